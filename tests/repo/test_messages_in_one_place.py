"""Each user message the core writes in more than one place is built once, in
`extender/core/model/messages.py`: checked on the source so that a second copy of a
template fails here instead of drifting from the first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from extender.core.model import messages

ROOT = Path(__file__).resolve().parents[2] / "extender"
HOME = ROOT / "core" / "model" / "messages.py"

# Each template as the code writes it, a replacement field shown as {}.
FRAGMENTS = ("{} of {} members exist", ": quorum of {} bound",
             "pod {} is finished or being deleted", "pod {} was deleted",
             "capacity on node {} is held for gang(s)")


def _template(node: ast.JoinedStr) -> str:
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _literals(source: str) -> list[tuple[int, str]]:
    """The strings of the code, an f-string as its template, docstrings left out."""
    tree = ast.parse(source)
    skip = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            skip |= {id(v) for v in n.values}
            out.append((n.lineno, _template(n)))
    return out + [(n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and id(n) not in skip]


def copies(source: str, path: str) -> list[str]:
    return [f"{path}:{line}: {text!r}" for line, text in _literals(source)
            for frag in FRAGMENTS if frag in text]


def test_every_repeated_template_is_written_only_in_messages() -> None:
    files = [p for p in sorted(ROOT.rglob("*.py")) if p != HOME]
    assert len(files) > 50
    found = [c for p in files for c in copies(p.read_text(), str(p.relative_to(ROOT.parent)))]
    assert not found, "\n".join(found)
    home = [t for _, t in _literals(HOME.read_text())]
    assert all(any(f in t for t in home) for f in FRAGMENTS)


@pytest.mark.parametrize("source", [
    'msg = f"gang {g}: {n} of {m} members exist"\n',
    'raise ValueError(f"pod {k} was deleted")\n',
    'x = (f"capacity on node {n} " f"is held for gang(s) {g}")\n',
])
def test_the_check_fails_on_a_second_copy(source: str) -> None:
    assert copies(source, "x.py")


def test_the_check_ignores_docstrings_and_comments() -> None:
    source = '"""Says "0 of N members exist" in prose."""\n# 2 of 3 members exist\nx = 1\n'
    assert copies(source, "x.py") == []


def test_the_messages_name_the_gang_the_pod_and_the_numbers() -> None:
    assert messages.members_exist("ns/g", 1, 4) == "gang ns/g: 1 of 4 members exist"
    assert messages.quorum_bound("ns/g", 3) == "gang ns/g: quorum of 3 bound"
    assert messages.capacity_held("n1", ["ns/a", "ns/b"], "ns/p", {"cpu": 2000, "pods": 1}) \
        .startswith("capacity on node n1 is held for gang(s) ns/a, ns/b; pod ns/p needs ")

"""The shape of the repository, checked so that it can fail (issue 43, item 4):

* no folder of source or tests holds more than 20 Python files directly: past that, a
  reader can no longer tell from the listing which files belong together, and a folder
  of subfolders named for their subjects says it for them;
* no module under `e2e/` imports a private name of another module (`from x import _y`,
  or `x._y` on a module it imported): a helper two modules share is public in one of
  them, or lives in a module of its own, so that what a module offers is what its
  public names say. `tests/repo/test_layering.py` holds the same rule for `extender/`.

Walked from the files, not imported: a broken module must not hide a violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREES = ("extender", "tests", "e2e", "bench")
MOST_FILES = 20


def folders() -> list[Path]:
    """Every folder of the trees, caches and hidden folders left out."""
    out: list[Path] = []
    for tree in TREES:
        root = REPO / tree
        out.append(root)
        out += [d for d in sorted(root.rglob("*")) if d.is_dir()
                and not any(p.startswith(".") or p == "__pycache__"
                            for p in d.relative_to(REPO).parts)]
    return out


def python_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.py") if p.is_file())


@pytest.mark.parametrize("folder", folders(), ids=lambda d: str(d.relative_to(REPO)))
def test_a_folder_holds_at_most_20_python_files(folder: Path) -> None:
    name = str(folder.relative_to(REPO))
    files = python_files(folder)
    assert len(files) <= MOST_FILES, (
        f"{name} holds {len(files)} Python files (at most {MOST_FILES}): group them in "
        f"subfolders named for their subjects: {files}")


def private_imports(path: Path, root: Path = REPO) -> list[str]:
    """`from m import _name`, and `m._name` where `m` is a module the file imported, as
    `file:line: what` (dunder names such as `__version__` are public)."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(root)
    found: list[str] = []
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = "." * node.level + (node.module or "")
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{rel}:{node.lineno}: from {source} import {alias.name}")
                else:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    return sorted(found, key=lambda f: int(f.split(":")[1]))


def test_no_e2e_module_imports_a_private_name_of_another() -> None:
    found = [f for p in sorted((REPO / "e2e").rglob("*.py")) for f in private_imports(p)]
    assert not found, "private names used across modules (make them public, or move "\
        "the helper to a module both import):\n" + "\n".join(found)


def test_the_private_name_walk_sees_both_forms(tmp_path: Path) -> None:
    """The walk above must see what it is there to see, or a clean run proves nothing."""
    bad = tmp_path / "bad.py"
    bad.write_text("from .pod import _Pod\nimport e2e.x as x\nfrom e2e import waiting\n"
                   "x._helper()\nwaiting._tail\nobj = object()\nobj._own\n__all__ = []\n")
    assert private_imports(bad, tmp_path) == [
        "bad.py:1: from .pod import _Pod", "bad.py:4: x._helper", "bad.py:5: waiting._tail"]

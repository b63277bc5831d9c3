"""The benchmark modules the repository names exist, and every experiment says where its
answer is written. bench/ was reorganised into suites and experiments once
(`bench.history` became `bench.experiments.history`); a command in the docs that names a
module which is gone fails only when a reader runs it, months later. Here it fails at
once: every `bench.…` name in README.md, docs/, the Makefile, and the strings and comments
of the Python sources (code is left out: `bench.run(...)` there is a variable's method)
must be a module, or a module's attribute (`bench.common.median_ci`). Cheap: it finds
specs and imports a few light modules, it runs nothing."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# `bench.` then dotted lowercase identifiers; not part of a longer name or path.
NAME = re.compile(r"(?<![\w./-])bench(?:\.[a-z_][a-z0-9_]*)+")
# In an experiment's docstring: a file, then the heading that holds the answer.
WHERE = re.compile(r"((?:docs/[\w-]+|README)\.md), \"([^\"]+)\"")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that is a module, not a package
        return False


def resolves(name: str) -> bool:
    """A module, or an attribute of one (a function or constant the docs cite)."""
    if _is_module(name):
        return True
    parent, _, attr = name.rpartition(".")
    return _is_module(parent) and hasattr(importlib.import_module(parent), attr)


def names_in_python(source: str) -> list[str]:
    """The `bench.…` names in a module's strings and comments, not in its code."""
    found: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            found += NAME.findall(tok.string)
    return found


def _texts() -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for p in [REPO / "README.md", REPO / "Makefile", *sorted((REPO / "docs").glob("*.md"))]:
        out.append((str(p.relative_to(REPO)), NAME.findall(p.read_text())))
    for d in ("bench", "e2e", "extender", "tests", "demo"):
        for p in sorted((REPO / d).rglob("*.py")):
            if p == Path(__file__).resolve():  # its own examples name modules that are gone
                continue
            out.append((str(p.relative_to(REPO)), names_in_python(p.read_text())))
    return out


def missing(texts: list[tuple[str, list[str]]]) -> list[str]:
    return [f"{where}: {name}" for where, names in texts for name in sorted(set(names))
            if not resolves(name)]


def test_every_bench_name_in_the_repository_exists() -> None:
    texts = _texts()
    named = {n for _, names in texts for n in names}
    # The documented commands are among them; if this drops, the scan found nothing.
    assert {"bench.core", "bench.e2e", "bench.experiments.quantities"} <= named
    gone = missing(texts)
    assert not gone, "named but not a module:\n" + "\n".join(gone)


def test_a_renamed_module_is_caught() -> None:
    doc = "Run `python -m bench.history --groups 10` (now bench.experiments.history)."
    assert missing([("doc.md", NAME.findall(doc))]) == ["doc.md: bench.history"]
    code = 'bench.run(s)  # see bench.no_such\n"-m", "bench.core"\n'
    assert names_in_python(code) == ["bench.no_such", "bench.core"]


def _headings(path: Path) -> list[str]:
    return [" ".join(line.lstrip("#").split()) for line in path.read_text().splitlines()
            if line.startswith("#")]


EXPERIMENTS = sorted(p for p in (REPO / "bench" / "experiments").glob("*.py")
                     if p.name != "__init__.py")


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_an_experiment_says_its_question_and_where_the_answer_is(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    top = " ".join(doc.split("\n\n")[0].split())
    assert top.startswith("Question: ") and " Answer" in top, top
    places = WHERE.findall(top)
    assert places, f"{path.name}: its answer names no docs/*.md or README.md section"
    for file, heading in places:
        assert any(h.startswith(heading) for h in _headings(REPO / file)), (
            f"{path.name}: {file} has no section {heading!r}")

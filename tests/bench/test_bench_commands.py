"""The benchmark and lab modules the repository names exist, and the lab stays apart.
bench/ was reorganised more than once (`bench.history` became an experiment, and the
experiments left for lab/); a command in the docs that names a module which is gone
fails only when a reader runs it, months later. Here it fails at once: every `bench.…`
or `lab.…` name in README.md, docs/, the Makefile, and the strings and comments of the
Python sources (code is left out: `bench.run(...)` there is a variable's method) must be
a module, or a module's attribute (`bench.common.median_ci`). Cheap: it finds specs and
imports a few light modules, it runs nothing. The lab's own checks (each experiment's
question and answer) run with `pytest lab`, not here."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# `bench.` or `lab.` then dotted lowercase identifiers; not part of a longer name or path.
NAME = re.compile(r"(?<![\w./-])(?:bench|lab)(?:\.[a-z_][a-z0-9_]*)+")


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
    for d in ("bench", "e2e", "extender", "tests", "demo", "lab"):
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
    assert {"bench.core", "bench.e2e"} <= named
    gone = missing(texts)
    assert not gone, "named but not a module:\n" + "\n".join(gone)


def test_a_renamed_module_is_caught() -> None:
    doc = "Run `python -m bench.history --groups 10` (now lab.experiments.history)."
    assert missing([("doc.md", NAME.findall(doc))]) == ["doc.md: bench.history"]
    lab = "Then `python -m lab.experiments.gone`; the lab's notes (lab/README.md) say why."
    assert missing([("doc.md", NAME.findall(lab))]) == ["doc.md: lab.experiments.gone"]
    code = 'bench.run(s)  # see bench.no_such\n"-m", "bench.core"\n'
    assert names_in_python(code) == ["bench.no_such", "bench.core"]


def lab_imports(source: str) -> list[str]:
    """The `lab` modules a source imports, in its code (names in its text are checked above)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "lab"]
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.split(".")[0] == "lab"):
            found.append(node.module)
    return found


def test_nothing_outside_the_lab_imports_it() -> None:
    """The lab may use the product and the benchmarks; never the other way, or an
    experiment left to age would break what users install and run."""
    found = [f"{p.relative_to(REPO)}: {name}"
             for d in ("extender", "bench", "e2e", "tests", "demo")
             for p in sorted((REPO / d).rglob("*.py"))
             for name in lab_imports(p.read_text())]
    assert not found, "imports the lab:\n" + "\n".join(found)
    assert lab_imports("import lab.common\nfrom lab.experiments import nominate\n"
                       "from .lab import x\n") == ["lab.common", "lab.experiments"]

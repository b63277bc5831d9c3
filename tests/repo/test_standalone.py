"""The repository stands alone: nothing in its tests, harness, demo, benchmarks or docs
reads a file outside the checkout.

Why a test: a clone with nothing beside it is what a new user and CI get. Reading a folder
laid beside the checkout (a sibling ``shared/``), or a path of one developer's machine,
passes wherever that folder happens to exist and fails everywhere else, with a
``FileNotFoundError`` that says nothing about the cause. Bodies the tests replay live in
tests/wire and are recorded by ``python -m e2e.capture_wire``.

What counts as reading outside: a path into a sibling ``shared`` folder; an absolute path
into the workspace this project was developed in; ``Path(__file__).parents[N]`` that climbs
above the checkout from where the file sits, or a path joined with ``".."``. Files are read as
text; generated outputs (profiles, logs, ``.txt``) and binary files are not scanned.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCANNED = ("tests", "e2e", "demo", "bench", "lab", "docs", "examples", "deploy", "charts",
           ".ci", "README.md", "Makefile", "Dockerfile", "pyproject.toml")
"""Everything a user runs or reads; the product code (extender/) reads no files of ours."""
REQUIRED = ("tests", "e2e", "demo", "bench", "docs", "README.md", "Makefile")
TEXT_SUFFIXES = frozenset({".py", ".sh", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini",
                           ".json", ".mk"})
TEXT_NAMES = frozenset({"Makefile", "Dockerfile", "run"})
SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache", ".hypothesis"})

# Built from pieces so that this file's own source does not match them.
_SHARED = "shared"
_WORKSPACE = "/" + "work"
_UP = "Path(__file__).resolve().parents"
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a folder beside the checkout", re.compile(r"\.\./+" + _SHARED + r"\b")),
    ("a folder beside the checkout",
     re.compile(r"/\s*[\"']" + _SHARED + r"[\"']")),
    ("climbs above the checkout", re.compile(r"/\s*[\"']\.\.[\"']")),
    ("an absolute path of the development machine",
     re.compile(r"(?<![\w.~-])" + re.escape(_WORKSPACE) + r"(?=/|\b)")),
)
_PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")


def reads_outside(relpath: str, text: str) -> list[str]:
    """Each line of ``text`` (the file at ``relpath`` in the checkout) that reads outside
    the checkout, as ``path:line: why: the line``."""
    depth = len(Path(relpath).parts)  # parents[depth - 1] is the checkout's root
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for why, rule in RULES:
            if rule.search(line):
                found.append(f"{relpath}:{n}: {why}: {line.strip()}")
        for m in _PARENTS.finditer(line):
            if int(m.group(1)) >= depth:
                found.append(f"{relpath}:{n}: climbs above the checkout: {line.strip()}")
    return found


def scanned_files(root: Path) -> Iterator[Path]:
    """The text files under ``root``'s scanned entries."""
    for entry in SCANNED:
        top = root / entry
        if top.is_file():
            yield top
            continue
        if not top.is_dir():
            continue
        for path in sorted(top.rglob("*")):
            if (path.is_file() and not SKIPPED_DIRS.intersection(path.parts)
                    and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES)):
                yield path


def findings(root: Path) -> list[str]:
    out = []
    for path in scanned_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        out += reads_outside(path.relative_to(root).as_posix(), text)
    return out


def test_nothing_reads_outside_the_checkout() -> None:
    assert all((REPO / entry).exists() for entry in REQUIRED)
    assert len(list(scanned_files(REPO))) > 100  # the scan really saw the repository
    assert findings(REPO) == []


def test_the_replayed_bodies_are_in_the_checkout() -> None:
    from tests.wire import WIRE_DIR, capture

    assert WIRE_DIR.is_relative_to(REPO)
    for mode in capture()["modes"]:
        for name in mode["files"]:
            assert (WIRE_DIR / name).is_file(), name


@pytest.mark.parametrize("line", [
    "SAMPLES = " + _UP + '[2] / "' + _SHARED + '" / "wire-samples"',
    "json.load(open('../" + _SHARED + "/wire-samples/x.json'))",
    "cat .." + "/" + _SHARED + "/wire-samples/README.md",
    'BIN = "' + _WORKSPACE + '/main/.venv/bin/python"',
    "see " + _WORKSPACE + "/" + _SHARED + " for the samples",
    "SAMPLES = " + _UP + "[3]",
    "ROOT = " + _UP.replace(".resolve()", "") + "[4]",
    "DATA = " + _UP + '[1] / ".' + '." / "data"',
])
def test_a_read_outside_is_found(tmp_path: Path, line: str) -> None:
    """Each way of reading outside, in a file at tests/core/test_x.py of a checkout."""
    target = tmp_path / "tests" / "core" / "test_x.py"
    target.parent.mkdir(parents=True)
    target.write_text(f"import json\n{line}\n")
    (tmp_path / "README.md").write_text("nothing here\n")
    (found,) = findings(tmp_path)
    assert found.startswith("tests/core/test_x.py:2: ")


@pytest.mark.parametrize("line", [
    "REPO = " + _UP + "[2]",  # the checkout's root from tests/core/
    'WIRE = REPO / "tests" / "wire"',
    "a shared cluster, shared nodes, a shared time axis",
    "https://example.com" + _WORKSPACE + "/items and ~" + _WORKSPACE + "ing",
    "cache = Path.home() / '.cache' / 'gang-extender'",
])
def test_reads_inside_are_not_found(tmp_path: Path, line: str) -> None:
    target = tmp_path / "tests" / "core" / "test_x.py"
    target.parent.mkdir(parents=True)
    target.write_text(f"{line}\n")
    assert findings(tmp_path) == []

"""docs/architecture.md kept true by cheap checks on its text, so that a move or a rename
that leaves it behind fails here rather than misleading the next reader:

* every file or folder it names exists (paths under `extender/` are written from there,
  or from `extender/core/`);
* every `Class.method` it names, for a class defined under `extender/`, is still defined
  in that class's module;
* every "architecture.md §N" cited in the code, the tests and the docs is a point the doc
  defines, and every link to one of its headings finds it;
* every module of the core has a row in its table of modules;
* the PodGroup CRD's copies its "where to change what" table names are all the copies,
  and identical.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
# Where a relative path in the doc may start: the repository, the package, the core, docs/.
ROOTS = (REPO, REPO / "extender", REPO / "extender" / "core", REPO / "docs")
_EXTENSIONS = "py|md|yaml|tpl|sh|toml|json|binpb|mod|go|txt"
_PATH = re.compile(rf"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:{_EXTENSIONS}))(?![\w/])")
_TICKED_DIR = re.compile(r"`((?:[\w.-]+/)+)`")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_METHOD = re.compile(r"`([A-Z]\w+)\.([a-z_]\w*)(?:\([^`]*\))?`")
_CITE = re.compile(r"architecture\.md,? (§\d+(?:\s*[-,–]\s*§\d+)*)")
_POINT = re.compile(r"^\* \*\*§(\d+) ", re.M)
_ANCHOR_LINK = re.compile(r"architecture\.md#([\w-]+)")
CRD_NAME = "scheduling.x-k8s.io_podgroups.yaml"


def missing_paths(text: str) -> list[str]:
    """The file and folder paths `text` names that exist under none of ROOTS."""
    named = set(_PATH.findall(text)) | set(_TICKED_DIR.findall(text))
    named |= {link for link in _LINK.findall(text) if "://" not in link}
    return sorted(p for p in named if not any((root / p).exists() for root in ROOTS))


def _classes() -> dict[str, list[str]]:
    """Class name -> the source of every module under extender/ that defines it."""
    found: dict[str, list[str]] = {}
    for path in (REPO / "extender").rglob("*.py"):
        source = path.read_text()
        for name in re.findall(r"^class (\w+)", source, re.M):
            found.setdefault(name, []).append(source)
    return found


def missing_methods(text: str, classes: dict[str, list[str]]) -> list[str]:
    """`Class.name` references in `text` whose class (defined under extender/) no
    longer has that method or attribute."""
    out = []
    for cls, attr in set(_METHOD.findall(text)):
        sources = classes.get(cls)
        if sources is None:
            continue  # not one of ours (or a dotted module reference)
        wanted = re.compile(rf"def {attr}\b|self\.{attr}\b|^\s+{attr}\s*[:=]", re.M)
        if not any(wanted.search(s) for s in sources):
            out.append(f"{cls}.{attr}")
    return sorted(out)


def points(text: str) -> set[int]:
    return {int(n) for n in _POINT.findall(text)}


def bad_citations(text: str, defined: set[int]) -> list[str]:
    """Citations "architecture.md §N" (or §N-§M, §N, §M) naming no defined point."""
    out = []
    for chain in _CITE.findall(text):
        numbers = [int(n) for n in re.findall(r"§(\d+)", chain)]
        if any(n not in defined for n in numbers):
            out.append(chain)
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def _sources() -> list[Path]:
    files = [REPO / "README.md"]
    for folder in ("extender", "tests", "docs", "bench", "e2e", "demo"):
        files += [p for p in (REPO / folder).rglob("*")
                  if p.suffix in (".py", ".md", ".sh") and p.is_file()]
    return [p for p in files if p != Path(__file__).resolve()]  # its own examples


def test_every_path_the_doc_names_exists() -> None:
    assert missing_paths(DOC.read_text()) == []


def test_the_path_check_can_fail() -> None:
    text = ("`core/ledger/_commit.py`, `core/nowhere.py`, docs/absent.md, `scheduler/`, "
            "`gone/`, [x](observability.md), [y](missing.md#a)")
    assert missing_paths(text) == ["core/nowhere.py", "docs/absent.md", "gone/", "missing.md"]


def test_every_method_the_doc_names_is_defined() -> None:
    assert missing_methods(DOC.read_text(), _classes()) == []


def test_the_method_check_can_fail() -> None:
    text = "`Ledger.commit`, `Ledger.no_such_step`, `Dispatcher.drain`, `Outside.thing`"
    assert missing_methods(text, _classes()) == ["Ledger.no_such_step"]


def test_every_citation_of_a_point_names_one_the_doc_defines() -> None:
    defined = points(DOC.read_text())
    assert defined == set(range(1, len(defined) + 1)), "points numbered 1..N, none twice"
    bad = {str(p.relative_to(REPO)): found for p in _sources()
           if (found := bad_citations(p.read_text(errors="replace"), defined))}
    assert bad == {}
    inside = {int(n) for n in re.findall(r"\(§(\d+)\)", DOC.read_text())}
    assert inside <= defined
    assert bad_citations("architecture.md §3, §99 and architecture.md §1-§2", {1, 2, 3}) == [
        "§3, §99"]


def test_every_link_to_a_heading_of_the_doc_finds_it() -> None:
    slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", DOC.read_text(), re.M)}
    broken = [(str(p.relative_to(REPO)), a) for p in _sources()
              for a in _ANCHOR_LINK.findall(p.read_text(errors="replace")) if a not in slugs]
    assert broken == []


def test_the_crd_copies_the_doc_names_are_all_of_them_and_identical() -> None:
    text = DOC.read_text()
    named = {p for p in _PATH.findall(text) if p.endswith(CRD_NAME)}
    found = {str(p.relative_to(REPO)) for p in REPO.rglob(CRD_NAME)
             if not {".venv", ".git", "node_modules"} & set(p.parts)}
    assert named == found
    assert len({(REPO / p).read_bytes() for p in found}) == 1


def unlisted_modules(text: str) -> list[str]:
    """Modules of extender/core/ (but `__init__.py`) without a row in the doc's table of
    the core's modules. A row names a module by its path from `extender/core/`, or, after
    a first path, by its file name in that path's folder (`model/types.py`, `resources.py`)."""
    listed: set[str] = set()
    for row in re.findall(r"^\| (\**`[^|]+)\|", text, re.M):
        names = re.findall(r"`([\w/.]+)`", row)
        folder = names[0].rpartition("/")[0] if names else ""
        listed |= {n if "/" in n or not folder else f"{folder}/{n}" for n in names}
    core = REPO / "extender" / "core"
    return sorted(rel for p in core.rglob("*.py") if p.name != "__init__.py"
                  and (rel := str(p.relative_to(core))) not in listed)


def test_every_module_of_the_core_has_a_row() -> None:
    assert unlisted_modules(DOC.read_text()) == []
    assert "planner/warmup.py" in unlisted_modules(
        DOC.read_text().replace("| `planner/warmup.py` |", "| warmup |"))

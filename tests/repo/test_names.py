"""No name used for two concepts: a reader who meets `report.py` or `class Kube` should
not have to ask which one.

* no two modules of the extender (`extender/`) share a file name;
* no two modules of the tooling beside it (`e2e/`, `bench/`, `demo/`) share one either,
  tests aside (a test module is named for what it tests);
* no two classes of the extender and the e2e suite share a name (top-level classes of
  modules that are not tests).

`__init__.py`, `__main__.py` and `main.py` say what a file does for its package, not
what it holds, so they may repeat. The rule replaces a limit on module length: a module
is as long as its one concept needs, and it is named for that concept, once.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROLES = frozenset({"__init__.py", "__main__.py", "main.py"})


def is_test(path: Path) -> bool:
    return path.name.startswith("test_") or path.name == "conftest.py"


def shared_file_names(paths: list[Path]) -> dict[str, list[str]]:
    """File name -> the modules that have it, for names more than one module has."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if path.name not in ROLES:
            by_name[path.name].append(path.relative_to(REPO).as_posix())
    return {name: sorted(found) for name, found in sorted(by_name.items()) if len(found) > 1}


def shared_class_names(sources: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Class name -> where it is defined ("path:line"), for top-level classes defined
    more than once among `sources` ((text, path) pairs)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for text, path in sources:
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef):
                by_name[node.name].append(f"{path}:{node.lineno}")
    return {name: found for name, found in sorted(by_name.items()) if len(found) > 1}


def _modules(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def test_no_two_modules_of_the_extender_share_a_name() -> None:
    paths = _modules("extender")
    assert len(paths) > 50
    assert shared_file_names(paths) == {}


def test_no_two_modules_of_the_tooling_share_a_name() -> None:
    paths = [p for p in _modules("e2e", "bench", "demo") if not is_test(p)]
    assert len(paths) > 50
    assert shared_file_names(paths) == {}


def test_no_two_classes_of_the_extender_and_the_e2e_suite_share_a_name() -> None:
    paths = [p for p in _modules("extender", "e2e") if not is_test(p)]
    sources = [(p.read_text(), p.relative_to(REPO).as_posix()) for p in paths]
    assert len(sources) > 100
    assert shared_class_names(sources) == {}


def test_the_file_name_check_finds_a_name_twice_and_lets_package_roles_repeat() -> None:
    paths = [REPO / p for p in ("bench/core/report.py", "e2e/soak/report.py",
                                "bench/core/__init__.py", "demo/__init__.py",
                                "bench/core/main.py", "bench/e2e/main.py", "demo/story.py")]
    assert shared_file_names(paths) == {
        "report.py": ["bench/core/report.py", "e2e/soak/report.py"]}


def test_the_class_check_finds_a_class_twice_at_the_top_of_modules_only() -> None:
    sources = [
        ("class Kube:\n    pass\n", "extender/kube/client.py"),
        ("import x\n\n\nclass Kube:\n    pass\n", "e2e/harness/target.py"),
        ("def f():\n    class Handler:\n        pass\n", "e2e/a.py"),
        ("class Handler:\n    pass\n", "e2e/b.py"),
    ]
    assert shared_class_names(sources) == {
        "Kube": ["extender/kube/client.py:1", "e2e/harness/target.py:4"]}

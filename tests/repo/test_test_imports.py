"""No test or e2e module leans on another test module (issue 43, item 4).

A `test_*.py` module is a list of checks: pytest collects it, and whoever edits it edits
the checks, not a library. When a second module imports a helper from it (`Env` from
`test_status`, `_frame` from `test_protobuf`), the helper's users are hidden: renaming a
check's helper breaks a far-off folder, running one file runs the other's import too,
and a fixture imported that way runs under two names. So a helper two modules share
lives in a support module named for what it is (as `tests/scheduler/fakes.py` does), not
named `test_*` so pytest does not collect it, and it offers public names. And a private
name (`_fill`) stays with its module: a module of `tests/` or `e2e/` that needs one of
another's is asking for that name to be made public, in a module of its own.

`extender/` is not covered here: tests may reach into the product's private names to
test them; this rule is about the test tree's own modules. Walked from the files, not
imported, so that a module that fails to import cannot hide a violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREES = ("tests", "e2e")


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str, root: Path) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def absolute(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """The dotted name `from ... import` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = here.split(".") if is_package else here.split(".")[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def ours(dotted: str, trees: tuple[str, ...]) -> bool:
    return dotted.split(".")[0] in trees


def is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def leaning_imports(path: Path, root: Path = REPO, trees: tuple[str, ...] = TREES
                    ) -> list[str]:
    """Imports of `path` from a `test_*` module, or of a private name of another module
    of the trees (`from m import _x`, or `m._x` on a module it imported), as
    `file:line: what`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(root)
    here = module_name(path, root)
    found: list[str] = []
    modules: dict[str, str] = {}  # a local name bound to one of our modules -> its name

    def flag(line: int, what: str) -> None:
        found.append(f"{rel}:{line}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not ours(alias.name, trees):
                    continue
                if is_test_module(alias.name):
                    flag(node.lineno, f"import {alias.name} (a test module)")
                if alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node, here, path.name == "__init__.py")
            if not ours(source, trees) or source == here:
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if is_module(target, root):
                    if is_test_module(target):
                        flag(node.lineno, f"from {source} import {alias.name} "
                                          "(a test module)")
                    elif private(alias.name):
                        flag(node.lineno, f"from {source} import {alias.name} "
                                          "(a private module)")
                    modules[alias.asname or alias.name] = target
                elif is_test_module(source):
                    flag(node.lineno, f"from {source} import {alias.name} "
                                      "(from a test module)")
                elif private(alias.name):
                    flag(node.lineno, f"from {source} import {alias.name} "
                                      "(a private name)")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            flag(node.lineno, f"{node.value.id}.{node.attr} "
                              f"(a private name of {modules[node.value.id]})")
    return sorted(found, key=lambda f: int(f.split(":")[1]))


def test_no_test_module_leans_on_another() -> None:
    found = [f for t in TREES for p in sorted((REPO / t).rglob("*.py"))
             if "__pycache__" not in p.parts for f in leaning_imports(p)]
    assert not found, (
        "test and e2e modules importing from a test_* module or a private name of "
        "another (move the helper to a support module named for what it is, with a "
        "public name):\n" + "\n".join(found))


def test_the_walk_sees_every_form(tmp_path: Path) -> None:
    """The walk must see what it is there to see, or a clean run proves nothing."""
    pkg = tmp_path / "tests" / "kube"
    pkg.mkdir(parents=True)
    for name in ("__init__.py", "test_protobuf.py", "frames.py", "_raw.py"):
        (pkg / name).write_text("")
    (tmp_path / "tests" / "__init__.py").write_text("")
    bad = pkg / "test_decode.py"
    bad.write_text(
        "from tests.kube.test_protobuf import RICH_POD\n"        # 1: from a test module
        "from .test_protobuf import helper\n"                    # 2: relative, the same
        "from tests.kube import test_protobuf\n"                 # 3: the test module itself
        "import tests.kube.test_protobuf as tp\n"                # 4: and by import
        "from .frames import _fill, frame\n"                     # 5: a private name
        "from tests.kube import frames\n"
        "frames._frame()\n"                                      # 7: through the module
        "from tests.kube import _raw\n"                          # 8: a private module
        "from extender.kube.client import _Writer\n"             # not ours: allowed
        "from tests.kube.frames import frame as f, __doc__\n"    # public and dunder
        "def _own() -> None: ...\n"
        "_own()\n")
    assert leaning_imports(bad, tmp_path) == [
        "tests/kube/test_decode.py:1: from tests.kube.test_protobuf import RICH_POD "
        "(from a test module)",
        "tests/kube/test_decode.py:2: from tests.kube.test_protobuf import helper "
        "(from a test module)",
        "tests/kube/test_decode.py:3: from tests.kube import test_protobuf (a test module)",
        "tests/kube/test_decode.py:4: import tests.kube.test_protobuf (a test module)",
        "tests/kube/test_decode.py:5: from tests.kube.frames import _fill (a private name)",
        "tests/kube/test_decode.py:7: frames._frame (a private name of tests.kube.frames)",
        "tests/kube/test_decode.py:8: from tests.kube import _raw (a private module)",
    ]

"""Every file the package reads besides its modules is installed with it.

Why a test: setuptools puts only Python modules in the wheel unless pyproject.toml names a
data file under `[tool.setuptools.package-data]`, and the image is built from the wheel
(Dockerfile: `pip install .`). A file left out still works from a checkout, where the
tests run, and fails only once installed: the metric catalogue, for one, is read when
`extender.reporting.metrics` is imported, so a missing one stops the extender at start.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache"})


def unshipped(root: Path, package_data: dict[str, list[str]]) -> list[str]:
    """Files under `root` (the `extender` package) that are not modules and that no
    package-data pattern of their package matches."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root.parent)
        if not path.is_file() or path.suffix in (".py", ".pyc") or SKIPPED_DIRS & set(rel.parts):
            continue
        package = ".".join(rel.parent.parts)
        if not any(fnmatch(path.name, p) for p in package_data.get(package, [])):
            out.append(str(rel))
    return out


def _package_data() -> dict[str, list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    data: dict[str, list[str]] = config["tool"]["setuptools"]["package-data"]
    return data


def test_every_data_file_of_the_package_is_package_data() -> None:
    assert unshipped(REPO / "extender", _package_data()) == []
    assert (REPO / "extender/reporting/metrics.toml").is_file()


def test_a_data_file_no_pattern_names_is_found(tmp_path: Path) -> None:
    (tmp_path / "extender" / "reporting").mkdir(parents=True)
    (tmp_path / "extender" / "reporting" / "metrics.toml").write_text("")
    (tmp_path / "extender" / "reporting" / "metrics.py").write_text("")
    assert unshipped(tmp_path / "extender", {}) == ["extender/reporting/metrics.toml"]
    assert unshipped(tmp_path / "extender", {"extender.reporting": ["*.toml"]}) == []
    assert unshipped(tmp_path / "extender", {"extender": ["*.toml"]}) == [
        "extender/reporting/metrics.toml"]

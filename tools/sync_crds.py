"""The CRDs have one source, `crds/`; the Helm chart's copy is made from it here.

Kustomize reads `crds/` itself (`deploy/kustomization.yaml` lists the folder, whose own
kustomization names the files), so it needs no copy. A Helm chart must carry its files
inside its own folder: a packaged or downloaded chart has nothing beside it, and a
symbolic link does not survive every checkout (a zip download, Windows). So the chart's
`crds/` holds copies, and this keeps them equal to the source: a hand edit of a copy, a
CRD added to `crds/` and not copied, or a copy left behind after its source went, all
show as stale.

    python -m tools.sync_crds           # write the copies (`make crds`)
    python -m tools.sync_crds --check   # only list the stale ones; exit 1 if any

tests/repo/test_crds.py runs the check, so a stale copy fails the tests.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path("crds")
# Where the copies go, from the repository's root: the chart's crds/ folder.
COPIES = (Path("charts/gang-scheduler/crds"),)
# Files of the source folder that are not CRDs: its kustomization.
NOT_CRDS = frozenset({"kustomization.yaml"})


def sources(root: Path = REPO) -> dict[str, bytes]:
    """File name -> content of each CRD in the source folder."""
    return {p.name: p.read_bytes() for p in sorted((root / SOURCE).glob("*.yaml"))
            if p.name not in NOT_CRDS}


def stale(root: Path = REPO) -> list[str]:
    """The copies (paths from `root`) that differ from their source, are missing, or
    have no source any more; empty when every copy is what `sync` would write."""
    want = sources(root)
    out: list[str] = []
    for folder in COPIES:
        have = {p.name for p in (root / folder).glob("*.yaml")}
        for name in sorted(have | set(want)):
            copy = root / folder / name
            if name not in want or not copy.is_file() or copy.read_bytes() != want[name]:
                out.append(str(folder / name))
    return out


def sync(root: Path = REPO) -> list[str]:
    """Write every stale copy from its source and delete copies with no source; returns
    what it changed (the paths `stale` listed)."""
    want = sources(root)
    changed = stale(root)
    for rel in changed:
        path = root / rel
        if path.name in want:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(want[path.name])
        else:
            path.unlink()
    return changed


def main(argv: Sequence[str] | None = None, root: Path = REPO) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.sync_crds",
                                     description="Copy crds/ into the Helm chart.")
    parser.add_argument("--check", action="store_true",
                        help="list the stale copies and exit 1 if there are any; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = stale(root)
        for rel in found:
            print(f"{rel}: not what {SOURCE}/ makes of it (run `make crds`)", file=sys.stderr)
        return 1 if found else 0
    for rel in sync(root):
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Question: did the extender's CPU per pod grow since the commit whose 1.2 ms per pod issue 20
quotes, measured in one harness? Answer: lab/history/performance-history.md, "A fourth run, the API
server's profile, and the machine's speed" (its paragraph "The extender's CPU per pod did
not grow").

The extender's CPU per pod, this checkout's against another commit's, in the same
`bench.e2e` harness: B runs whose extender comes alternately from this checkout and from
TREE (`git worktree add TREE COMMIT`), everything else (control plane, kube-scheduler
configuration, pods) the same. Numbers measured by different versions of the harness do
not compare (its CPU window has changed), hence one harness for both.

    .venv/bin/python -m lab.experiments.extender_ab /tmp/old --sweep 200x500 --reps 8 \\
        --warmup 2 --out /tmp/ab

The remaining arguments go to `bench.e2e` (`--systems B --clients unthrottled` are added);
with an even number of warm-ups the measured runs start with this checkout.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import bench.e2e.run as e2e_run
from bench.common import REPO, md_table
from bench.e2e.main import main as e2e_main
from e2e.gang import start_extender
from e2e.harness.clusterbase import Cluster
from e2e.harness.process import ManagedProcess
from e2e.harness.readiness import http_ok


def alternating(trees: list[Path], used: list[Path]) -> Any:
    def start(cluster: Cluster, port: int, args: list[str], name: str) -> ManagedProcess:
        tree = trees[len(used) % len(trees)]
        used.append(tree)
        if tree == REPO:
            return start_extender(cluster, port, args, name)
        # A tree from before leader election has no --leader-lease (and needs none).
        lease = (["--leader-lease", "off"]
                 if "--leader-lease" in (tree / "extender" / "cli.py").read_text() else [])
        argv = [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig",
                str(cluster.kubeconfig), "--listen", f"127.0.0.1:{port}", *lease, *args]
        return cluster.start_process(argv, name, cwd=tree,
                                     ready=http_ok(f"http://127.0.0.1:{port}/readyz"),
                                     ready_timeout=30)
    return start


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or "--out" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    tree, rest = Path(argv[0]).resolve(), argv[1:]
    if not (tree / "extender" / "cli.py").exists():
        print(f"{tree}: not a checkout of this project", file=sys.stderr)
        return 2
    used: list[Path] = []
    with mock.patch.object(e2e_run, "start_extender", alternating([REPO, tree], used)):
        code = e2e_main([*rest, "--systems", "B", "--clients", "unthrottled", "--no-plot"])
    out = Path(rest[rest.index("--out") + 1])
    data = json.loads(next(out.glob("e2e*.json")).read_text())
    runs = data["runs"]
    measured = used[len(used) - len(runs):]  # warm-ups first, then the runs in order
    rows: list[list[object]] = []
    per_tree: dict[Path, list[float]] = {REPO: [], tree: []}
    for run, t in zip(runs, measured, strict=True):
        ms = run["cpu"].get("extender", float("nan")) * 1000 / run["pods"]
        per_tree[t].append(ms)
        rows.append([run["rep"], "this checkout" if t == REPO else str(t), round(ms, 2),
                     run["pods_per_second"]])
    print(md_table(["rep", "extender from", "extender CPU ms/pod", "pods/s"], rows))
    for t, values in per_tree.items():
        if values:
            print(f"{'this checkout' if t == REPO else t}: median {statistics.median(values):.2f}"
                  f" ms/pod over {len(values)} run(s)")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

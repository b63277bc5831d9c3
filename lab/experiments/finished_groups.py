"""Question: does the filter call that plans a gang grow with the PodGroups of finished gangs
left behind? Answer: docs/reliability.md, "In process, 100,000 PodGroups and 200,000
pods", and lab/history/performance-history.md, "Where the time goes now" (a gang's first member).

The filter call that plans a gang, beside PodGroups whose gangs have finished.

    .venv/bin/python -m lab.experiments.finished_groups [--finished 0,1000,5000] [--gangs 200]

Why: a finished Job leaves its PodGroup (and, until its TTL, its Succeeded pods) behind,
so a long-lived cluster holds many more groups than wait. The gang queue's pass runs on
the filter call of a gang's first member; if the pass visits every group ever created,
that call grows with the cluster's history. Here, through the gang manager (no HTTP),
`--finished` groups of `--pods-per-group` Succeeded pods each (default one), then
`--gangs` gangs of 8 arriving one by one on 500 nodes; each gang's first filter call
plans it. Milliseconds per such call
(p50, p99), CPU time. The script uses only the manager's public API, so the same file
run from a worktree of an older revision measures that revision.
"""

from __future__ import annotations

import argparse
import statistics
import time

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo
from extender.core.wiring import Core

NODES = 500
GANG = 8


def _pod(name: str, group: str, **kw: object) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ns", name=name,
                   requests={"cpu": 1000, "memory": 1 << 30, "pods": 1},
                   labels={GROUP_LABEL: group}, scheduler_name="gang-scheduler",
                   **kw)  # type: ignore[arg-type]


def run(finished: int, gangs: int, per: int = 1) -> list[float]:
    mgr = GangManager(Core.wire(Config(default_timeout_seconds=3600)))
    names = [f"n{i}" for i in range(NODES)]
    for n in names:
        mgr.on_node(NodeInfo(n, {"cpu": 64000, "memory": 256 << 30, "pods": 110},
                             {"kubernetes.io/hostname": n}))
    now = 1.0
    for i in range(finished):
        mgr.on_group(GroupInfo("ns", f"done{i}", per, uid=f"g-done{i}"), now)
        for m in range(per):
            mgr.on_pod(_pod(f"done{i}-{m}", f"done{i}", node_name=names[(i + m) % NODES],
                            phase="Succeeded"), now)
    mgr.tick(now)
    ms: list[float] = []
    for g in range(gangs):
        now += 0.01
        mgr.on_group(GroupInfo("ns", f"g{g}", GANG, uid=f"g-g{g}"), now)
        members = [_pod(f"g{g}-{m}", f"g{g}") for m in range(GANG)]
        for p in members:
            mgr.on_pod(p, now)
        start = time.process_time()
        result = mgr.filter(members[0], names, now)
        ms.append((time.process_time() - start) * 1000)
        if not result.nodes:
            raise SystemExit(f"gang g{g} was not planned: {result}")
        mgr.take_actions()
    return ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--finished", default="0,1000,5000")
    ap.add_argument("--gangs", type=int, default=200)
    ap.add_argument("--pods-per-group", type=int, default=1,
                    help="Succeeded pods of each finished group (issue 27's history: 2)")
    args = ap.parse_args(argv)
    print("| finished groups | planning filter p50 ms | p99 ms |")
    print("|---|---|---|")
    for finished in (int(x) for x in args.finished.split(",")):
        ms = sorted(run(finished, args.gangs, args.pods_per_group))
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        print(f"| {finished} | {statistics.median(ms):.3f} | {p99:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

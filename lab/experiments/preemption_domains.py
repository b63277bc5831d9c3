"""Question: how long is the tick that searches for preemption victims one topology domain at
a time, as the number of domains grows (the search was quadratic in the cluster)?
Answer: docs/topology.md, "Preemption and the starvation guard" (its paragraph "The
search's cost across many domains").

The tick that runs a preemption search confined to one topology domain, by number of
domains.

Every node runs one low-priority pod that fills it; a high-priority gang that must stay
in one domain (a rack of `per` nodes, or one node by its hostname) needs the whole
domain, so every domain makes room and is searched. The tick runs on the extender's one
event loop, so its length is how long the verbs wait behind it.

    .venv/bin/python -m lab.experiments.preemption_domains            # about a minute
    .venv/bin/python -m lab.experiments.preemption_domains --quick
"""

from __future__ import annotations

import argparse
import time

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import Preempting
from extender.core.wiring import Core

RACK = "example.com/rack"
HOSTNAME = "kubernetes.io/hostname"


def _pod(name: str, priority: int, node: str = "", gang: str | None = None) -> PodInfo:
    """4 CPUs: a whole node. Bound ones are another scheduler's, running."""
    return PodInfo(uid=name, namespace="ns", name=name,
                   requests={"cpu": 4000, "memory": 1 << 20, "pods": 1},
                   labels={GROUP_LABEL: gang} if gang else {}, priority=priority,
                   node_name=node, phase="Running" if node else "Pending",
                   scheduler_name="default-scheduler" if node else "gang-scheduler")


def tick_ms(nodes: int, per: int, key: str) -> tuple[float, int]:
    """(the search's tick in ms, Preempting reports) on `nodes` nodes, domains of `per`."""
    manager = GangManager(Core.wire(Config(default_timeout_seconds=30, preemption=True,
                                           starvation_after_seconds=None)))
    now = 1000.0
    for i in range(nodes):
        labels = {HOSTNAME: f"n{i}", RACK: f"r{i // per:05d}"}
        manager.on_node(NodeInfo(f"n{i}", {"cpu": 4000, "memory": 32 << 30, "pods": 110},
                                 labels))
        manager.on_pod(_pod(f"low-{i}", 1, node=f"n{i}"), now)
    size = per if key == RACK else 1
    manager.on_group(GroupInfo("ns", "high", size, uid="high", topology_required=key), now)
    for j in range(size):
        manager.on_pod(_pod(f"high-{j}", 10, gang="high"), now)
    manager.take_actions()
    t = time.perf_counter()
    manager.tick(now)
    ms = (time.perf_counter() - t) * 1000
    return ms, sum(isinstance(a, Preempting) for a in manager.take_actions())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="500 and 2,000 nodes only")
    args = ap.parse_args()
    sizes = (500, 2000) if args.quick else (500, 2000, 5000)
    cases = [(n, 2, RACK) for n in sizes] + [(n, 1, HOSTNAME) for n in sizes]
    if not args.quick:
        cases.append((5000, 32, RACK))
    print("| nodes | domain | domains | gang | tick ms | preempting |")
    print("|---|---|---|---|---|---|")
    for nodes, per, key in cases:
        ms, reports = tick_ms(nodes, per, key)
        label = "node (hostname)" if key == HOSTNAME else f"rack of {per}"
        size = per if key == RACK else 1
        print(f"| {nodes} | {label} | {nodes // per} | {size} | {ms:.0f} | {reports} |",
              flush=True)


if __name__ == "__main__":
    main()

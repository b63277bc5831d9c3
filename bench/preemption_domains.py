"""The tick that runs a preemption search confined to one topology domain, by number of
domains (docs/topology.md, "Preemption inside one domain").

Every node runs one low-priority pod that fills it; a high-priority gang that must stay
in one domain (a rack of `per` nodes, or one node by its hostname) needs the whole
domain, so every domain makes room and is searched. The tick runs on the extender's one
event loop, so its length is how long the verbs wait behind it.

    .venv/bin/python -m bench.preemption_domains            # about a minute
    .venv/bin/python -m bench.preemption_domains --quick
"""

from __future__ import annotations

import argparse
import time

from extender.core.config import Config
from extender.core.manager import Core
from extender.core.types import NodeInfo
from extender.core.vocabulary import Preempting
from tests.core.sim import SimScheduler, group, pod

RACK = "example.com/rack"
HOSTNAME = "kubernetes.io/hostname"


def tick_ms(nodes: int, per: int, key: str) -> tuple[float, int]:
    """(the search's tick in ms, Preempting reports) on `nodes` nodes, domains of `per`."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, preemption=True,
                                        starvation_after_seconds=None)))
    for i in range(nodes):
        labels = {HOSTNAME: f"n{i}", RACK: f"r{i // per:05d}"}
        sim.add_node(NodeInfo(f"n{i}", {"cpu": 4000, "memory": 32 << 30, "pods": 110}, labels))
    for i in range(nodes):
        sim.bind_foreign(pod(f"low-{i}", None, cpu=4000, memory=1 << 20, priority=1,
                             creation=float(i)), f"n{i}")
    size = per if key == RACK else 1
    sim.add_group(group("high", size, topology_required=key))
    for j in range(size):
        sim.add_pod(pod(f"high-{j}", "high", cpu=4000, memory=1 << 20, priority=10))
    t = time.perf_counter()
    sim.tick()
    return (time.perf_counter() - t) * 1000, sum(isinstance(a, Preempting)
                                                 for a in sim.actions)


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

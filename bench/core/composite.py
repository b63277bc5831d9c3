"""What planning a CompositePodGroup of 8 children costs, in process:

    .venv/bin/python -m bench.core.composite

On 1,000 and 5,000 nodes, of which 128 have room for the children's 8-CPU pods (the
others have 2 CPU: every plan still looks at them), three composites of 8 children of
16 pods each (`planner/composite_plan.py`):

* "fits": all 8 children fit (128 pods on the 128 big nodes): the first pass alone;
* "searched": beside those 8, a first child of 32 pods × 12 CPU, which takes the 32 big
  nodes made 12-CPU and leaves room for only 6 of the others, minGroupCount 8 of 9:
  the first pass places 7, the search leaves that child out (the case it exists for);
* "cannot fit": minGroupCount 5, at most 4 fit (each child is 32 pods): the search
  spends its whole bound (`search_budget` plans: 64 at 1,000 nodes, 12 at 5,000) and
  gives up.

And the tick in which a composite of 8 children × 4 pods of 8 CPU at priority 10, on the
128 big nodes each held by a pod of a lower-priority 2-pod gang, evicts 16 of those gangs
at once (`Preemptions.composite`), beside one gang of 32 such pods doing the same (best of
3 runs, each on a cluster built anew).

It prints the plans made and the milliseconds (best and median of 5) of one
`plan_composite` call, and those of its first pass alone (the search's bound set to 0:
what the planner cost before it searched); docs/performance.md quotes the figures.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence

from extender.core.cache.snapshot import Snapshot
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import (
    GROUP_LABEL,
    CompositeInfo,
    GroupInfo,
    NodeInfo,
    PodInfo,
    composite_key,
)
from extender.core.model.vocabulary import Preempting
from extender.core.planner import Plan, Shortfall, plan_group
from extender.core.planner.composite_plan import Child, CompositePlan, plan_composite
from extender.core.wiring import Core

PARENT = composite_key("ml", "job")
BIG = 128  # nodes with room for an 8-CPU pod


def cluster(nodes: int, wide: int = 0) -> Snapshot:
    """`nodes` nodes: `BIG` of 8 CPU (the first `wide` of them 12 CPU), the rest 2."""
    core = Core.wire(Config(direct_commit=False))
    m = GangManager(core)
    for i in range(nodes):
        name = f"node-{i:05}"
        cpu = 12000 if i < wide else 8000 if i < BIG else 2000
        m.on_node(NodeInfo(name, {"cpu": cpu, "memory": 64 << 30, "pods": 110},
                           {"kubernetes.io/hostname": name}))
    return core.cache.snapshot


def child(name: str, pods: int, cpu: int = 8000) -> Child:
    group = GroupInfo("ml", name, pods, uid=name, parent=PARENT)
    return Child(group, [PodInfo(f"{name}-{i}", "ml", f"{name}-{i}",
                                 {"cpu": cpu, "memory": 1 << 30, "pods": 1},
                                 labels={GROUP_LABEL: name}, creation=float(i))
                         for i in range(pods)])


class Counting:
    """`plan_group`, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, group: GroupInfo, members: Sequence[PodInfo], succeeded: int,
                 snapshot: Snapshot, /, explain: bool = True) -> Plan | Shortfall:
        self.calls += 1
        return plan_group(group, members, succeeded, snapshot, explain)


def run(composite: CompositeInfo, children: Sequence[Child], snapshot: Snapshot,
        budget: int | None = None) -> tuple[CompositePlan, int, float, float]:
    """`budget` 0: the first pass alone."""
    times: list[float] = []
    out: CompositePlan | None = None
    planner = Counting()
    for _ in range(5):
        planner.calls = 0
        gc.collect()
        start = time.perf_counter()
        out = plan_composite(composite, children, snapshot, planner, budget)
        times.append((time.perf_counter() - start) * 1e3)
    assert out is not None
    return out, planner.calls, min(times), statistics.median(times)


def preemption_tick_ms(nodes: int, composite: bool) -> tuple[float, int]:
    """The tick in which the preemptor evicts; and how many units it evicts."""
    best, victims = float("inf"), 0
    for _ in range(3):
        core = Core.wire(Config(direct_commit=True, preemption=True,
                                starvation_after_seconds=None))
        m = GangManager(core)
        for i in range(nodes):
            name = f"node-{i:05}"
            m.on_node(NodeInfo(name, {"cpu": 8000 if i < BIG else 2000, "memory": 64 << 30,
                                      "pods": 110}, {"kubernetes.io/hostname": name}))
        now = 1000.0
        for g in range(BIG // 2):
            m.on_group(GroupInfo("ml", f"low{g}", 2, uid=f"low{g}", creation=float(g)), now)
            for j in range(2):
                m.on_pod(PodInfo(f"low{g}-{j}", "ml", f"low{g}-{j}",
                                 {"cpu": 8000, "memory": 1 << 30, "pods": 1},
                                 labels={GROUP_LABEL: f"low{g}"}, priority=1,
                                 node_name=f"node-{2 * g + j:05}", phase="Running",
                                 scheduler_name="gang-scheduler"), now)
        groups = [(f"c{c}", 4) for c in range(8)] if composite else [("one", 32)]
        if composite:
            m.on_group(CompositeInfo("ml", "job", 8, uid="job"), now)
        for name, size in groups:
            m.on_group(GroupInfo("ml", name, size, uid=name, creation=100.0,
                                 parent=PARENT if composite else ""), now)
            for j in range(size):
                m.on_pod(PodInfo(f"{name}-{j}", "ml", f"{name}-{j}",
                                 {"cpu": 8000, "memory": 1 << 30, "pods": 1},
                                 labels={GROUP_LABEL: name}, priority=10, creation=100.0,
                                 scheduler_name="gang-scheduler"), now)
        m.take_actions()
        gc.collect()
        start = time.perf_counter()
        m.tick(now + 1)
        best = min(best, (time.perf_counter() - start) * 1e3)
        victims = sum(len(a.victims) for a in m.take_actions() if isinstance(a, Preempting))
    return best, victims


def main() -> None:
    print("| composite | nodes | placed | plans | ms best | ms median | first pass alone: "
          "ms best |")
    print("|---|---|---|---|---|---|---|")
    for nodes in (1000, 5000):
        cases = [
            ("fits: 8 × 16 pods", cluster(nodes), CompositeInfo("ml", "job", 8),
             [child(f"c{i}", 16) for i in range(8)]),
            ("searched: 8 × 16 pods and 32 × 12 CPU, 8 of 9", cluster(nodes, wide=32),
             CompositeInfo("ml", "job", 8),
             [child("a", 32, 12000), *(child(f"c{i}", 16) for i in range(8))]),
            ("cannot fit: 8 × 32 pods, 5 of 8", cluster(nodes),
             CompositeInfo("ml", "job", 5), [child(f"c{i}", 32) for i in range(8)]),
        ]
        for name, snapshot, composite, children in cases:
            out, calls, best, median = run(composite, children, snapshot)
            alone = run(composite, children, snapshot, budget=0)[2]
            placed = f"{len(out.plans)} children" if out.placed else f"no ({out.searched})"
            print(f"| {name} | {nodes:,} | {placed} | {calls} | {best:.1f} | {median:.1f} | "
                  f"{alone:.1f} |")
    print()
    print("| preemptor | nodes | units evicted | tick ms (best of 3) |")
    print("|---|---|---|---|")
    for nodes in (1000, 5000):
        for whole, name in ((True, "composite of 8 × 4 pods"), (False, "gang of 32 pods")):
            ms, victims = preemption_tick_ms(nodes, whole)
            print(f"| {name} | {nodes:,} | {victims} | {ms:.0f} |")


if __name__ == "__main__":
    main()

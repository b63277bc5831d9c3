"""Question: how long does the planner alone (`plan_gang` on a plain snapshot: no verb, no
queue, no fit index) take for a gang of 64 on 5,000 nodes, empty and busy, per request
shape? Answer: no number of its own in docs/; it checked the planner change of the commit
that added it (28f2a08). docs/performance.md, "Performance" names it as the planner alone;
what a user waits for is the planning filter call, through the fit index: docs/performance.md,
"Where the time goes now" (0.25 ms for 64 members on 5,000 nodes).

Time `plan_gang` for 64 members on 5,000 nodes. Not a test: it prints milliseconds.

Run from the repository root: .venv/bin/python -m bench.experiments.plan_speed
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from extender.core.cache.snapshot import Snapshot
from extender.core.model.types import (
    LabelSelector,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    Resources,
    Taint,
    Toleration,
)
from extender.core.planner import Plan, plan_gang

GI = 1 << 30
NODES = 5000
MEMBERS = 64


def cluster(busy: bool) -> tuple[dict[str, NodeInfo], dict[str, Resources]]:
    """8-GPU nodes, half of them tainted; "busy" leaves most partly used, unevenly."""
    nodes: dict[str, NodeInfo] = {}
    free: dict[str, Resources] = {}
    for i in range(NODES):
        name = f"node-{i:05d}"
        alloc = {"cpu": 64_000, "memory": 256 * GI, "pods": 110, "nvidia.com/gpu": 8}
        taints = (Taint("nvidia.com/gpu", "present", "NoSchedule"),) if i % 2 else ()
        nodes[name] = NodeInfo(name, alloc, {"kubernetes.io/hostname": name}, taints)
        f = dict(alloc)
        if busy and i % 7:
            f["cpu"] -= 1000 * (i % 50)
            f["memory"] -= GI * (i % 200)
            f["nvidia.com/gpu"] -= i % 9
            f["pods"] -= i % 30
        free[name] = f
    return nodes, free


def gang(req: Resources, n: int = MEMBERS, role: str = "trainer", **kw: object) -> list[PodInfo]:
    tol = (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)
    return [
        PodInfo(
            f"uid-{role}-{i}",
            "ml",
            f"{role}-{i}",
            dict(req),
            labels={"app": "trainer", "index": str(i)},
            tolerations=tol,
            **kw,  # type: ignore[arg-type]
        )
        for i in range(n)
    ]


def bench(
    label: str, pods: list[PodInfo], nodes: dict[str, NodeInfo], free: dict[str, Resources]
) -> None:
    times = []
    result: object = None
    snapshot = Snapshot(nodes, free, {})  # no fit index: every plan scans the nodes
    for _ in range(30):
        t0 = time.perf_counter()
        result = plan_gang(pods, len(pods), snapshot)
        times.append((time.perf_counter() - t0) * 1000)
    outcome = "Plan" if isinstance(result, Plan) else f"Shortfall: {result.message}"  # type: ignore[attr-defined]
    median = statistics.median(times)
    print(f"  {label:<52} median {median:5.2f} ms  min {min(times):5.2f} ms  {outcome}")


def main() -> None:
    one_gpu = {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 1, "pods": 1}
    eight_gpu = {"cpu": 16000, "memory": 64 * GI, "nvidia.com/gpu": 8, "pods": 1}
    cpu_only = {"cpu": 2000, "memory": 4 * GI, "pods": 1}
    spread = (PodAffinityTerm(LabelSelector((("app", "trainer"),)), "kubernetes.io/hostname"),)
    for busy in (False, True):
        nodes, free = cluster(busy)
        print(f"{NODES} nodes, {'busy' if busy else 'empty'} cluster, {MEMBERS} members:")
        bench("{cpu: 8, memory: 32Gi, gpu: 1}", gang(one_gpu), nodes, free)
        bench("{cpu: 16, memory: 64Gi, gpu: 8} (whole nodes)", gang(eight_gpu), nodes, free)
        bench("{cpu: 2, memory: 4Gi}", gang(cpu_only), nodes, free)
        bench(
            "{cpu: 2, memory: 4Gi}, one per node (anti-affinity)",
            gang(cpu_only, required_anti_affinity=spread),
            nodes,
            free,
        )
        bench(
            "1 launcher {cpu: 2} + 63 workers {gpu: 1}",
            gang(cpu_only, 1, "launcher") + gang(one_gpu, MEMBERS - 1, "worker"),
            nodes,
            free,
        )
        bench(
            "{cpu: 2, memory: 4Gi}, selector matching one node",
            gang(cpu_only, node_selector={"kubernetes.io/hostname": "node-04999"}),
            nodes,
            free,
        )
        bench("{gpu: 9} (fits nowhere)", gang({"nvidia.com/gpu": 9, "pods": 1}), nodes, free)


if __name__ == "__main__":
    main()

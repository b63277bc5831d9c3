"""What planning gangs on DRA devices costs, in process, with the CEL runtime the
extender ships:

    .venv/bin/python -m bench.core.dra_plan

* a plan of one gang of 64 members × (4 CPU + a claim of 2 devices) on 1,000 nodes of 8
  devices each, beside the same gang without claims (the best of 5 plans each);
* the filter calls of 20 such gangs of 8 members on 5,000 nodes of 8 devices: the first
  member's call plans its gang (and reserves it), the others are answered from their
  slots; p50, p99 and max over all calls, each with every node offered.

docs/devices.md quotes the figures.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence

from extender.cel_selectors import compile_selector
from extender.core.devices.model import (
    claim_template_from_k8s,
    device_class_from_k8s,
    resource_slice_from_k8s,
)
from extender.core.manager import GangManager
from extender.core.model.claims import ClaimRef, PodClaims
from extender.core.model.config import Config
from extender.core.model.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo
from extender.core.planner.plan import Plan, plan_gang
from extender.core.wiring import Core

DRIVER = "gpu.example.com"
CLAIMS = PodClaims((ClaimRef("gpu", None, "two-gpus"),), {})


def cluster(nodes: int, devices: int) -> tuple[GangManager, Core]:
    """`nodes` nodes of 64 CPU, each publishing `devices` devices of one driver."""
    core = Core.wire(Config(direct_commit=False), selectors=compile_selector)
    m = GangManager(core)
    m.on_devices("deviceclasses", DRIVER, device_class_from_k8s({
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}))
    m.on_devices("resourceclaimtemplates", "ml/two-gpus", claim_template_from_k8s({
        "metadata": {"name": "two-gpus", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": DRIVER, "count": 2}}]}}}}))
    for i in range(nodes):
        name = f"node-{i:05}"
        m.on_node(NodeInfo(name, {"cpu": 64000, "memory": 256 << 30, "pods": 110},
                           {"kubernetes.io/hostname": name}))
        m.on_devices("resourceslices", name, resource_slice_from_k8s({
            "metadata": {"name": name}, "spec": {
                "driver": DRIVER, "pool": {"name": name, "generation": 1}, "nodeName": name,
                "devices": [{"name": f"gpu-{j}"} for j in range(devices)]}}))
    return m, core


def members(gang: str, n: int, claims: bool = True) -> list[PodInfo]:
    return [PodInfo(f"{gang}-{i}", "ml", f"{gang}-{i}",
                    {"cpu": 4000, "memory": 1 << 30, "pods": 1}, labels={GROUP_LABEL: gang},
                    scheduler_name="gang-scheduler", creation=float(i),
                    claims=CLAIMS if claims else None, binds_via_scheduler=claims)
            for i in range(n)]


def plan_ms(core: Core, pods: Sequence[PodInfo], runs: int = 5) -> tuple[float, int]:
    snapshot = core.cache.snapshot
    best, nodes = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        result = plan_gang(pods, len(pods), snapshot)
        best = min(best, time.perf_counter() - start)
        assert isinstance(result, Plan), result
        nodes = len(set(result.assignments.values()))
    return best * 1e3, nodes


def filter_ms(m: GangManager, core: Core, gangs: int, size: int) -> list[float]:
    names = sorted(core.cache.nodes)
    gc.collect()  # the cluster's construction leaves garbage that is not the filter's
    out: list[float] = []
    now = 1000.0
    for g in range(gangs):
        gang = f"g{g:02}"
        m.on_group(GroupInfo("ml", gang, size, uid=gang, creation=float(g)), now)
        pods = members(gang, size)
        for p in pods:
            m.on_pod(p, now)
        for p in pods:
            start = time.perf_counter()
            result = m.filter(p, names, now)
            out.append((time.perf_counter() - start) * 1e3)
            assert result.nodes, result
        m.take_actions()
    return out


def main() -> None:
    _, core = cluster(1000, 8)
    dra, dra_nodes = plan_ms(core, members("big", 64))
    plain, plain_nodes = plan_ms(core, members("plain", 64, claims=False))
    print("| plan | nodes × devices | ms (best of 5) | nodes used |")
    print("|---|---|---|---|")
    print(f"| 64 members × 2 devices | 1,000 × 8 | {dra:.2f} | {dra_nodes} |")
    print(f"| 64 members, no claims | 1,000 × 8 | {plain:.2f} | {plain_nodes} |")
    calls = filter_ms(*cluster(5000, 8), 20, 8)
    calls.sort()
    p99 = calls[min(len(calls) - 1, int(len(calls) * 0.99))]
    print()
    print("| filter calls | nodes × devices | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    print(f"| {len(calls)} (20 gangs × 8 members × 2 devices) | 5,000 × 8 | "
          f"{statistics.median(calls):.2f} | {p99:.2f} | {calls[-1]:.2f} |")


if __name__ == "__main__":
    main()

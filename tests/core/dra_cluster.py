"""A small DRA cluster for the core's tests: a device class, claim templates of 1, 2 and
4 devices, nodes each publishing a ResourceSlice of some GPUs, gang members whose claims
come from those templates, and the allocation kube-scheduler's plugin writes once one is
bound. The planner, preemption, starvation, PodGroup-claims and reporting tests all place
gangs on devices this way, so the cluster is a module of its own rather than a test
module the others import from."""

from __future__ import annotations

from typing import Any

from extender.cel_selectors import compile_selector
from extender.core.devices.model import (
    claim_from_k8s,
    claim_template_from_k8s,
    device_class_from_k8s,
    resource_slice_from_k8s,
)
from extender.core.model.claims import ClaimRef, PodClaims
from extender.core.model.config import Config
from extender.core.model.types import PodInfo
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node, pod

CLASS = "gpu.example.com"


def dra_sim(devices: tuple[int, ...], cpu: int = 16000, direct: bool = False,
         config: Config | None = None) -> SimScheduler:
    """`config`: instead of the default one (30 s timeout, `direct` commit)."""
    config = config or Config(default_timeout_seconds=30, direct_commit=direct)
    sim = SimScheduler(Core.wire(config, selectors=compile_selector))
    m = sim.manager
    m.on_devices("deviceclasses", CLASS, device_class_from_k8s({
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{CLASS}"'}}]}}))
    for count in (2, 4, 1):
        m.on_devices("resourceclaimtemplates", f"ns/gpu-{count}", claim_template_from_k8s({
            "metadata": {"name": f"gpu-{count}", "namespace": "ns"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": CLASS, "count": count}}]}}}}))
    for i, n in enumerate(devices):
        sim.add_node(node(f"node-{i}", cpu=cpu))
        m.on_devices("resourceslices", f"node-{i}-gpu", gpu_slice(f"node-{i}", n))
    return sim


def gpu_slice(node_name: str, n: int) -> Any:
    return resource_slice_from_k8s({"metadata": {"name": f"{node_name}-gpu"}, "spec": {
        "driver": CLASS, "pool": {"name": node_name, "generation": 1}, "nodeName": node_name,
        "devices": [{"name": f"gpu-{j}"} for j in range(n)]}})


def gpu_member(name: str, gang: str, count: int = 2, creation: float = 0.0,
            priority: int = 0) -> PodInfo:
    """Its claim, made from the template, is named `<name>-gpu` once made (`allocate_claim`)."""
    claims = PodClaims((ClaimRef("gpu", None, f"gpu-{count}"),), {"gpu": f"{name}-gpu"})
    return pod(name, gang, cpu=1000, memory=1 << 20, creation=creation, claims=claims,
               binds_via_scheduler=True, priority=priority)


def allocate_claim(sim: SimScheduler, p: PodInfo, count: int = 2) -> None:
    """What kube-scheduler's plugin writes for a bound member: its claim allocated the
    first `count` devices of its node."""
    sim.manager.on_devices("resourceclaims", f"ns/{p.name}-gpu", claim_from_k8s({
        "metadata": {"name": f"{p.name}-gpu", "namespace": "ns", "uid": f"claim-{p.uid}"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": CLASS, "count": count}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": CLASS, "pool": p.node_name, "device": f"gpu-{j}"}
            for j in range(count)]}}}}))


def slots_of(sim: SimScheduler, gang: str) -> dict[str, str]:
    res = sim.core.ledger.reservations.get(f"ns/{gang}")
    return {} if res is None else {s.pod.name: s.node for s in res.slots.values()}

"""Whole-gang preemption by devices (DRA, issue 44): a high-priority gang asking for
devices evicts a whole lower-priority gang holding them, and is helped only by victims
that free devices; what a victim's claims have allocated and what its slots hold both
come back."""

from __future__ import annotations

from extender.core.cache.devices import DeviceView
from extender.core.devices.model import claim_from_k8s
from extender.core.model.claims import ClaimRef, PodClaims
from extender.core.model.config import Config
from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import EvictPods
from extender.core.preemption.victims import GANG, Unit, view_without
from tests.core.planner.test_device_plans import CLASS, _sim
from tests.core.sim import SimScheduler, group, pod


def _gpu_member(name: str, gang: str, priority: int, generated: str | None = None
                ) -> PodInfo:
    claims = PodClaims((ClaimRef("gpu", None, "gpu-2"),),
                       {} if generated is None else {"gpu": generated})
    return pod(name, gang, cpu=1000, memory=1 << 20, claims=claims, priority=priority,
               binds_via_scheduler=True)


def _preempting_sim() -> SimScheduler:
    return _sim((2, 2, 2, 2), config=Config(
        default_timeout_seconds=30, preemption=True, starvation_after_seconds=None,
        direct_commit=False))


def test_a_high_priority_dra_gang_evicts_a_whole_lower_priority_dra_gang() -> None:
    """Gang low (4 × 2 devices) holds every device of four nodes with CPU to spare;
    gang high (4 × 2 devices, priority 10) can only be placed on the devices low
    frees, so low is evicted whole (before: its CPU alone was given back, which did not
    make high fit, and high waited forever)."""
    sim = _preempting_sim()
    sim.add_group(group("low", 4, creation=1.0))
    low = [sim.add_pod(_gpu_member(f"low-{i}", "low", 1)) for i in range(4)]
    for p in low:
        sim.schedule(p.uid)
    assert len(sim.bound("low")) == 4
    sim.add_group(group("high", 4, creation=2.0))
    high = [sim.add_pod(_gpu_member(f"high-{i}", "high", 10)) for i in range(4)]
    sim.schedule(high[0].uid)
    sim.tick(1.0)
    sim.run_all()
    evicted = [a for a in sim.actions if isinstance(a, EvictPods) and a.preemptor]
    assert [(a.gang, a.preemptor) for a in evicted] == [("ns/low", "ns/high")], evicted
    assert {p.uid for p in evicted[0].pods} == {p.uid for p in low}
    for p in low:  # the victims are gone: high is placed whole on their devices
        sim.finish(p.uid)
    sim.tick(1.0)
    sim.run_all()
    assert sorted(p.node_name for p in sim.bound("high")) == [
        "node-0", "node-1", "node-2", "node-3"]


def test_a_victims_allocated_claims_come_back_in_the_preemptors_view() -> None:
    """A bound member whose claim (made from its template) is allocated frees those
    devices; a plain pod without claims frees none."""
    sim = _sim((2, 2))
    sim.manager.on_devices("resourceclaims", "ns/v-gpu-x", claim_from_k8s({
        "metadata": {"name": "v-gpu-x", "namespace": "ns", "uid": "c-v"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": CLASS, "count": 2}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": CLASS, "pool": "node-0", "device": f"gpu-{j}"}
            for j in range(2)]}}}}))
    victim = _gpu_member("v", "", 1, generated="v-gpu-x")
    plain = pod("plain", None, cpu=1000)
    snapshot = sim.cache.snapshot
    view = snapshot.devices
    assert isinstance(view, DeviceView) and len(view.taken()) == 2
    unit = Unit("pod ns/v", GANG, 1, (victim,), (("node-0", victim),), 0.0)
    none = Unit("pod ns/plain", GANG, 1, (plain,), (("node-1", plain),), 0.0)
    freed = view_without(snapshot, [unit]).devices
    assert freed is not None and freed.taken() == frozenset()
    kept = view_without(snapshot, [none]).devices
    assert kept is not None and len(kept.taken()) == 2

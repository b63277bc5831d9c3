"""Whole-gang preemption by devices (DRA, issue 44): a high-priority gang asking for
devices evicts a whole lower-priority gang holding them, and is helped only by victims
that free devices; what a victim's claims have allocated and what its slots hold both
come back."""

from __future__ import annotations

import dataclasses

import pytest

from extender.core.cache.devices import DeviceView
from extender.core.model.config import Config
from extender.core.model.vocabulary import POD, EvictPods
from extender.core.planner.plan import Plan, plan_gang
from extender.core.preemption.victims import Unit, view_without
from tests.core.dra_cluster import allocate_claim, dra_sim, gpu_member
from tests.core.sim import SimScheduler, group, pod


def _preempting_sim() -> SimScheduler:
    return dra_sim((2, 2, 2, 2), config=Config(
        default_timeout_seconds=30, preemption=True, starvation_after_seconds=None,
        direct_commit=False))


@pytest.mark.parametrize("allocated", [False, True])
def test_a_high_priority_dra_gang_evicts_a_whole_lower_priority_dra_gang(
    allocated: bool,
) -> None:
    """Gang low (4 × 2 devices) holds every device of four nodes with CPU to spare;
    gang high (4 × 2 devices, priority 10) can only be placed on the devices low
    frees, so low is evicted whole (before: its CPU alone was given back, which did not
    make high fit, and high waited forever). `allocated`: low's claims allocated, as
    kube-scheduler leaves them (otherwise bound, the allocation not seen yet)."""
    sim = _preempting_sim()
    sim.add_group(group("low", 4, creation=1.0))
    low = [sim.add_pod(gpu_member(f"low-{i}", "low", priority=1)) for i in range(4)]
    for p in low:
        sim.schedule(p.uid)
    assert len(sim.bound("low")) == 4
    if allocated:
        for p in sim.bound("low"):
            allocate_claim(sim, p)
    sim.add_group(group("high", 4, creation=2.0))
    high = [sim.add_pod(gpu_member(f"high-{i}", "high", priority=10)) for i in range(4)]
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
    devices, and the plan counts them free; a plain pod without claims frees none."""
    sim = dra_sim((2, 2))
    placed = dataclasses.replace(gpu_member("v", "", priority=1), node_name="node-0")
    allocate_claim(sim, placed)
    plain = pod("plain", None, cpu=1000)
    snapshot = sim.cache.snapshot
    view = snapshot.devices
    assert isinstance(view, DeviceView) and len(view.taken()) == 2
    unit = Unit("pod ns/v", POD, 1, (placed,), (("node-0", placed),), 0.0)
    none = Unit("pod ns/plain", POD, 1, (plain,), (("node-1", plain),), 0.0)
    freed = view_without(snapshot, [unit])
    assert freed.devices is not None and freed.devices.taken() == frozenset()
    two = [gpu_member(f"t-{i}", "t") for i in range(2)]
    assert isinstance(plan_gang(two, 2, freed), Plan)
    assert not isinstance(plan_gang(two, 2, snapshot), Plan)
    kept = view_without(snapshot, [none]).devices
    assert kept is not None and len(kept.taken()) == 2

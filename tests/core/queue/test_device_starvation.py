"""The starvation guard holds devices (DRA, issue 44): a gang asking for devices that
has starved holds the nodes whose devices it will get, and its slots hold those devices
as they come free, so younger DRA gangs do not keep taking them."""

from __future__ import annotations

import pytest

from extender.core.model.config import Config
from tests.core.dra_cluster import allocate_claim, dra_sim, gpu_member, slots_of
from tests.core.sim import group


@pytest.mark.parametrize("allocated", [False, True])
def test_a_starved_dra_gang_holds_devices_younger_gangs_would_take(allocated: bool) -> None:
    """a (2 × 2 devices) runs on two of four nodes of 2 devices; b (4 × 2) waits for
    them, starves after 10 s and holds all four nodes, the two free ones' devices at
    once; c (2 × 2), younger, finds none and waits; a finishes and b goes whole.
    Before: b's hold was planned on CPU alone, all four members on one node whose
    devices a held, and c took the two free nodes' devices from under it."""
    sim = dra_sim((2, 2, 2, 2), config=Config(
        default_timeout_seconds=300, starvation_after_seconds=10, preemption=False,
        direct_commit=False))
    sim.add_group(group("a", 2, creation=1.0))
    a = [sim.add_pod(gpu_member(f"a-{i}", "a")) for i in range(2)]
    for p in a:
        sim.schedule(p.uid)
    assert len(sim.bound("a")) == 2
    if allocated:  # as kube-scheduler leaves them (otherwise not seen yet)
        for p in sim.bound("a"):
            allocate_claim(sim, p)
    sim.add_group(group("b", 4, creation=2.0))
    b = [sim.add_pod(gpu_member(f"b-{i}", "b")) for i in range(4)]
    sim.schedule(b[0].uid)
    assert slots_of(sim, "b") == {}
    sim.tick(11.0)
    sim.run_all()
    held = slots_of(sim, "b")
    assert sorted(held.values()) == ["node-0", "node-1", "node-2", "node-3"], held
    sim.add_group(group("c", 2, creation=20.0))
    c = [sim.add_pod(gpu_member(f"c-{i}", "c")) for i in range(2)]
    sim.schedule(c[0].uid)
    sim.run_all()
    assert slots_of(sim, "c") == {} and not sim.bound("c")
    for p in sim.bound("a"):
        sim.finish(p.uid)
    sim.tick(1.0)
    sim.run_all()
    assert sorted(p.node_name for p in sim.bound("b")) == [
        "node-0", "node-1", "node-2", "node-3"]

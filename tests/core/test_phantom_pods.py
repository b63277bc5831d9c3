"""A relist reconciles every pod the core holds, however it learned of it
(`GangManager.pods_listed`): a pod learned from a filter call that the list does not show
was created and deleted while the watch was down, and is deleted; one learned after the
list began may be missing only because it is newer than the list, and stays."""

from __future__ import annotations

from extender.core.model.types import PodInfo
from tests.core.sim import SimScheduler, group, node, pod


def _gang(sim: SimScheduler) -> tuple[PodInfo, PodInfo]:
    """A gang of 2 on two 4-CPU nodes: one member delivered by the watch, the other
    known only from its filter call (the watch was down when it was created)."""
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.add_group(group("g", 2))
    real = sim.add_pod(pod("g-0", "g", cpu=3000, creation=sim.now))
    phantom = pod("g-1", "g", cpu=3000, creation=sim.now)
    sim.manager.filter(phantom, ["n0", "n1"], sim.now)
    return real, phantom


def test_a_phantom_member_learned_from_a_filter_call_goes_with_the_relist() -> None:
    """It took a slot for good: the gang waited for a bind that never came or, with the
    direct commit, its Binding 404'd and the real members were evicted at every
    deadline."""
    sim = SimScheduler()
    real, phantom = _gang(sim)
    res = sim.core.ledger.reservations.get("ns/g")
    assert res is not None and phantom.uid in res.slots  # it holds a slot

    sim.manager.pods_listed({real.uid}, began=sim.now + 5, now=sim.now + 6)

    assert sim.manager.reads.pod(phantom.uid) is None
    assert sim.manager.reads.pod(real.uid) is not None
    res = sim.core.ledger.reservations.get("ns/g")
    assert res is None or phantom.uid not in res.slots


def test_a_pod_learned_after_the_list_began_stays() -> None:
    sim = SimScheduler()
    real, phantom = _gang(sim)
    sim.manager.pods_listed({real.uid}, began=sim.now - 1, now=sim.now + 1)
    assert sim.manager.reads.pod(phantom.uid) is not None


"""The arrival clock of a gang one of whose members is deleted while it is being
created. The clock says the gang is arriving, and at what rate: the filter's assembly
wait holds a member's filter call (and so kube-scheduler's serial loop) for the rest on
its word, and `Reads.bindings_ahead` opens connections for the gang's commit on it. A
pod that is gone tells neither: it is not a member the rest of the gang follows, and a
gang whose only recent arrival was deleted is not about to commit. (Its controller's
replacement is a new pod, which arrives on its own.)"""

from __future__ import annotations

from extender.core.model.types import PodInfo
from tests.core.sim import FOUR_NODES, SimScheduler, four_nodes, group, pod


def created(sim: SimScheduler, name: str, gang: str, at: float) -> PodInfo:
    """A member created at `at` and seen by the watch at once."""
    sim.now = at
    return sim.add_pod(pod(name, gang, creation=at))


def test_a_deleted_member_no_longer_keeps_its_gang_arriving() -> None:
    """Gang g (quorum 3, gap 0.5 s): g-0 created at t, g-1 at t + 0.3 s, then g-1 is
    deleted. At t + 0.6 s the newest member still in g arrived 0.6 s ago, past the gap:
    g-0 is turned away at once rather than held for members the clock no longer sees
    coming."""
    sim = four_nodes(assembly_gap_seconds=0.5)
    sim.add_group(group("g", 3))
    t = sim.now
    first = created(sim, "g-0", "g", t)
    gone = created(sim, "g-1", "g", t + 0.3)
    sim.now = t + 0.35
    sim.delete(gone.uid)
    res = sim.manager.filter(first, FOUR_NODES, t + 0.6)
    assert res.wait == 0
    assert set(res.unresolvable.values()) == {"gang ns/g: 1 of 3 members exist"}


def test_a_gang_whose_only_arrival_was_deleted_has_no_bindings_ahead() -> None:
    """Gang g (quorum 3): g-0 was listed after a restart (not arriving), g-1 created
    just now and deleted: g is not being created, so no connections are opened for its
    commit until a pod created in it afterwards arrives."""
    sim = four_nodes()
    sim.add_group(group("g", 3))
    t = sim.now
    created(sim, "g-0", "g", t - 60)  # listed, too old to be arriving
    gone = created(sim, "g-1", "g", t)
    assert sim.manager.reads.bindings_ahead(t) == 2
    sim.now = t + 0.1
    sim.delete(gone.uid)
    assert sim.manager.reads.bindings_ahead(t + 0.1) == 0
    created(sim, "g-2", "g", t + 0.2)
    assert sim.manager.reads.bindings_ahead(t + 0.2) == 2

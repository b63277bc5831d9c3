"""The arrival clock of a gang whose members join it by a relabel: a pod created without
the pod-group label (or with another gang's) and labelled into the gang afterwards, as
a controller that labels pods after creating them does. The clock is what the filter's
assembly wait reads (a member of a gang being created waits a moment for the rest
instead of being turned away into kube-scheduler's pod backoff) and what
`Reads.bindings_ahead` counts the connections to open from. A pod joins its gang when
its label says so, so that is when it arrives; a pod relabelled out of a gang no longer
keeps that gang's clock going."""

from __future__ import annotations

import dataclasses

from extender.core.model.types import GROUP_LABEL, PodInfo
from tests.core.sim import FOUR_NODES, SimScheduler, four_nodes, group, pod


def created(sim: SimScheduler, name: str, at: float, gang: str | None = None) -> PodInfo:
    """A pod created at `at` (in gang `gang`, or none) and seen by the watch at once."""
    sim.now = at
    return sim.add_pod(pod(name, gang, creation=at))


def relabel(sim: SimScheduler, p: PodInfo, gang: str | None, at: float) -> PodInfo:
    """The watch's MODIFIED event for `p` with its pod-group label set to `gang` (or
    removed)."""
    sim.now = at
    labels = {k: v for k, v in p.labels.items() if k != GROUP_LABEL}
    if gang is not None:
        labels[GROUP_LABEL] = gang
    moved = dataclasses.replace(sim.cache.pods[p.uid], labels=labels)
    sim.manager.on_pod(moved, at)
    return moved


def test_a_member_labelled_into_its_gang_waits_for_the_rest_as_one_created_in_it() -> None:
    """Two pods created plain, labelled into gang g (quorum 2) a moment later: the first
    one's filter call waits for the second instead of being turned away with "1 of 2
    members exist"; once the second is labelled it gets its slot."""
    sim = four_nodes()
    sim.add_group(group("g", 2))
    t = sim.now
    a, b = created(sim, "a", t), created(sim, "b", t)
    a = relabel(sim, a, "g", t + 0.01)
    res = sim.manager.filter(a, FOUR_NODES, t + 0.02)
    assert res.wait > 0 and not res.unresolvable, res
    assert sim.decision("ns/g") is None  # no "1 of 2 members exist" recorded
    relabel(sim, b, "g", t + 0.03)
    res = sim.manager.filter(a, FOUR_NODES, t + 0.04, waited=0.02)
    assert res.wait == 0 and len(res.nodes) == 1


def test_a_member_moved_from_another_gang_arrives_in_its_new_gang() -> None:
    sim = four_nodes()
    sim.add_group(group("old", 4))
    sim.add_group(group("g", 2))
    t = sim.now
    p = relabel(sim, created(sim, "p", t - 60, "old"), "g", t)
    assert sim.manager.filter(p, FOUR_NODES, t + 0.01).wait > 0


def test_members_labelled_into_a_gang_are_bindings_ahead() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 3))
    t = sim.now
    plain = [created(sim, f"p{i}", t) for i in range(3)]
    assert sim.manager.reads.bindings_ahead(t) == 0
    for p in plain[:2]:
        relabel(sim, p, "g", t + 0.01)
    assert sim.manager.reads.bindings_ahead(t + 0.01) == 2


def test_a_pod_relabelled_out_no_longer_keeps_its_old_gang_arriving() -> None:
    """Gang g (quorum 3, gap 0.5 s): g-0 created at t, g-1 at t + 0.3 s, then g-1 is
    relabelled into gang h. At t + 0.6 s the newest member g still has arrived 0.6 s
    ago, past the gap: g-0 is turned away at once, and g-1 is h's arrival, not g's."""
    sim = four_nodes(assembly_gap_seconds=0.5)
    sim.add_group(group("g", 3))
    sim.add_group(group("h", 2))
    t = sim.now
    first = created(sim, "g-0", t, "g")
    moved = relabel(sim, created(sim, "g-1", t + 0.3, "g"), "h", t + 0.35)
    res = sim.manager.filter(first, FOUR_NODES, t + 0.6)
    assert res.wait == 0
    assert set(res.unresolvable.values()) == {"gang ns/g: 1 of 3 members exist"}
    assert sim.manager.filter(moved, FOUR_NODES, t + 0.6).wait > 0  # h's arrival, at t + 0.35


def test_a_pod_labelled_out_and_back_counts_once() -> None:
    """Moved out of g and back in: one member of g, arrived when it came back, so the
    clock sees one member and no rate yet (not two members at a rate of 0)."""
    sim = four_nodes()
    sim.add_group(group("g", 4))
    t = sim.now
    p = created(sim, "g-0", t, "g")
    relabel(sim, p, None, t + 0.1)
    relabel(sim, p, "g", t + 0.2)
    arrival = sim.core.arrivals.get("ns/g")
    assert arrival is not None
    assert (arrival.count, arrival.first, arrival.last) == (1, t + 0.2, t + 0.2)


def test_every_member_relabelled_out_leaves_no_clock() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 2))
    t = sim.now
    p = created(sim, "g-0", t, "g")
    relabel(sim, p, None, t + 0.01)
    assert sim.core.arrivals.get("ns/g") is None
    assert sim.manager.reads.bindings_ahead(t + 0.01) == 0

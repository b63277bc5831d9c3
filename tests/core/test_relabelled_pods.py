"""A pending pod that moves to another gang with nothing else about it changed: its
labels rewritten (scheduler-plugins' label, or a Kueue pod group's), or a JobSet's split
moving its pods to their replicated Job's gang. Both gangs' counts change, so both must
be planned again: the queue skips a gang whose failed plan depends on nothing that moved
since (`GangQueue._failure_signature`, whose part for the gang is `members_epoch`), and
the pod it just gained may be the one that lets it fit (a later member stands in for one
that does not fit, `plan_gang`)."""

from __future__ import annotations

import dataclasses

from extender.core.cache.cache import Cache
from extender.core.model.types import GROUP_LABEL
from extender.core.model.vocabulary import Reason
from tests.core.sim import SimScheduler, group, node, pod


def test_a_relabelled_pod_changes_the_members_of_both_gangs() -> None:
    cache = Cache()
    for g in (group("a", 3), group("b", 2)):
        cache.upsert_group(g)
    p = pod("p", "a")
    cache.upsert_pod(p)
    before = dict(cache.members_epoch)
    cache.upsert_pod(dataclasses.replace(p, labels={GROUP_LABEL: "b"}))
    assert cache.members_epoch["ns/a"] != before["ns/a"]
    assert cache.members_epoch["ns/b"] != before["ns/b"]
    assert cache.tally(cache.groups["ns/a"]).members == 0
    assert cache.tally(cache.groups["ns/b"]).members == 1


def test_a_plain_pod_labelled_into_a_gang_changes_its_members() -> None:
    cache = Cache()
    cache.upsert_group(group("b", 2))
    p = pod("p")
    cache.upsert_pod(p)
    before = cache.members_epoch["ns/b"]
    cache.upsert_pod(dataclasses.replace(p, labels={GROUP_LABEL: "b"}))
    assert cache.members_epoch["ns/b"] != before
    assert cache.tally(cache.groups["ns/b"]).members == 1


def waiting_gang_b() -> tuple[SimScheduler, str]:
    """Gang b (quorum 2) failed its plan: of its two members one fits the 3 CPU free, the
    other (4 CPU) only an emptied node. Pod p (1 CPU) is pending in gang a (quorum 3);
    returns its uid."""
    sim = SimScheduler()
    for n, taken in (("n0", 2000), ("n1", 3000)):
        sim.add_node(node(n, cpu=4000))
        sim.add_pod(pod(f"on-{n}", cpu=taken, node_name=n, phase="Running"))
    sim.add_group(group("b", 2))
    sim.add_pod(pod("b-0", "b", cpu=1000))
    sim.add_pod(pod("b-1", "b", cpu=4000))
    sim.add_group(group("a", 3))
    p = sim.add_pod(pod("p", "a", cpu=1000))
    sim.tick()
    assert sim.status("ns/b").reason == Reason.INSUFFICIENT_CAPACITY
    return sim, p.uid


def test_a_gang_gaining_a_relabelled_pod_that_lets_it_fit_is_placed() -> None:
    """p moves from gang a to gang b, nothing else changes: b-0 and p fit together, so b
    is reserved on the next pass and both are bound (before, b kept its old failure:
    nothing its signature reads had moved)."""
    sim, uid = waiting_gang_b()
    moved = dataclasses.replace(sim.cache.pods[uid], labels={GROUP_LABEL: "b"})
    sim.manager.on_pod(moved, sim.now)
    sim.tick()
    assert "ns/b" in sim.core.ledger.reservations
    sim.run_all()
    assert sorted(q.name for q in sim.bound("b")) == ["b-0", "p"]
    assert sim.cache.tally(sim.cache.groups["ns/a"]).members == 0


def test_a_plain_pod_labelled_into_a_waiting_gang_lets_it_fit() -> None:
    sim, uid = waiting_gang_b()
    sim.delete(uid)
    p = sim.add_pod(pod("q", cpu=1000))  # a plain pod, then labelled into b
    sim.tick()
    sim.manager.on_pod(dataclasses.replace(p, labels={GROUP_LABEL: "b"}), sim.now)
    sim.tick()
    assert "ns/b" in sim.core.ledger.reservations

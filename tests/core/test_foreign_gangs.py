"""Gangs of other schedulers on a shared cluster: pods that carry a gang's keys but name
another scheduler (Volcano's, scheduler-plugins' Coscheduling, the default scheduler
under Kueue) are never this extender's members. They would otherwise be planned here,
their capacity reserved for binds that never come to us, and their groups' status
written by two schedulers at once (architecture.md §11)."""

from __future__ import annotations

import dataclasses

from extender.core.model.sources import KUEUE_GROUP_LABEL
from extender.core.model.types import KUEUE, SCHEDULER_PLUGINS, Membership
from extender.core.model.vocabulary import StatusChanged
from tests.core.sim import SimScheduler, group, node, pod


def test_a_gang_of_another_scheduler_reserves_nothing_here() -> None:
    """One node of 4 cpu. An older PodGroup whose two 2-cpu pods name another scheduler
    is complete; a younger gang of ours needs the same node. Planned as ours, the older
    one would take the node for pods we never bind, and ours would wait behind it."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=4000))
    sim.add_group(group("theirs", 2, creation=1.0))
    for i in range(2):
        sim.add_pod(pod(f"theirs-{i}", "theirs", cpu=2000, creation=1.0,
                        scheduler_name="volcano"))
    sim.add_group(group("ours", 2, creation=2.0))
    mine = [sim.add_pod(pod(f"ours-{i}", "ours", cpu=2000, creation=2.0)) for i in range(2)]
    sim.manager.tick(sim.now)
    assert "ns/theirs" not in sim.core.ledger.reservations
    assert sim.manager.reads.group_pods("ns", "theirs") == []
    for p in mine:
        sim.schedule(p.uid)
    assert len(sim.bound("ours")) == 2


def test_a_bound_pod_of_another_scheduler_counts_as_capacity_not_as_a_member() -> None:
    """Bound by the other scheduler, its pods still take their node's capacity."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=4000))
    sim.add_group(group("theirs", 1))
    sim.add_pod(dataclasses.replace(pod("theirs-0", "theirs", cpu=3000, scheduler_name="volcano"),
                                    node_name="n0", phase="Running"))
    assert sim.cache.free["n0"]["cpu"] == 1000
    assert sim.manager.reads.group_pods("ns", "theirs") == []


def test_the_group_of_another_scheduler_gets_no_status_from_us() -> None:
    """Its own scheduler writes its status; a second writer would flap it."""
    sim = SimScheduler()
    sim.add_node(node("n0"))
    sim.add_group(group("theirs", 2))
    for i in range(2):
        sim.add_pod(pod(f"theirs-{i}", "theirs", scheduler_name="default-scheduler"))
    sim.manager.tick(sim.now)
    changed = [a for a in sim.manager.take_actions() if isinstance(a, StatusChanged)]
    assert [a for a in changed if a.gang == "ns/theirs" and a.status is not None] == []


def test_kueue_pods_of_the_default_scheduler_form_no_gang_here() -> None:
    """Kueue labels the pods of a pod group whatever scheduler they name; only those
    naming this one are a gang here (docs/integrations.md, Kueue plain pod groups)."""
    sim = SimScheduler()
    sim.add_node(node("n0"))
    for i in range(2):
        sim.add_pod(pod(f"k-{i}", labels={KUEUE_GROUP_LABEL: "batch"},
                        scheduler_name="default-scheduler",
                        membership=Membership(KUEUE, "batch", 2)))
    sim.manager.tick(sim.now)
    assert sim.cache.groups == {}
    assert sim.manager.reads.group_pods("ns", "batch", KUEUE) == []
    assert not list(sim.core.ledger.reservations.values())


def test_a_member_that_moves_to_another_scheduler_leaves_the_gang() -> None:
    """schedulerName is immutable, but a pod recreated under the same uid by a test or a
    replayed watch must not keep a slot: the stricter reading wins."""
    sim = SimScheduler()
    sim.add_node(node("n0"))
    sim.add_group(group("g", 2))
    a = sim.add_pod(pod("g-0", "g"))
    sim.add_pod(pod("g-1", "g"))
    sim.manager.tick(sim.now)
    assert a.uid in sim.core.ledger.reservations["ns/g"].slots
    sim.add_pod(dataclasses.replace(a, scheduler_name="volcano",
                                    membership=Membership(SCHEDULER_PLUGINS, "g")))
    assert a.uid not in sim.core.ledger.reservations["ns/g"].slots
    assert a.uid not in {p.uid for p in sim.manager.reads.group_pods("ns", "g")}

"""A CompositePodGroup's spec.priority (what admission resolved from its
priorityClassName) places its children in the queue where their members have no
priority of their own (`order.gang_priority`, `GangQueue._sort_key`)."""

from __future__ import annotations

from extender.core.model.order import gang_priority
from extender.core.model.types import CompositeInfo, composite_key
from tests.core.sim import SimScheduler, group, node, pod

PARENT = composite_key("ns", "lw")


def cluster(priority: int | None) -> SimScheduler:
    """Room for two pods: an older plain gang of two and a younger composite of a
    leader and a worker, every pod without a priority; all complete before any pass."""
    sim = SimScheduler()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.add_group(group("old", 2, creation=1.0))
    sim.manager.on_group(CompositeInfo("ns", "lw", 2, uid="c-lw", creation=50.0,
                                       priority=priority), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT, creation=50.0))
    sim.add_group(group("workers", 1, parent=PARENT, creation=50.0))
    for name, g in (("old-0", "old"), ("old-1", "old"), ("leader-0", "leader"),
                    ("workers-0", "workers")):
        sim.add_pod(pod(name, g))
    return sim


def test_the_composites_priority_puts_its_children_first() -> None:
    sim = cluster(priority=1000)
    assert [r.gang for r in sim.manager.reads.queue()] == ["ns/leader", "ns/workers", "ns/old"]
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == ["leader-0", "workers-0"]


def test_without_one_the_older_gang_goes_first() -> None:
    sim = cluster(priority=None)
    assert [r.gang for r in sim.manager.reads.queue()] == ["ns/old", "ns/leader", "ns/workers"]
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == ["old-0", "old-1"]


def test_a_members_own_priority_wins() -> None:
    assert gang_priority([pod("a", priority=5)], inherited=1000) == 5
    assert gang_priority([pod("a")], inherited=1000) == 1000
    assert gang_priority([pod("a")], inherited=None) == 0

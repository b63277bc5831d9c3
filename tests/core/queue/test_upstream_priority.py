"""An upstream PodGroup's own spec.priority (v1beta1, 1.37: what admission resolved from
its spec.priorityClassName) is the gang's priority where its pods have none, as a
CompositePodGroup's is for its children (`test_composite_priority.py`): it places the
gang in the queue and keeps lower-priority preemptors off it. Before, the field was not
read and such a gang ran at priority 0."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.model.config import Config
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.types import WORKLOAD_API, GroupInfo, Membership
from extender.core.model.vocabulary import Preempting
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

BETA = "scheduling.k8s.io/v1beta1"


def podgroup_object(name: str, min_count: int, priority: Any = None,
                    creation: str = "2026-11-29T06:00:50Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": BETA, "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": name, "uid": f"g-{name}",
                         "creationTimestamp": creation},
            "spec": spec}


def upstream(name: str, min_count: int, priority: Any = None) -> GroupInfo:
    return workload_group_from_k8s(podgroup_object(name, min_count, priority))


def cluster(priority: int | None) -> SimScheduler:
    """Room for two pods: an older scheduler-plugins gang of two and a younger upstream
    gang of two, every pod without a priority; all complete before any pass."""
    sim = SimScheduler()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.add_group(group("old", 2, creation=1.0))
    sim.add_group(upstream("new", 2, priority))
    for i in range(2):
        sim.add_pod(pod(f"old-{i}", "old"))
        sim.add_pod(pod(f"new-{i}", membership=Membership(WORKLOAD_API, "new")))
    return sim


def test_the_podgroup_s_priority_puts_its_gang_first() -> None:
    sim = cluster(priority=1000)
    assert [r.gang for r in sim.manager.reads.queue()] == [f"{WORKLOAD_API}:ns/new", "ns/old"]
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == ["new-0", "new-1"]


def test_without_one_the_older_gang_goes_first() -> None:
    sim = cluster(priority=None)
    assert [r.gang for r in sim.manager.reads.queue()] == ["ns/old", f"{WORKLOAD_API}:ns/new"]
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == ["old-0", "old-1"]


def test_a_member_s_own_priority_wins() -> None:
    """A pod's priority, when it has one, is the gang's, as for a composite's child."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=1000))
    sim.add_group(group("old", 1, creation=1.0))
    sim.add_group(upstream("new", 1, 1000))
    sim.add_pod(pod("old-0", "old", priority=5))
    sim.add_pod(pod("new-0", membership=Membership(WORKLOAD_API, "new"), priority=1))
    assert [r.gang for r in sim.manager.reads.queue()] == ["ns/old", f"{WORKLOAD_API}:ns/new"]


def preempted(running_priority: int | None) -> bool:
    """A running upstream gang of two (pods without a priority) on the two nodes; a
    gang of two whose pods have priority 10 arrives: whether it evicts the first."""
    sim = SimScheduler(Core.wire(Config(direct_commit=False)))
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.add_group(upstream("run", 2, running_priority))
    for i in range(2):
        sim.add_pod(pod(f"run-{i}", membership=Membership(WORKLOAD_API, "run"),
                        node_name=f"n{i}", phase="Running"))
    sim.add_group(group("high", 2))
    for i in range(2):
        sim.add_pod(pod(f"high-{i}", "high", priority=10))
    sim.tick()
    sim.tick(1)
    return any(isinstance(a, Preempting) for a in sim.actions)


def test_the_podgroup_s_priority_keeps_lower_preemptors_off_it() -> None:
    assert preempted(running_priority=None)  # the control: priority 0, evicted
    assert not preempted(running_priority=50)


def test_spec_priority_is_read_and_a_bad_one_named() -> None:
    assert upstream("g", 1).priority is None
    assert upstream("g", 1, 0).priority == 0
    assert upstream("g", 1, -5).priority == -5
    for bad in ("high", 1.5, True):
        with pytest.raises(ValueError, match=r"spec\.priority"):
            upstream("g", 1, bad)


def test_the_starvation_guard_orders_starving_gangs_by_it_too() -> None:
    """The guard lets a starving gang take over holds only of gangs behind it in gang
    order; that order must be the queue's, or a gang the queue puts first would lose its
    hold to one behind it. Before, the guard read only a composite's priority."""
    sim = cluster(priority=1000)
    cache, guard = sim.core.cache, sim.core.starvation
    new, old = cache.groups[f"{WORKLOAD_API}:ns/new"], cache.groups["ns/old"]
    assert guard._key_of(new, cache.members(new)) < guard._key_of(old, cache.members(old))

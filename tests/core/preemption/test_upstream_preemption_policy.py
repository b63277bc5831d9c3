"""An upstream PodGroup's own spec.preemptionPolicy (scheduling.k8s.io/v1beta1, 1.37,
PodGroupPreemptionPolicy; admission fills it from the group's PriorityClass): Never keeps
the gang from evicting lower-priority work, as a scheduler-plugins gang is kept by a
member whose pod says Never, though its pods say PreemptLowerPriority (a pod's policy
comes from the pod's own PriorityClass, which need not be the group's). Before, the
field was not read and such a gang evicted others."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.types import WORKLOAD_API, CompositeInfo, Membership
from tests.core.preemption.preempting import cluster, evictions
from tests.core.sim import SimScheduler, group, pod

UP: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
    "metadata": {"name": "up", "namespace": "ns", "uid": "pg-up",
                 "creationTimestamp": "2026-11-24T10:25:29Z"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 4}},
             "priorityClassName": "high", "priority": 10},
}


def with_policy(policy: Any) -> dict[str, Any]:
    obj = copy.deepcopy(UP)
    if policy is not None:
        obj["spec"]["preemptionPolicy"] = policy
    return obj


@pytest.mark.parametrize("given,read", [
    (None, "PreemptLowerPriority"),  # the gate off, or no PriorityClass: upstream's default
    ("PreemptLowerPriority", "PreemptLowerPriority"),
    ("Never", "Never"),
])
def test_the_preemption_policy_is_read(given: str | None, read: str) -> None:
    assert workload_group_from_k8s(with_policy(given)).preemption_policy == read


@pytest.mark.parametrize("given", ["never", "Sometimes", 1, {"Never": {}}])
def test_a_malformed_preemption_policy_is_named(given: Any) -> None:
    with pytest.raises(ValueError,
                       match=r"podgroup\.scheduling\.k8s\.io ns/up: .*spec\.preemptionPolicy"):
        workload_group_from_k8s(with_policy(given))


def low_everywhere() -> SimScheduler:
    """Four 4-CPU nodes, each taken by a member of the running priority-1 gang ns/low."""
    sim = cluster()
    sim.add_group(group("low", 4))
    for i in range(4):
        sim.add_pod(pod(f"low-{i}", "low", cpu=4000, priority=1, node_name=f"n{i}",
                        phase="Running"))
    return sim


def run(policy: str) -> SimScheduler:
    """Four 4-CPU nodes, each taken by a member of the running priority-1 gang ns/low;
    then the upstream gang ns/up (4 pods of priority 10 and PreemptLowerPriority, a
    whole node each) whose PodGroup says `policy`."""
    sim = low_everywhere()
    sim.add_group(workload_group_from_k8s(with_policy(policy)))
    for i in range(4):
        sim.add_pod(pod(f"up-{i}", cpu=4000, priority=10,
                        membership=Membership(WORKLOAD_API, "up")))
    for _ in range(4):
        sim.tick(0.5)
    return sim


def test_never_on_the_podgroup_keeps_its_gang_from_preempting() -> None:
    sim = run("Never")
    assert evictions(sim) == []
    assert "does not preempt lower-priority work (preemptionPolicy: Never)" in sim.status(
        "workload-api:ns/up").message


def test_preempt_lower_priority_on_the_podgroup_preempts() -> None:
    """The same gang, its PodGroup's policy the default: the low gang is evicted whole
    for it (the Never test's control)."""
    (ev,) = evictions(run("PreemptLowerPriority"))
    assert ev.gang == "ns/low" and ev.preemptor == "workload-api:ns/up"


@pytest.mark.parametrize("leader_policy,evicts", [("Never", False),
                                                  ("PreemptLowerPriority", True)])
def test_a_never_child_keeps_its_composite_from_preempting(leader_policy: str,
                                                           evicts: bool) -> None:
    """A CompositePodGroup preempts as one unit for all its children: one child whose
    PodGroup says Never keeps the whole from preempting, as a child with a Never member
    does."""
    sim = low_everywhere()
    sim.manager.on_group(CompositeInfo("ns", "lw", 2, uid="c-lw"), sim.now)
    for name, count, policy in (("leader", 1, leader_policy),
                                ("workers", 3, "PreemptLowerPriority")):
        obj = with_policy(policy)
        obj["metadata"].update(name=name, uid=f"pg-{name}")
        obj["spec"].update(schedulingPolicy={"gang": {"minCount": count}},
                           parentCompositePodGroupName="lw")
        sim.add_group(workload_group_from_k8s(obj))
        for i in range(count):
            sim.add_pod(pod(f"{name}-{i}", cpu=4000, priority=10,
                            membership=Membership(WORKLOAD_API, name)))
    for _ in range(4):
        sim.tick(0.5)
    assert bool(evictions(sim)) == evicts

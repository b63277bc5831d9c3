"""A CompositePodGroup whose own disruption mode is all (core/preemption/disruption.py):
once it has started (minGroupCount children at their quorum bound), a member of any of
its children lost has every bound member of every child evicted, once, each child
reported; a child of mode all inside a composite of mode single is disrupted alone."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert_groups import composite_from_k8s
from extender.core.model.types import (
    DISRUPT_ALL,
    DISRUPT_SINGLE,
    MEMBER_DISRUPTED,
    CompositeInfo,
    PodInfo,
    composite_key,
)
from extender.core.model.vocabulary import EvictPods, GangDisrupted
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

PARENT = composite_key("ns", "lw")


def lw(mode: str = DISRUPT_ALL, min_groups: int = 2, **kw: Any) -> CompositeInfo:
    return CompositeInfo("ns", "lw", min_groups, uid="c-lw", disruption_mode=mode, **kw)


def started(mode: str = DISRUPT_ALL, workers_mode: str = DISRUPT_SINGLE
            ) -> tuple[SimScheduler, dict[str, PodInfo]]:
    """A leader group of one pod and a worker group of two, children of ns/lw, placed
    together and bound, one pod per node."""
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.manager.on_group(lw(mode), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT))
    sim.add_group(group("workers", 2, parent=PARENT, disruption_mode=workers_mode))
    names = [("leader-0", "leader"), ("workers-0", "workers"), ("workers-1", "workers")]
    made = [sim.add_pod(pod(n, g, creation=sim.now - 60)) for n, g in names]
    sim.run_all()
    assert len(sim.bound()) == 3
    sim.actions.clear()
    return sim, {p.name: sim.cache.pods[p.uid] for p in made}


def evictions(sim: SimScheduler) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in sim.actions:
        if isinstance(a, EvictPods):
            out.setdefault(a.gang, set()).update(p.name for p in a.pods)
    return out


def reports(sim: SimScheduler) -> list[GangDisrupted]:
    return [a for a in sim.actions if isinstance(a, GangDisrupted)]


def test_a_worker_lost_has_every_child_evicted_once() -> None:
    sim, pods = started()
    sim.delete(pods["workers-0"].uid)
    assert evictions(sim) == {"ns/leader": {"leader-0"}, "ns/workers": {"workers-1"}}
    by_gang = {r.group.name: r for r in reports(sim)}
    assert set(by_gang) == {"leader", "workers"}
    assert all(r.composite == "lw" for r in by_gang.values())
    assert [p.name for p in by_gang["workers"].lost] == ["workers-0"]
    assert by_gang["leader"].lost == ()
    msg = by_gang["leader"].message
    assert msg.startswith("gang ns/leader: part of CompositePodGroup ns/lw, whose "
                          "disruption mode is all: member ns/workers-0 was deleted"), msg
    assert "its 2 bound member(s) left, 1 of this group, are evicted" in msg
    # More events, a relist, time passing: nothing more.
    for name in ("leader-0", "workers-1"):
        p = sim.cache.pods[pods[name].uid]
        sim.manager.on_pod(dataclasses.replace(p, phase="Running"), sim.now)
    sim.manager.pods_listed({pods["leader-0"].uid, pods["workers-1"].uid}, sim.now - 1,
                            sim.now)
    sim.tick(30)
    assert len([a for a in sim.actions if isinstance(a, EvictPods)]) == 2
    assert len(reports(sim)) == 2


def test_the_leader_on_a_node_not_ready_takes_the_workers_too() -> None:
    sim, pods = started()
    sim.manager.on_node_deleted(pods["leader-0"].node_name)
    sim.tick(1)
    assert evictions(sim) == {"ns/leader": {"leader-0"},
                              "ns/workers": {"workers-0", "workers-1"}}


def test_a_composite_of_mode_single_leaves_its_children_to_their_own_modes() -> None:
    """Workers of mode all inside a single composite: a worker lost evicts the other
    worker, never the leader; a leader lost (mode single) evicts nobody."""
    sim, pods = started(DISRUPT_SINGLE, workers_mode=DISRUPT_ALL)
    sim.delete(pods["workers-0"].uid)
    assert evictions(sim) == {"ns/workers": {"workers-1"}}
    [r] = reports(sim)
    assert r.composite == "" and r.message.startswith("gang ns/workers: member ns/workers-0")

    sim2, pods2 = started(DISRUPT_SINGLE)
    sim2.delete(pods2["leader-0"].uid)
    sim2.tick(1)
    assert evictions(sim2) == {} and reports(sim2) == []


def test_a_composite_not_started_is_not_disrupted() -> None:
    """The leader bound (by another hand), the workers never: a loss is not a
    disruption of the composite."""
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.manager.on_group(lw(), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT))
    sim.add_group(group("workers", 2, parent=PARENT))
    leader = sim.add_pod(pod("leader-0", "leader"))
    sim.add_pod(pod("workers-0", "workers"))
    sim.bind_foreign(leader, "n0")
    sim.delete(leader.uid)
    sim.tick(1)
    assert evictions(sim) == {} and reports(sim) == []


def test_placed_again_together_it_can_be_disrupted_again() -> None:
    sim, pods = started()
    sim.delete(pods["leader-0"].uid)
    assert evictions(sim) == {"ns/workers": {"workers-0", "workers-1"}}
    for name in ("workers-0", "workers-1"):  # the eviction lets them go
        sim.delete(pods[name].uid)
    sim.actions.clear()
    new = [sim.add_pod(pod("leader-new", "leader")),
           *(sim.add_pod(pod(f"workers-new-{i}", "workers")) for i in range(2))]
    sim.run_all()
    assert all(sim.cache.pods[p.uid].node_name for p in new)
    sim.delete(new[1].uid)
    assert evictions(sim) == {"ns/leader": {"leader-new"}, "ns/workers": {"workers-new-1"}}


def test_a_restarted_extender_carries_the_composites_disruption_on_once() -> None:
    """The composite's own DisruptionTarget was recorded: the old attempt's members of
    both children still bound go, once; a member made since stays."""
    now = 5000.0
    manager = GangManager(Core.wire(Config(default_timeout_seconds=30, direct_commit=False)))
    for i in range(3):
        manager.on_node(node(f"n{i}", cpu=1000))
    manager.on_group(lw(disrupted_since=now - 10), now)
    manager.on_group(group("leader", 1, parent=PARENT), now)
    manager.on_group(group("workers", 2, parent=PARENT), now)
    old = [dataclasses.replace(pod(n, g, creation=now - 100), node_name=f"n{i}",
                               phase="Running")
           for i, (n, g) in enumerate((("leader-0", "leader"), ("workers-0", "workers")))]
    new = dataclasses.replace(pod("workers-new", "workers", creation=now - 5),
                              node_name="n2", phase="Running")
    for p in (*old, new):
        manager.on_pod(p, now)
    actions = manager.take_actions()
    evicted = {p.name for a in actions if isinstance(a, EvictPods) for p in a.pods}
    assert evicted == {"leader-0", "workers-0"}
    said = [a for a in actions if isinstance(a, GangDisrupted) and a.evicted]
    assert {r.group.name for r in said} == {"leader", "workers"}
    assert all(r.since == now - 10 and r.composite == "lw" for r in said)
    assert "the disruption mode of its CompositePodGroup ns/lw is all" in said[0].message
    for p in old:
        manager.on_pod(p, now + 1)
    assert not [a for a in manager.take_actions() if isinstance(a, EvictPods)]


# ----- the composite's fields, as the 1.37 API serves them (convert_groups.py) ---------------

COMPOSITE: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
    "metadata": {"name": "lw", "namespace": "ml", "uid": "c-1",
                 "creationTimestamp": "2026-11-29T03:10:08Z"},
    "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
             "schedulingPolicy": {"gang": {"minGroupCount": 2}},
             "disruptionMode": {"all": {}}, "priorityClassName": "high", "priority": 1000},
    "status": {},
}


def test_the_composites_disruption_mode_and_priority_are_read() -> None:
    c = composite_from_k8s(COMPOSITE)
    assert (c.disruption_mode, c.priority, c.disrupted_since) == (DISRUPT_ALL, 1000, 0.0)
    obj = copy.deepcopy(COMPOSITE)
    del obj["spec"]["disruptionMode"], obj["spec"]["priority"]
    c = composite_from_k8s(obj)
    assert (c.disruption_mode, c.priority) == (DISRUPT_SINGLE, None)
    obj["spec"]["disruptionMode"] = {"single": {}}
    assert composite_from_k8s(obj).disruption_mode == DISRUPT_SINGLE


@pytest.mark.parametrize("field,value,error", [
    ("disruptionMode", "PodGroup", r"spec\.disruptionMode: 'PodGroup' is not an object"),
    ("disruptionMode", {"all": {}, "single": {}}, r"spec\.disruptionMode: exactly one"),
    ("priority", "high", r"spec\.priority must be an integer"),
])
def test_malformed_fields_are_named(field: str, value: Any, error: str) -> None:
    obj = copy.deepcopy(COMPOSITE)
    obj["spec"][field] = value
    with pytest.raises(ValueError, match=error):
        composite_from_k8s(obj)


def test_our_disruption_condition_on_the_composite_is_read_back() -> None:
    obj = copy.deepcopy(COMPOSITE)
    ours = {"type": "DisruptionTarget", "status": "True", "reason": MEMBER_DISRUPTED,
            "lastTransitionTime": "2026-11-29T03:00:00Z"}
    obj["status"] = {"conditions": [ours]}
    assert composite_from_k8s(obj).disrupted_since == 1795921200.0
    obj["status"] = {"conditions": [{**ours, "reason": "PreemptionByScheduler"}]}
    assert composite_from_k8s(obj).disrupted_since == 0.0

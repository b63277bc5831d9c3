"""Gangs disrupted whole (core/preemption/disruption.py): a started gang whose
disruption mode is "all" that loses a member has the rest evicted, once; "single" keeps
its members running and places a replacement beside them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert_groups import (
    group_from_k8s,
    volcano_group_from_k8s,
    workload_group_from_k8s,
)
from extender.core.model.types import (
    DISRUPT_ALL,
    DISRUPT_SINGLE,
    DISRUPTION_MODE,
    MEMBER_DISRUPTED,
    GroupInfo,
    PodInfo,
    Taint,
)
from extender.core.model.vocabulary import EvictPods, GangDisrupted
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


def started(mode: str = DISRUPT_ALL, members: int = 3, sim: SimScheduler | None = None,
            name: str = "train") -> tuple[SimScheduler, list[PodInfo]]:
    """A gang of `members` (quorum all of them) placed and bound, one per node."""
    sim = sim or SimScheduler()
    for i in range(members):
        sim.add_node(node(f"{name}-n{i}", cpu=1000))
    sim.add_group(group(name, members, disruption_mode=mode))
    pods = [sim.add_pod(pod(f"{name}-{i}", name, creation=sim.now - 60))
            for i in range(members)]
    sim.run_all()
    assert len(sim.bound(name)) == members
    sim.actions.clear()
    return sim, [sim.cache.pods[p.uid] for p in pods]


def evictions(sim: SimScheduler) -> list[EvictPods]:
    return [a for a in sim.actions if isinstance(a, EvictPods)]


def disrupted(sim: SimScheduler) -> list[GangDisrupted]:
    return [a for a in sim.actions if isinstance(a, GangDisrupted)]


def test_a_deleted_member_has_the_others_evicted_once() -> None:
    sim, pods = started()
    sim.delete(pods[0].uid)
    [ev] = evictions(sim)
    assert {p.uid for p in ev.pods} == {pods[1].uid, pods[2].uid}
    assert ev.gang == "ns/train" and ev.preemptor is None  # retried against budgets
    [report] = disrupted(sim)
    assert [p.uid for p in report.lost] == [pods[0].uid]
    assert report.message.startswith("gang ns/train: member ns/train-0 was deleted")
    assert "disruption mode is all" in report.message
    # More events of the same pods, a relist, time passing: no second eviction.
    for p in pods[1:]:
        sim.manager.on_pod(dataclasses.replace(sim.cache.pods[p.uid], phase="Running"),
                           sim.now)
    sim.manager.pods_listed({p.uid for p in pods[1:]}, sim.now - 1, sim.now)
    sim.tick(30)
    assert len(evictions(sim)) == 1 and len(disrupted(sim)) == 1


def test_single_keeps_the_others_running() -> None:
    sim, pods = started(DISRUPT_SINGLE)
    sim.delete(pods[0].uid)
    sim.tick(1)
    assert evictions(sim) == [] and disrupted(sim) == []
    # Today's behaviour: the replacement is placed beside the running members.
    repl = sim.add_pod(pod("train-r", "train"))
    sim.run_all()
    assert sim.cache.pods[repl.uid].node_name == pods[0].node_name


def test_a_failed_or_evicted_member_is_lost_too() -> None:
    sim, pods = started()
    sim.manager.on_pod(dataclasses.replace(pods[1], phase="Failed"), sim.now)
    sim.drain()
    [report] = disrupted(sim)
    assert "member ns/train-1 failed" in report.message
    sim2, pods2 = started(name="other")
    sim2.manager.on_pod(dataclasses.replace(pods2[2], deleting=True), sim2.now)
    sim2.drain()
    [report] = disrupted(sim2)
    assert "member ns/other-2 is being deleted" in report.message
    assert {p.uid for p in evictions(sim2)[0].pods} == {pods2[0].uid, pods2[1].uid}


def test_a_member_on_a_node_removed_or_not_ready_is_lost() -> None:
    sim, pods = started()
    sim.manager.on_node_deleted(pods[0].node_name)
    sim.tick(1)
    [report] = disrupted(sim)
    assert f"is on node {pods[0].node_name}, which was removed" in report.message
    # Every bound member goes, the one on the lost node too: nobody else ends it.
    assert {p.uid for p in evictions(sim)[0].pods} == {p.uid for p in pods}

    sim2, pods2 = started(name="other")
    n = sim2.cache.nodes[pods2[1].node_name]
    sim2.manager.on_node(dataclasses.replace(n, taints=(
        Taint("node.kubernetes.io/unreachable", "", "NoExecute"),)))
    sim2.tick(1)
    [report] = disrupted(sim2)
    assert "which is not ready" in report.message


def test_a_gang_that_never_started_is_not_disrupted() -> None:
    """Two of three members bound, the quorum never: a loss is not a disruption (what
    a commit bound is the reservation's business, `queue/timeouts.py`)."""
    sim = SimScheduler()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.add_group(group("train", 3, disruption_mode=DISRUPT_ALL))
    pods = [sim.add_pod(pod(f"train-{i}", "train")) for i in range(3)]
    for i in range(2):
        sim.bind_foreign(pods[i], f"n{i}")
    sim.delete(pods[0].uid)
    sim.tick(1)
    assert disrupted(sim) == [] and evictions(sim) == []


def test_a_member_that_succeeded_is_not_lost() -> None:
    sim, pods = started()
    sim.finish(pods[0].uid)
    sim.delete(pods[0].uid)
    sim.tick(1)
    assert disrupted(sim) == [] and evictions(sim) == []


def test_the_new_attempt_waits_for_the_old_then_is_placed_whole_and_can_be_disrupted_again(
        ) -> None:
    sim, pods = started()
    sim.delete(pods[0].uid)
    assert len(evictions(sim)) == 1
    new = [sim.add_pod(pod(f"train-new-{i}", "train")) for i in range(3)]
    sim.run_all()
    # The evicted members still run: the new pods are turned away, none beside them.
    assert not any(sim.cache.pods[p.uid].node_name for p in new)
    assert "lost a member and is disrupted whole" in sim.last_filter[new[0].uid]
    for p in pods[1:]:  # the Eviction API let them go
        sim.manager.on_pod(dataclasses.replace(sim.cache.pods[p.uid], deleting=True),
                           sim.now)
        sim.delete(p.uid)
    sim.run_all()
    assert all(sim.cache.pods[p.uid].node_name for p in new)
    assert len(disrupted(sim)) == 1
    # Started again: its next loss is a new disruption.
    sim.delete(new[1].uid)
    assert len(disrupted(sim)) == 2
    assert {p.uid for p in evictions(sim)[-1].pods} == {new[0].uid, new[2].uid}


def test_an_extra_bound_after_the_start_is_evicted_with_the_rest() -> None:
    sim, pods = started(members=2)
    sim.add_node(node("spare", cpu=1000))
    extra = sim.add_pod(pod("train-x", "train"))
    sim.run_all()
    assert sim.cache.pods[extra.uid].node_name
    sim.delete(pods[0].uid)
    assert {p.uid for p in evictions(sim)[0].pods} == {pods[1].uid, extra.uid}


def test_a_restarted_extender_carries_a_disruption_on_once() -> None:
    """Its predecessor evicted the gang and recorded it (`disrupted_since`): an old
    member still bound (created before) goes once; a new one (created after) stays."""
    now = 5000.0
    core = Core.wire(Config(default_timeout_seconds=30, direct_commit=False))
    manager = GangManager(core)
    for i in range(3):
        manager.on_node(node(f"n{i}", cpu=1000))
    g: GroupInfo = group("train", 2, disruption_mode=DISRUPT_ALL, disrupted_since=now - 10)
    old = dataclasses.replace(pod("train-0", "train", creation=now - 100), node_name="n0",
                              phase="Running")
    new = dataclasses.replace(pod("train-new", "train", creation=now - 5), node_name="n1",
                              phase="Running")
    manager.on_group(g, now)
    manager.on_pod(old, now)
    manager.on_pod(new, now)
    actions = manager.take_actions()
    [ev] = [a for a in actions if isinstance(a, EvictPods)]
    assert [p.uid for p in ev.pods] == [old.uid]
    # Said when the group came (its status keeps saying it), and with the eviction.
    reports = [a for a in actions if isinstance(a, GangDisrupted)]
    assert [r.evicted for r in reports] == [(), ev.pods]
    assert all(r.since == now - 10 and r.lost == () for r in reports)
    assert reports[1].message.endswith("1 member(s) of that attempt still bound are evicted")
    manager.on_pod(old, now + 1)
    manager.on_group(g, now + 1)
    assert not [a for a in manager.take_actions() if isinstance(a, EvictPods)]


def test_a_disrupted_gang_whose_new_attempt_is_running_after_a_restart_is_left_alone(
        ) -> None:
    now = 5000.0
    manager = GangManager(Core.wire(Config(direct_commit=False)))
    for i in range(2):
        manager.on_node(node(f"n{i}", cpu=1000))
    manager.on_group(group("train", 2, disruption_mode=DISRUPT_ALL,
                           disrupted_since=now - 100), now)
    pods = [dataclasses.replace(pod(f"train-{i}", "train", creation=now - 50),
                                node_name=f"n{i}", phase="Running") for i in range(2)]
    for p in pods:
        manager.on_pod(p, now)
    actions = manager.take_actions()
    assert not [a for a in actions if isinstance(a, EvictPods)]
    [report] = [a for a in actions if isinstance(a, GangDisrupted)]
    assert report.evicted == () and report.message.endswith(
        "it waits for its new pods to be placed whole")
    # Started again: a loss now is a disruption of its own.
    manager.on_pod_deleted(pods[0].uid, now + 1)
    [ev] = [a for a in manager.take_actions() if isinstance(a, EvictPods)]
    assert [p.uid for p in ev.pods] == [pods[1].uid]


# ----- the mode, as each source says it (core/model/convert_groups.py) -------------------------

def _upstream(mode: object, **status: object) -> dict[str, object]:
    spec: dict[str, object] = {"schedulingPolicy": {"gang": {"minCount": 3}}}
    if mode is not None:
        spec["disruptionMode"] = mode
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
            "spec": spec, "status": status}


def test_the_upstream_mode_of_each_version() -> None:
    assert workload_group_from_k8s(_upstream({"all": {}})).disruption_mode == DISRUPT_ALL
    assert workload_group_from_k8s(_upstream({"single": {}})).disruption_mode == DISRUPT_SINGLE
    assert workload_group_from_k8s(_upstream(None)).disruption_mode == DISRUPT_SINGLE
    assert workload_group_from_k8s(_upstream("PodGroup")).disruption_mode == DISRUPT_ALL
    assert workload_group_from_k8s(_upstream("Pod")).disruption_mode == DISRUPT_SINGLE
    with pytest.raises(ValueError, match=r"spec\.disruptionMode: exactly one"):
        workload_group_from_k8s(_upstream({"all": {}, "single": {}}))
    with pytest.raises(ValueError, match=r"spec\.disruptionMode: 'Whole'"):
        workload_group_from_k8s(_upstream("Whole"))


def _annotated(value: str | None) -> dict[str, object]:
    meta: dict[str, object] = {"name": "train", "namespace": "ml", "uid": "u1"}
    if value is not None:
        meta["annotations"] = {DISRUPTION_MODE: value}
    return {"metadata": meta, "spec": {"minMember": 3}}


@pytest.mark.parametrize("convert", [group_from_k8s, volcano_group_from_k8s],
                         ids=["scheduler-plugins", "volcano"])
def test_the_annotation_on_podgroups_without_the_field(convert: Any) -> None:
    assert convert(_annotated("all")).disruption_mode == DISRUPT_ALL
    assert convert(_annotated(" single ")).disruption_mode == DISRUPT_SINGLE
    assert convert(_annotated(None)).disruption_mode == DISRUPT_SINGLE
    with pytest.raises(ValueError, match=r"disruption-mode\]: 'All' is not 'single' or 'all'"):
        convert(_annotated("All"))


def test_our_disruption_condition_is_read_back_for_a_restart() -> None:
    ours = {"type": "DisruptionTarget", "status": "True", "reason": MEMBER_DISRUPTED,
            "lastTransitionTime": "2026-11-29T03:00:00Z"}
    g = workload_group_from_k8s(_upstream({"all": {}}, conditions=[ours]))
    assert g.disrupted_since == 1795921200.0
    # A preemption's, or one ended: not a disruption to carry on.
    for other in ({**ours, "reason": "PreemptionByScheduler"}, {**ours, "status": "False"}):
        assert workload_group_from_k8s(
            _upstream({"all": {}}, conditions=[other])).disrupted_since == 0.0
    # A status write of our own does not make the gang a new spec (nothing is replanned).
    assert g.same_spec(dataclasses.replace(g, disrupted_since=0.0))


def test_a_gang_our_preemption_evicts_is_not_disrupted_too() -> None:
    """Preempted whole already: its members leaving are not losses that evict it again,
    nor make it a `MemberDisrupted` target instead of a preempted one."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, preemption=True,
                                        starvation_after_seconds=None, direct_commit=False)))
    sim, low = started(sim=sim, members=2)
    for p in low:
        sim.manager.on_pod(dataclasses.replace(sim.cache.pods[p.uid], priority=1), sim.now)
    sim.add_group(group("high", 2))
    for i in range(2):
        sim.add_pod(pod(f"high-{i}", "high", priority=10))
    sim.run_all()
    sim.tick(1)
    [ev] = evictions(sim)
    assert ev.preemptor == "ns/high"
    for p in low:  # the Eviction API lets them go, one after the other
        sim.manager.eviction_answered(p.uid, None, sim.now)
        sim.manager.on_pod(dataclasses.replace(sim.cache.pods[p.uid], deleting=True),
                           sim.now)
        sim.delete(p.uid)
    sim.tick(1)
    sim.run_all()
    assert disrupted(sim) == [] and len(evictions(sim)) == 1


# ----- random runs: the promises under any order of events ------------------------------------

_OPS = st.lists(st.tuples(
    st.sampled_from(["create", "schedule", "delete", "fail", "evicting", "succeed", "taint",
                     "untaint", "remove_node", "add_node", "tick", "relist", "evict"]),
    st.sampled_from(["a", "b"]), st.integers(0, 5)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_OPS)
def test_random_runs_keep_the_promises(ops: list[tuple[str, str, int]]) -> None:
    """Gang "a" (quorum 2 of 3, mode all) and "b" (quorum 2, single) on three nodes, under
    random pod, node, relist and eviction events. After every step: every disruption is
    of a gang whose quorum was bound since its last one, by pods it had not evicted (once
    per start); it evicts only bound members of that gang, never one being deleted; "b"
    is never disrupted."""
    sim = SimScheduler()
    nodes = {f"n{i}": node(f"n{i}", cpu=2000) for i in range(3)}
    for n in nodes.values():
        sim.add_node(n)
    sim.add_group(group("a", 2, disruption_mode=DISRUPT_ALL))
    sim.add_group(group("b", 2))
    made: dict[str, list[str]] = {"a": [], "b": []}
    for g, count in (("a", 3), ("b", 2)):  # both placed and running: the case that matters;
        # "a" with an extra beyond its quorum, so that a loss leaves a quorum bound
        made[g] = [sim.add_pod(pod(f"{g}-{k}", g, creation=sim.now)).uid
                   for k in range(count)]
    sim.run_all()
    assert (len(sim.bound("a")), len(sim.bound("b"))) == (3, 2)
    started = {"a": True}
    pending: list[EvictPods] = []
    gone: set[str] = set()  # asked to be evicted: never part of a new start
    seen = len(sim.actions)

    def pick(g: str, i: int) -> PodInfo | None:
        live = [u for u in made[g] if u in sim.cache.pods]
        return sim.cache.pods[live[i % len(live)]] if live else None

    for op, g, i in ops:
        p = pick(g, i)
        name = f"n{i % 3}"
        if op == "create":
            made[g].append(sim.add_pod(pod(f"{g}-{len(made[g])}", g, creation=sim.now)).uid)
            sim.drain()
        elif op == "schedule":
            sim.run_all(rounds=1)
        elif op == "delete" and p is not None:
            sim.delete(p.uid)
        elif op in ("fail", "evicting", "succeed") and p is not None:
            change = {"fail": {"phase": "Failed"}, "evicting": {"deleting": True},
                      "succeed": {"phase": "Succeeded"}}[op]
            sim.manager.on_pod(dataclasses.replace(p, **change), sim.now)  # type: ignore[arg-type]
        elif op in ("taint", "untaint") and name in nodes:
            taints = (Taint("node.kubernetes.io/not-ready", "", "NoExecute"),) if op == "taint" \
                else ()
            nodes[name] = dataclasses.replace(nodes[name], taints=taints)
            sim.manager.on_node(nodes[name])
        elif op == "remove_node" and name in nodes:
            del nodes[name]
            sim.manager.on_node_deleted(name)
        elif op == "add_node" and name not in nodes:
            nodes[name] = node(name, cpu=2000)
            sim.add_node(nodes[name])
        elif op == "tick":
            sim.tick(1)
        elif op == "relist":
            sim.manager.pods_listed(set(sim.cache.pods), sim.now, sim.now)
        elif op == "evict" and pending:  # the Eviction API lets the next one go
            ev = pending.pop(0)
            for ref_ in ev.pods:
                if ref_.uid in sim.cache.pods:
                    sim.delete(ref_.uid)
        sim.drain()
        for a in sim.actions[seen:]:
            if isinstance(a, GangDisrupted):
                assert a.group.name == "a", a
                assert started["a"] or not a.lost, ("disrupted before it started", a)
                started["a"] = False
            elif isinstance(a, EvictPods) and a.preemptor is None and a.gang == "ns/a":
                for ref_ in a.pods:
                    q = sim.cache.pods[ref_.uid]
                    assert q.gang == "ns/a" and q.node_name and not q.deleting, (q, a)
                pending.append(a)
                gone.update(r.uid for r in a.pods)
        seen = len(sim.actions)
        bound = [q for q in sim.cache.pods.values() if q.gang == "ns/a" and q.node_name
                 and not (q.deleting or q.terminal) and q.uid not in gone]
        if len(bound) + sim.cache.tally(sim.cache.groups["ns/a"]).succeeded >= 2:
            started["a"] = True

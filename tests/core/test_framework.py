"""The gang state machine on plain data: one test per contract point of architecture.md §1-§8."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from extender.core.cache.snapshot import Snapshot
from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import (
    BindOutcome,
    BindPod,
    PodRef,
    Reason,
    RejectWaitingBind,
    Transition,
    WakePods,
)
from extender.core.planner import Plan, Shortfall, plan_group
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, in_flight, node, pod


def cluster(n: int = 4, **kw: object) -> SimScheduler:
    sim = SimScheduler()
    for i in range(n):
        sim.add_node(node(f"n{i}", **kw))  # type: ignore[arg-type]
    return sim


def test_quorum_missing_member_rejects_with_count() -> None:
    sim = cluster()
    sim.add_group(group("g", 4))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "rejected"
    assert sim.last_filter[pods[0].uid] == "gang ns/g: 3 of 4 members exist"
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_MEMBERS
    assert not sim.bound()


def test_no_member_bound_before_quorum_then_all_at_once() -> None:
    sim = cluster()
    sim.add_group(group("g", 4))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(4)]
    results = [sim.schedule(p.uid) for p in pods]
    assert results == ["held", "held", "held", "bound"]
    assert len(sim.bind_log) == 4
    assert len({t for t, _, _ in sim.bind_log}) == 1  # one batch
    assert sim.status("ns/g").reason == Reason.BOUND
    permit = sim.core.ledger.binds
    assert not sim.core.ledger.reservations and not permit.waiting and not in_flight(permit)


def test_reservation_takes_capacity_against_plain_pods() -> None:
    sim = cluster(2, cpu=4000)
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=4000)) for i in range(2))
    assert sim.schedule(a.uid) == "held"
    plain = sim.add_pod(pod("plain", None, cpu=1000))
    assert sim.schedule(plain.uid) == "rejected"
    assert "held for gang(s) ns/g" in sim.last_filter[plain.uid]
    assert sim.schedule(b.uid) == "bound"
    assert {p.name for p in sim.bound()} == {"g-0", "g-1"}


def test_plain_pod_uses_capacity_no_gang_holds() -> None:
    sim = cluster(2, cpu=4000)
    sim.add_group(group("g", 1))
    g0 = sim.add_pod(pod("g-0", "g", cpu=4000))
    assert sim.schedule(g0.uid) == "bound"
    plain = sim.add_pod(pod("plain", None, cpu=4000))
    assert sim.schedule(plain.uid) == "bound"


def test_older_gang_gets_capacity_even_when_younger_member_asks_first() -> None:
    sim = cluster(4)
    sim.add_group(group("old", 3, creation=1.0))
    sim.add_group(group("young", 3, creation=2.0))
    old = [sim.add_pod(pod(f"old-{i}", "old", cpu=8000)) for i in range(3)]
    young = [sim.add_pod(pod(f"young-{i}", "young", cpu=8000)) for i in range(3)]
    assert sim.schedule(young[0].uid) == "rejected"
    assert "waiting behind older gang ns/old" in sim.last_filter[young[0].uid]
    assert sim.status("ns/young").reason == Reason.WAITING_BEHIND_OLDER_GANG
    assert "ns/old" in sim.core.ledger.reservations
    # Its members were never turned away, so they are still in kube-scheduler's queue
    # and need no wake-up patch.
    assert not {w[2] for w in sim.woken} & {p.uid for p in old}
    for p in old:
        sim.schedule(p.uid)
    assert {p.name for p in sim.bound()} == {"old-0", "old-1", "old-2"}
    for p in old:
        sim.finish(p.uid)
    sim.tick()
    assert "ns/young" in sim.core.ledger.reservations
    sim.run_all()
    assert {p.name for p in sim.bound("young")} == {f"young-{i}" for i in range(3)}


def test_priority_beats_age() -> None:
    sim = cluster(2)
    sim.add_group(group("old", 2, creation=1.0))
    sim.add_group(group("urgent", 2, creation=5.0))
    for i in range(2):
        sim.add_pod(pod(f"old-{i}", "old", cpu=8000))
        sim.add_pod(pod(f"urgent-{i}", "urgent", cpu=8000, priority=100))
    sim.tick()
    assert list(sim.core.ledger.reservations) == ["ns/urgent"]


def test_younger_gang_may_use_capacity_the_older_cannot() -> None:
    sim = cluster(2, cpu=4000)
    sim.add_group(group("big", 3, creation=1.0))
    sim.add_group(group("small", 2, creation=2.0))
    for i in range(3):
        sim.add_pod(pod(f"big-{i}", "big", cpu=4000))
    for i in range(2):
        sim.add_pod(pod(f"small-{i}", "small", cpu=1000))
    sim.run_all()
    assert {p.name for p in sim.bound()} == {"small-0", "small-1"}
    assert sim.status("ns/big").reason == Reason.UNPLACEABLE  # 3 nodes' worth on 2
    assert "needs 3 × {cpu: 4" in sim.status("ns/big").message


def test_fragmentation_gives_shortfall_not_a_reservation() -> None:
    sim = SimScheduler()
    for i, gpus in enumerate((6, 2, 2, 2)):
        sim.add_node(node(f"n{i}", gpu=gpus))
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g", gpu=4)) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "rejected"
    msg = sim.last_filter[pods[0].uid]
    assert "needs 3 × {" in msg and "nvidia.com/gpu: 4" in msg and "1 fit" in msg
    assert not sim.core.ledger.reservations
    small = sim.add_pod(pod("plain", None, gpu=2))
    assert sim.schedule(small.uid) == "bound"


def test_deadline_releases_everything_and_backs_off() -> None:
    sim = SimScheduler(Core.wire(Config(10, BackoffPolicy(5, 20), direct_commit=False)))
    for i in range(2):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "held"
    assert sim.schedule(pods[1].uid) == "held"
    sim.tick(10.5)
    assert {uid for uid, _ in sim.failed_binds} == {pods[0].uid, pods[1].uid}
    assert not sim.bound() and not sim.core.ledger.reservations and not sim.cache.reserved_nodes
    assert sim.status("ns/g").reason == Reason.BACKING_OFF
    assert "backing off 5s" in sim.status("ns/g").message
    assert sim.schedule(pods[2].uid) == "rejected"
    sim.tick(5.1)  # backoff over: planned again, members woken
    assert "ns/g" in sim.core.ledger.reservations
    assert ("ns", "g-0", pods[0].uid) in sim.woken
    sim.run_all()
    assert len(sim.bound("g")) == 3


def test_backoff_doubles_and_retry_limit_fails_group() -> None:
    sim = SimScheduler(Core.wire(Config(10, BackoffPolicy(5, 8, retry_limit=3),
                                        direct_commit=False)))
    sim.add_node(node("n0"))
    sim.add_group(group("g", 2))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(2)]
    delays = []
    for _ in range(3):
        sim.tick()
        assert sim.schedule(pods[0].uid) == "held"
        sim.tick(10.1)
        bo = sim.core.backoffs.get("ns/g")
        assert bo is not None
        delays.append(bo.until - sim.now)
        sim.tick(max(delays[-1], 0) + 0.1)
    assert delays[:2] == [5.0, 8.0]
    assert sim.status("ns/g").reason == Reason.FAILED
    assert "retry limit 3 reached" in sim.status("ns/g").message
    assert sim.schedule(pods[1].uid) == "rejected"
    # A changed spec gives the group a fresh start.
    sim.add_group(dataclasses.replace(group("g", 1), creation=0.0))
    sim.run_all()
    assert len(sim.bound("g")) == 2  # the quorum of one, then the elastic extra


def test_elastic_group_binds_quorum_together_then_extras_one_by_one() -> None:
    sim = cluster(5, cpu=1000)
    sim.add_group(group("g", 4))
    pods = [sim.add_pod(pod(f"g-{i}", "g", cpu=1000)) for i in range(6)]
    sim.run_all(rounds=4)
    bound = sorted(p.name for p in sim.bound())
    assert len(bound) == 5
    first_batch_time = sim.bind_log[0][0]
    assert sum(1 for t, _, _ in sim.bind_log if t == first_batch_time) >= 4
    assert [p for p in pods if not sim.cache.pods[p.uid].node_name]


def test_member_deleted_while_binds_held_fails_its_bind_and_replacement_completes() -> None:
    sim = cluster()
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    sim.schedule(pods[0].uid)
    sim.schedule(pods[1].uid)
    sim.delete(pods[1].uid)
    assert (pods[1].uid, "gang ns/g: pod ns/g-1 was deleted") in sim.failed_binds
    assert not sim.bound()
    assert sim.schedule(pods[2].uid) == "held"  # 2 of 3 present: still no bind
    repl = sim.add_pod(pod("g-1b", "g"))
    assert sim.schedule(repl.uid) == "bound"
    assert len(sim.bound("g")) == 3


def test_node_deleted_under_reservation_moves_the_member() -> None:
    sim = cluster(3, cpu=2000)
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=2000)) for i in range(2))
    assert sim.schedule(a.uid) == "held"
    slot_b = sim.core.ledger.reservations["ns/g"].slots[b.uid].node
    sim.manager.on_node_deleted(slot_b)
    sim.drain()
    assert sim.schedule(b.uid) == "bound"
    assert slot_b not in {p.node_name for p in sim.bound()}


def test_group_deleted_releases_reservation_and_fails_holds() -> None:
    sim = cluster()
    sim.add_group(group("g", 2))
    a, _ = (sim.add_pod(pod(f"g-{i}", "g")) for i in range(2))
    sim.schedule(a.uid)
    sim.manager.on_group_deleted("ns/g")
    sim.drain()
    assert not sim.core.ledger.reservations and not sim.cache.reserved_nodes
    assert sim.failed_binds and "PodGroup ns/g was deleted" in sim.failed_binds[0][1]


def test_min_member_lowered_while_held_commits() -> None:
    sim = cluster()
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    sim.schedule(pods[0].uid)
    sim.schedule(pods[1].uid)
    sim.add_group(group("g", 2))
    sim.drain()
    assert len(sim.bound("g")) == 2


def test_bind_without_reservation_is_refused() -> None:
    """After a restart the new process has no reservation: the pod must go round again
    instead of being bound alone."""
    sim = cluster()
    sim.add_group(group("g", 2))
    a, _ = (sim.add_pod(pod(f"g-{i}", "g")) for i in range(2))
    d = sim.manager.bind("ns", a.name, a.uid, "n0", sim.now)
    assert d.outcome is BindOutcome.ERROR and "no reservation holds a slot" in d.message
    assert not sim.manager.take_actions()


def test_bind_is_idempotent_and_validates() -> None:
    sim = cluster()
    p = sim.add_pod(pod("plain"))
    assert sim.schedule(p.uid) == "bound"
    where = sim.cache.pods[p.uid].node_name
    assert sim.manager.bind("ns", "plain", p.uid, where, sim.now).outcome is BindOutcome.BOUND
    other = "n1" if where != "n1" else "n2"
    d = sim.manager.bind("ns", "plain", p.uid, other, sim.now)
    assert d.outcome is BindOutcome.ERROR and f"already bound to node {where}" in d.message
    assert sim.manager.bind("ns", "nope", "uid-x", "n0", sim.now).outcome is BindOutcome.ERROR
    q = sim.add_pod(pod("q"))
    assert "not known" in sim.manager.bind("ns", "q", q.uid, "ghost", sim.now).message
    assert "belongs to pod ns/q" in sim.manager.bind("ns", "z", q.uid, "n0", sim.now).message


def test_missing_podgroup_names_it() -> None:
    sim = cluster()
    p = sim.add_pod(pod("x", "nogroup"))
    assert sim.schedule(p.uid) == "rejected"
    assert "PodGroup ns/nogroup not found" in sim.last_filter[p.uid]


def test_prioritize_steers_to_slot() -> None:
    sim = cluster()
    sim.add_group(group("g", 2))
    a, _ = (sim.add_pod(pod(f"g-{i}", "g")) for i in range(2))
    res = sim.manager.filter(a, ["n0", "n1", "n2", "n3"], sim.now)
    scores = dict(sim.manager.prioritize(a, ["n0", "n1", "n2", "n3"]))
    assert scores[res.nodes[0]] == 10
    assert sum(scores.values()) == 10


def test_events_and_wakeups_are_emitted_once_per_change() -> None:
    sim = cluster()
    sim.add_group(group("g", 2))
    a = sim.add_pod(pod("g-0", "g"))
    assert not sim.manager.filter(a, ["n0"], sim.now).nodes  # "1 of 2 members exist"
    b = sim.add_pod(pod("g-1", "g"))
    sim.manager.take_actions()
    sim.manager.filter(b, ["n0"], sim.now)
    out = sim.manager.take_actions()
    assert sum(isinstance(x, Transition) for x in out) == 1
    wakes = [x for x in out if isinstance(x, WakePods)]
    assert len(wakes) == 1 and wakes[0].pods == (PodRef("ns", "g-0", a.uid),)
    sim.manager.filter(b, ["n0"], sim.now)
    sim.tick()
    assert not [x for x in sim.actions if isinstance(x, (WakePods, Transition))]
    assert not [x for x in sim.manager.take_actions() if isinstance(x, (WakePods, Transition))]
    assert sim.status("ns/g").reason == Reason.RESERVED


def test_plain_pods_turned_away_by_holds_are_woken_on_release() -> None:
    sim = SimScheduler(Core.wire(Config(5, direct_commit=False)))
    sim.add_node(node("n0", cpu=2000))
    sim.add_group(group("g", 2))
    a, _ = (sim.add_pod(pod(f"g-{i}", "g", cpu=1000)) for i in range(2))
    sim.schedule(a.uid)
    plain = sim.add_pod(pod("plain", cpu=1000))
    assert sim.schedule(plain.uid) == "rejected"
    sim.tick(6)
    assert ("ns", "plain", plain.uid) in sim.woken


def test_stale_request_copy_does_not_unbind() -> None:
    sim = cluster()
    p = sim.add_pod(pod("plain"))
    sim.schedule(p.uid)
    stale = dataclasses.replace(sim.cache.pods[p.uid], node_name="")
    sim.manager.on_pod(stale, sim.now)
    assert sim.cache.pods[p.uid].node_name


def test_commit_emits_one_bind_per_member() -> None:
    sim = SimScheduler(Core.wire(Config(direct_commit=False)))
    fw = sim.manager
    for i in range(2):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g")) for i in range(2))
    fw.filter(a, ["n0", "n1"], sim.now)
    fw.filter(b, ["n0", "n1"], sim.now)
    fw.take_actions()
    na = sim.core.ledger.reservations["ns/g"].slots[a.uid].node
    nb = sim.core.ledger.reservations["ns/g"].slots[b.uid].node
    assert fw.bind("ns", "g-0", a.uid, na, sim.now).outcome is BindOutcome.WAIT
    assert not [x for x in fw.take_actions() if isinstance(x, BindPod)]
    assert fw.bind("ns", "g-1", b.uid, nb, sim.now).outcome is BindOutcome.WAIT
    out = fw.take_actions()
    binds = [x for x in out if isinstance(x, BindPod)]
    assert sorted(x.pod.name for x in binds) == ["g-0", "g-1"]
    assert not [x for x in out if isinstance(x, RejectWaitingBind)]


def test_min_resources_is_checked_in_the_groups_own_terms() -> None:
    sim = cluster(2, cpu=4000)
    g = dataclasses.replace(group("g", 2), min_resources={"cpu": 16000})
    sim.add_group(g)
    pods = [sim.add_pod(pod(f"g-{i}", "g", cpu=1000)) for i in range(2)]
    assert sim.schedule(pods[0].uid) == "rejected"
    assert "minResources" in sim.last_filter[pods[0].uid]
    assert not sim.core.ledger.reservations
    sim.add_group(dataclasses.replace(g, min_resources={"cpu": 2000}))
    sim.run_all()
    assert len(sim.bound("g")) == 2


def test_unknown_node_is_rejected_with_reason() -> None:
    sim = cluster(1)
    p = sim.add_pod(pod("plain"))
    res = sim.manager.filter(p, ["n0", "ghost"], sim.now)
    assert res.nodes == ["n0"]
    assert "not yet known" in res.unresolvable["ghost"]


def test_member_relabelled_out_of_its_gang_releases_its_slot_and_bind() -> None:
    sim = cluster()
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "held"
    moved = dataclasses.replace(sim.cache.pods[pods[0].uid], labels={})
    sim.manager.on_pod(moved, sim.now)
    sim.drain()
    assert pods[0].uid not in sim.core.ledger.reservations["ns/g"].slots
    assert any("left gang ns/g" in m for _, m in sim.failed_binds)
    assert not sim.bound()


def test_timeout_message_names_the_gang_once() -> None:
    sim = SimScheduler(Core.wire(Config(5, direct_commit=False)))
    sim.add_node(node("n0"))
    sim.add_group(group("g", 2))
    a, _ = (sim.add_pod(pod(f"g-{i}", "g")) for i in range(2))
    sim.schedule(a.uid)
    sim.tick(6)
    (msg,) = [m for uid, m in sim.failed_binds if uid == a.uid]
    assert msg.startswith("gang ns/g: timed out") and msg.count("gang ns/g") == 1, msg


def test_succeeded_members_keep_counting_toward_the_quorum() -> None:
    """A Job with completions > parallelism: once some members finish, later pods join
    the running quorum one by one instead of waiting forever for a new quorum."""
    sim = cluster()
    sim.add_group(group("job", 3))
    pods = [sim.add_pod(pod(f"job-{i}", "job")) for i in range(3)]
    sim.run_all()
    assert len(sim.bound("job")) == 3
    sim.finish(pods[0].uid)
    sim.finish(pods[1].uid)
    sim.tick()
    assert sim.status("ns/job").reason == Reason.BOUND
    assert sim.manager.reads.queue() == []
    late = sim.add_pod(pod("job-3", "job"))
    assert sim.schedule(late.uid) == "bound"


def test_finished_gang_leaves_the_queue_view() -> None:
    sim = cluster()
    sim.add_group(group("g", 2))
    sim.add_group(group("waiting", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(2)]
    sim.add_pod(pod("waiting-0", "waiting"))
    sim.run_all()
    for p in pods:
        sim.finish(p.uid)
    assert [row.gang for row in sim.manager.reads.queue()] == ["ns/waiting"]


def test_waiting_message_says_older_only_when_the_holder_is_older() -> None:
    sim = cluster(2)
    sim.add_group(group("old", 2, creation=1.0))
    sim.add_group(group("young", 2, creation=2.0))
    young = [sim.add_pod(pod(f"young-{i}", "young", cpu=8000)) for i in range(2)]
    sim.schedule(young[0].uid)  # the old gang has no members yet: young reserves
    old = [sim.add_pod(pod(f"old-{i}", "old", cpu=8000)) for i in range(2)]
    assert sim.schedule(old[0].uid) == "rejected"
    msg = sim.last_filter[old[0].uid]
    assert "waiting behind gang ns/young which reserved the capacity first" in msg, msg


def test_plain_binds_are_rechecked_against_holds_and_charged_in_flight() -> None:
    """Three 1-cpu pods all passed the filter next to a 2-cpu hold on a 4-cpu node before
    any bind arrived: the first two bind, the third is refused until the hold goes."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=4000))
    sim.add_group(group("g", 2))
    members = [sim.add_pod(pod(f"g-{i}", "g", cpu=1000)) for i in range(2)]
    sim.manager.filter(members[0], ["n0"], sim.now)  # reserves 2 x 1 cpu on n0
    held = sum(s.pod.requests["cpu"] for s in sim.core.ledger.reservations["ns/g"].slots.values())
    assert held == 2000
    plains = [sim.add_pod(pod(f"p-{i}", cpu=1000)) for i in range(3)]
    passed = [p for p in plains if sim.manager.filter(p, ["n0"], sim.now).nodes]
    decisions = [sim.manager.bind("ns", p.name, p.uid, "n0", sim.now) for p in passed]
    ok = [d for d in decisions if d.outcome is BindOutcome.WAIT]
    assert len(ok) == (4000 - held) // 1000
    refused = [d for d in decisions if d.outcome is BindOutcome.ERROR]
    assert all("held for gang(s) ns/g" in d.message for d in refused)
    for p in passed[: len(ok)]:
        sim.manager.binding_finished(p.uid, "n0", None, sim.now)
    assert sim.cache.free["n0"]["cpu"] == 4000 - held - 1000 * len(ok)


def test_deleted_pods_are_not_resurrected_by_a_late_filter_and_the_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import extender.core.cache.tombstones as tombstones

    monkeypatch.setattr(tombstones, "_REMEMBERED", 10)
    sim = cluster()
    pods = [sim.add_pod(pod(f"p-{i}")) for i in range(25)]
    for p in pods:
        sim.manager.on_pod_deleted(p.uid)
    late = sim.manager.filter(pods[-1], ["n0"], sim.now)
    assert late.nodes == [] and "was deleted" in late.unresolvable["n0"]
    assert pods[-1].uid not in sim.cache.pods
    assert len(sim.core.tombstones) == 10


def test_complete_but_unplaceable_gang_wakes_its_members_once() -> None:
    """Members parked with "2 of 3 members exist" get a fresh answer (the shortfall)
    when the last member appears, even though the gang cannot be placed."""
    sim = SimScheduler()
    for i, gpus in enumerate((6, 2, 2, 2)):
        sim.add_node(node(f"n{i}", gpu=gpus))
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g", gpu=4)) for i in range(2)]
    for p in pods:
        assert sim.schedule(p.uid) == "rejected"  # "2 of 3 members exist"
    pods.append(sim.add_pod(pod("g-2", "g", gpu=4)))
    sim.schedule(pods[2].uid)
    # The last member is being scheduled right now: only the parked ones are woken.
    assert sorted(w[2] for w in sim.woken) == [pods[0].uid, pods[1].uid]
    sim.woken.clear()
    sim.schedule(pods[0].uid)
    sim.tick()
    assert sim.woken == []  # once per completion, not per filter
    assert "1 fit" in sim.last_filter[pods[0].uid]


# ----- wake-ups only for members kube-scheduler may have parked (design 3.8) ----------


def test_reserve_wakes_no_member_that_was_never_turned_away() -> None:
    """Members that never got a "no" from the extender are still in kube-scheduler's
    active queue and reach filter anyway: patching them is a wasted API write."""
    sim = cluster()
    sim.add_group(group("g", 3))
    for i in range(3):
        sim.add_pod(pod(f"g-{i}", "g"))
    sim.tick()
    assert "ns/g" in sim.core.ledger.reservations
    assert sim.woken == []


def test_reserve_wakes_only_the_member_rejected_for_missing_members() -> None:
    sim = cluster()
    sim.add_group(group("g", 3))
    early = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(2)]
    assert sim.schedule(early[0].uid) == "rejected"
    assert sim.last_filter[early[0].uid] == "gang ns/g: 2 of 3 members exist"
    sim.add_pod(pod("g-2", "g"))
    sim.tick()
    assert "ns/g" in sim.core.ledger.reservations
    assert sim.woken == [("ns", "g-0", early[0].uid)]


def test_member_retried_by_kube_scheduler_is_not_woken_by_its_own_filter_call() -> None:
    """The pod whose filter call grants the reservation is in its scheduling cycle,
    not parked, even though it was turned away before and carries the condition."""
    sim = cluster()
    sim.add_group(group("g", 2))
    a = sim.add_pod(pod("g-0", "g"))
    assert sim.schedule(a.uid) == "rejected"
    sim.add_pod(dataclasses.replace(sim.cache.pods[a.uid], unschedulable=True))
    sim.add_pod(pod("g-1", "g"))
    assert sim.schedule(a.uid) == "held"
    assert "ns/g" in sim.core.ledger.reservations
    assert sim.woken == []


def test_member_marked_unschedulable_is_woken_by_a_fresh_framework() -> None:
    """After a restart the extender's own record is empty; kube-scheduler's
    PodScheduled=False condition still says which members it parked."""
    sim = cluster()
    sim.add_group(group("g", 3))
    parked = sim.add_pod(pod("g-0", "g", unschedulable=True))
    sim.add_pod(pod("g-1", "g"))
    sim.add_pod(pod("g-2", "g"))
    sim.tick()
    assert "ns/g" in sim.core.ledger.reservations
    assert sim.woken == [("ns", "g-0", parked.uid)]


def test_complete_but_unplaceable_gang_wakes_only_parked_members() -> None:
    sim = cluster(1, cpu=2000)
    sim.add_group(group("g", 3))
    turned_away = sim.add_pod(pod("g-0", "g"))
    assert sim.schedule(turned_away.uid) == "rejected"
    marked = sim.add_pod(pod("g-1", "g", unschedulable=True))
    sim.add_pod(pod("g-2", "g"))
    sim.tick()
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE
    assert sorted(w[2] for w in sim.woken) == sorted([turned_away.uid, marked.uid])


def test_failed_held_bind_is_woken_when_the_gang_is_reserved_again() -> None:
    """A bind answered with an error sends the pod back to kube-scheduler's queue,
    where it may be parked like a filter rejection."""
    sim = SimScheduler(Core.wire(Config(10, BackoffPolicy(5, 20), direct_commit=False)))
    for i in range(2):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "held"
    sim.tick(10.5)  # deadline: the held bind fails
    assert [uid for uid, _ in sim.failed_binds] == [pods[0].uid]
    sim.tick(5.1)  # backoff over: reserved again
    assert "ns/g" in sim.core.ledger.reservations
    assert sim.woken == [("ns", "g-0", pods[0].uid)]


def parked(sim: SimScheduler, *pods: PodInfo) -> set[str]:
    """Which of `pods` (as given: unbound copies, even of pods since bound, relabelled or
    deleted) a wake-up patch would go to: `Parked.members`, what the pass reads to wake
    a gang's parked members. The sim's pods are never marked unschedulable, so this is
    exactly the extender's own record of turned-away members."""
    assert not any(p.unschedulable for p in pods)
    return {r.uid for r in sim.core.parked.members(pods, (), None)}


def test_rejection_record_is_cleared_on_pass_bind_and_delete() -> None:
    sim = cluster()
    sim.add_group(group("g", 2))
    a = sim.add_pod(pod("g-0", "g"))
    assert sim.schedule(a.uid) == "rejected"
    assert parked(sim, a) == {a.uid}
    assert sim.manager.filter(a, ["n0"], sim.now).nodes == []  # still one member
    assert parked(sim, a) == {a.uid}
    b = sim.add_pod(pod("g-1", "g"))
    assert sim.manager.filter(a, ["n0", "n1"], sim.now).nodes  # passes: no longer parked
    assert parked(sim, a, b) == set()
    sim.schedule(b.uid)
    sim.schedule(a.uid)
    assert len(sim.bound("g")) == 2 and parked(sim, a, b) == set()

    sim.add_group(group("h", 3))
    waiting = [sim.add_pod(pod(f"h-{i}", "h")) for i in range(2)]
    for p in waiting:
        assert sim.schedule(p.uid) == "rejected"
    assert parked(sim, *waiting) == {p.uid for p in waiting}
    for p in waiting:
        sim.delete(p.uid)
    assert parked(sim, *waiting) == set()
    # A late filter call of a deleted pod must not bring its record back.
    assert sim.manager.filter(waiting[0], ["n0"], sim.now).nodes == []
    assert parked(sim, *waiting) == set()


def test_rejection_record_is_dropped_when_a_member_is_bound_elsewhere_or_leaves() -> None:
    sim = cluster()
    sim.add_group(group("g", 3))
    a, b = (sim.add_pod(pod(f"g-{i}", "g")) for i in range(2))
    for p in (a, b):
        assert sim.schedule(p.uid) == "rejected"
    sim.manager.on_pod(dataclasses.replace(a, node_name="n0"), sim.now)  # bound by someone
    sim.manager.on_pod(dataclasses.replace(b, labels={}), sim.now)  # relabelled out
    assert parked(sim, a, b) == set()


def test_status_only_update_does_not_replan_a_waiting_gang() -> None:
    """kube-scheduler writes PodScheduled=False after every failed attempt; carrying it
    must not look like a membership or capacity change."""
    planned: list[str] = []
    counting = False

    def counting_plan(
        g: GroupInfo, m: Sequence[PodInfo], succeeded: int, snap: Snapshot,
        explain: bool = True,
    ) -> Plan | Shortfall:
        if counting:
            planned.append(g.key)
        return plan_group(g, m, succeeded, snap, explain)

    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=False),
                                 planner=counting_plan))
    sim.add_node(node("n0", cpu=4000))
    sim.add_pod(pod("other", cpu=2000, node_name="n0"))  # fits once it is gone
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    sim.tick()
    assert sim.status("ns/g").reason == Reason.INSUFFICIENT_CAPACITY
    cache = sim.cache
    epochs = (cache.capacity_epoch, dict(cache.members_epoch))
    counting = True
    for p in pods:
        sim.manager.on_pod(dataclasses.replace(p, unschedulable=True), sim.now)
    sim.tick()
    assert (cache.capacity_epoch, cache.members_epoch) == epochs
    assert planned == []


def test_deleted_pod_memo_forgets_after_its_time_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tombstones are bounded by age as well as count: with steady churn the memo
    stops growing after `_TTL_SECONDS` instead of filling to its cap."""
    import extender.core.cache.tombstones as tombstones

    monkeypatch.setattr(tombstones, "_TTL_SECONDS", 100.0)
    sim = cluster()
    pods = [sim.add_pod(pod(f"p-{i}")) for i in range(50)]
    for i, p in enumerate(pods):
        sim.manager.on_pod_deleted(p.uid, 1000.0 + 10 * i)  # one deletion every 10 s
    # the last 100 s: deletions at 1400..1490 (10), plus the one exactly 100 s old
    assert len(sim.core.tombstones) == 11
    assert sim.core.tombstones.oldest() == 1390.0
    late = sim.manager.filter(pods[-1], ["n0"], 1495.0)
    assert "was deleted" in late.unresolvable["n0"]
    assert pods[0].uid not in sim.core.tombstones

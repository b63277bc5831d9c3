"""The PodGroup status writer, the event sink and policy, metrics and the debug route,
against a recording stand-in for the API (no network)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import generate_latest

from extender.core.manager import GangManager
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.phase import rfc3339
from extender.core.model.types import WORKLOAD_API, Membership
from extender.kube.client import ApiError
from extender.kube.recorder import EventRecorder, ObjectRef, RecorderLimits
from extender.reporting.kinds import observed_kinds
from extender.reporting.status import StatusWriter
from extender.scheduler.debug import install_podgroups_route
from tests.core.sim import group, pod
from tests.reporting.status_env import T0, Clock, Env, FakeApi, cond, last, make_env


@pytest.fixture
def env() -> Env:
    return make_env()


def test_life_of_a_gang_written_through_the_status_subresource(env: Env) -> None:
    env.add_group("train", 3)
    uids = [env.add_pod(f"train-{i}", "train", owner="train-job") for i in range(2)]
    assert env.step() == 1
    path, patch = env.api.patches[-1]
    assert path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/train/status"
    st = patch["status"]
    assert st["phase"] == "Pending" and st["occupiedBy"] == "ns/train-job"
    assert cond(st)["reason"] == "WaitingForMembers"
    assert cond(st)["message"] == "gang ns/train: 2 of 3 members exist"
    assert env.step(5) == 0, "nothing changed: nothing written"

    uids.append(env.add_pod("train-2", "train", owner="train-job"))
    for uid in uids:
        env.sim.schedule(uid)
    env.step(1)
    st = last(env, "train")
    assert (st["phase"], cond(st)["reason"], st["bound"]) == ("Scheduling", "Bound", 3)
    assert cond(st)["status"] == "True" and "scheduleStartTime" in st

    for uid in uids:
        env.set_phase(uid, "Running")
    env.step(1)
    st = last(env, "train")
    assert (st["phase"], st["running"]) == ("Running", 3)
    for uid in uids:
        env.set_phase(uid, "Succeeded")
    env.step(1)
    st = last(env, "train")
    assert (st["phase"], st["succeeded"], st["running"]) == ("Finished", 3, 0)

    reasons = {r for r, *_ in env.api.events_for("train")}
    assert {"WaitingForMembers", "Reserved", "Bound", "Running", "Finished"} <= reasons
    pod_events = env.api.events_for("train-0")
    assert [r for r, *_ in pod_events] == ["Reserved"]
    assert "reserved for this pod until" in pod_events[0][3]


def test_writes_are_rate_limited_per_group_and_coalesced(env: Env) -> None:
    env.add_group("g", 3)
    env.add_pod("g-0", "g")
    assert env.step() == 1
    env.add_pod("g-1", "g")
    assert env.step(0.3) == 0, "second change inside the interval waits"
    assert env.writer.dirty == {"ns/g"}
    assert env.step(0.8) == 1
    assert cond(last(env, "g"))["message"] == "gang ns/g: 2 of 3 members exist"
    assert len(env.api.status_writes("g")) == 2


def test_new_group_without_members_is_written_only_after_its_grace(env: Env) -> None:
    """A PodGroup created a moment ago with no pods yet: "0 of N members exist" would be
    overwritten as soon as its pods arrive, so it waits `new_group_grace` (5 s); pods that
    arrive within it make the first write the one that counts."""
    env.add_group("slow", 3, creation=T0)
    env.add_group("fast", 2, creation=T0)
    assert env.step() == 0
    assert env.step(2) == 0
    assert env.writer.dirty == {"ns/slow", "ns/fast"}, "held back, not forgotten"
    env.add_pod("fast-0", "fast")
    env.add_pod("fast-1", "fast")
    assert env.step(1) == 1
    assert cond(last(env, "fast"))["message"] == (
        "gang ns/fast: 2 members present, waiting to be planned")
    assert len(env.api.status_writes("fast")) == 1
    assert env.step(1.9) == 0
    assert env.step(0.2) == 1, "5 s after creation the empty group says why it waits"
    assert cond(last(env, "slow"))["message"] == "gang ns/slow: 0 of 3 members exist"


def test_waiting_for_members_is_told_once_a_member_exists_even_after_a_quiet_status(
        env: Env) -> None:
    """"0 of 3 members exist" gets no Event (noise: pods usually follow their PodGroup at
    once). When the Job's pods come late, "2 of 3" has the same reason; its Event is still
    owed. Without that, the Event depended on whether the writer looked before the pods
    came (e2e test_status_lifecycle caught it once)."""
    env.add_group("late", 3, creation=T0)
    env.step()
    assert env.api.events_for("late") == []
    env.add_pod("late-0", "late")
    env.add_pod("late-1", "late")
    env.step(1)
    assert [(r, m) for r, _, _, m in env.api.events_for("late")] == [
        ("WaitingForMembers", "gang ns/late: 2 of 3 members exist")]
    env.step(6)  # written after the grace; nothing more to tell
    assert len(env.api.events_for("late")) == 1


def test_young_group_whose_api_status_is_stale_is_corrected_once_it_has_a_member(
        env: Env) -> None:
    """A status it did not write, on a group it holds no member of, is someone else's
    (next test); the first member of ours makes it ours, and it is corrected at once."""
    env.add_group("g", 2, creation=T0)
    env.writer.observe_group({"metadata": {"namespace": "ns", "name": "g", "uid": "g-g"},
                              "status": {"phase": "Running", "running": 2}})
    assert env.step() == 0
    env.add_pod("g-0", "g")
    assert env.step() == 1
    assert last(env, "g")["phase"] == "Pending"


def test_the_group_of_another_scheduler_is_left_to_it(env: Env) -> None:
    """Its pods name another scheduler (Coscheduling's, on the same CRD) and that
    scheduler wrote its status: no write, no Event from here, even on a resync."""
    env.add_group("theirs", 2, creation=T0)
    env.writer.observe_group({"metadata": {"namespace": "ns", "name": "theirs", "uid": "g-theirs"},
                              "status": {"phase": "Running", "running": 2}})
    for i in range(2):
        env.add_pod(f"theirs-{i}", "theirs", scheduler_name="scheduler-plugins-scheduler")
    env.sim.tick(0)
    assert env.step(60) == 0
    assert env.api.status_writes("theirs") == []
    assert env.api.events_for("theirs") == []


def test_the_group_of_another_scheduler_that_writes_no_status_is_left_to_it(
        env: Env) -> None:
    """Coscheduling without scheduler-plugins' controller writes no PodGroup status: the
    group's labelled pods name another scheduler, so "0 of 2 members exist" is never
    written there, past the grace and on a resync. A member of ours makes it ours."""
    env.add_group("theirs", 2, creation=T0)
    for i in range(2):
        env.add_pod(f"theirs-{i}", "theirs", scheduler_name="scheduler-plugins-scheduler")
    env.sim.tick(0)
    assert env.step(60) == 0
    assert env.api.status_writes("theirs") == [] and env.api.events_for("theirs") == []
    env.add_pod("theirs-2", "theirs")  # one of ours joins: ours, and told
    assert env.step(1) == 1
    assert cond(last(env, "theirs"))["message"] == "gang ns/theirs: 1 of 2 members exist"


def test_a_pod_that_leaves_another_scheduler_gives_the_group_back(env: Env) -> None:
    env.add_group("g", 2, creation=T0)
    uid = env.add_pod("g-0", "g", scheduler_name="scheduler-plugins-scheduler")
    assert env.step(60) == 0
    env.manager.on_pod_deleted(uid, env.clock.now)
    env.writer.pod_deleted(uid, None)
    assert env.step(1) == 1
    assert cond(last(env, "g"))["message"] == "gang ns/g: 0 of 2 members exist"


def test_a_gang_that_runs_within_the_settle_time_gets_one_write(env: Env) -> None:
    """Members arrive, the gang is reserved, bound and running inside half a second: the
    status written is the one it settles in, not every stage on the way."""
    env.writer.config.settle = 0.5
    env.add_group("g", 2)
    uids = [env.add_pod(f"g-{i}", "g") for i in range(2)]
    assert env.step() == 0, "just changed"
    for uid in uids:
        env.sim.schedule(uid)
    assert env.step(0.2) == 0
    for uid in uids:
        env.set_phase(uid, "Running")
    assert env.step(0.2) == 0
    assert env.step(0.3) == 0, "0.3 s since its last change"
    assert env.step(0.25) == 1
    assert [w["phase"] for w in env.api.status_writes("g")] == ["Running"]
    assert env.step(5) == 0


def test_a_status_that_keeps_changing_is_written_after_max_lag(env: Env) -> None:
    env.writer.config.settle, env.writer.config.max_lag = 0.5, 2.0
    env.add_group("g", 9)
    for i in range(6):
        env.add_pod(f"g-{i}", "g")
        assert env.step(0.4 if i else 0.0) == (1 if i == 5 else 0), i
    assert cond(last(env, "g"))["message"] == "gang ns/g: 6 of 9 members exist"


def test_api_errors_are_retried_with_backoff_never_raised(env: Env) -> None:
    env.add_group("g", 2)
    env.add_pod("g-0", "g")
    env.api.fail = ApiError(500, "InternalError", "etcd is sad")
    assert env.step() == 0
    assert env.writer.write_errors == 1
    env.api.fail = None
    assert env.step(1) == 0, "retry waits for its backoff"
    assert env.step(2) == 1
    assert 'gang_extender_podgroup_status_writes_total{result="error"} 1.0' in \
        generate_latest(env.metrics.registry).decode()


def test_deleted_group_404_is_not_an_error(env: Env) -> None:
    env.add_group("g", 2)
    env.api.fail = ApiError(404, "NotFound", "gone")
    env.step()
    assert env.writer.write_errors == 0
    env.writer.group_deleted("ns/g")
    assert "ns/g" not in env.writer.groups


def test_restart_does_not_rewrite_an_unchanged_status(env: Env) -> None:
    env.add_group("g", 2)
    env.add_pod("g-0", "g")
    env.step()
    written = last(env, "g")
    fresh = StatusWriter(env.manager.reads, env.api, env.clock)
    fresh.observe_group({"metadata": {"namespace": "ns", "name": "g", "uid": "g-g"},
                         "status": written})
    before = len(env.api.patches)
    asyncio.run(fresh.step())
    assert len(env.api.patches) == before


def test_timeout_backoff_and_retry_limit_events_and_metrics(env: Env) -> None:
    env.add_group("big", 2, timeout=3)
    a = env.add_pod("big-0", "big")
    env.add_pod("big-1", "big")
    assert env.sim.schedule(a) == "held"  # the other member never comes
    env.step()
    assert cond(last(env, "big"))["reason"] == "Reserved"
    env.tick(3.5)
    st = last(env, "big")
    assert (st["phase"], cond(st)["reason"]) == ("Scheduling", "BackingOff")
    assert "timed out after" in cond(st)["message"]
    # Kept for a restart: the backoff's end, rounded up to the second.
    assert st["requeueState"] == {"count": 1,
                                  "requeueAt": rfc3339(math.ceil(env.clock.now + 2))}
    events = {r: (t, c, m) for r, t, c, m in env.api.events_for("big")}
    assert events["TimedOut"][0] == "Warning"
    assert "released 2 slot(s) on 1 node(s)" in events["Released"][2]
    assert "next attempt in 2s" in events["BackingOff"][2]
    assert ("TimedOut", "Warning") in {(r, t) for r, t, *_ in env.api.events_for("big-1")}

    # Second attempt after the backoff: times out again and hits the retry limit.
    env.tick(2.5)
    assert env.sim.schedule(a) == "held"
    env.tick(3.5)
    st = last(env, "big")
    assert st["phase"] == "Failed"
    assert cond(st, "Failed")["reason"] == "RetryLimitReached"
    assert st["requeueState"] == {"count": 2}
    events = {r: (t, c, m) for r, t, c, m in env.api.events_for("big")}
    assert events["TimedOut"][1] == 2, "the repeat was folded into the first TimedOut Event"
    assert events["Reserved"][1] == 2
    assert "RetryLimitReached" in events
    text = generate_latest(env.metrics.registry).decode()
    assert "gang_extender_timeouts_total 2.0" in text
    assert "gang_extender_backoffs_total 1.0" in text
    assert "gang_extender_retry_limit_reached_total 1.0" in text


def test_the_requeue_state_is_removed_once_the_gang_is_bound(env: Env) -> None:
    env.add_group("g", 2, timeout=3)
    a = env.add_pod("g-0", "g")
    b = env.add_pod("g-1", "g")
    assert env.sim.schedule(a) == "held"
    env.tick(3.5)
    assert last(env, "g")["requeueState"]["count"] == 1
    env.tick(2.5)  # backoff over
    for uid in (a, b):
        env.sim.schedule(uid)
    env.step(1)
    st = last(env, "g")
    assert cond(st)["reason"] == "Bound"
    assert "requeueState" in st and st["requeueState"] is None  # null: the patch removes it


def test_a_malformed_topology_annotation_is_a_condition_and_a_warning(env: Env) -> None:
    bad = ("annotation gang-extender.x-k8s.io/topology-required: 'rack zone' is not a node "
           "label key (the name part must be ...); the gang is not placed until the "
           "annotation is fixed")
    env.add_group("t", 2, topology_error=bad)
    uids = [env.add_pod(f"t-{i}", "t") for i in range(2)]
    assert [env.sim.schedule(u) for u in uids] == ["rejected", "rejected"]
    env.step(1)
    st = last(env, "t")
    assert (st["phase"], cond(st)["reason"]) == ("Scheduling", "InvalidTopology")
    assert cond(st)["message"] == f"gang ns/t: {bad}"
    assert ("InvalidTopology", "Warning", 1, f"gang ns/t: {bad}") in env.api.events_for("t")
    assert env.sim.last_filter[uids[0]] == f"gang ns/t: {bad}"
    # Fixed: the same gang is planned at once, inside one node's domain.
    env.sim.add_group(group("t", 2, topology_required="kubernetes.io/hostname"))
    assert [env.sim.schedule(u) for u in uids] == ["held", "bound"]
    assert len({p.node_name for p in env.sim.bound("t")}) == 1


def test_an_unusable_upstream_topology_key_is_a_warning_on_the_upstream_podgroup(
        env: Env) -> None:
    """The upstream PodGroup (scheduling.k8s.io/v1alpha2) gets the InvalidTopology Event.
    Its conditions go through `strategic_patch`, which this API has not
    (tests/reporting/test_upstream_status_writer.py): no merge patch of a status here."""
    g = workload_group_from_k8s({
        "metadata": {"name": "up", "namespace": "ns", "uid": "up-1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                 "schedulingConstraints": {"topology": [{"key": "a/b/c"}]}}})
    env.sim.add_group(g)
    env.sim.drain()
    uids = [env.sim.add_pod(pod(f"up-{i}", membership=Membership(WORKLOAD_API, "up"))).uid
            for i in range(2)]
    assert [env.sim.schedule(u) for u in uids] == ["rejected", "rejected"]
    env.step(1)
    msg = f"gang workload-api:ns/up: {g.topology_error}"
    assert ("InvalidTopology", "Warning", 1, msg) in env.api.events_for("up")
    (ev,) = [e for e in env.api.events.values() if e["reason"] == "InvalidTopology"]
    assert ev["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert env.api.status_writes("up") == []


def test_member_failure_marks_failed_and_names_the_pod(env: Env) -> None:
    env.add_group("g", 2)
    uids = [env.add_pod(f"g-{i}", "g") for i in range(2)]
    for uid in uids:
        env.sim.schedule(uid)
        env.set_phase(uid, "Running")
    env.step()
    assert last(env, "g")["phase"] == "Running"
    env.set_phase(uids[1], "Failed")
    env.step(1)
    st = last(env, "g")
    assert (st["phase"], st["failed"], st["running"]) == ("Failed", 1, 1)
    assert "g-1" in cond(st, "Failed")["message"]
    assert ("MemberFailed", "Warning") in {(r, t) for r, t, *_ in env.api.events_for("g")}


def test_gauge_counts_gangs_by_phase_and_reason(env: Env) -> None:
    env.add_group("a", 3)
    env.add_group("b", 1)
    env.add_pod("a-0", "a")
    env.sim.schedule(env.add_pod("b-0", "b"))
    env.step()
    env.refresh()
    text = generate_latest(env.metrics.registry).decode()
    assert ('gang_extender_gangs{phase="Pending",reason="WaitingForMembers",'
            'source="scheduler-plugins"} 1.0') in text
    assert ('gang_extender_gangs{phase="Scheduling",reason="Bound",source="scheduler-plugins"}'
            ' 1.0') in text


def test_recorder_folds_repeats_and_recreates_expired_events() -> None:
    api, clock = FakeApi(), Clock()
    rec = EventRecorder(api, clock, RecorderLimits(window=600))
    ref = ObjectRef("PodGroup", "scheduling.x-k8s.io/v1alpha1", "ns", "g", "uid-g")
    rec.record(ref, "InsufficientCapacity", "needs 3; 2 fit", warning=True)
    rec.record(ref, "InsufficientCapacity", "needs 3; 1 fit", warning=True)
    asyncio.run(rec.flush())
    (ev,) = api.events.values()
    assert (ev["count"], ev["message"], ev["type"]) == (2, "needs 3; 1 fit", "Warning")
    assert ev["involvedObject"] == {"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                    "kind": "PodGroup", "namespace": "ns", "name": "g",
                                    "uid": "uid-g"}
    clock.now += 60
    rec.record(ref, "InsufficientCapacity", "needs 3; 1 fit", warning=True)
    asyncio.run(rec.flush())
    assert len(api.events) == 1 and ev["count"] == 3
    api.event_404 = True  # expired by the API server's event TTL
    rec.record(ref, "InsufficientCapacity", "needs 3; 0 fit", warning=True)
    asyncio.run(rec.flush())
    assert len(api.events) == 2
    clock.now += 601
    api.event_404 = False
    rec.record(ref, "InsufficientCapacity", "x")
    asyncio.run(rec.flush())
    assert len(api.events) == 3, "outside the window a new Event is created"
    assert rec.stats.created == 3 and rec.stats.updated == 1 and rec.stats.folded == 1


def test_recorder_never_raises_and_bounds_its_queue() -> None:
    api = FakeApi()
    rec = EventRecorder(api, Clock(), RecorderLimits(max_pending=2))
    for i in range(4):
        rec.record(ObjectRef("Pod", "v1", "ns", f"p{i}", f"u{i}"), "Reserved", "m")
    assert rec.stats.dropped == 2
    api.fail = ApiError(403, "Forbidden", "no RBAC for events")
    asyncio.run(rec.flush())
    assert rec.stats.errors == 2


def test_an_event_whose_namespace_is_gone_is_dropped_not_an_error() -> None:
    """Events wait in a queue (a big commit's Scheduled Events for seconds); a namespace
    deleted meanwhile is not a fault of the extender's, and its metric must not say so."""
    api = FakeApi()
    results: list[str] = []
    rec = EventRecorder(api, Clock(), on_result=results.append)
    for i, fail in enumerate((
            ApiError(403, "Forbidden", 'events "p0.1" is forbidden: unable to create new '
                                       "content in namespace ns because it is being "
                                       "terminated"),
            ApiError(404, "NotFound", 'namespaces "ns" not found'))):
        api.fail = fail
        rec.record(ObjectRef("Pod", "v1", "ns", f"p{i}", f"u{i}"), "Scheduled", "m")
        asyncio.run(rec.flush())
    assert results == ["dropped", "dropped"] and rec.stats.errors == 0


def test_the_events_queued_for_a_namespace_found_gone_are_dropped_without_a_call() -> None:
    api, clock = FakeApi(), Clock()
    rec = EventRecorder(api, clock)
    for i in range(3):
        rec.record(ObjectRef("Pod", "v1", "gone", f"p{i}", f"u{i}"), "Scheduled", "m",
                   background=True)
    rec.record(ObjectRef("Pod", "v1", "kept", "q", "uq"), "Scheduled", "m", background=True)
    calls = 0
    real_create = api.create

    async def create(path: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if "/namespaces/gone/" in path:
            raise ApiError(404, "NotFound", 'namespaces "gone" not found')
        return await real_create(path, body)

    api.create = create  # type: ignore[method-assign]
    asyncio.run(rec.flush())
    assert calls == 2  # one refusal for "gone", then its other two dropped; one for "kept"
    assert rec.stats.dropped == 3 and rec.stats.created == 1 and rec.stats.errors == 0
    clock.now += 61  # later, a namespace of that name may exist again
    rec.record(ObjectRef("Pod", "v1", "gone", "p9", "u9"), "Scheduled", "m")
    asyncio.run(rec.flush())
    assert calls == 3


def test_namespaces_found_gone_are_forgotten_once_their_minute_is_over() -> None:
    """One entry per deleted namespace, kept for good, would grow for as long as the
    process lives on a cluster that makes and deletes namespaces."""
    api, clock = FakeApi(), Clock()
    rec = EventRecorder(api, clock)
    api.fail = ApiError(404, "NotFound", "namespace not found")
    for ns in ("a", "b"):
        rec.record(ObjectRef("Pod", "v1", ns, "p", f"u-{ns}"), "Scheduled", "m")
        asyncio.run(rec.flush())
        clock.now += 61
    assert set(rec._gone) == {"b"}

def test_observed_kinds_feed_owners_and_group_status() -> None:
    manager = GangManager()
    writer = StatusWriter(manager.reads, None)
    kinds = {k.name: k for k in observed_kinds(writer)}
    kinds["podgroups"].apply(manager, {
        "metadata": {"namespace": "ns", "name": "g", "uid": "gu", "creationTimestamp":
                     "2027-01-01T00:00:00Z"},
        "spec": {"minMember": 2}, "status": {"phase": "Running"}}, T0)
    kinds["pods"].apply(manager, {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pu",
                     "labels": {"scheduling.x-k8s.io/pod-group": "g"},
                     "ownerReferences": [{"name": "job-1", "kind": "Job", "uid": "j"}]},
        "spec": {"schedulerName": "gang-scheduler", "containers": []}}, T0)
    assert writer.pods.owners == {"pu": ("job-1",)}
    assert writer.groups["ns/g"].observed == {"phase": "Running"}
    assert writer.groups["ns/g"].phase == "Running"
    kinds["pods"].delete(manager, "pu", T0)
    assert writer.pods.owners == {} and manager.reads.pod("pu") is None
    kinds["pods"].apply(manager, {  # Coscheduling's pod, labelled for the same group
        "metadata": {"namespace": "ns", "name": "q", "uid": "qu",
                     "labels": {"scheduling.x-k8s.io/pod-group": "g"}},
        "spec": {"schedulerName": "scheduler-plugins-scheduler", "containers": []}}, T0)
    assert writer.pods.foreign("ns/g") and writer.pods.owners == {}
    kinds["pods"].delete(manager, "qu", T0)
    assert not writer.pods.foreign("ns/g")
    kinds["podgroups"].delete(manager, "ns/g", T0)
    assert "ns/g" not in writer.groups


def test_debug_route_shows_queue_reservations_and_held_binds(env: Env) -> None:
    env.add_group("big", 2, timeout=30)
    a = env.add_pod("big-0", "big")
    env.add_pod("big-1", "big")
    env.add_group("late", 2)
    env.add_pod("late-0", "late")
    env.sim.schedule(a)
    res = env.core.ledger.reservations.get("ns/big")
    assert res is not None
    # The bind of big-0 waits at the permit barrier, on its reserved slot's node.
    assert env.core.ledger.binds.waiting.get(a) == res.slots[a].node
    env.step()
    app = FastAPI()
    install_podgroups_route(app, env.writer, env.recorder, env.clock)

    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as client:
            return (await client.get("/debug/podgroups")).json()

    body = asyncio.run(go())
    assert [g["gang"] for g in body["podGroups"]] == ["ns/big", "ns/late"]
    assert body["podGroups"][0]["reason"] == "Reserved"
    assert body["podGroups"][0]["queuePosition"] == 0
    (res,) = body["reservations"]
    assert res["gang"] == "ns/big" and len(res["slots"]) == 2 and res["secondsLeft"] == 30
    assert res["domain"] == ""  # no topology asked for
    assert body["waitingBinds"][0]["gang"] == "ns/big"
    assert body["heldBinds"] == body["waitingBinds"]  # the deprecated old key, one release
    assert body["events"]["created"] >= 1


def test_background_events_wait_behind_the_rest_and_never_crowd_them_out() -> None:
    """A big gang's commit queues a `Scheduled` Event per pod; a warning recorded after
    them is sent first, and neither lane's bound drops the other's events."""
    api = FakeApi()
    rec = EventRecorder(api, Clock(), RecorderLimits(max_pending=2, max_background=3))
    for i in range(5):
        rec.record(ObjectRef("Pod", "v1", "ns", f"p{i}", f"u{i}"), "Scheduled", "m",
                   background=True)
    assert rec.stats.dropped == 2  # the background lane's own bound
    group = ObjectRef("PodGroup", "scheduling.x-k8s.io/v1alpha1", "ns", "g", "uid-g")
    rec.record(group, "Unschedulable", "needs 3; 2 fit", warning=True)
    rec.record(ObjectRef("PodGroup", "scheduling.x-k8s.io/v1alpha1", "ns", "h", "uid-h"),
               "Unschedulable", "needs 2; 1 fit", warning=True)
    assert rec.stats.dropped == 2  # not crowded out by the full background lane
    asyncio.run(rec._send_one())
    (first,) = api.events.values()
    assert first["involvedObject"]["name"] == "g"
    asyncio.run(rec.flush())
    assert [e["reason"] for e in api.events.values()] == [
        "Unschedulable", "Unschedulable", "Scheduled", "Scheduled", "Scheduled"]

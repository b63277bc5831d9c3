"""An upstream PodGroup's backoff survives a restart, as a scheduler-plugins PodGroup's
does (`test_backoff_restart.py`): the status writer keeps the timeouts counted and the
backoff's end in a condition of ours (`BACKING_OFF`), since the PodGroup's status, a
built-in API type's, holds only conditions and would drop a `status.requeueState`; a
restarted extender reads it back (`workload_group_from_k8s`) and carries it on
(`Backoffs.restore`). Before, a restarted extender retried a timed-out upstream gang at
once, its count toward --backoff-limit started over, and a Failed one went on."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.phase import Previous, rfc3339
from extender.core.model.types import BACKING_OFF, WORKLOAD_API, GroupInfo, Membership
from extender.core.model.upstream_status import upstream_conditions
from extender.core.model.vocabulary import Reason
from extender.core.wiring import Core
from tests.core.queue.restart import written
from tests.core.sim import SimScheduler, node, pod

BETA = "scheduling.k8s.io/v1beta1"
GANG = f"{WORKLOAD_API}:ns/g"


def podgroup_object(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": BETA, "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": "g", "uid": "g-g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            "status": status or {}}


def uid_of(sim: SimScheduler, name: str) -> str:
    return next(p.uid for p in sim.cache.pods.values() if p.name == name)


def cluster(group: GroupInfo, policy: BackoffPolicy, now: float) -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(10, policy, direct_commit=False)))
    sim.now = now
    sim.add_node(node("n0"))
    sim.add_group(group)
    for i in range(2):
        sim.add_pod(pod(f"g-{i}", membership=Membership(WORKLOAD_API, "g")))
    return sim


def timed_out(policy: BackoffPolicy) -> SimScheduler:
    """An upstream gang of two on one node whose second member never comes to filter:
    its reservation times out (after 10 s) once."""
    sim = cluster(workload_group_from_k8s(podgroup_object()), policy, 1000.3)
    sim.tick()
    assert sim.schedule(uid_of(sim, "g-0")) == "held"
    sim.tick(10.1)
    return sim


def recorded(sim: SimScheduler) -> GroupInfo:
    """The PodGroup as a restarted extender lists it: the conditions the writer sets
    for the first process's status, through JSON, read back."""
    conds = upstream_conditions(written(sim, GANG), None, BETA, Previous(), sim.now, 1)
    status = orjson.loads(orjson.dumps({"conditions": [c.to_k8s() for c in conds]}))
    return workload_group_from_k8s(podgroup_object(status))


def test_a_restarted_extender_waits_out_the_upstream_gang_s_recorded_backoff() -> None:
    policy = BackoffPolicy(20, 60, retry_limit=3)
    first = timed_out(policy)
    bo = first.core.backoffs.get(GANG)
    assert bo is not None and bo.attempts == 1
    until = bo.until
    restored = recorded(first)
    assert (restored.requeue_count, restored.requeue_at) == (1, math.ceil(until))
    second = cluster(restored, policy, first.now + 5)
    second.tick()
    assert GANG not in second.core.ledger.reservations
    st = second.status(GANG)
    assert st.reason == Reason.BACKING_OFF and "carried over" in st.message, st.message
    assert second.schedule(uid_of(second, "g-0")) == "rejected"
    second.tick(until - second.now - 0.5)
    assert GANG not in second.core.ledger.reservations
    second.tick(1.6)  # past the recorded, rounded-up end
    assert GANG in second.core.ledger.reservations
    # The next timeout is the second, as it would have been without the restart: the
    # delay doubles, and the third is the last --backoff-limit allows.
    second.tick(10.1)
    bo2 = second.core.backoffs.get(GANG)
    assert bo2 is not None and (bo2.attempts, bo2.until - second.now) == (2, 40)
    third = cluster(recorded(second), policy, second.now + 41)
    third.tick()
    third.tick(10.1)
    bo3 = third.core.backoffs.get(GANG)
    assert bo3 is not None and (bo3.attempts, bo3.failed) == (3, True)


def test_a_failed_upstream_gang_stays_failed_across_a_restart() -> None:
    policy = BackoffPolicy(5, 8, retry_limit=1)
    first = timed_out(policy)
    assert first.status(GANG).reason == Reason.FAILED
    restored = recorded(first)
    assert (restored.requeue_count, restored.requeue_at) == (1, 0.0)
    second = cluster(restored, policy, first.now + 60)
    second.tick()
    assert GANG not in second.core.ledger.reservations
    assert second.status(GANG).reason == Reason.FAILED
    assert second.schedule(uid_of(second, "g-0")) == "rejected"


def test_the_condition_says_the_count_and_the_end_and_is_ended_once_placed() -> None:
    first = timed_out(BackoffPolicy(20, 60))
    (cond,) = [c for c in upstream_conditions(written(first, GANG), None, BETA, Previous(),
                                              first.now, 1) if c.type == BACKING_OFF]
    until = first.core.backoffs.get(GANG).until  # type: ignore[union-attr]
    assert (cond.status, cond.reason) == ("True", "BackingOff")
    assert cond.message.startswith(f"count=1 requeueAt={rfc3339(math.ceil(until))}; ")
    previous = Previous(conditions={BACKING_OFF: ("True", cond.last_transition)})
    first.tick(until - first.now + 0.1)  # the backoff ran out: tried again, and placed
    assert first.schedule(uid_of(first, "g-0")) == "held"
    assert first.schedule(uid_of(first, "g-1")) == "bound"
    first.tick()
    (ended,) = [c for c in upstream_conditions(written(first, GANG), None, BETA, previous,
                                               first.now, 1) if c.type == BACKING_OFF]
    assert (ended.status, ended.reason) == ("False", "NotBackingOff")
    assert workload_group_from_k8s(podgroup_object({"conditions": [ended.to_k8s()]})
                                   ).requeue_count == 0


@pytest.mark.parametrize("message", [
    "count=0 requeueAt=2026-11-29T06:00:00Z; x", "count=-1; x", "count=01; x",
    "count=2 requeueAt=soon; x", "count=2 requeueAt=2026-11-29T06:00:00Z", "count=2",
    "timed out twice", "", 5, None,
])
def test_a_record_it_cannot_read_starts_the_backoff_over(message: Any) -> None:
    """Only the extender writes the condition, so one it cannot read is dropped (the
    backoff starts over) rather than rejecting the PodGroup, as `status.requeueState`."""
    obj = podgroup_object({"conditions": [
        {"type": BACKING_OFF, "status": "True", "reason": "BackingOff", "message": message,
         "lastTransitionTime": "2026-11-29T06:00:00Z"}]})
    assert (workload_group_from_k8s(obj).requeue_count,
            workload_group_from_k8s(obj).requeue_at) == (0, 0.0)


def test_a_well_formed_record_is_read() -> None:
    for message, want in (("count=2 requeueAt=2026-11-29T06:00:00Z; backing off",
                           (2, 1795932000.0)),
                          ("count=3; out of retries", (3, 0.0))):
        obj = podgroup_object({"conditions": [
            {"type": BACKING_OFF, "status": "True", "message": message}]})
        group = workload_group_from_k8s(obj)
        assert (group.requeue_count, group.requeue_at) == want

"""An upstream PodGroup keeps its backoff in a condition of ours (`BACKING_OFF`), since
its status, a built-in API type's, holds only conditions and would drop the
`status.requeueState` a scheduler-plugins PodGroup keeps: the status writer sets it (the
timeouts counted and the backoff's end) and a restarted extender reads it back
(`workload_group_from_k8s`). Before, a restarted extender retried a timed-out upstream
gang at once, its count toward --backoff-limit started over, and a Failed one went on.
That it survives a restart as a scheduler-plugins PodGroup's does is tested for both
kinds in `test_backoff_restart.py`; here, the condition's own format."""

from __future__ import annotations

import math
from typing import Any

import pytest

from extender.core.model.config import BackoffPolicy
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.phase import Previous, rfc3339
from extender.core.model.types import BACKING_OFF
from extender.core.model.upstream_status import upstream_conditions
from tests.core.queue.restart import BETA, UPSTREAM, uid_of, upstream_podgroup, written

GANG = UPSTREAM.gang


def test_the_condition_says_the_count_and_the_end_and_is_ended_once_placed() -> None:
    first = UPSTREAM.timed_out(BackoffPolicy(20, 60))
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
    assert workload_group_from_k8s(upstream_podgroup({"conditions": [ended.to_k8s()]})
                                   ).requeue_count == 0


@pytest.mark.parametrize("message", [
    "count=0 requeueAt=2026-11-29T06:00:00Z; x", "count=-1; x", "count=01; x",
    "count=2 requeueAt=soon; x", "count=2 requeueAt=2026-11-29T06:00:00Z", "count=2",
    "timed out twice", "", 5, None,
])
def test_a_record_it_cannot_read_starts_the_backoff_over(message: Any) -> None:
    """Only the extender writes the condition, so one it cannot read is dropped (the
    backoff starts over) rather than rejecting the PodGroup, as `status.requeueState`."""
    obj = upstream_podgroup({"conditions": [
        {"type": BACKING_OFF, "status": "True", "reason": "BackingOff", "message": message,
         "lastTransitionTime": "2026-11-29T06:00:00Z"}]})
    assert (workload_group_from_k8s(obj).requeue_count,
            workload_group_from_k8s(obj).requeue_at) == (0, 0.0)


def test_a_well_formed_record_is_read() -> None:
    for message, want in (("count=2 requeueAt=2026-11-29T06:00:00Z; backing off",
                           (2, 1795932000.0)),
                          ("count=3; out of retries", (3, 0.0))):
        obj = upstream_podgroup({"conditions": [
            {"type": BACKING_OFF, "status": "True", "message": message}]})
        group = workload_group_from_k8s(obj)
        assert (group.requeue_count, group.requeue_at) == want

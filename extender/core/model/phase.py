"""PodGroup status from plain data: phase, counts and conditions (architecture.md §9).

Pure: the status writer (`extender/reporting/status.py`) feeds it the group, every pod labelled
for it, the gang manager's latest word on the gang and the status written last, and
writes what comes back. Rules, in order (the first that applies wins):

* **Finished**: at least `minMember` members Succeeded and no member is bound and
  unfinished. Members never placed (an elastic extra still pending) do not hold it back.
* **Failed**: the extender gave up (the retry limit of timeouts was reached), or a
  member Failed and the quorum can no longer be met by the pods that exist:
  `succeeded + unfinished < minMember`. If a controller replaces the failed member,
  the group moves back to Scheduling.
* **Running**: `running + succeeded >= minMember` (Running is the pod phase). A quorum
  that ran and partly finished stays Running while the rest run.
* **Pending**: fewer than `minMember` members exist (a member is a labelled pod that is
  not finished, not being deleted and has no scheduling gates), or the extender has not
  looked at the gang yet.
* **Scheduling**: everything else: a quorum of members exists and the extender has
  tried it (it waits for capacity, behind an older gang, in backoff, holds a
  reservation, or the quorum is bound but not yet Running).

scheduler-plugins differences, on purpose: its controller calls a group Failed as soon
as one member failed once the quorum had started (an elastic gang that lost an extra
is still healthy here), and keeps an intermediate `Scheduled` phase (here the
`Scheduled` condition says it). Finished and Failed are sticky once no labelled pod
is left (a Job's pods garbage-collected after it finished must not turn it Pending).

Conditions:

* `Scheduled`: True with reason `Bound` while the quorum is bound, running or
  finished; otherwise False with the reason the gang waits (table in
  docs/observability.md) and a message that names the numbers.
* `Failed`: present only in phase Failed; reason `MemberFailed` or
  `RetryLimitReached`.
* `DisruptionTarget`: True with reason `MemberDisrupted` while a started gang of
  disruption mode all that lost a member is evicted whole and not yet placed again
  (`core/preemption/disruption.py`; the upstream PodGroup's twin is in
  `upstream_status.py`); then False with reason `Scheduled`, kept so.

`lastTransitionTime` moves only when a condition's status changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from extender.core.model import messages
from extender.core.model.types import MEMBER_DISRUPTED, GroupInfo, PodInfo
from extender.core.model.vocabulary import Decision, Reason

PENDING = "Pending"
SCHEDULING = "Scheduling"
RUNNING = "Running"
FINISHED = "Finished"
FAILED_PHASE = "Failed"


# The core's word on a gang that says nothing about an attempt to place it.
_NOT_TRIED = (Reason.WAITING_FOR_MEMBERS, Reason.BOUND)

SCHEDULED = "Scheduled"
FAILED_CONDITION = "Failed"
DISRUPTION_TARGET = "DisruptionTarget"


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition of a PodGroup's status: scheduler-plugins' (no generation) and the
    upstream API's `metav1.Condition` (`upstream_status.py`) alike."""

    type: str
    status: str  # "True" | "False"
    reason: str
    message: str
    last_transition: str  # RFC 3339
    observed_generation: int = 0  # 0: not written

    def to_k8s(self) -> dict[str, Any]:
        generation = ({"observedGeneration": self.observed_generation}
                      if self.observed_generation > 0 else {})
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition,
            **generation,
        }


def _text(v: Any) -> str:
    return v if isinstance(v, str) else ""


@dataclass(frozen=True, slots=True)
class Previous:
    """What the PodGroup's status says now (as written last, or as read from the API)."""

    phase: str = ""
    schedule_start_time: str = ""
    occupied_by: str = ""
    # condition type -> (status, lastTransitionTime)
    conditions: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @staticmethod
    def from_k8s(status: Any) -> Previous:
        """Tolerant: a status someone else wrote may be partial or odd. A field that is
        not a string reads as absent (`str()` of a list nested 1,000 deep, which the
        API lets anyone with write access to the status put there, raised
        RecursionError)."""
        if not isinstance(status, Mapping):
            return Previous()
        conds: dict[str, tuple[str, str]] = {}
        raw = status.get("conditions")
        if isinstance(raw, list):
            for c in raw:
                if isinstance(c, Mapping) and isinstance(c.get("type"), str):
                    conds[c["type"]] = (_text(c.get("status")),
                                        _text(c.get("lastTransitionTime")))

        def text(name: str) -> str:
            v = status.get(name)
            return v if isinstance(v, str) else ""

        return Previous(text("phase"), text("scheduleStartTime"), text("occupiedBy"), conds)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    phase: str
    running: int
    succeeded: int
    failed: int
    bound: int
    members: int
    schedule_start_time: str  # "" until the gang was first tried
    occupied_by: str
    conditions: tuple[Condition, ...]
    # (timeouts, end of the backoff or 0) while the gang has a backoff: kept in the
    # status so that a restart or a new leader carries it on (`Backoffs.restore`).
    requeue: tuple[int, float] | None = None
    # When the gang began waiting for capacity (epoch seconds) while it waits: kept so
    # that the starvation guard's clock survives a restart (`Starvation.restore`).
    waiting_since: float | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def reason(self) -> str:
        """The Scheduled condition's reason: what `kubectl get pg` shows."""
        c = self.condition(SCHEDULED)
        return c.reason if c else ""

    @property
    def message(self) -> str:
        c = self.condition(SCHEDULED)
        return c.message if c else ""

    def to_k8s(self) -> dict[str, Any]:
        """The `status` object for a merge patch of the status subresource."""
        out: dict[str, Any] = {
            "phase": self.phase,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "bound": self.bound,
            "conditions": [c.to_k8s() for c in self.conditions],
        }
        if self.schedule_start_time:
            out["scheduleStartTime"] = self.schedule_start_time
        if self.occupied_by:
            out["occupiedBy"] = self.occupied_by
        # Kueue's shape. null removes it in the merge patch once the gang starts over.
        out["requeueState"] = None
        if self.requeue is not None:
            count, until = self.requeue
            out["requeueState"] = {"count": count}
            if until:
                # Whole seconds, rounded up: a backoff read back never ends early.
                out["requeueState"]["requeueAt"] = rfc3339(math.ceil(until))
        # Whole seconds, rounded down: a wait read back is never shorter than it was.
        out["waitingForCapacitySince"] = (rfc3339(math.floor(self.waiting_since))
                                          if self.waiting_since else None)
        return out


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def occupied_by(namespace: str, owners: Iterable[Iterable[str]]) -> str:
    """scheduler-plugins' format: "<namespace>/<owner name>" of the members' owners,
    sorted and comma-joined (e.g. "ml/trainer" for the pods of Job ml/trainer)."""
    refs = sorted({f"{namespace}/{name}" for names in owners for name in names})
    return ",".join(refs)


def compute_status(
    group: GroupInfo,
    pods: Sequence[PodInfo],
    decision: Decision | None,
    now: float,
    *,
    retry_limit_reached: bool = False,
    previous: Previous | None = None,
    owners: Iterable[Iterable[str]] = (),
    requeue: tuple[int, float] | None = None,
    waiting_since: float | None = None,
    disrupted: tuple[str, float] | None = None,
) -> GroupStatus | None:
    """The status the PodGroup should show. `pods`: every pod labelled for the group,
    finished ones included. `decision`: the gang manager's status for the gang (None if it
    has none). `owners`: owner names of the pods. `requeue` and `waiting_since`: what
    a restart carries on, as the `GroupStatus` fields of those names. `disrupted`: the
    message and time of a disruption of the gang in progress (`DisruptionTarget`). None:
    leave the status as it is (a finished group whose pods are all gone)."""
    prev = previous or Previous()
    key, need = group.key, group.min_member
    running = sum(1 for p in pods if p.phase == "Running")
    succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    failed = sum(1 for p in pods if p.phase == "Failed")
    unfinished = [p for p in pods if not p.terminal and not p.deleting]
    members = [p for p in unfinished if not p.gated]
    bound = sum(1 for p in members if p.node_name)
    started = sum(1 for p in unfinished if p.node_name)  # bound and not finished

    if not pods and prev.phase in (FINISHED, FAILED_PHASE):
        return None

    scheduled_true = bound >= need or running + succeeded >= need
    failed_message = ""
    failed_reason = ""
    if retry_limit_reached:
        phase = FAILED_PHASE
        failed_reason = Reason.RETRY_LIMIT_REACHED
        failed_message = (decision.message if decision and decision.reason == Reason.FAILED
                          else f"gang {key}: retry limit reached")
    elif succeeded >= need and started == 0:
        phase = FINISHED
    elif failed and succeeded + len(unfinished) < need:
        phase = FAILED_PHASE
        failed_reason = Reason.MEMBER_FAILED
        names = sorted(p.name for p in pods if p.phase == "Failed")
        shown = ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
        failed_message = (
            f"gang {key}: {failed} member(s) failed ({shown}); {succeeded} succeeded and "
            f"{len(unfinished)} unfinished cannot reach minMember {need}"
        )
        # The quorum ran before it broke: it was scheduled.
        placed = started + sum(1 for p in pods if p.terminal and p.node_name)
        scheduled_true = scheduled_true or placed >= need
    elif running + succeeded >= need:
        phase = RUNNING
    elif len(members) < need:
        phase = PENDING
    elif bound or (decision is not None and decision.reason not in _NOT_TRIED):
        phase = SCHEDULING
    else:
        phase = PENDING

    if retry_limit_reached:
        reason, message = Reason.RETRY_LIMIT_REACHED, failed_message
    elif scheduled_true:
        reason = Reason.BOUND
        message = (decision.message if decision is not None and decision.reason == Reason.BOUND
                   else messages.quorum_bound(key, need))
    elif len(members) < need:
        reason = Reason.WAITING_FOR_MEMBERS
        message = messages.members_exist(key, len(members), need)
    elif decision is not None and decision.reason not in _NOT_TRIED:
        reason, message = decision.reason, decision.message
    else:
        reason = Reason.QUEUED
        message = f"gang {key}: {len(members)} members present, waiting to be planned"

    def transition(type_: str, status: str) -> str:
        old = prev.conditions.get(type_)
        if old is not None and old[0] == status and old[1]:
            return old[1]
        return rfc3339(now)

    sched_status = "True" if reason == Reason.BOUND else "False"
    conditions = [Condition(SCHEDULED, sched_status, reason, message,
                            transition(SCHEDULED, sched_status))]
    if phase == FAILED_PHASE:
        conditions.append(Condition(FAILED_CONDITION, "True", failed_reason, failed_message,
                                    transition(FAILED_CONDITION, "True")))
    if disrupted is not None:
        old = prev.conditions.get(DISRUPTION_TARGET)
        since = old[1] if old is not None and old[0] == "True" and old[1] else rfc3339(
            disrupted[1] or now)
        conditions.append(Condition(DISRUPTION_TARGET, "True", MEMBER_DISRUPTED,
                                    disrupted[0], since))
    elif DISRUPTION_TARGET in prev.conditions:
        conditions.append(Condition(DISRUPTION_TARGET, "False", SCHEDULED,
                                    f"placed again after the disruption; {message}",
                                    transition(DISRUPTION_TARGET, "False")))

    start = prev.schedule_start_time
    if not start and phase != PENDING:
        tried = now
        if decision is not None and decision.reason != Reason.WAITING_FOR_MEMBERS:
            tried = min(decision.since, now)
        start = rfc3339(tried)

    return GroupStatus(
        phase=phase,
        running=running,
        succeeded=succeeded,
        failed=failed,
        bound=bound,
        members=len(members),
        schedule_start_time=start,
        occupied_by=occupied_by(group.namespace, owners) or prev.occupied_by,
        conditions=tuple(conditions),
        requeue=requeue,
        waiting_since=waiting_since,
    )

"""Which gang transition becomes which Kubernetes Event, on which object (architecture.md §6).

PodGroup: Reserved, Bound, TimedOut (Warning), Released, BackingOff (Warning),
RetryLimitReached (Warning), PartialGangEvicted (Warning), WaitingForMembers, Queued,
WaitingBehindOlderGang, InsufficientCapacity (Warning), InvalidTopology (Warning), Running,
Finished, MemberFailed (Warning).
Pods: Reserved (the node reserved for the pod), TimedOut (Warning) on members still
unbound when their gang's reservation expires, PartialGangEvicted (Warning) on members
evicted because their gang never reached its quorum. Bind on pods is kube-scheduler's own
`Scheduled` event; rejections are its `FailedScheduling` events with our message.

Everything an Event says comes with the gang manager's report; nothing is read back.
"""

from __future__ import annotations

from extender.core.phase import (
    FAILED_CONDITION,
    FAILED_PHASE,
    FINISHED,
    RUNNING,
    GroupStatus,
    rfc3339,
)
from extender.core.types import GroupInfo
from extender.core.vocabulary import (
    GangBound,
    GangReserved,
    GangTimedOut,
    GroupRef,
    PodRef,
    Reason,
    Report,
)
from extender.kube.client import PODGROUP_PATH
from extender.kube.events import EventRecorder, ObjectRef

# Event reasons beyond the condition reasons (docs/observability.md lists them all).
RELEASED = "Released"
BACKING_OFF_EVENT = "BackingOff"
PARTIAL = "PartialGangEvicted"

# Waiting reasons worth an Event on the PodGroup when the gang enters them (the others
# come with their own Event from the gang manager's transitions); True: a Warning.
_WAITING_EVENTS = {
    Reason.WAITING_FOR_MEMBERS: False,
    Reason.QUEUED: False,
    Reason.WAITING_BEHIND_OLDER_GANG: False,
    Reason.INSUFFICIENT_CAPACITY: True,
    Reason.INVALID_TOPOLOGY: True,
}


def group_ref(group: GroupRef | GroupInfo) -> ObjectRef:
    return ObjectRef("PodGroup", PODGROUP_PATH.removeprefix("/apis/"), group.namespace,
                     group.name, group.uid)


def pod_ref(pod: PodRef) -> ObjectRef:
    return ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid)


class GangEvents:
    def __init__(self, recorder: EventRecorder) -> None:
        self.recorder = recorder

    def on_report(self, report: Report) -> None:
        if isinstance(report, GangReserved):
            self._reserved(report)
        elif isinstance(report, GangBound):
            extra = (f", {report.seconds:.2f}s after the quorum was present"
                     if report.seconds is not None else "")
            self.recorder.record(group_ref(report.group), Reason.BOUND, report.message + extra)
        elif isinstance(report, GangTimedOut):
            self._timed_out(report)

    def _reserved(self, ev: GangReserved) -> None:
        rec = self.recorder
        rec.record(group_ref(ev.group), Reason.RESERVED, ev.message)
        until = rfc3339(ev.deadline)
        for slot in ev.slots:
            rec.record(pod_ref(slot.pod), Reason.RESERVED,
                       f"gang {ev.group.key}: node {slot.node} reserved for this pod until "
                       f"{until}; it binds when the whole quorum is ready")

    def _timed_out(self, ev: GangTimedOut) -> None:
        rec = self.recorder
        ref = group_ref(ev.group)
        rec.record(ref, Reason.TIMED_OUT, ev.message, warning=True)
        rec.record(ref, RELEASED,
                   f"gang {ev.group.key}: released {ev.slots} slot(s) on {ev.nodes} node(s) "
                   f"held since {rfc3339(ev.reserved_at)}; held binds were answered with an "
                   f"error, so kube-scheduler retries those pods")
        if ev.retry_at is None:
            rec.record(ref, Reason.RETRY_LIMIT_REACHED, ev.message, warning=True)
        else:
            delay = max(0.0, ev.retry_at - rec.clock())
            rec.record(ref, BACKING_OFF_EVENT,
                       f"gang {ev.group.key}: timeout {ev.attempts}; next attempt in "
                       f"{delay:.0f}s (at {rfc3339(ev.retry_at)})", warning=True)
        for pod in ev.unbound:
            rec.record(pod_ref(pod), Reason.TIMED_OUT, ev.message, warning=True)
        if ev.evicted:
            names = ", ".join(p.name for p in ev.evicted)
            rec.record(ref, PARTIAL,
                       f"gang {ev.group.key}: its commit bound {len(ev.evicted)} member(s) "
                       f"({names}) but the quorum never was; they are evicted so that the "
                       f"gang is placed again whole", warning=True)
            for pod in ev.evicted:
                rec.record(pod_ref(pod), PARTIAL,
                           f"gang {ev.group.key} ended below its quorum after its commit; "
                           f"this member is evicted", warning=True)

    def on_status(self, group: GroupInfo, old_phase: str, old_reason: str,
                  new: GroupStatus) -> None:
        """The computed status changed (the status writer calls this)."""
        ref = group_ref(group)
        # A PodGroup is usually created just before its pods: "0 of N members" is noise.
        quiet = new.reason == Reason.WAITING_FOR_MEMBERS and new.members == 0
        if new.reason != old_reason and new.reason in _WAITING_EVENTS and not quiet:
            self.recorder.record(ref, new.reason, new.message,
                                 warning=_WAITING_EVENTS[Reason(new.reason)])
        if new.phase == old_phase:
            return
        if new.phase == RUNNING:
            self.recorder.record(ref, RUNNING,
                                 f"gang {group.key}: {new.running} member(s) running, "
                                 f"{new.succeeded} succeeded (minMember {group.min_member})")
        elif new.phase == FINISHED:
            self.recorder.record(ref, FINISHED,
                                 f"gang {group.key}: {new.succeeded} member(s) succeeded")
        elif new.phase == FAILED_PHASE:
            cond = new.condition(FAILED_CONDITION)
            if cond is not None and cond.reason != Reason.RETRY_LIMIT_REACHED:
                self.recorder.record(ref, cond.reason, cond.message, warning=True)

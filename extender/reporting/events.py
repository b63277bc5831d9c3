"""Which gang transition becomes which Kubernetes Event, on which object (architecture.md §9).

PodGroup: Reserved, CapacityHeld, Preempting, Preempted (Warning), Bound, TimedOut (Warning),
Released, BackingOff (Warning),
RetryLimitReached (Warning), PartialGangEvicted (Warning), Disrupted (Warning),
WaitingForMembers, Queued,
WaitingBehindOlderGang, WaitingForPodAffinity, InsufficientCapacity (Warning), Unplaceable
(Warning), InvalidTopology (Warning), Running,
Finished, MemberFailed (Warning).
Pods: Preempting (a plain pod that preempts), Preempted (Warning, on every victim pod),
Reserved (the node reserved for the pod), TimedOut (Warning) on members still
unbound when their gang's reservation expires, PartialGangEvicted (Warning) on members
evicted because their gang never reached its quorum, Disrupted (Warning) on members
evicted because their started gang (disruption mode "all") lost one. Bind on pods is
kube-scheduler's own
`Scheduled` event; rejections are its `FailedScheduling` events with our message.

The PodGroup is the gang's object in its source (scheduler-plugins, Volcano or the
upstream Workload API: `involvedObject` says which, and the gang key in the message
names the source). A Kueue pod group has no object: its group Events go to its pods
(each pod not being deleted; a transition whose pods already get an Event of the same
reason, Reserved and TimedOut, adds none).

Everything an Event says comes with the gang manager's report; nothing is read back but
which pods make up a Kueue gang.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from extender.core.model.phase import (
    FAILED_CONDITION,
    FAILED_PHASE,
    FINISHED,
    RUNNING,
    GroupStatus,
    rfc3339,
)
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import (
    GangBound,
    GangDisrupted,
    GangHeld,
    GangReserved,
    GangTimedOut,
    GroupRef,
    PodRef,
    Preempting,
    Reason,
    Report,
)
from extender.kube.recorder import EventRecorder, ObjectRef
from extender.kube.source_kinds import group_api_version

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
    Reason.WAITING_FOR_PROVISIONING: False,
    Reason.UNPLACEABLE: True,
    Reason.WAITING_FOR_POD_AFFINITY: False,
    Reason.INVALID_TOPOLOGY: True,
}


def group_ref(group: GroupRef | GroupInfo) -> ObjectRef | None:
    """The gang's PodGroup in its source; None for a source without an object (Kueue)."""
    api_version = group_api_version(group.source, group.key)
    if api_version is None:
        return None
    return ObjectRef("PodGroup", api_version, group.namespace, group.name, group.uid)


def pod_ref(pod: PodRef) -> ObjectRef:
    return ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid)


class Members(Protocol):
    def group_pods(self, namespace: str, name: str, source: str = ...) -> Sequence[PodInfo]: ...


def quiet(st: GroupStatus) -> bool:
    """A status that gets no Event: a PodGroup is usually created just before its pods,
    so "0 of N members exist" is noise until a member exists."""
    return st.reason == Reason.WAITING_FOR_MEMBERS and st.members == 0


class GangEvents:
    def __init__(self, recorder: EventRecorder, members: Members | None = None) -> None:
        self.recorder = recorder
        self.members = members  # the gang manager's reads: the pods of object-less gangs

    def _group(self, group: GroupRef | GroupInfo, reason: str, message: str,
               warning: bool = False, pods_have_it: bool = False) -> None:
        """An Event about the gang: on its PodGroup, or for a gang without an object on
        its pods, unless `pods_have_it` (they get one of the same reason already)."""
        ref = group_ref(group)
        if ref is not None:
            self.recorder.record(ref, reason, message, warning=warning)
            return
        if pods_have_it or self.members is None:
            return
        for pod in self.members.group_pods(group.namespace, group.name, group.source):
            if not pod.deleting:
                self.recorder.record(ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid),
                                     reason, message, warning=warning)

    def on_report(self, report: Report) -> None:
        if isinstance(report, GangReserved):
            self._reserved(report)
        elif isinstance(report, GangBound):
            extra = (f", {report.seconds:.2f}s after the quorum was present"
                     if report.seconds is not None else "")
            self._group(report.group, Reason.BOUND, report.message + extra)
        elif isinstance(report, GangTimedOut):
            self._timed_out(report)
        elif isinstance(report, GangHeld):
            self._group(report.group, Reason.CAPACITY_HELD, report.message)
        elif isinstance(report, Preempting):
            self._preempting(report)
        elif isinstance(report, GangDisrupted):
            self._disrupted(report)

    def _disrupted(self, ev: GangDisrupted) -> None:
        """The gang says which member it lost and that the rest go; each evicted member
        says why it goes, as `kubectl describe pod` is where a user looks first. A
        disruption a restarted extender carries on with nothing left to evict says
        nothing new: no Event."""
        if not ev.lost and not ev.evicted:
            return
        self._group(ev.group, Reason.DISRUPTED, ev.message, warning=True,
                    pods_have_it=bool(ev.evicted))
        lost = ", ".join(p.key for p in ev.lost) or "a member"
        why = (f"gang {ev.group.key} lost {lost} after it had started, and its disruption "
               f"mode is all" if not ev.composite else
               f"CompositePodGroup {ev.group.namespace}/{ev.composite}, of gang "
               f"{ev.group.key}, lost a member after it had started, and its disruption "
               f"mode is all")
        for pod in ev.evicted:
            self.recorder.record(pod_ref(pod), Reason.DISRUPTED, f"evicted: {why}",
                                 warning=True)

    def _preempting(self, ev: Preempting) -> None:
        """Both sides: the preemptor says whom it evicts and why; every victim gang and
        pod says by whom."""
        rec = self.recorder
        if ev.group is not None:
            self._group(ev.group, Reason.PREEMPTING, ev.message)
        elif ev.pod is not None:
            rec.record(pod_ref(ev.pod), Reason.PREEMPTING, ev.message)
        for v in ev.victims:
            by = f"{ev.preemptor} (priority {ev.priority})"
            if v.group is not None:
                what = (f"{len(v.pods)} bound member(s) evicted" if v.pods
                        else "its reservation released")
                self._group(v.group, Reason.PREEMPTED,
                            f"{v.name} (priority {v.priority}) preempted by {by}: {what}, "
                            f"to be placed again whole", warning=True,
                            pods_have_it=bool(v.pods))
            for pod in v.pods:
                rec.record(pod_ref(pod), Reason.PREEMPTED,
                           f"evicted: {v.name} (priority {v.priority}) preempted by {by}",
                           warning=True)

    def _reserved(self, ev: GangReserved) -> None:
        rec = self.recorder
        self._group(ev.group, Reason.RESERVED, ev.message, pods_have_it=True)
        until = rfc3339(ev.deadline)
        for slot in ev.slots:
            rec.record(pod_ref(slot.pod), Reason.RESERVED,
                       f"gang {ev.group.key}: node {slot.node} reserved for this pod until "
                       f"{until}; it binds when the whole quorum is ready")

    def _timed_out(self, ev: GangTimedOut) -> None:
        rec, ref = self.recorder, ev.group
        self._group(ref, Reason.TIMED_OUT, ev.message, warning=True, pods_have_it=True)
        self._group(ref, RELEASED,
                    f"gang {ev.group.key}: released {ev.slots} slot(s) on {ev.nodes} node(s) "
                    f"reserved since {rfc3339(ev.reserved_at)}; waiting binds were answered "
                    f"with an error, so kube-scheduler retries those pods")
        if ev.retry_at is None:
            self._group(ref, Reason.RETRY_LIMIT_REACHED, ev.message, warning=True)
        else:
            delay = max(0.0, ev.retry_at - rec.clock())
            self._group(ref, BACKING_OFF_EVENT,
                        f"gang {ev.group.key}: timeout {ev.attempts}; next attempt in "
                        f"{delay:.0f}s (at {rfc3339(ev.retry_at)})", warning=True)
        for pod in ev.unbound:
            rec.record(pod_ref(pod), Reason.TIMED_OUT, ev.message, warning=True)
        if ev.evicted:
            names = ", ".join(p.name for p in ev.evicted)
            self._group(ref, PARTIAL,
                        f"gang {ev.group.key}: its commit bound {len(ev.evicted)} member(s) "
                        f"({names}) but the quorum never was; they are evicted so that "
                        f"the gang is placed again whole", warning=True)
            for pod in ev.evicted:
                rec.record(pod_ref(pod), PARTIAL,
                           f"gang {ev.group.key} ended below its quorum after its commit; "
                           f"this member is evicted", warning=True)

    def on_status(self, group: GroupInfo, old_phase: str, old_reason: str,
                  new: GroupStatus) -> None:
        """The computed status changed (the status writer calls this; after a quiet
        status, `old_reason` is "", so that the reason it kept quiet is still told)."""
        if new.reason != old_reason and new.reason in _WAITING_EVENTS and not quiet(new):
            self._group(group, new.reason, new.message,
                        warning=_WAITING_EVENTS[Reason(new.reason)])
        if new.phase == old_phase:
            return
        if new.phase == RUNNING:
            self._group(group, RUNNING,
                        f"gang {group.key}: {new.running} member(s) running, "
                        f"{new.succeeded} succeeded (minMember {group.min_member})")
        elif new.phase == FINISHED:
            self._group(group, FINISHED,
                        f"gang {group.key}: {new.succeeded} member(s) succeeded")
        elif new.phase == FAILED_PHASE:
            cond = new.condition(FAILED_CONDITION)
            if cond is not None and cond.reason != Reason.RETRY_LIMIT_REACHED:
                self._group(group, cond.reason, cond.message, warning=True)

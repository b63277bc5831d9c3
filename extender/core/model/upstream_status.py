"""The conditions of an upstream PodGroup (`scheduling.k8s.io`) whose members name this
scheduler, as the in-tree scheduler writes them for its own gangs (architecture.md §9).

Pure: the status writer (`reporting/status.py`) feeds it what `phase.compute_status`
made of the gang, the gang manager's latest word on it, the conditions the API shows (or
this process wrote last) and the group's generation; it writes what comes back with a
strategic merge patch of the `status` subresource, so conditions of other types (and
anything else in the status) are left as they are.

Names, from the API types of each release (k8s.io/api scheduling):

* the scheduling condition is `PodGroupInitiallyScheduled` in v1beta1 (Kubernetes
  1.37) and `PodGroupScheduled` in v1alpha2 (1.36); the same reasons in both:
  `Unschedulable`, `SchedulerError`, and `Scheduled` for True (the in-tree scheduler's
  literal; the API names no constant for it);
* `DisruptionTarget` with reason `PreemptionByScheduler` in both.

Rules, following kube-scheduler's `updatePodGroupCondition` where it has one:

* nothing until the gang has been tried: a gang still short of members, or not yet
  looked at, gets no condition (the in-tree scheduler writes none before its first pod
  group cycle, which waits for `minCount` pods);
* `Unschedulable` with our message (it names the gang, the members and the number that
  did not fit) while a tried gang waits: no room, waiting behind another gang, capacity
  held, preempting, backing off, out of retries; `SchedulerError` when the PodGroup asks
  for something that cannot be honoured (a malformed or refused topology, a composite);
* True once the quorum is bound, and never back to False: v1beta1 calls it terminal, and
  kube-scheduler keeps it so in both versions (evicted members, a later shortfall);
* `DisruptionTarget` True when this extender's preemption evicts the gang's bound
  members (`disruptions`: a victim of kind gang in a `Preempting` report), naming the
  preemptor and the numbers; False with reason `Scheduled` once the quorum is bound
  again (a condition left True would say a running gang is about to go). A gang whose
  unbound reservation was preempted is not disrupted (nothing of it is evicted): its
  scheduling condition says why it waits. kube-scheduler 1.37 defines this condition
  for PodGroups but does not write it yet; this follows its pod-level twin.
* `DisruptionTarget` True with reason `MemberDisrupted` when a started gang whose
  disruption mode is all lost a member and the rest are evicted (`member_lost`, from a
  `GangDisrupted` report; `core/preemption/disruption.py`); its `lastTransitionTime` is
  when that happened, which a restarted extender reads back (`GroupInfo.disrupted_since`).
  Ended as a preemption's is, once the gang is placed again.
* our own `gang-extender.x-k8s.io/WaitingForCapacity` (`WAITING_FOR_CAPACITY`), as the
  composite's below: True while the gang waits for capacity (`GroupStatus.waiting_since`),
  False once it stops; read back after a restart (`GroupInfo.waiting_since`).
* our own `gang-extender.x-k8s.io/BackingOff` (`BACKING_OFF`): True while timeouts are
  counted against --backoff-limit (`GroupStatus.requeue`), the count and the backoff's
  end in its message (`_backing_off`); False once the count is dropped (the gang placed,
  re-specified); read back after a restart (`GroupInfo.requeue_count`, `requeue_at`).

`lastTransitionTime` moves only when a condition's status changes; `observedGeneration`
is the PodGroup's generation, as kube-scheduler sets it.

A CompositePodGroup (`scheduling.k8s.io/v1alpha3`) whose children's pods are ours gets
its own (`composite_conditions`): `CompositePodGroupInitiallyScheduled`, the composite's
name for the scheduling condition, True once `minGroupCount` of its children (1 for a
"basic" one) have their quorum bound, terminal as the PodGroup's; False with reason
`Unschedulable` and a waiting child's message before that, `SchedulerError` for what
cannot be honoured; and `DisruptionTarget` as a PodGroup's, when it is disrupted whole
(its disruption mode all) or our preemption evicts it (all its children, one victim).
And one of our own, `gang-extender.x-k8s.io/WaitingForCapacity` (`WAITING_FOR_CAPACITY`):
True while the composite waits for capacity, its lastTransitionTime when that wait
began (whole seconds, whatever the previous write said), so that a restarted extender's
starvation guard counts from there (`CompositeInfo.waiting_since`); False once it stops
waiting. A scheduler-plugins
PodGroup keeps that time in `status.waitingForCapacitySince`, a field of the CRD this
project ships; the composite's status, a built-in type's, holds only conditions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.core.model.phase import Condition, GroupStatus, Previous, rfc3339
from extender.core.model.types import BACKING_OFF, MEMBER_DISRUPTED, WAITING_FOR_CAPACITY
from extender.core.model.vocabulary import GANG, GangDisrupted, Preempting, Reason

INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"  # scheduling.k8s.io/v1beta1 (1.37)
# A CompositePodGroup's (scheduling.k8s.io/v1alpha3, 1.37): its own type, same reasons.
COMPOSITE_INITIALLY_SCHEDULED = "CompositePodGroupInitiallyScheduled"
SCHEDULED_V1ALPHA2 = "PodGroupScheduled"  # scheduling.k8s.io/v1alpha2 (1.36)
DISRUPTION_TARGET = "DisruptionTarget"
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
SCHEDULED = "Scheduled"  # the reason of the True condition (and of a disruption ended)
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

# The Scheduled reasons of a gang that was tried and is not placed.
_UNSCHEDULABLE = frozenset({
    Reason.INSUFFICIENT_CAPACITY, Reason.UNPLACEABLE, Reason.WAITING_BEHIND_OLDER_GANG,
    Reason.CAPACITY_HELD, Reason.PREEMPTING, Reason.PREEMPTED, Reason.BACKING_OFF,
    Reason.FAILED, Reason.RETRY_LIMIT_REACHED, Reason.WAITING_FOR_PROVISIONING,
    Reason.WAITING_FOR_POD_AFFINITY,
})
_SCHEDULER_ERROR = frozenset({Reason.INVALID_TOPOLOGY})


def scheduled_type(api_version: str) -> str:
    """The scheduling condition's type in the PodGroup's version (e.g.
    "scheduling.k8s.io/v1alpha2"); any version but v1alpha2 is read as v1beta1's."""
    return SCHEDULED_V1ALPHA2 if api_version.endswith("/v1alpha2") else INITIALLY_SCHEDULED


@dataclass(frozen=True, slots=True)
class Disruption:
    """Our preemption evicts a gang's bound members; or, with `lost` set, the gang lost
    a member and the rest are evicted (disruption mode all)."""

    gang: str
    priority: int
    pods: tuple[str, ...]  # uids of the bound members evicted
    preemptor: str  # "gang ns/x" or "pod ns/p"
    preemptor_priority: int
    lost: str = ""  # the core's message about the member lost
    since: float = 0.0  # when the member was lost
    # A preemption's own words ("": a gang's, made here): a composite's names its children.
    said: str = ""

    @property
    def reason(self) -> str:
        return MEMBER_DISRUPTED if self.lost else PREEMPTION_BY_SCHEDULER

    @property
    def message(self) -> str:
        if self.lost or self.said:
            return self.lost or self.said
        return (f"gang {self.gang} (priority {self.priority}): preempted by "
                f"{self.preemptor} (priority {self.preemptor_priority}): its {len(self.pods)} "
                f"bound member(s) are evicted; it is placed again whole when there is room")


def disruptions(report: Preempting) -> list[Disruption]:
    """The gangs a preemption evicts (not the reservations it releases, nor plain pods)."""
    return [Disruption(v.group.key, v.priority, tuple(p.uid for p in v.pods),
                       report.preemptor, report.priority)
            for v in report.victims if v.kind == GANG and v.group is not None and v.pods]


def member_lost(report: GangDisrupted) -> Disruption:
    """The gang a member's loss disrupts whole."""
    return Disruption(report.group.key, 0, tuple(p.uid for p in report.evicted), "", 0,
                      lost=report.message, since=report.since)


@dataclass(frozen=True, slots=True)
class _Setting:
    """Conditions set now over `previous` (the conditions as the API shows them, with
    what this process wrote last laid over them). The PodGroup's and the composite's
    follow the same rules: a condition's lastTransitionTime is kept while its status
    stays; the scheduling condition is terminal once True; `DisruptionTarget` is True
    while a disruption is on and turns False once the group is placed again."""

    previous: Previous
    now: float
    generation: int

    def cond(self, type_: str, state: str, reason: str, message: str,
             at: float = 0.0) -> Condition:
        old = self.previous.conditions.get(type_)
        since = (old[1] if old is not None and old[0] == state and old[1]
                 else rfc3339(at or self.now))
        return Condition(type_, state, reason, message, since, self.generation)

    def was_true(self, type_: str) -> bool:
        return self.previous.conditions.get(type_, ("", ""))[0] == "True"

    def disruption_target(self, disruption: Disruption | None, placed: bool,
                          message: str) -> Condition | None:
        """`placed`: the group is placed now, `message` its scheduling condition's."""
        if disruption is not None:
            return self.cond(DISRUPTION_TARGET, "True", disruption.reason, disruption.message,
                             disruption.since)
        if placed and self.was_true(DISRUPTION_TARGET):
            return self.cond(DISRUPTION_TARGET, "False", SCHEDULED,
                             f"placed again after the disruption; {message}")
        return None


def upstream_conditions(
    status: GroupStatus,
    disruption: Disruption | None,
    api_version: str,
    previous: Previous,
    now: float,
    generation: int = 0,
) -> tuple[Condition, ...]:
    """The conditions to set now (types absent from the result are left as they are).
    `status`: `compute_status`'s result for the gang; `disruption`: our preemption
    evicts it (from its report until the eviction is done and said); `previous`: the
    conditions as the API shows them, with what this process wrote last laid over them."""
    sched = scheduled_type(api_version)
    setting = _Setting(previous, now, generation)
    was_true = setting.was_true(sched)
    out: list[Condition] = []
    bound = status.reason == Reason.BOUND
    if bound:
        out.append(setting.cond(sched, "True", SCHEDULED, status.message))
    elif not was_true and status.reason in _UNSCHEDULABLE:
        out.append(setting.cond(sched, "False", UNSCHEDULABLE, status.message))
    elif not was_true and status.reason in _SCHEDULER_ERROR:
        out.append(setting.cond(sched, "False", SCHEDULER_ERROR, status.message))
    wait = _waiting(setting, status.waiting_since or 0.0, bound)
    if wait is not None:
        out.append(wait)
    backoff = _backing_off(setting, status.requeue)
    if backoff is not None:
        out.append(backoff)
    target = setting.disruption_target(disruption, bound, status.message)
    return tuple(out) if target is None else (*out, target)


@dataclass(frozen=True, slots=True)
class CompositeState:
    """What the children of a CompositePodGroup say, for its conditions: `placed`, the
    message once enough of them have their quorum bound ("": not yet); `waiting`, a
    tried child's message while none is ("": none tried); `error`, what the composite
    asks that cannot be honoured ("": nothing)."""

    placed: str = ""
    waiting: str = ""
    error: str = ""
    # When it began waiting for capacity (`Starvation.since`), 0: it does not.
    waiting_since: float = 0.0


def composite_conditions(
    state: CompositeState,
    disruption: Disruption | None,
    previous: Previous,
    now: float,
    generation: int = 0,
) -> tuple[Condition, ...]:
    """A CompositePodGroup's conditions to set now, by the rules of `upstream_conditions`
    (terminal once True; `DisruptionTarget` until placed again)."""
    sched = COMPOSITE_INITIALLY_SCHEDULED
    setting = _Setting(previous, now, generation)
    was_true = setting.was_true(sched)
    out: list[Condition] = []
    if state.placed:
        out.append(setting.cond(sched, "True", SCHEDULED, state.placed))
    elif not was_true and state.error:
        out.append(setting.cond(sched, "False", SCHEDULER_ERROR, state.error))
    elif not was_true and state.waiting:
        out.append(setting.cond(sched, "False", UNSCHEDULABLE, state.waiting))
    wait = _waiting(setting, state.waiting_since, bool(state.placed))
    if wait is not None:
        out.append(wait)
    target = setting.disruption_target(disruption, bool(state.placed), state.placed)
    return tuple(out) if target is None else (*out, target)


def _waiting(setting: _Setting, waiting_since: float, placed: bool) -> Condition | None:
    """Our `WAITING_FOR_CAPACITY`: True from when the wait began (the time said in
    the message too, so that a wait begun again is written, since `differs` does not
    look at lastTransitionTime); False once it ends; nothing if it never began."""
    if waiting_since and not placed:
        since = rfc3339(math.floor(waiting_since))
        return Condition(WAITING_FOR_CAPACITY, "True", "WaitingForCapacity",
                         f"waiting for capacity since {since}: gang-extender's starvation "
                         f"guard counts --starvation-after from then", since,
                         setting.generation)
    if setting.was_true(WAITING_FOR_CAPACITY):
        return setting.cond(WAITING_FOR_CAPACITY, "False", "NotWaitingForCapacity",
                            "placed, or waiting for something other than capacity")
    return None


def differs(conditions: tuple[Condition, ...],
            shown: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether setting `conditions` would change any of those `shown` (type -> the
    condition as the API shows it, or as written last): the status, reason, message or
    generation of one of them. `lastTransitionTime` follows the status."""
    for c in conditions:
        old = shown.get(c.type)
        if old is None:
            return True
        if (str(old.get("status", "")), str(old.get("reason", "")),
                str(old.get("message", ""))) != (c.status, c.reason, c.message):
            return True
        if c.observed_generation and old.get("observedGeneration") != c.observed_generation:
            return True
    return False


def conditions_by_type(status: Any) -> dict[str, dict[str, Any]]:
    """type -> condition of a PodGroup's status (tolerant: someone else's may be odd)."""
    if not isinstance(status, Mapping):
        return {}
    raw = status.get("conditions")
    out: dict[str, dict[str, Any]] = {}
    if isinstance(raw, list):
        for c in raw:
            if isinstance(c, Mapping) and isinstance(c.get("type"), str):
                out[c["type"]] = dict(c)
    return out


def backoff_message(count: int, until: float) -> str:
    """The message of our `BACKING_OFF`, which alone carries the backoff over a restart:
    `count=N requeueAt=<RFC 3339, whole seconds, rounded up>; ` (no requeueAt once the
    backoff ran out or the gang is out of retries), then words for people. Why there and
    so: a condition's message is the only free text a built-in status keeps; its
    lastTransitionTime is when the condition last turned True, so it cannot carry the
    end of a later backoff (nor the count), and holds whole seconds only. The fields are
    `status.requeueState`'s names and rounding (a backoff read back never ends early),
    and `convert_groups._backing_off` accepts exactly this form and nothing looser: a
    message edited by hand, or one a later version words otherwise, is dropped (the
    backoff starts over) rather than half-read into a count or an end it did not mean."""
    head = f"count={count}"
    if until:
        head += f" requeueAt={rfc3339(math.ceil(until))}"
        said = f"backing off until then after {count} timeout(s)"
    else:
        said = f"{count} timeout(s) counted"
    return (f"{head}; {said}: gang-extender counts them against --backoff-limit and "
            f"carries them over a restart")


def _backing_off(setting: _Setting, requeue: tuple[int, float] | None) -> Condition | None:
    """Our `BACKING_OFF`: True while timeouts are counted (`backoff_message`), its
    lastTransitionTime when that began; False once they are dropped; nothing if none was
    ever counted."""
    if requeue is not None and requeue[0] > 0:
        return setting.cond(BACKING_OFF, "True", "BackingOff", backoff_message(*requeue))
    if setting.was_true(BACKING_OFF):
        return setting.cond(BACKING_OFF, "False", "NotBackingOff",
                            "no timeouts counted: placed, or started over")
    return None

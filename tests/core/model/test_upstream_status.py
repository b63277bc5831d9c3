"""The conditions of an upstream PodGroup of ours (`core/model/upstream_status.py`): the names
each version defines, when each is set, and that the scheduling one never goes back."""

from __future__ import annotations

from extender.core.model.phase import SCHEDULED, Condition, GroupStatus, Previous, rfc3339
from extender.core.model.types import WORKLOAD_API
from extender.core.model.upstream_status import (
    DISRUPTION_TARGET,
    INITIALLY_SCHEDULED,
    SCHEDULED_V1ALPHA2,
    Disruption,
    conditions_by_type,
    differs,
    disruptions,
    scheduled_type,
    upstream_conditions,
)
from extender.core.model.vocabulary import GroupRef, PodRef, Preempting, Reason, Victim

T0 = 1_800_000_000.0
BETA = "scheduling.k8s.io/v1beta1"
ALPHA = "scheduling.k8s.io/v1alpha2"
SHORT = ("gang workload-api:ns/up: 3 members need 3000m cpu; pod ns/up-2 fits no node "
         "(2 of 3 placed)")


def status(reason: Reason, message: str = SHORT, bound: int = 0) -> GroupStatus:
    sched = "True" if reason == Reason.BOUND else "False"
    return GroupStatus(phase="Scheduling", running=0, succeeded=0, failed=0, bound=bound,
                       members=3, schedule_start_time="", occupied_by="",
                       conditions=(Condition(SCHEDULED, sched, reason, message, ""),))


def prev(**conds: tuple[str, str]) -> Previous:
    return Previous(conditions=conds)


def by_type(conds: tuple[Condition, ...]) -> dict[str, Condition]:
    return {c.type: c for c in conds}


def test_each_version_names_its_scheduling_condition() -> None:
    assert scheduled_type(BETA) == "PodGroupInitiallyScheduled" == INITIALLY_SCHEDULED
    assert scheduled_type(ALPHA) == "PodGroupScheduled" == SCHEDULED_V1ALPHA2


def test_a_gang_not_yet_tried_gets_no_condition() -> None:
    for reason in (Reason.WAITING_FOR_MEMBERS, Reason.QUEUED, Reason.RESERVED):
        assert upstream_conditions(status(reason, "x"), None, BETA, Previous(), T0) == ()


def test_a_gang_that_does_not_fit_is_unschedulable_with_our_message() -> None:
    for version, type_ in ((BETA, INITIALLY_SCHEDULED), (ALPHA, SCHEDULED_V1ALPHA2)):
        (c,) = upstream_conditions(status(Reason.INSUFFICIENT_CAPACITY), None, version,
                                   Previous(), T0, generation=4)
        assert (c.type, c.status, c.reason, c.message) == (type_, "False", "Unschedulable",
                                                          SHORT)
        assert c.to_k8s() == {"type": type_, "status": "False", "reason": "Unschedulable",
                              "message": SHORT, "lastTransitionTime": rfc3339(T0),
                              "observedGeneration": 4}
    for reason in (Reason.WAITING_BEHIND_OLDER_GANG, Reason.BACKING_OFF, Reason.PREEMPTING,
                   Reason.UNPLACEABLE, Reason.CAPACITY_HELD, Reason.RETRY_LIMIT_REACHED):
        (c,) = upstream_conditions(status(reason), None, BETA, Previous(), T0)
        assert c.reason == "Unschedulable", reason


def test_a_podgroup_that_asks_for_what_cannot_be_honoured_is_a_scheduler_error() -> None:
    (c,) = upstream_conditions(status(Reason.INVALID_TOPOLOGY, "gang x: topology..."), None,
                               BETA, Previous(), T0)
    assert (c.status, c.reason, c.message) == ("False", "SchedulerError", "gang x: topology...")


def test_true_once_bound_and_never_back_to_false() -> None:
    (c,) = upstream_conditions(status(Reason.BOUND, "gang x: quorum of 3 bound", bound=3),
                               None, BETA, prev(PodGroupInitiallyScheduled=("False", "t0")),
                               T0 + 5)
    assert (c.status, c.reason, c.last_transition) == ("True", "Scheduled", rfc3339(T0 + 5))
    was_true = prev(PodGroupInitiallyScheduled=("True", "t1"))
    # A later shortfall (members evicted and replaced) leaves it as it is.
    assert upstream_conditions(status(Reason.INSUFFICIENT_CAPACITY), None, BETA, was_true,
                               T0 + 9) == ()
    # The time of a condition whose status stays is kept.
    (again,) = upstream_conditions(status(Reason.BOUND, bound=3), None, BETA, was_true, T0 + 9)
    assert again.last_transition == "t1"


LOW = GroupRef("ns", "low", "u-low", WORKLOAD_API)
REPORT = Preempting(
    "gang ns/high", GroupRef("ns", "high", "u-high"), None, 10, "gang ns/high preempts ...",
    (Victim("gang workload-api:ns/low", "gang", 1, LOW,
            (PodRef("ns", "low-0", "u0"), PodRef("ns", "low-1", "u1"))),
     Victim("reservation of gang ns/r", "reservation", 1, GroupRef("ns", "r", "u-r"), ()),
     Victim("pod ns/p", "pod", 0, None, (PodRef("ns", "p", "up"),))),
    ())


def test_a_preemption_disrupts_the_gangs_it_evicts_only() -> None:
    """Not a reservation it releases (nothing of it is evicted), nor a plain pod."""
    (d,) = disruptions(REPORT)
    assert d == Disruption("workload-api:ns/low", 1, ("u0", "u1"), "gang ns/high", 10)
    assert d.message == ("gang workload-api:ns/low (priority 1): preempted by gang ns/high "
                         "(priority 10): its 2 bound member(s) are evicted; it is placed "
                         "again whole when there is room")


def test_our_preemption_of_a_placed_gang_is_a_disruption_target() -> None:
    (d,) = disruptions(REPORT)
    # Still bound while the evictions go out.
    got = by_type(upstream_conditions(status(Reason.BOUND, bound=2), d, BETA,
                                      prev(PodGroupInitiallyScheduled=("True", "t1")), T0))
    dt = got[DISRUPTION_TARGET]
    assert (dt.status, dt.reason, dt.message) == ("True", "PreemptionByScheduler", d.message)
    # Members gone: the scheduling condition stays True, the disruption stays.
    got = by_type(upstream_conditions(status(Reason.PREEMPTED, "x"), d, BETA,
                                      prev(PodGroupInitiallyScheduled=("True", "t1"),
                                           DisruptionTarget=("True", "t2")), T0 + 1))
    assert set(got) == {DISRUPTION_TARGET} and got[DISRUPTION_TARGET].last_transition == "t2"
    # Placed again: no longer about to go.
    got = by_type(upstream_conditions(
        status(Reason.BOUND, "gang x: quorum of 2 bound", bound=2), None, BETA,
        prev(PodGroupInitiallyScheduled=("True", "t1"), DisruptionTarget=("True", "t2")),
        T0 + 30))
    dt = got[DISRUPTION_TARGET]
    assert (dt.status, dt.reason) == ("False", "Scheduled")
    assert "gang x: quorum of 2 bound" in dt.message
    # Waiting to be placed again: the disruption said stays as it is.
    got = by_type(upstream_conditions(
        status(Reason.INSUFFICIENT_CAPACITY), None, BETA,
        prev(PodGroupInitiallyScheduled=("True", "t1"), DisruptionTarget=("True", "t2")),
        T0 + 30))
    assert got == {}


def test_a_preempted_reservation_waits_unschedulable() -> None:
    (c,) = upstream_conditions(status(Reason.PREEMPTED, "gang ns/r: preempted: its "
                                      "reservation is released"), None, BETA, Previous(), T0)
    assert (c.type, c.reason) == (INITIALLY_SCHEDULED, "Unschedulable")


def test_differs_compares_status_reason_message_and_generation() -> None:
    (c,) = upstream_conditions(status(Reason.INSUFFICIENT_CAPACITY), None, BETA, Previous(),
                               T0, generation=2)
    shown = conditions_by_type({"conditions": [c.to_k8s()]})
    assert not differs((c,), shown)
    assert differs((c,), {})
    for field, value in (("status", "True"), ("reason", "SchedulerError"),
                         ("message", "older"), ("observedGeneration", 1)):
        assert differs((c,), {c.type: {**shown[c.type], field: value}}), field
    # Someone else's condition of another type changes nothing.
    assert not differs((c,), {**shown, "Other": {"status": "True"}})


def test_conditions_by_type_tolerates_odd_statuses() -> None:
    assert conditions_by_type(None) == {}
    assert conditions_by_type({"conditions": "x"}) == {}
    assert conditions_by_type({"conditions": [1, {"type": 2}, {"type": "A", "status": "True"}]}
                              ) == {"A": {"type": "A", "status": "True"}}

"""PodGroup status rules (extender/core/model/phase.py) on plain data, through a gang's life."""

from __future__ import annotations

import pytest

from extender.core.model.phase import (
    FAILED_CONDITION,
    FAILED_PHASE,
    FINISHED,
    PENDING,
    RUNNING,
    SCHEDULED,
    SCHEDULING,
    GroupStatus,
    Previous,
    compute_status,
    occupied_by,
    rfc3339,
)
from extender.core.model.types import GROUP_LABEL, GroupInfo, PodInfo
from extender.core.model.vocabulary import Decision, Reason

NOW = 1_800_000_000.0
GROUP = GroupInfo("ml", "train", 3, uid="g1")


def pod(i: int, phase: str = "Pending", node: str = "", **kw: object) -> PodInfo:
    return PodInfo(f"u{i}", "ml", f"train-{i}", {"cpu": 1000, "pods": 1},
                   labels={GROUP_LABEL: "train"}, phase=phase, node_name=node,
                   **kw)  # type: ignore[arg-type]


def decision(reason: str, message: str = "", since: float = NOW - 5) -> Decision:
    return Decision(Reason(reason), message or f"gang ml/train: {reason}", since)


def status(pods: list[PodInfo], dec: Decision | None = None, group: GroupInfo = GROUP,
           **kw: object) -> GroupStatus:
    st = compute_status(group, pods, dec, NOW, **kw)  # type: ignore[arg-type]
    assert st is not None
    return st


def test_no_pods_is_pending_waiting_for_members() -> None:
    st = status([])
    assert (st.phase, st.reason) == (PENDING, Reason.WAITING_FOR_MEMBERS)
    assert st.message == "gang ml/train: 0 of 3 members exist"
    assert st.condition(SCHEDULED).status == "False"  # type: ignore[union-attr]
    assert st.schedule_start_time == ""
    assert "scheduleStartTime" not in st.to_k8s()


def test_too_few_members_is_pending_even_if_the_framework_said_more() -> None:
    st = status([pod(0), pod(1)], decision(Reason.WAITING_FOR_MEMBERS, "gang ml/train: 1 of 3"))
    assert (st.phase, st.reason, st.members) == (PENDING, Reason.WAITING_FOR_MEMBERS, 2)
    assert "2 of 3 members exist" in st.message


def test_gated_deleting_and_finished_pods_are_not_members() -> None:
    pods = [pod(0), pod(1, gated=True), pod(2, deleting=True), pod(3, "Succeeded", "n1")]
    st = status(pods)
    assert (st.phase, st.members, st.succeeded) == (PENDING, 1, 1)


def test_quorum_present_not_yet_planned_is_pending_queued() -> None:
    st = status([pod(0), pod(1), pod(2)])
    assert (st.phase, st.reason) == (PENDING, Reason.QUEUED)
    assert st.schedule_start_time == ""


@pytest.mark.parametrize("reason", [Reason.INSUFFICIENT_CAPACITY, Reason.WAITING_BEHIND_OLDER_GANG,
                                    Reason.RESERVED, Reason.BACKING_OFF])
def test_tried_gang_is_scheduling_with_the_framework_reason(reason: str) -> None:
    msg = "gang ml/train: needs 3 × {cpu: 1}; 2 fit; largest shortfall on cpu"
    st = status([pod(0), pod(1), pod(2)], decision(reason, msg, since=NOW - 7))
    assert (st.phase, st.reason, st.message) == (SCHEDULING, reason, msg)
    assert st.schedule_start_time == rfc3339(NOW - 7)
    assert st.to_k8s()["conditions"][0]["status"] == "False"


def test_quorum_bound_not_running_yet_is_scheduling_and_scheduled() -> None:
    pods = [pod(0, node="n1"), pod(1, node="n1"), pod(2, node="n2")]
    st = status(pods, decision(Reason.BOUND, "gang ml/train: quorum of 3 bound"))
    assert (st.phase, st.reason, st.bound) == (SCHEDULING, Reason.BOUND, 3)
    assert st.condition(SCHEDULED).status == "True"  # type: ignore[union-attr]
    assert st.message == "gang ml/train: quorum of 3 bound"


def test_running_quorum_with_a_pending_elastic_extra() -> None:
    pods = [pod(i, "Running", "n1") for i in range(3)] + [pod(3)]
    st = status(pods, decision(Reason.BOUND))
    assert (st.phase, st.running, st.bound, st.members) == (RUNNING, 3, 3, 4)
    assert st.reason == Reason.BOUND


def test_running_after_restart_without_framework_decision() -> None:
    pods = [pod(i, "Running", "n1") for i in range(3)]
    st = status(pods, None)
    assert (st.phase, st.reason) == (RUNNING, Reason.BOUND)
    assert st.message == "gang ml/train: quorum of 3 bound"
    assert st.schedule_start_time == rfc3339(NOW)


def test_partly_finished_quorum_stays_running_although_framework_waits_for_members() -> None:
    pods = [pod(0, "Succeeded", "n1"), pod(1, "Running", "n1"), pod(2, "Running", "n2")]
    st = status(pods, decision(Reason.WAITING_FOR_MEMBERS, "gang ml/train: 2 of 3 members exist"))
    assert (st.phase, st.reason, st.running, st.succeeded) == (RUNNING, Reason.BOUND, 2, 1)


def test_all_succeeded_is_finished() -> None:
    pods = [pod(i, "Succeeded", "n1") for i in range(3)]
    st = status(pods, decision(Reason.BOUND))
    assert (st.phase, st.succeeded, st.bound, st.reason) == (FINISHED, 3, 0, Reason.BOUND)


def test_quorum_succeeded_but_an_extra_still_running_is_running_then_finished() -> None:
    pods = [pod(i, "Succeeded", "n1") for i in range(3)] + [pod(3, "Running", "n2")]
    assert status(pods, decision(Reason.BOUND)).phase == RUNNING
    pods[3] = pod(3, "Succeeded", "n2")
    assert status(pods, decision(Reason.BOUND)).phase == FINISHED


def test_quorum_succeeded_with_an_extra_never_placed_is_finished() -> None:
    pods = [pod(i, "Succeeded", "n1") for i in range(3)] + [pod(3)]
    assert status(pods, decision(Reason.WAITING_FOR_MEMBERS)).phase == FINISHED


def test_elastic_member_failure_keeps_running_while_quorum_can_hold() -> None:
    group = GroupInfo("ml", "train", 2, uid="g1")
    pods = [pod(0, "Failed", "n1"), pod(1, "Running", "n1"), pod(2, "Running", "n2")]
    st = status(pods, decision(Reason.BOUND), group=group)
    assert (st.phase, st.failed, st.running) == (RUNNING, 1, 2)
    assert st.condition(FAILED_CONDITION) is None


def test_member_failure_that_breaks_the_quorum_is_failed_and_named() -> None:
    pods = [pod(0, "Failed", "n1"), pod(1, "Running", "n1"), pod(2, "Running", "n2")]
    st = status(pods, decision(Reason.WAITING_FOR_MEMBERS, "gang ml/train: 2 of 3 members exist"))
    assert (st.phase, st.failed, st.running) == (FAILED_PHASE, 1, 2)
    cond = st.condition(FAILED_CONDITION)
    assert cond is not None and cond.reason == Reason.MEMBER_FAILED and cond.status == "True"
    assert "train-0" in cond.message and "minMember 3" in cond.message
    # It ran whole before it broke.
    assert st.condition(SCHEDULED).status == "True"  # type: ignore[union-attr]


def test_failed_member_replaced_goes_back_to_scheduling() -> None:
    pods = [pod(0, "Failed", "n1"), pod(1, "Running", "n1"), pod(2, "Running", "n2"), pod(3)]
    st = status(pods, decision(Reason.RESERVED, "gang ml/train: reserved 1 slot(s)"))
    assert (st.phase, st.reason) == (SCHEDULING, Reason.RESERVED)
    assert st.condition(FAILED_CONDITION) is None


def test_all_failed_is_failed() -> None:
    pods = [pod(i, "Failed", "n1") for i in range(3)]
    st = status(pods, decision(Reason.BOUND))
    assert st.phase == FAILED_PHASE


def test_quorum_succeeded_and_a_member_failed_is_finished() -> None:
    pods = [pod(i, "Succeeded", "n1") for i in range(3)] + [pod(3, "Failed", "n2")]
    assert status(pods, decision(Reason.BOUND)).phase == FINISHED


def test_retry_limit_reached_is_failed() -> None:
    msg = "gang ml/train: timed out 3 time(s) ...; retry limit 3 reached, the group is Failed"
    st = status([pod(0), pod(1), pod(2)], decision(Reason.FAILED, msg), retry_limit_reached=True)
    assert (st.phase, st.reason, st.message) == (FAILED_PHASE, Reason.RETRY_LIMIT_REACHED, msg)
    cond = st.condition(FAILED_CONDITION)
    assert cond is not None and cond.reason == Reason.RETRY_LIMIT_REACHED


def test_terminal_phase_is_kept_when_every_pod_is_gone() -> None:
    assert compute_status(GROUP, [], None, NOW, previous=Previous(phase=FINISHED)) is None
    assert compute_status(GROUP, [], None, NOW, previous=Previous(phase=FAILED_PHASE)) is None
    st = compute_status(GROUP, [], None, NOW, previous=Previous(phase=RUNNING))
    assert st is not None and st.phase == PENDING


def test_transition_time_moves_only_when_condition_status_changes() -> None:
    earlier = "2027-01-01T00:00:00Z"
    prev = Previous(phase=SCHEDULING, conditions={SCHEDULED: ("False", earlier)})
    pods = [pod(0), pod(1), pod(2)]
    st = status(pods, decision(Reason.INSUFFICIENT_CAPACITY), previous=prev)
    assert st.condition(SCHEDULED).last_transition == earlier  # type: ignore[union-attr]
    st = status([pod(i, node="n1") for i in range(3)], decision(Reason.BOUND), previous=prev)
    assert st.condition(SCHEDULED).last_transition == rfc3339(NOW)  # type: ignore[union-attr]


def test_schedule_start_time_and_occupied_by_are_kept() -> None:
    prev = Previous(phase=SCHEDULING, schedule_start_time="2027-01-01T00:00:00Z",
                    occupied_by="ml/train")
    st = status([pod(i, "Running", "n1") for i in range(3)], decision(Reason.BOUND), previous=prev)
    assert st.schedule_start_time == "2027-01-01T00:00:00Z"
    assert st.occupied_by == "ml/train"
    assert st.to_k8s()["occupiedBy"] == "ml/train"


def test_occupied_by_is_the_sorted_owner_list_like_scheduler_plugins() -> None:
    assert occupied_by("ml", [("trainer",), ("trainer",), ("alpha",)]) == "ml/alpha,ml/trainer"
    st = status([pod(0)], owners=[("trainer",)])
    assert st.occupied_by == "ml/trainer"


def test_previous_from_k8s_is_tolerant() -> None:
    assert Previous.from_k8s(None) == Previous()
    assert Previous.from_k8s({"phase": 3, "conditions": "x"}) == Previous()
    p = Previous.from_k8s({
        "phase": "Running", "scheduleStartTime": "2027-01-01T00:00:00Z",
        "conditions": [{"type": "Scheduled", "status": "True",
                        "lastTransitionTime": "2027-01-01T00:00:01Z"}, "junk"]})
    assert p.phase == "Running"
    assert p.conditions == {"Scheduled": ("True", "2027-01-01T00:00:01Z")}


def test_to_k8s_shape() -> None:
    st = status([pod(i, "Running", "n1") for i in range(3)], decision(Reason.BOUND))
    doc = st.to_k8s()
    assert set(doc) == {"phase", "running", "succeeded", "failed", "bound", "conditions",
                        "scheduleStartTime", "requeueState", "waitingForCapacitySince"}
    assert doc["conditions"][0].keys() == {"type", "status", "reason", "message",
                                           "lastTransitionTime"}
    assert doc["requeueState"] is None  # no backoff: null, so the merge patch removes it
    assert doc["waitingForCapacitySince"] is None  # not waiting: null, removed likewise


def test_requeue_state_keeps_the_backoff_in_whole_seconds_rounded_up() -> None:
    pods = [pod(i) for i in range(3)]
    backing_off = compute_status(GROUP, pods, decision(Reason.BACKING_OFF), NOW,
                                 requeue=(2, NOW + 19.2))
    assert backing_off is not None
    assert backing_off.to_k8s()["requeueState"] == {"count": 2,
                                                    "requeueAt": rfc3339(NOW + 20)}
    failed = compute_status(GROUP, pods, decision(Reason.FAILED), NOW,
                            retry_limit_reached=True, requeue=(3, 0.0))
    assert failed is not None and failed.to_k8s()["requeueState"] == {"count": 3}


def test_waiting_for_capacity_since_is_kept_in_whole_seconds_rounded_down() -> None:
    st = compute_status(GROUP, [pod(i) for i in range(3)],
                        decision(Reason.INSUFFICIENT_CAPACITY), NOW, waiting_since=NOW - 7.8)
    assert st is not None
    assert st.to_k8s()["waitingForCapacitySince"] == rfc3339(NOW - 8)


def test_life_of_a_gang() -> None:
    """Pending -> Scheduling -> Running -> Finished, with the reasons along the way."""
    seen = []
    steps: list[tuple[list[PodInfo], Decision | None]] = [
        ([pod(0)], None),
        ([pod(0), pod(1), pod(2)], decision(Reason.INSUFFICIENT_CAPACITY)),
        ([pod(0), pod(1), pod(2)], decision(Reason.RESERVED)),
        ([pod(0, node="a"), pod(1, node="a"), pod(2, node="b")], decision(Reason.BOUND)),
        ([pod(0, "Running", "a"), pod(1, "Running", "a"), pod(2, "Running", "b")],
         decision(Reason.BOUND)),
        ([pod(0, "Succeeded", "a"), pod(1, "Running", "a"), pod(2, "Running", "b")],
         decision(Reason.WAITING_FOR_MEMBERS)),
        ([pod(i, "Succeeded", "a") for i in range(3)], decision(Reason.BOUND)),
    ]
    prev = Previous()
    for pods, dec in steps:
        st = compute_status(GROUP, pods, dec, NOW, previous=prev)
        assert st is not None
        seen.append((st.phase, st.reason))
        prev = Previous.from_k8s(st.to_k8s())
    assert seen == [
        (PENDING, Reason.WAITING_FOR_MEMBERS),
        (SCHEDULING, Reason.INSUFFICIENT_CAPACITY),
        (SCHEDULING, Reason.RESERVED),
        (SCHEDULING, Reason.BOUND),
        (RUNNING, Reason.BOUND),
        (RUNNING, Reason.BOUND),
        (FINISHED, Reason.BOUND),
    ]

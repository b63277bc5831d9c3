"""The autoscaler stand-in's pure decisions (e2e/integrations/autoscaler_standin_plan.py):
how many pool nodes a ProvisioningRequest needs, and the conditions it gets next."""

from __future__ import annotations

from fractions import Fraction

from e2e.integrations.autoscaler_standin_plan import (
    ATOMIC,
    CHECK_CAPACITY,
    Resources,
    booked,
    booking_expired,
    decide,
    free_room,
    merge_conditions,
    nodes_needed,
    pod_requests,
    quantities,
    retry_due,
    served,
    unschedulable,
    usable_node,
)

NODE = quantities({"cpu": "4", "memory": "16Gi", "pods": "110"})


def pod(cpu: str, memory: str = "1Gi") -> Resources:
    return pod_requests({"containers": [{"resources": {"requests": {
        "cpu": cpu, "memory": memory}}}]})


def static(with_cpu_used: str) -> Resources:
    """A 4-CPU node running a pod of ``with_cpu_used``."""
    return free_room(NODE, [pod(with_cpu_used)])


def test_pod_requests_sum_containers_and_take_a_pod_slot() -> None:
    got = pod_requests({"containers": [
        {"resources": {"requests": {"cpu": "500m"}}}, {"resources": {"requests": {
            "cpu": "1", "memory": "1Gi"}}}, {"name": "no-requests"}]})
    assert got == {"pods": 1, "cpu": Fraction(3, 2), "memory": 2 ** 30}


def test_request_pods_go_to_new_nodes_when_existing_room_is_full() -> None:
    # two 3-CPU pods for two empty 4-CPU nodes' worth: one node each
    assert nodes_needed([], [], [pod("3")] * 2, NODE) == 2
    # two 1-CPU pods share a node
    assert nodes_needed([], [], [pod("1")] * 2, NODE) == 1


def test_existing_room_is_used_before_new_nodes() -> None:
    room = [static("1"), static("1")]  # 3 CPUs free on each
    assert nodes_needed(room, [], [pod("3")] * 4, NODE) == 2
    assert nodes_needed(room, [], [pod("3")] * 2, NODE) == 0


def test_pending_pods_that_fit_take_the_room_first() -> None:
    """The gang of four, short of two nodes: its four pending members take the two free
    slots first, so a request for the whole gang needs four nodes (as the autoscaler
    added), and a request for only the two without room needs two."""
    room = [static("1"), static("1")]
    members = [pod("3")] * 4
    assert nodes_needed(room, members, [pod("3")] * 4, NODE) == 4
    assert nodes_needed(room, members, [pod("3")] * 2, NODE) == 2


def test_pending_pods_that_fit_nowhere_take_nothing() -> None:
    room = [static("1"), static("1")]
    assert nodes_needed(room, [pod("64")] * 2, [pod("3")] * 2, NODE) == 0


def test_a_pod_bigger_than_a_pool_node_cannot_be_provisioned() -> None:
    assert nodes_needed([], [], [pod("3"), pod("5")], NODE) is None
    assert nodes_needed([], [], [pod("1", memory="17Gi")], NODE) is None


def test_atomic_request_scales_up_all_or_nothing() -> None:
    ok = decide(ATOMIC, {}, needed=2, headroom=4)
    assert ok.scale_up == 2
    assert [(c.type, c.status, c.reason) for c in ok.conditions] == [
        ("Accepted", "True", "Accepted"), ("Provisioned", "True", "CapacityIsProvisioned")]
    short = decide(ATOMIC, {"Accepted": "True"}, needed=2, headroom=1)
    assert short.scale_up == 0
    assert [(c.type, c.status, c.reason) for c in short.conditions] == [
        ("Provisioned", "False", "CapacityIsNotFound")]
    assert "needs 2 new nodes, the pool may add 1" in short.conditions[0].message
    impossible = decide(ATOMIC, {"Accepted": "True"}, needed=None, headroom=4)
    assert impossible.scale_up == 0 and impossible.conditions[0].status == "False"


def test_capacity_already_there_is_provisioned_without_nodes() -> None:
    for cls in (ATOMIC, CHECK_CAPACITY):
        d = decide(cls, {"Accepted": "True"}, needed=0, headroom=0)
        assert d.scale_up == 0
        assert [(c.type, c.status, c.reason) for c in d.conditions] == [
            ("Provisioned", "True", "CapacityIsFound")]


def test_check_capacity_never_scales_up_and_fails_only_with_no_retry() -> None:
    retry = decide(CHECK_CAPACITY, {"Accepted": "True"}, needed=1, headroom=4)
    assert retry.scale_up == 0
    assert [(c.type, c.status) for c in retry.conditions] == [("Provisioned", "False")]
    fail = decide(CHECK_CAPACITY, {"Accepted": "True"}, needed=1, headroom=4,
                  params={"noRetry": "true"})
    assert [(c.type, c.status, c.reason) for c in fail.conditions] == [
        ("Failed", "True", "CapacityIsNotFound")]


def test_only_undecided_requests_of_served_classes_are_served() -> None:
    assert served(ATOMIC, {}) and served(CHECK_CAPACITY, {"Provisioned": "False"})
    assert not served("queued-provisioning.gke.io", {})
    for done in ("Provisioned", "Failed", "BookingExpired"):
        assert not served(ATOMIC, {"Accepted": "True", done: "True"})


def test_retry_backoff_doubles_up_to_its_maximum() -> None:
    assert not retry_due(100.0, 101.9, attempts=1)
    assert retry_due(100.0, 102.0, attempts=1)
    assert not retry_due(100.0, 103.9, attempts=2)
    assert retry_due(100.0, 104.0, attempts=5)  # capped at 4 s


def test_booking_and_what_it_holds() -> None:
    assert not booking_expired(100.0, 699.0, 600.0)
    assert booking_expired(100.0, 700.0, 600.0)
    assert booked(4, 1) == 3 and booked(2, 5) == 0


def node(ready: str = "True", taints: tuple[str, ...] = (), made: bool = False,
         cordoned: bool = False) -> dict[str, object]:
    return {"metadata": {"annotations": {"kwok.x-k8s.io/node": "fake"} if made else {}},
            "spec": {"unschedulable": cordoned,
                     "taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def test_which_nodes_count_as_room() -> None:
    assert usable_node(node())
    assert not usable_node(node(ready="False"))
    assert not usable_node(node(cordoned=True))
    assert not usable_node(node(taints=("dedicated",)))
    # a static node not yet untainted is not room; a node the stand-in just made is
    assert not usable_node(node(taints=("node.kubernetes.io/not-ready",)))
    assert usable_node(node(taints=("node.kubernetes.io/not-ready",), made=True))
    assert not usable_node(node(taints=("node.kubernetes.io/not-ready", "dedicated"),
                                made=True))
    assert not usable_node({})  # no status: not Ready, no crash


def test_only_pods_the_scheduler_gave_up_on_are_pending_for_the_simulation() -> None:
    def p(node_name: str, status: str, why: str) -> dict[str, object]:
        return {"spec": {"nodeName": node_name}, "status": {"conditions": [
            {"type": "PodScheduled", "status": status, "reason": why}]}}

    assert unschedulable(p("", "False", "Unschedulable"))
    assert not unschedulable(p("n1", "False", "Unschedulable"))
    assert not unschedulable(p("", "False", "SchedulerError"))
    assert not unschedulable({"spec": {}})  # not looked at yet


def test_conditions_keep_their_transition_time_while_their_status_stays() -> None:
    first = merge_conditions([], decide(ATOMIC, {}, needed=2, headroom=1).conditions, "t1")
    assert [(c["type"], c["status"], c["lastTransitionTime"]) for c in first] == [
        ("Accepted", "True", "t1"), ("Provisioned", "False", "t1")]
    again = merge_conditions(first, decide(ATOMIC, {"Accepted": "True"}, needed=2,
                                           headroom=1).conditions, "t2")
    assert [c["lastTransitionTime"] for c in again] == ["t1", "t1"]
    done = merge_conditions(again, decide(ATOMIC, {"Accepted": "True"}, needed=2,
                                          headroom=2).conditions, "t3")
    assert [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in done] == [
        ("Accepted", "True", "Accepted", "t1"),
        ("Provisioned", "True", "CapacityIsProvisioned", "t3")]
    # a condition another writer set (the test's Failed) is kept
    kept = merge_conditions([{"type": "Failed", "status": "True", "reason": "Expired"}],
                            [], "t4")
    assert kept == [{"type": "Failed", "status": "True", "reason": "Expired"}]

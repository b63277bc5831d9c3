"""The soak's checker on synthetic watch events (no cluster): it must see what it is
there to see, or a clean soak would prove nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from e2e.harness.k8s import client
from e2e.soak.check.checker import Checker
from e2e.soak.check.quantity import HUGE, quantity
from e2e.soak.check.records import DECIDED_AT, NEIGHBOUR_LABEL, NodeRec


def pod(name: str, group: str | None, node: str = "", phase: str = "Pending",
        cpu: str = "1", uid: str | None = None, neighbour: str | None = None,
        scheduler: str | None = None, decided: str | None = None) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    if neighbour:
        labels[NEIGHBOUR_LABEL] = neighbour
    spec: dict[str, Any] = {"nodeName": node or None, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    md: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid or f"u-{name}",
                          "labels": labels}
    if decided is not None:
        md["annotations"] = {DECIDED_AT: decided}
    return {"metadata": md, "spec": spec, "status": {"phase": phase}}


@pytest.fixture
def checker() -> Checker:
    c = Checker(client.ApiClient(), partial_window=5.0, default_timeout=20.0,
                gang_scheduler="gangs")
    c.nodes["n1"] = NodeRec(cpu=4000, mem=8 << 30, pods=110)
    c.nodes["n2"] = NodeRec(cpu=4000, mem=8 << 30, pods=110)
    c.register_gang("ns/g", 3)
    return c


def test_quantities() -> None:
    assert quantity("250m", milli=True) == 250
    assert quantity("2", milli=True) == 2000
    assert quantity("512Mi") == 512 << 20
    assert quantity("1Gi") == 1 << 30
    assert quantity("110") == 110


def test_a_hostile_quantity_counts_as_huge_instead_of_raising() -> None:
    """The hostile mode's pods: the checker's watch must not raise (and relist) on them."""
    assert quantity("1e300000") == HUGE
    assert quantity("9e18", milli=True) == HUGE
    assert quantity("1e300000Mi") == HUGE


def test_a_burst_reaching_quorum_is_no_violation(checker: Checker) -> None:
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g"))
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g", node="n1"))
    checker.check_windows(checker.now() + 60)
    checker.stop()
    assert checker.violations == []
    assert checker.quorum_reached("ns/g")


def test_a_gang_stuck_short_of_quorum_is_a_violation(checker: Checker) -> None:
    checker._observe(pod("g-0", "g", node="n1"))
    checker.check_windows(checker.now() + 1)
    assert checker.violations == []  # still within the burst window
    checker.check_windows(checker.now() + 30)
    assert [v.kind for v in checker.violations] == ["partial"]
    # Still short past the recovery grace (2 x the 20 s default timeout): a partial
    # gang as well, a second invariant broken.
    checker.check_windows(checker.now() + 60)
    assert [v.kind for v in checker.violations] == ["partial", "partial-gang"]


def test_a_gang_short_of_quorum_at_the_end_is_a_violation(checker: Checker) -> None:
    checker._observe(pod("g-0", "g", node="n1"))
    checker.stop()
    assert [v.kind for v in checker.violations] == ["partial-at-end"]


def test_overcommit_counts_every_pod_and_frees_finished_ones(checker: Checker) -> None:
    checker._observe(pod("a", None, node="n1", phase="Running", cpu="2"))
    checker._observe(pod("b", None, node="n1", phase="Running", cpu="2"))
    assert checker.violations == []
    checker._observe(pod("a", None, node="n1", phase="Succeeded", cpu="2"))
    checker._observe(pod("c", None, node="n1", cpu="2"))
    assert checker.violations == []
    age(checker)
    checker._observe(pod("d", "g", node="n1", cpu="500m"))
    assert [v.kind for v in checker.violations] == ["overcommit"]
    checker._deleted("u-d")
    checker._deleted("u-c")
    checker._observe(pod("e", "g", node="n1", cpu="1"))
    assert len(checker.violations) == 1


def test_a_relist_treats_vanished_pods_as_deleted(checker: Checker) -> None:
    checker._observe(pod("a", None, node="n1", phase="Running", cpu="4"))
    checker._replace([pod("b", None, node="n1", phase="Running", cpu="4")])
    assert checker.violations == []
    assert set(checker.pods) == {"u-b"}


def test_a_pod_moving_node_is_a_violation(checker: Checker) -> None:
    checker._observe(pod("a", None, node="n1"))
    checker._observe(pod("a", None, node="n2"))
    assert [v.kind for v in checker.violations] == ["rebound"]


# ----- over-commit: whose binding made the node exceed ----------------------------------


def test_a_gang_commit_onto_capacity_a_pinned_pod_took_is_a_violation(
        checker: Checker) -> None:
    """The bug that went unseen while the soak's nodes were tainted: a spec.nodeName pod
    takes the node's cpu while the gang's binds are held, and the gang is bound anyway."""
    checker._observe(pod("pinned", None, node="n1", cpu="3", neighbour="direct"))
    bound_earlier(checker, "pinned", 2.0)  # long before the commit: the extender saw it
    checker._observe(pod("g-0", "g", node="n1"))
    assert checker.violations == []  # 4 of 4 cpu: full, not over
    checker._observe(pod("g-1", "g", node="n1"))
    [v] = checker.violations
    assert (v.kind, v.subject) == ("overcommit", "n1")
    assert "cpu 5000m/4000m" in v.detail and "ns/g-1" in v.detail
    assert "direct pinned 3000m bound 2.0" in v.detail  # the evidence names the neighbour
    assert checker.note_counts == {}


def bound_earlier(checker: Checker, name: str, seconds: float) -> None:
    """Move a pod's binding back in time (the race window is measured in seconds)."""
    rec = next(p for p in checker.pods.values() if p.name == name)
    assert rec.bound_at is not None
    g = checker.gangs.get(f"ns/{rec.gang}")
    if g is not None and g.first_bound_at == rec.bound_at:
        g.first_bound_at -= seconds
    rec.bound_at -= seconds


def age(checker: Checker, seconds: float = 10.0) -> None:
    """Every pod bound so far was bound `seconds` ago: no race."""
    for rec in checker.pods.values():
        if rec.bound_at is not None:
            rec.bound_at -= seconds


def test_a_neighbour_bound_just_before_the_commit_began_is_a_race(checker: Checker) -> None:
    """Two schedulers' Bindings milliseconds apart cannot see each other: noted, with
    the evidence, not a violation; the same with race_window=0 is one."""
    checker._observe(pod("g-0", "g", node="n2"))  # the commit began here
    bound_earlier(checker, "g-0", 0.3)
    checker._observe(pod("sched", None, node="n1", cpu="3", neighbour="scheduled"))
    checker._observe(pod("g-1", "g", node="n1"))
    checker._observe(pod("g-2", "g", node="n1"))
    assert checker.violations == []
    [n] = checker.notes
    assert n.kind == "overcommit-race" and "scheduled sched 3000m" in n.detail

    strict = Checker(client.ApiClient(), race_window=0)
    strict.nodes["n1"] = NodeRec(cpu=4000, mem=8 << 30, pods=110)
    strict.register_gang("ns/g", 2)
    strict._observe(pod("sched", None, node="n1", cpu="3", neighbour="scheduled"))
    strict._observe(pod("g-0", "g", node="n1"))
    strict._observe(pod("g-1", "g", node="n1"))
    assert [v.kind for v in strict.violations] == ["overcommit"]


def test_the_race_is_measured_from_the_start_of_the_quorum_burst(checker: Checker) -> None:
    """A neighbour bound after the gang's first Binding but long before the member that
    tipped the node is still a race: the extender committed the quorum at the start."""
    checker._observe(pod("g-0", "g", node="n2"))
    bound_earlier(checker, "g-0", 2.0)  # a slow burst
    checker._observe(pod("pinned", None, node="n1", cpu="3", neighbour="direct"))
    bound_earlier(checker, "pinned", 1.8)  # after g-0, 1.8 s (> race_window) before g-2
    checker._observe(pod("g-1", "g", node="n1"))
    checker._observe(pod("g-2", "g", node="n1"))
    assert checker.violations == [] and checker.note_counts == {"overcommit-race": 1}
    # An elastic extra bound later has no burst: its own Binding is the reference.
    checker.register_gang("ns/e", 1)
    checker._observe(pod("e-0", "e", node="n2", cpu="1"))
    checker._observe(pod("old", None, node="n2", cpu="2", neighbour="direct"))
    bound_earlier(checker, "old", 1.0)
    checker._observe(pod("e-1", "e", node="n2", cpu="1"))  # 5 of 4, "old" seen 1 s ago
    assert [v.kind for v in checker.violations] == ["overcommit"]


def decided(checker: Checker, ago: float) -> str:
    """The decided-at annotation of a Binding the extender decided `ago` seconds before
    now, as it writes it (its wall clock, RFC 3339 UTC with microseconds)."""
    t = checker.wall0 + checker.now() - ago
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_member_is_judged_at_its_own_decision_not_at_the_bursts_first_binding(
        checker: Checker) -> None:
    """The extender decides each Binding right before it sends it, against the node as
    it sees it then: a neighbour bound after the gang's first Binding but 1.8 s before
    this member's Binding was decided was in its view. A violation, where the rule
    anchored at the burst's first Binding called it a race."""
    checker._observe(pod("g-0", "g", node="n2", decided=decided(checker, 2.0)))
    bound_earlier(checker, "g-0", 2.0)  # a slow burst
    checker._observe(pod("pinned", None, node="n1", cpu="3", neighbour="direct"))
    bound_earlier(checker, "pinned", 1.8)
    checker._observe(pod("g-1", "g", node="n1", decided=decided(checker, 0.05)))
    assert checker.violations == []  # 4 of 4
    checker._observe(pod("g-2", "g", node="n1", decided=decided(checker, 0.05)))
    [v] = checker.violations
    assert v.kind == "overcommit" and "direct pinned 3000m" in v.detail
    assert checker.note_counts == {}
    assert (checker.decided_seen, checker.decided_missing) == (3, 0)


def test_a_neighbour_bound_after_the_decision_is_a_race_however_late_the_binding_shows(
        checker: Checker) -> None:
    """A Binding decided 1.2 s before the watch shows it (a slow POST, right after an
    API server restart): a neighbour bound in between could not be seen when the
    extender decided. A race, where the rule anchored at the Binding itself (an elastic
    extra's) called it a violation; one bound more than the window before the decision
    is still a violation."""
    checker.register_gang("ns/e", 1)
    checker._observe(pod("e-0", "e", node="n2", cpu="1"))
    checker._observe(pod("late", None, node="n2", cpu="3", neighbour="scheduled"))
    bound_earlier(checker, "late", 1.0)  # 0.2 s after the decision below
    checker._observe(pod("e-1", "e", node="n2", cpu="1", decided=decided(checker, 1.2)))
    assert checker.violations == []
    [n] = checker.notes
    assert n.kind == "overcommit-race" and "its Binding was decided" in n.detail
    assert "scheduled late 3000m" in n.detail
    assert 1.1 < checker.decided_lag_max < 1.3  # the report shows how late Bindings show

    checker._observe(pod("early", None, node="n1", cpu="3", neighbour="scheduled"))
    bound_earlier(checker, "early", 2.0)  # 0.8 s before the decision: in its view
    checker._observe(pod("e-2", "e", node="n1", cpu="1", decided=decided(checker, 1.2)))
    checker._observe(pod("e-3", "e", node="n1", cpu="1", decided=decided(checker, 1.2)))
    [v] = checker.violations
    assert v.kind == "overcommit" and "ns/e-3" in v.detail


def test_a_binding_without_a_readable_decision_falls_back_to_the_burst(
        checker: Checker) -> None:
    """Another scheduler's Binding carries no decided-at, and a value that is not an
    RFC 3339 time with a zone is ignored, not fatal: the commit is then taken to begin
    at the gang's first Binding of its quorum burst, as before."""
    checker._observe(pod("g-0", "g", node="n2", decided="yesterday"))
    bound_earlier(checker, "g-0", 2.0)
    checker._observe(pod("pinned", None, node="n1", cpu="3", neighbour="direct"))
    bound_earlier(checker, "pinned", 1.8)  # after g-0
    checker._observe(pod("g-1", "g", node="n1", decided="2026-11-28T23:57:01.000000"))
    checker._observe(pod("g-2", "g", node="n1"))
    assert checker.violations == [] and checker.note_counts == {"overcommit-race": 1}
    assert (checker.decided_seen, checker.decided_missing) == (0, 3)


def test_racers_only_excuse_an_overcommit_that_fits_without_them(checker: Checker) -> None:
    checker._observe(pod("old", None, node="n1", cpu="2", neighbour="direct"))
    bound_earlier(checker, "old", 5.0)
    checker._observe(pod("new", None, node="n1", cpu="1", neighbour="scheduled"))
    checker._observe(pod("g-0", "g", node="n1", cpu="1"))  # 4 of 4
    checker._observe(pod("g-1", "g", node="n1", cpu="1"))  # 4 without "new": fits
    assert checker.note_counts == {"overcommit-race": 1}
    checker._deleted("u-g-1")
    checker._observe(pod("g-2", "g", node="n1", cpu="2"))  # 5 without "new": exceeds
    [v] = checker.violations
    assert v.kind == "overcommit" and "direct old 2000m" in v.detail


def test_a_pod_of_the_gang_scheduler_without_a_group_label_counts_as_gang(
        checker: Checker) -> None:
    checker._observe(pod("a", None, node="n1", cpu="4", neighbour="scheduled"))
    age(checker)
    checker._observe(pod("plain", None, node="n1", cpu="1", scheduler="gangs"))
    assert [v.kind for v in checker.violations] == ["overcommit"]


def test_a_neighbour_that_overcommits_is_noted_not_a_violation(checker: Checker) -> None:
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g", node="n1", phase="Running"))
    checker._observe(pod("pinned", None, node="n1", cpu="2", neighbour="direct"))
    assert checker.violations == []
    assert checker.note_counts == {"overcommit-by-direct": 1}
    # A gang member bound onto the node a neighbour over-committed did not make it
    # exceed: noted apart, still no violation.
    checker.register_gang("ns/h", 1)
    checker._observe(pod("h-0", "h", node="n1"))
    assert checker.violations == []
    assert checker.note_counts == {"overcommit-by-direct": 1, "gang-onto-overcommitted": 1}
    # Once the neighbour is gone the node fits again; the next over-commit counts anew.
    checker._deleted("u-pinned")
    checker._observe(pod("sched", None, node="n1", cpu="1", neighbour="scheduled"))
    assert checker.counts() == {"overcommit-by-direct": 1, "gang-onto-overcommitted": 1,
                                "overcommit-by-scheduled": 1}
    assert checker.violations == []


def test_memory_and_pod_count_overcommit_too(checker: Checker) -> None:
    checker.nodes["n3"] = NodeRec(cpu=64000, mem=2 << 30, pods=2)
    checker._observe(pod("pinned", None, node="n3", cpu="100m", neighbour="direct"))
    age(checker)
    checker._observe(pod("g-0", "g", node="n3", cpu="100m"))
    checker._observe(pod("g-1", "g", node="n3", cpu="100m"))  # memory 3Gi of 2, pods 3/2
    assert [v.kind for v in checker.violations] == ["overcommit"]


def test_a_relist_frees_finished_pods_before_charging_new_ones(checker: Checker) -> None:
    checker._observe(pod("a", None, node="n1", phase="Running", cpu="4"))
    # Missed while the watch was down: a finished, then g-0 bound in its place.
    checker._replace([pod("g-0", "g", node="n1", cpu="4"),
                      pod("a", None, node="n1", phase="Succeeded", cpu="4")])
    assert checker.violations == [] and checker.note_counts == {}


def test_a_relist_blames_an_overcommit_on_the_gang(checker: Checker) -> None:
    """The order is lost on a relist: neighbours are charged first, so the gang member
    is blamed (a possible false positive, marked), never let through."""
    checker._replace([pod("g-0", "g", node="n1", cpu="2"),
                      pod("pinned", None, node="n1", cpu="3", neighbour="direct")])
    [v] = checker.violations
    assert v.kind == "overcommit" and "(relist)" in v.detail


# ----- partial gangs: short of quorum for longer than the recovery grace ---------------


def quorum(checker: Checker, gang: str = "g", n: int = 3) -> None:
    for i in range(n):
        checker._observe(pod(f"{gang}-{i}", gang, node="n1", phase="Running"))


def test_a_gang_left_partial_after_its_quorum_is_a_violation_after_the_grace(
        checker: Checker) -> None:
    """A commit cut short or a member lost after the quorum: the gang is partial; the
    extender's recovery has 2 x scheduleTimeoutSeconds to complete or evict it."""
    checker.register_gang("ns/t", 3, timeout=10)
    quorum(checker, "t")
    checker._deleted("u-t-1")  # evicted by someone, not by the driver
    assert checker.gang_vanished("ns/t") == 1
    checker.check_windows(checker.now() + 15)
    assert checker.violations == []  # within 2 x 10 s
    checker.check_windows(checker.now() + 25)
    [v] = checker.violations
    assert (v.kind, v.subject) == ("partial-gang", "ns/t")
    assert "2 of 3" in v.detail and "grace 20s" in v.detail
    checker.check_windows(checker.now() + 60)
    assert len(checker.violations) == 1  # one violation per episode


def test_the_grace_of_a_gang_without_timeout_uses_the_default(checker: Checker) -> None:
    quorum(checker)
    checker._deleted("u-g-0")
    checker.check_windows(checker.now() + 35)  # default 20 s: grace 40 s
    assert checker.violations == []
    checker.check_windows(checker.now() + 45)
    assert [v.kind for v in checker.violations] == ["partial-gang"]


def test_a_partial_gang_completed_within_the_grace_is_no_violation(checker: Checker) -> None:
    quorum(checker)
    checker._deleted("u-g-2")
    checker._observe(pod("g-2r", "g", node="n2", phase="Running"))  # its replacement
    checker.check_windows(checker.now() + 100)
    checker.stop()
    assert checker.violations == []
    assert checker.max_partial < 5


def test_a_partial_gang_evicted_whole_is_no_violation(checker: Checker) -> None:
    quorum(checker)
    for i in range(3):
        checker._deleted(f"u-g-{i}")
    checker.check_windows(checker.now() + 100)
    assert checker.violations == []
    assert checker.gang_vanished("ns/g") == 3


def test_members_deleted_by_the_driver_are_no_partial_gang(checker: Checker) -> None:
    quorum(checker)
    checker.gang_deleted("ns/g")
    checker._deleted("u-g-0")
    checker.check_windows(checker.now() + 100)
    checker.stop()
    assert checker.violations == []
    assert checker.gang_vanished("ns/g") == 0


def test_a_gang_partial_when_the_run_ends_is_a_violation(checker: Checker) -> None:
    quorum(checker)
    checker._deleted("u-g-0")
    checker.stop()
    assert [v.kind for v in checker.violations] == ["partial-gang"]


def test_elastic_extras_above_the_quorum_are_not_partial(checker: Checker) -> None:
    checker.register_gang("ns/e", 2)
    for i in range(4):
        checker._observe(pod(f"e-{i}", "e", node="n2", cpu="500m"))
    checker._deleted("u-e-3")
    checker._deleted("u-e-2")
    checker.check_windows(checker.now() + 100)
def evicted(name: str) -> dict[str, Any]:
    """The pod as the Eviction API leaves it just before deleting it."""
    p = pod(name, "g", node="n1", phase="Running")
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                  "reason": "EvictionByEvictionAPI"}]
    return p


def test_a_partial_eviction_is_a_violation(checker: Checker) -> None:
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g", node="n1", phase="Running"))
    checker._observe(evicted("g-0"))
    checker._deleted("u-g-0")  # one member evicted, the others keep running
    checker.check_windows(checker.now() + 10)  # past the window, within the grace
    assert [v.kind for v in checker.violations] == ["partial-eviction"]


def test_a_whole_eviction_is_not(checker: Checker) -> None:
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g", node="n1", phase="Running"))
    checker._observe(evicted("g-0"))
    checker._deleted("u-g-0")
    checker._observe(pod("g-1", "g", node="n1", phase="Succeeded"))  # finished meanwhile
    checker._observe(evicted("g-2"))
    checker._deleted("u-g-2")
    checker.check_windows(checker.now() + 10)
    assert checker.violations == []

"""The soak's checker on synthetic watch events (no cluster): it must see what it is
there to see, or a clean soak would prove nothing."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness.k8s import client
from e2e.soak.checker import Checker, NodeRec, quantity


def pod(name: str, group: str | None, node: str = "", phase: str = "Pending",
        cpu: str = "1", uid: str | None = None) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid or f"u-{name}",
                         "labels": labels},
            "spec": {"nodeName": node or None, "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase}}


@pytest.fixture
def checker() -> Checker:
    c = Checker(client.ApiClient(), partial_window=5.0)
    c.nodes["n1"] = NodeRec(cpu=4000, mem=8 << 30, pods=110)
    c.register_gang("ns/g", 3)
    return c


def test_quantities() -> None:
    assert quantity("250m", milli=True) == 250
    assert quantity("2", milli=True) == 2000
    assert quantity("512Mi") == 512 << 20
    assert quantity("1Gi") == 1 << 30
    assert quantity("110") == 110


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
    checker.check_windows(checker.now() + 60)
    assert [v.kind for v in checker.violations] == ["partial"]


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
    checker._observe(pod("d", None, node="n1", cpu="500m"))
    assert [v.kind for v in checker.violations] == ["overcommit"]
    checker._deleted("u-d")
    checker._deleted("u-c")
    checker._observe(pod("e", None, node="n1", cpu="1"))
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


def test_a_partial_eviction_is_a_violation(checker: Checker) -> None:
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g", node="n1", phase="Running"))
    checker._deleted("u-g-0")  # one member evicted, the others keep running
    checker.check_windows(checker.now() + 60)
    assert [v.kind for v in checker.violations] == ["partial-eviction"]


def test_a_whole_eviction_is_not(checker: Checker) -> None:
    for i in range(3):
        checker._observe(pod(f"g-{i}", "g", node="n1", phase="Running"))
    checker._deleted("u-g-0")
    checker._observe(pod("g-1", "g", node="n1", phase="Succeeded"))  # finished meanwhile
    checker._deleted("u-g-2")
    checker.check_windows(checker.now() + 60)
    assert checker.violations == []

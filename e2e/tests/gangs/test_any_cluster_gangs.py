"""Gang scheduling on any cluster where the gang scheduler is installed (issue 19): the
local control plane with the session's gang stack, kind, or CI's external run against the
local control plane with the stack started as deploy/ starts it. Pods are sized so that
exactly one fits on each node lent to the test (e2e/anycluster.py); only the API is read.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.anycluster import AnyCluster
from e2e.gang import Recorder
from e2e.harness.objects import create_podgroup
from e2e.harness.queries import get_pod, get_podgroup
from e2e.harness.waiting import NotYet, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.any_cluster]


def condition(ns: str, pod: str) -> str:
    for c in ((get_pod(ns, pod) or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message", ""))
    return ""


def scheduled(ns: str, group: str) -> dict[str, Any]:
    status = (get_podgroup(ns, group) or {}).get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "Scheduled":
            return dict(c)
    return {}


def test_a_gang_binds_only_once_its_last_member_exists(
        any_cluster: AnyCluster, namespace: str) -> None:
    ns, slots = namespace, any_cluster.nodes(3)
    create_podgroup(ns, "trio", 3)
    with Recorder(ns) as rec:
        for i in range(2):
            slots.pod(ns, f"trio-{i}", pod_group="trio")
        wait_for(lambda: "2 of 3 members exist" in condition(ns, "trio-0")
                 or NotYet(condition(ns, "trio-0")), 30, "trio-0 told it waits for members",
                 logs=slots.logs)
        time.sleep(1)
        assert rec.bound() == {}, "no member may bind before its gang exists"
        slots.pod(ns, "trio-2", pod_group="trio")
        wait_for(lambda: len(rec.bound("trio")) == 3 or NotYet(slots.bound(ns)), 30,
                 "the gang bound", logs=slots.logs)
        rec.assert_never_partial("trio", 3)
    assert sorted(slots.bound(ns).values()) == sorted(slots.nodes), "one member per node"


def test_a_gang_that_cannot_fit_whole_is_never_half_placed_and_says_why(
        any_cluster: AnyCluster, namespace: str) -> None:
    ns, slots = namespace, any_cluster.nodes(2)
    create_podgroup(ns, "wide", 3)
    with Recorder(ns) as rec:
        for i in range(3):
            slots.pod(ns, f"wide-{i}", pod_group="wide")
        def explained() -> dict[str, Any] | NotYet:
            st = scheduled(ns, "wide")
            # Unplaceable where the two nodes could never hold three, InsufficientCapacity
            # where other pods take the room.
            return st if st.get("reason") in ("InsufficientCapacity", "Unplaceable") \
                else NotYet(st)

        st = wait_for(explained, 30, "the PodGroup says why it waits", logs=slots.logs)
        assert "2 fit" in st["message"], st
        time.sleep(2)
        assert rec.bound() == {}, f"two of three fit, none may bind: {rec.history}"


def test_two_gangs_that_each_need_most_of_the_cluster_run_one_after_the_other(
        any_cluster: AnyCluster, namespace: str) -> None:
    """Each gang needs 3 of the 4 nodes: the older runs whole, the younger waits whole
    and starts once the older has finished; they never interleave."""
    ns, slots = namespace, any_cluster.nodes(4)
    create_podgroup(ns, "older", 3)
    time.sleep(1.1)  # creationTimestamp has second resolution
    create_podgroup(ns, "younger", 3)
    with Recorder(ns) as rec:
        for g in ("older", "younger"):
            for i in range(3):
                slots.pod(ns, f"{g}-{i}", pod_group=g, run_seconds=3)

        def done() -> bool | NotYet:
            finished = [n for n, r in rec.pods.items() if r.phase == "Succeeded"]
            return len(finished) == 6 or NotYet({n: r.phase for n, r in rec.pods.items()})

        wait_for(done, 90, "both gangs ran to completion", logs=slots.logs)
        rec.assert_never_partial("older", 3)
        rec.assert_never_partial("younger", 3)
        older_done = sorted(r.phase_at["Succeeded"] for n, r in rec.pods.items()
                            if n.startswith("older"))
        assert max(rec.bind_times("older")) < min(rec.bind_times("younger")), rec.history
        # One node was free all along: the younger fits once two older members are done.
        assert min(rec.bind_times("younger")) >= older_done[1] - 0.5, (
            f"the younger gang started before the older one's nodes were free: {rec.history}")

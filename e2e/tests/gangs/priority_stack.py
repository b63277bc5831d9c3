"""The priorities stack: an extender and a stock kube-scheduler of their own (profile
`gang-priority-e2e`, `--starvation-after 10`, `E2E_PRIORITY_ARGS` appended), the
PriorityClasses a test makes and removes, and what the tests read of it (a pod gone or
going, a gang's line in the queue). The priority, unplaceable and DRA tests run on it, so
it is a module of its own rather than a test module the others import from."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gang import DEFAULT_ARGS, GangStack, scheduler_config, start_extender
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.k8s import client
from e2e.harness.process import free_port
from e2e.harness.queries import get_pod
from e2e.harness.target import kube

SCHED = "gang-priority-e2e"
STARVATION_AFTER = 10.0


@pytest.fixture(scope="module")
def prio(control_plane: Cluster) -> Iterator[GangStack]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane")
    port = free_port()
    args = [*DEFAULT_ARGS, "--scheduler-name", SCHED, "--starvation-after",
            f"{STARVATION_AFTER:g}", *os.environ.get("E2E_PRIORITY_ARGS", "").split()]
    ext = start_extender(control_plane, port, args, "gang-extender-priorities")
    config = scheduler_config(port)
    config["profiles"][0]["schedulerName"] = SCHED
    sched = control_plane.start_scheduler(config, "gang-kube-scheduler-priorities")
    yield GangStack(control_plane, port, ext, sched, args)
    for p in (sched, ext):
        with contextlib.suppress(Exception):
            p.stop()


@pytest.fixture
def classes() -> Iterator[dict[str, str]]:
    """PriorityClasses low (1000), high (2000) and high-never (2000, Never), named per
    test (they are cluster-wide)."""
    api = client.SchedulingV1Api(kube().api)
    suffix = os.urandom(3).hex()
    made = {}
    for key, value, never in (("low", 1000, False), ("high", 2000, False),
                              ("high-never", 2000, True)):
        name = f"e2e-{key}-{suffix}"
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": name}, "value": value}
        if never:
            body["preemptionPolicy"] = "Never"
        api.create_priority_class(body, _preload_content=False)
        made[key] = name
    yield made
    for name in made.values():
        with contextlib.suppress(Exception):
            api.delete_priority_class(name, _preload_content=False)


def gone(ns: str, name: str) -> bool:
    pod = get_pod(ns, name)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def queue_message(stack: GangStack, gang: str) -> str:
    for row in stack.debug()["queue"]:
        if row["gang"] == gang:
            return str(row["message"])
    return ""

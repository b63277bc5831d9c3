"""A commit's Bindings in flight keep their capacity whatever happens to their gang
(architecture.md, "A Binding in flight"), on the real control plane.

A 200-pod gang is committed directly while kube-scheduler runs no cycle; its PodGroup is
deleted as soon as the first member lands, with its Bindings still in flight, and plain
pods of the gang scheduler, each as big as what a node would have free without the
gang, wait in kube-scheduler's queue for that moment. Before the fix the deletion freed
the capacity of every member still in flight, the extender let plain pods bind onto it,
and both landed: more CPU bound to a node than it has.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.test_direct_commit import kube_scheduler_paused

pytestmark = pytest.mark.e2e

_NODE_CPU_MILLI = 16_000


def _cpu_milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def cpu_bound_per_node(ns: str) -> dict[str, int]:
    """CPU requested by the pods of `ns` bound to each node, from the API."""
    used: dict[str, int] = {}
    for p in kube().core.list_namespaced_pod(ns).items:
        if not p.spec.node_name or (p.status and p.status.phase in ("Succeeded", "Failed")):
            continue
        for c in p.spec.containers:
            req: dict[str, Any] = (c.resources.requests or {}) if c.resources else {}
            used[p.spec.node_name] = (used.get(p.spec.node_name, 0)
                                      + _cpu_milli(str(req.get("cpu", "0"))))
    return used


def test_a_podgroup_deleted_mid_commit_frees_no_capacity_still_in_flight(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    fake_nodes.add_nodes(20, prefix="race", cpu="16", memory="64Gi")
    with Recorder(ns) as rec:
        with kube_scheduler_paused(gang):
            # First in kube-scheduler's queue once it runs again: 8 CPU each, which a
            # node holding its 10 members (15 CPU) cannot take, and one without them can.
            for i in range(40):
                create_pod(ns, f"plain-{i}", cpu="8", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER)
            create_podgroup(ns, "race", 200, timeout=120)
            for i in range(200):
                create_pod(ns, f"race-{i}", cpu="1500m", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER, pod_group="race")
            wait_for(lambda: rec.bound("race") or NotYet(len(rec.bound("race"))), 60,
                     "the commit's first Binding", interval=0.005, logs=gang.logs())
            kube().custom.delete_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "race")
        deleted_with = len(rec.bound("race"))

        def settled() -> bool | NotYet:
            flying = gang.debug()["bindingsInFlight"]
            return not flying or NotYet(flying)

        wait_for(settled, 60, "no Binding in flight", logs=gang.logs())
        time.sleep(3)  # kube-scheduler's retries of the plain pods
    used = cpu_bound_per_node(ns)
    over = {n: u for n, u in used.items() if u > _NODE_CPU_MILLI}
    print(f"MEASURED podgroup deleted with {deleted_with} of 200 members bound; "
          f"{len(rec.bound('race'))} landed, {len(rec.bound()) - len(rec.bound('race'))} "
          f"plain pods bound")
    assert not over, f"CPU bound beyond 16 on {over}"

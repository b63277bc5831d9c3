"""A gang whose member's pod affinity selects no pod yet waits for it, on the real control
plane (issue 42, "Unplaceable means never"; docs/topology.md).

The issue's case: 3 members × 4 CPU on four 4-CPU nodes of one zone, the third with a
required pod affinity (topologyKey the zone) to `app=db`, which no pod has yet. Before,
the gang was set aside as `Unplaceable` ("can never be placed ... even emptied of every
pod"), the test was made again only when nodes changed, and when a matching pod was then
bound onto one node the gang was still not placed 40 s later while three nodes were free.
Now it says `WaitingForPodAffinity` and is placed whole once the pod is there.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.k8s import ApiException
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_podgroup
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
SET = "e2e.example.com/set"
AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}]}}


def scheduled(ns: str, name: str) -> dict[str, Any]:
    st = (get_podgroup(ns, name) or {}).get("status") or {}
    return next((dict(c) for c in st.get("conditions") or [] if c.get("type") == "Scheduled"),
                {})


def provisioning_requests(ns: str) -> list[str] | None:
    """Names of the ProvisioningRequests in `ns`; None when the API is not served."""
    try:
        raw = kube().custom.list_namespaced_custom_object(
            "autoscaling.x-k8s.io", "v1", ns, "provisioningrequests", _preload_content=False)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return [r["metadata"]["name"] for r in json.loads(raw.data)["items"]]


def test_a_gang_waiting_for_its_pod_affinity_target_is_placed_once_it_appears(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = [fake_nodes.add_node(f"{ns}-aff{i}", cpu="4", memory="8Gi",
                                 labels={ZONE: ns, SET: ns}) for i in range(4)]
    create_podgroup(ns, "g", 3)
    with Recorder(ns) as rec:
        for i in range(3):
            create_pod(ns, f"g-{i}", cpu="4", scheduler_name=GANG_SCHEDULER, pod_group="g",
                       node_selector={SET: ns},
                       spec_extra={"affinity": AFFINITY} if i == 2 else None)

        def waiting() -> dict[str, Any] | NotYet:
            c = scheduled(ns, "g")
            return c if c.get("reason") == "WaitingForPodAffinity" else NotYet(c)

        cond = wait_for(waiting, 20, "the PodGroup says WaitingForPodAffinity",
                        logs=gang.logs())
        assert isinstance(cond, dict)
        message = str(cond.get("message", ""))
        assert f"gang {ns}/g: waits for a pod" in message, message
        assert f"member {ns}/g-2" in message and "app=db" in message, message
        time.sleep(3)  # a few ticks: still waiting, nothing bound, nothing asked for
        assert scheduled(ns, "g").get("reason") == "WaitingForPodAffinity", scheduled(ns, "g")
        assert rec.bound() == {}, rec.bound()
        requests = provisioning_requests(ns)
        assert not requests, requests  # None (not served) or none made
        # The pod it waits for, bound onto one node: the other three take the gang.
        created = time.monotonic()
        create_pod(ns, "db", cpu="100m", labels={"app": "db"},
                   spec_extra={"nodeName": nodes[3]})
        wait_for(lambda: len(rec.bound("g")) == 3 or NotYet((rec.bound(), scheduled(ns, "g"))),
                 30, "the gang bound whole once its affinity's pod is there",
                 logs=gang.logs())
        last = max(rec.bind_times("g"))
        rec.assert_never_partial("g", 3)
        where = {r.node for r in rec.bound("g").values()}
    elapsed = last - created
    print(f"MEASURED affinity wait: target pod created -> gang of 3 bound in {elapsed:.2f}s")
    assert where == set(nodes[:3]), where

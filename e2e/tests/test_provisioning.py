"""Gangs on an autoscaled node pool (issue 31): the real Cluster Autoscaler (kwok provider,
:mod:`e2e.autoscaler`) grows a pool of fake nodes for ProvisioningRequests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.autoscaler import (
    ATOMIC,
    GROUP,
    PLURAL,
    VERSION,
    Autoscaler,
    conditions,
    requests_in,
)
from e2e.harness.cluster import Cluster, ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.fixtures import NotYet, kube, wait_for
from e2e.operators import obtain_operator

pytestmark = pytest.mark.e2e

LOGS = ["cluster-autoscaler", "gang-extender", "gang-kube-scheduler", "fake-kubelet"]
NODE_CPU, MEMBER_CPU = "4", "3"


@pytest.fixture(scope="module")
def autoscaler(control_plane: Cluster, fake_kubelet: FakeKubelet) -> Iterator[Autoscaler]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the Cluster Autoscaler as a local process on the local control plane")
    a = Autoscaler(control_plane, obtain_operator("cluster-autoscaler"))
    a.install()
    try:
        yield a
    finally:
        a.stop()


def pod_template(ns: str, name: str, cpu: str) -> None:
    kube().core.create_namespaced_pod_template(ns, {
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{
            "name": "main", "image": "busybox:1.36",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}})


def create_request(ns: str, name: str, template: str, count: int,
                   cls: str = ATOMIC) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ProvisioningRequest",
            "metadata": {"name": name},
            "spec": {"provisioningClassName": cls,
                     "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}}
    out: dict[str, Any] = kube().custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, body)
    return out


def test_autoscaler_provisions_a_hand_made_request(autoscaler: Autoscaler,
                                                   namespace: str) -> None:
    pool = f"pool-{namespace[-6:]}"
    autoscaler.start(pool, max_size=4, cpu=NODE_CPU)
    pod_template(namespace, "members", MEMBER_CPU)
    create_request(namespace, "by-hand", "members", 2)

    def provisioned() -> object:
        reqs = requests_in(namespace)
        conds = conditions(reqs[0]) if reqs else {}
        return conds.get("Provisioned") == "True" or NotYet(conds)

    wait_for(provisioned, 60, "request Provisioned", logs=LOGS)
    nodes = autoscaler.nodes(pool)
    assert len(nodes) == 2, nodes

    def untainted() -> object:
        taints = {n: [t["key"] for t in (kube().core.read_node(n).to_dict()["spec"]
                                          .get("taints") or [])] for n in nodes}
        return all(not t for t in taints.values()) or NotYet(taints)

    wait_for(untainted, 30, "the autoscaler's nodes untainted", logs=LOGS)

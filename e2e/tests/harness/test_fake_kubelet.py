"""Fake kubelet and fake node behaviour other tests take for granted."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import orjson
import pytest

from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import create_pod, delete_pod
from e2e.harness.queries import get_pod, pod_phases
from e2e.harness.rawapi import STRATEGIC_MERGE_PATCH, RawApi, RawApiError
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for, wait_pods_phase

pytestmark = pytest.mark.e2e


def test_node_is_ready_untainted_with_capacity(fake_nodes: NodeSet, namespace: str) -> None:
    name = fake_nodes.add_node(f"{namespace}-gpu", cpu="16", memory="64Gi", gpus=4,
                               labels={"pool": "a"})
    node = kube().core.read_node(name)
    assert node.metadata.labels["harness/fake-kubelet"] == "true"
    assert node.metadata.labels["kubernetes.io/hostname"] == name
    assert node.metadata.labels["pool"] == "a"
    assert not node.spec.taints  # the admission-added not-ready taint is gone
    assert node.status.allocatable["nvidia.com/gpu"] == "4"
    assert node.status.allocatable["cpu"] == "16"
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True"
    fake_nodes.cordon(name)
    assert kube().core.read_node(name).spec.unschedulable is True
    fake_nodes.uncordon(name)
    assert not kube().core.read_node(name).spec.unschedulable


def test_fail_annotation_and_force_delete(fake_nodes: NodeSet, namespace: str) -> None:
    node = fake_nodes.add_node(f"{namespace}-0")
    create_pod(namespace, "bad", run_seconds=0.5, fail=True, spec_extra={"nodeName": node})
    create_pod(namespace, "forever", spec_extra={"nodeName": node})
    wait_pods_phase(namespace, "Failed", 1, timeout=20)

    def running_ready() -> object:
        pod = get_pod(namespace, "forever") or {}
        st = pod.get("status") or {}
        conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
        ok = st.get("phase") == "Running" and conds.get("Ready") == "True" and st.get("podIP")
        return pod if ok else NotYet(st)

    wait_for(running_ready, 20, "pod forever Running and Ready")
    bad = get_pod(namespace, "bad")
    assert bad is not None
    term = bad["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 1
    # A graceful delete (30 s grace) completes at once: the kubelet force-deletes.
    delete_pod(namespace, "forever", grace_seconds=30)
    wait_for(lambda: "forever" not in pod_phases(namespace), 10, "pod forever gone")


def test_status_written_like_a_kubelet(fake_nodes: NodeSet, namespace: str) -> None:
    """Every field the kubelet loop writes, Running and then Succeeded (what the job
    controller, the extender and the benchmark's watchers read)."""
    node = fake_nodes.add_node(f"{namespace}-0")
    init = [{"name": "setup", "image": "busybox:1.36", "command": ["true"]}]
    create_pod(namespace, "done", run_seconds=3,
               spec_extra={"nodeName": node, "initContainers": init})

    def running() -> object:
        st = (get_pod(namespace, "done") or {}).get("status") or {}
        return st if st.get("phase") == "Running" else NotYet(st)

    st: Any = wait_for(running, 20, "pod done Running")
    node_ip = next(a.address for a in kube().core.read_node(node).status.addresses
                   if a.type == "InternalIP")
    assert st["hostIP"] == node_ip and st["hostIPs"] == [{"ip": node_ip}]
    assert ipaddress.ip_address(st["podIP"]) in ipaddress.ip_network("10.128.0.0/12")
    assert st["podIPs"] == [{"ip": st["podIP"]}] and st["startTime"]
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
        assert conds[t] == "True", t
    (main,) = st["containerStatuses"]
    assert main["name"] == "main" and main["ready"] and main["started"]
    assert main["image"] == "busybox:1.36" and "running" in main["state"]
    assert main["containerID"].startswith("containerd://")
    (setup,) = st["initContainerStatuses"]
    assert setup["state"]["terminated"]["reason"] == "Completed"

    wait_pods_phase(namespace, "Succeeded", 1, timeout=20)
    st = (get_pod(namespace, "done") or {})["status"]
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds["Ready"] == "False" and conds["ContainersReady"] == "False"
    term = st["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    assert term["startedAt"] <= term["finishedAt"]


def test_raw_api_keeps_connections_and_maps_errors(control_plane: Cluster,
                                                   namespace: str) -> None:
    """The fake kubelet's lean client: one keep-alive connection per thread (a new TLS
    handshake per call is what made it expensive), non-2xx as RawApiError with the status
    the retry logic keys on, and a connection the server dropped replaced transparently."""
    raw = RawApi(control_plane.api_client())
    try:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                "data": {"a": "1"}}
        raw.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)
        path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
        conn = raw._connection()
        sock = conn.sock
        for i in range(5):
            raw.request("PATCH", path, body={"data": {"a": str(i)}},
                        content_type=STRATEGIC_MERGE_PATCH)
        assert conn.sock is sock and len(raw._connections) == 1
        assert orjson.loads(raw.request("GET", path))["data"] == {"a": "4"}
        with pytest.raises(RawApiError) as err:
            raw.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/absent")
        assert err.value.status == 404
        with pytest.raises(RawApiError) as err:
            raw.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)
        assert err.value.status == 409
        with pytest.raises(RawApiError) as err:  # a uid precondition, as the force delete uses
            raw.request("DELETE", path, {"gracePeriodSeconds": 0},
                        body={"preconditions": {"uid": "not-its-uid"}})
        assert err.value.status == 409

        # A keep-alive connection the server has closed: the request goes out again on a
        # fresh one instead of failing.
        mine, peer = socket.socketpair()
        peer.close()
        assert conn.sock is not None
        conn.sock.close()
        conn.sock = mine
        raw.request("DELETE", path)
        assert conn.sock is not None and conn.sock is not mine
        with pytest.raises(RawApiError) as err:
            raw.request("GET", path)
        assert err.value.status == 404
    finally:
        raw.close()

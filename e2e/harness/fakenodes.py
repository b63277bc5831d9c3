"""Fake nodes: the Node object a kubelet would register, and the node changes tests make
(add, cordon, mark not Ready, delete with its pods).

Why apart: tests change nodes synchronously, in their own process, through plain API
calls, while the kubelet loop (:mod:`e2e.harness.kubelet.loop`) runs elsewhere and only
discovers the nodes by label; the node template is also what a Cluster Autoscaler's
``kwok`` provider copies (e2e/integrations/autoscaler.py), with no kubelet at all.

Nodes made by a node provisioner (a Cluster Autoscaler's ``kwok`` provider, which creates
Node objects from a template carrying this label and a Ready status, marks them with
:data:`PROVIDER_NODE_ANNOTATION`): the TaintNodesByCondition admission plugin gives every
new node the ``not-ready`` taint, and the node-lifecycle controller that would lift it
does not run here. :class:`FakeNodes` lifts it itself for the nodes it adds; for those the
kubelet loop lifts it (:func:`provider_node_to_untaint`), once the node reports Ready, as
that controller would.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ipaddress
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .k8s import ApiException, client

FAKE_NODE_LABEL = "harness/fake-kubelet"
FAKE_NODE_SELECTOR = f"{FAKE_NODE_LABEL}=true"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
PROVIDER_NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""Value ``fake``: a node a provisioner made (the annotation kwok's controller manages)."""
KUBELET_VERSION = "v1.36.3"


def now_rfc3339() -> str:
    """Now, as the API writes a condition's time (the fake kubelet's and the autoscaler
    stand-in's writes)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s: str) -> float:
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@functools.cache
def _network(net: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """Parsed once: ``ip_network`` is slow enough to show in a per-pod profile."""
    return ipaddress.ip_network(net)


def fake_ip(seed: str, net: str) -> str:
    """A stable pseudo-random address in ``net`` (pod/node IPs only need to look real)."""
    n = _network(net)
    h = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    return str(n.network_address + 1 + h % (n.num_addresses - 2))


def node_manifest(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: int = 110,
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    extra_resources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Ready Node object with capacity == allocatable, as a kubelet would register it.

    Status is accepted on Node create (kubelets register that way), so one call suffices.
    """
    res: dict[str, str] = {
        "cpu": str(cpu), "memory": str(memory), "pods": str(pods),
        "ephemeral-storage": "100Gi",
    }
    if gpus:
        res["nvidia.com/gpu"] = str(gpus)
    res.update(extra_resources or {})
    now = now_rfc3339()

    def cond(t: str, s: str, reason: str) -> dict[str, Any]:
        return {"type": t, "status": s, "reason": reason, "message": "fake kubelet",
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", FAKE_NODE_LABEL: "true", **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints]},
        "status": {
            "capacity": res, "allocatable": dict(res),
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                cond("Ready", "True", "KubeletReady"),
            ],
            "addresses": [{"type": "InternalIP", "address": fake_ip(name, "172.30.0.0/16")},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.1.0",
                "osImage": "fake", "containerRuntimeVersion": "fake://1.0",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def _drain(resp: Any) -> None:
    """Read a raw (``_preload_content=False``) response to its end.

    urllib3 hands a connection back to its pool only once the body is read; an unread one
    is dropped, and the next call pays a new TLS handshake (milliseconds of CPU).
    """
    resp.read()


class FakeNodes:
    """Create, cordon and delete fake nodes through the API.

    Separate from the kubelet loop so tests manipulate nodes synchronously in their own
    process while the loop runs elsewhere.
    """

    def __init__(self, api_client: Any) -> None:
        self.v1 = client.CoreV1Api(api_client)

    def add_node(
        self,
        name: str,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: int = 110,
        gpus: int = 0,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        extra_resources: Mapping[str, str] | None = None,
    ) -> str:
        """Register a Ready fake node and return its name.

        The TaintNodesByCondition admission plugin adds ``node.kubernetes.io/not-ready`` to
        every new node; the node-lifecycle controller would remove it, but that controller
        does not run here, so this does. ``taints`` are dicts like
        ``{"key": "k", "value": "v", "effect": "NoSchedule"}``.
        """
        body = node_manifest(name, cpu, memory, pods, gpus, labels, taints, extra_resources)
        created = self.v1.create_node(body, _preload_content=False)
        obj = json.loads(created.data)
        have = obj.get("spec", {}).get("taints") or []
        if any(t.get("key") == NOT_READY_TAINT for t in have):
            self._set_taints(name, [t for t in have if t.get("key") != NOT_READY_TAINT])
        return name

    def _set_taints(self, name: str, taints: list[dict[str, Any]]) -> None:
        # Taints have no merge key: a strategic merge patch replaces the whole list.
        _drain(self.v1.patch_node(name, {"spec": {"taints": taints}},
                                  _preload_content=False))

    def _taints(self, name: str) -> list[dict[str, Any]]:
        obj = json.loads(self.v1.read_node(name, _preload_content=False).data)
        return list(obj.get("spec", {}).get("taints") or [])

    def delete_node(self, name: str, evict_pods: bool = True) -> None:
        """Delete the node; by default also force-delete the pods bound to it.

        Without ``evict_pods`` the pods stay until the pod GC controller removes orphans
        (about 40 s), as in a real cluster after a node object vanishes.
        """
        with contextlib.suppress(ApiException):
            _drain(self.v1.delete_node(name, grace_period_seconds=0, _preload_content=False))
        if evict_pods:
            resp = self.v1.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={name}", _preload_content=False)
            for p in json.loads(resp.data)["items"]:
                md = p["metadata"]
                with contextlib.suppress(ApiException):
                    _drain(self.v1.delete_namespaced_pod(
                        md["name"], md["namespace"], grace_period_seconds=0,
                        _preload_content=False))

    def cordon(self, name: str) -> None:
        """``kubectl cordon``: spec.unschedulable=true."""
        _drain(self.v1.patch_node(name, {"spec": {"unschedulable": True}},
                                  _preload_content=False))

    def uncordon(self, name: str) -> None:
        """``kubectl uncordon``."""
        _drain(self.v1.patch_node(name, {"spec": {"unschedulable": False}},
                                  _preload_content=False))

    def set_ready(self, name: str, ready: bool) -> None:
        """Flip the Ready condition and the not-ready NoSchedule taint, as a node failure
        and the (absent) node-lifecycle controller would. Pods are not evicted."""
        now = now_rfc3339()
        status = "True" if ready else "False"
        _drain(self.v1.patch_node_status(name, {"status": {"conditions": [{
            "type": "Ready", "status": status, "reason": "FakeKubelet",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, _preload_content=False))
        taints = [t for t in self._taints(name) if t.get("key") != NOT_READY_TAINT]
        if not ready:
            taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        self._set_taints(name, taints)

    def list_nodes(self) -> list[str]:
        """Names of all fake nodes."""
        resp = self.v1.list_node(label_selector=FAKE_NODE_SELECTOR, _preload_content=False)
        return [n["metadata"]["name"] for n in json.loads(resp.data)["items"]]

    def delete_all_nodes(self) -> None:
        """Remove every fake node (and its pods): a clean slate between test modules."""
        for n in self.list_nodes():
            self.delete_node(n)


def provider_node_to_untaint(node: Mapping[str, Any]) -> bool:
    """A provisioner's node (:data:`PROVIDER_NODE_ANNOTATION`) that reports Ready but still
    has the ``not-ready`` taint admission gave it."""
    if (node["metadata"].get("annotations") or {}).get(PROVIDER_NODE_ANNOTATION) != "fake":
        return False
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    return ready and any(t.get("key") == NOT_READY_TAINT
                         for t in (node.get("spec") or {}).get("taints") or [])

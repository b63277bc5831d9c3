"""The protobuf pod watch (`--pod-watch protobuf`) against a real kube-apiserver: every
event of a pod that uses what the extender reads converts to the same `PodInfo` as the
JSON watch's event for the same resourceVersion, and the
API server answers that watch in protobuf."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from e2e.harness.clusterbase import Cluster
from e2e.harness.target import kube
from extender.core.model.convert import pod_from_k8s
from extender.kube import protobuf
from extender.kube.client import Kube, ProtoDecoder, make_kube
from tests.kube.watch_wire import RICH_POD

pytestmark = pytest.mark.e2e


def _decoder() -> ProtoDecoder:
    return protobuf.Pod, protobuf.pod_dict


def _pod(ns: str) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads(json.dumps(RICH_POD))
    meta = pod["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
              "managedFields"):
        meta.pop(k)
    meta["namespace"] = ns
    spec = pod["spec"]
    for k in ("nodeName", "overhead", "schedulingGroup", "hostname", "serviceAccountName"):
        spec.pop(k)  # set by the API server, or needing what this namespace lacks
    spec.pop("schedulingGates")
    spec["priority"] = 0  # no PriorityClass: the admission plugin insists on 0
    spec["preemptionPolicy"] = "PreemptLowerPriority"
    spec["schedulerName"] = "nobody"
    pod.pop("status")
    return pod


async def _events(k: Kube, ns: str, rv: str, proto: bool, n: int) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    async with asyncio.timeout(30):
        async for etype, obj in k.watch(f"/api/v1/namespaces/{ns}/pods", rv,
                                        proto=_decoder() if proto else None):
            if etype in ("ADDED", "MODIFIED", "DELETED"):
                out.append((etype, obj))
            if len(out) == n:
                return out
    return out


def test_protobuf_and_json_watches_convert_alike(control_plane: Cluster,
                                                  namespace: str) -> None:
    ns = namespace
    k8s = kube()
    rv = json.loads(k8s.core.list_namespaced_pod(ns, _preload_content=False).data)[
        "metadata"]["resourceVersion"]
    body = _pod(ns)
    k8s.core.create_namespaced_pod(ns, body, _preload_content=False)
    k8s.core.patch_namespaced_pod_status(body["metadata"]["name"], ns, {"status": {
        "conditions": [{"type": "PodScheduled", "status": "False",
                        "reason": "Unschedulable", "message": "no"}]}},
        _preload_content=False)
    k8s.core.delete_namespaced_pod(body["metadata"]["name"], ns, grace_period_seconds=30,
                                   _preload_content=False)

    async def both() -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        k = make_kube(str(control_plane.kubeconfig))
        try:
            return (await _events(k, ns, rv, False, 3), await _events(k, ns, rv, True, 3))
        finally:
            await k.http.aclose()

    as_json, as_proto = asyncio.run(both())
    assert [e for e, _ in as_json] == [e for e, _ in as_proto] == ["ADDED", "MODIFIED",
                                                                  "MODIFIED"]
    for (_, j), (_, p) in zip(as_json, as_proto, strict=True):
        assert p["metadata"]["resourceVersion"] == j["metadata"]["resourceVersion"]
        assert pod_from_k8s(p) == pod_from_k8s(j)
    last = pod_from_k8s(as_proto[-1][1])
    assert last.unschedulable and last.deleting and last.required_anti_affinity


def test_the_api_server_answers_the_pod_watch_in_protobuf(control_plane: Cluster,
                                                          namespace: str) -> None:
    """What `Kube.watch(proto=...)` asks for is served as protobuf (else the test above
    would compare JSON with JSON through the fallback)."""
    async def content_type() -> str:
        k = make_kube(str(control_plane.kubeconfig))
        try:
            rv = (await k.list(f"/api/v1/namespaces/{namespace}/pods"))[1]
            async with k.http.stream(
                    "GET", f"/api/v1/namespaces/{namespace}/pods",
                    params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1"},
                    headers={"Accept": f"{protobuf.WATCH_ACCEPT}, application/json"}) as resp:
                return str(resp.headers.get("content-type", ""))
        finally:
            await k.http.aclose()

    assert asyncio.run(content_type()).startswith(protobuf.CONTENT_TYPE)

"""What a kube-apiserver watch sends, made on the test side: a pod rich in the fields the
extender reads (RICH_POD), its protobuf encoding and framing as the API server writes
them, and response bodies that arrive in chosen chunks or say nothing. The protobuf,
watch, decode and informer tests, and the e2e protobuf watch, all feed the client these
bytes, so they live in a module of their own rather than in a test module the others
import from."""

from __future__ import annotations

import asyncio
import calendar
from collections.abc import AsyncIterator
from typing import Any

import httpx

from extender.kube import protobuf

RICH_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
        "name": "trainer-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
        "creationTimestamp": "2026-11-24T07:14:48Z",
        "deletionTimestamp": "2026-11-24T08:00:00Z",
        "labels": {"scheduling.x-k8s.io/pod-group": "g", "app": "x", "empty": ""},
        "annotations": {"scheduling.k8s.io/group-name": "v"},
        "managedFields": [{"manager": "kubectl", "operation": "Update"}],
    },
    "spec": {
        "containers": [
            {"name": "a", "image": "i", "resources": {
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            {"name": "b", "image": "i"},
        ],
        "initContainers": [
            {"name": "sidecar", "image": "i", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}},
        ],
        "overhead": {"cpu": "50m"},
        "resources": {"requests": {"memory": "3Gi"}},
        "nodeName": "n1", "schedulerName": "gang", "priority": 7,
        "preemptionPolicy": "Never",
        "nodeSelector": {"zone": "a"},
        "schedulingGates": [{"name": "wait"}],
        "schedulingGroup": {"podGroupName": "wg"},
        "tolerations": [
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ],
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                     "values": ["n9"]}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "x"}, "matchExpressions": [
                    {"key": "tier", "operator": "Exists"}]},
                "topologyKey": "kubernetes.io/hostname", "namespaces": ["ml"],
                "namespaceSelector": {}}]},
        },
        "hostname": "h", "serviceAccountName": "sa",  # read by nobody
    },
    "status": {
        "phase": "Pending", "nominatedNodeName": "n-7",
        "conditions": [{"type": "PodScheduled", "status": "False",
                        "reason": "Unschedulable", "message": "no",
                        "lastTransitionTime": "2026-11-24T07:15:00Z"}],
    },
}


def fill_proto(msg: Any, obj: dict[str, Any]) -> Any:
    """A test-side JSON-to-protobuf encoder for the shapes of RICH_POD: Quantity and Time
    are messages in protobuf and strings in JSON, which `json_format` does not know."""
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        fd = msg.DESCRIPTOR.fields_by_name[key]
        sub = fd.message_type
        if sub is not None and sub.GetOptions().map_entry:
            vfd = sub.fields_by_name["value"]
            for k, v in value.items():
                if vfd.message_type is None:
                    getattr(msg, key)[k] = v
                else:
                    _scalar_message(getattr(msg, key)[k], v)
        elif fd.is_repeated:
            for v in value:
                if sub is None:
                    getattr(msg, key).append(v)
                else:
                    fill_proto(getattr(msg, key).add(), v)
        elif sub is None:
            setattr(msg, key, value)
        elif sub.full_name.endswith((".Time", ".Quantity")):
            _scalar_message(getattr(msg, key), value)
        else:
            getattr(msg, key).SetInParent()
            fill_proto(getattr(msg, key), value)
    return msg


def _scalar_message(msg: Any, value: str) -> None:
    if msg.DESCRIPTOR.name == "Quantity":
        msg.string = value
    else:
        msg.seconds = calendar.timegm(
            __import__("time").strptime(value, "%Y-%m-%dT%H:%M:%SZ"))


def _envelope(kind: str, raw: bytes) -> bytes:
    unknown: Any = protobuf._Unknown()
    unknown.typeMeta.apiVersion = "v1"
    unknown.typeMeta.kind = kind
    unknown.raw = raw
    return b"k8s\x00" + bytes(unknown.SerializeToString())


def watch_frame(etype: str, kind: str, raw: bytes) -> bytes:
    """One watch event as kube-apiserver frames it: a 4-byte length, then a WatchEvent
    whose object is the `k8s\\0` envelope around `raw`."""
    event: Any = protobuf._WatchEvent()
    event.type = etype
    event.object.raw = _envelope(kind, raw)
    data = bytes(event.SerializeToString())
    return len(data).to_bytes(4, "big") + data


class Chunks(httpx.AsyncByteStream):
    """A response body that arrives in the given chunks, split where a test wants the
    reader to meet a boundary."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


class QuietWatch(httpx.AsyncByteStream):
    """A watch that sends nothing and ends after a moment (a real one blocks)."""

    async def __aiter__(self) -> Any:
        await asyncio.sleep(0.02)
        return
        yield b""

"""Pod watch events in Kubernetes' protobuf encoding, as the JSON shape `convert` reads.

Why: on a real cluster every other pod watcher (kube-scheduler, kubelets, controllers)
asks for protobuf, and kube-apiserver's watch cache encodes each event once per encoding
its watchers use (`cachingObject`), so a JSON watch of all pods makes it encode every pod
event a second time. Measured in docs/performance.md ("CPU per pod").

The message classes come from `k8s_core_v1.binpb`, a descriptor set compiled by `protoc`
from k8s.io/api's and k8s.io/apimachinery's `generated.proto` at the versions pinned in
`e2e/k8sbuild/go.mod` (`e2e/k8sbuild/gen-proto.sh` writes it; `tests/kube/test_protobuf.py`
checks it is current). Built at import through the `protobuf` runtime's message factory,
the classes are exactly what `protoc --python_out` would give, without hundreds of lines
of generated Python in the package.

Only what `extender.core.model.convert` reads is turned into dicts (not the managed fields,
volumes, env, ...): walking the whole message in Python would cost more than `orjson`
parsing all of it. Empty strings are left out as the JSON encoding's `omitempty` does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

# "Accept" for a watch; the API server answers JSON to anything it cannot encode so
# (custom resources), which `Kube.watch` checks in the response's Content-Type.
WATCH_ACCEPT = "application/vnd.kubernetes.protobuf;stream=watch"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"  # every protobuf-encoded object starts with it, then runtime.Unknown

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."


def _classes() -> dict[str, type[Message]]:
    fds = descriptor_pb2.FileDescriptorSet.FromString(
        files("extender.kube").joinpath("k8s_core_v1.binpb").read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    names = {"unknown": "k8s.io.apimachinery.pkg.runtime.Unknown",
             "event": _META + "WatchEvent", "status": _META + "Status",
             "pod": "k8s.io.api.core.v1.Pod", "node": "k8s.io.api.core.v1.Node"}
    return {k: message_factory.GetMessageClass(pool.FindMessageTypeByName(v))
            for k, v in names.items()}


_CLASSES = _classes()
_Unknown = _CLASSES["unknown"]
_WatchEvent = _CLASSES["event"]
_Status = _CLASSES["status"]
Pod = _CLASSES["pod"]
Node = _CLASSES["node"]

# Message types that have a scalar JSON form of their own.
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_TIMES = frozenset({_META + "Time", _META + "MicroTime"})
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"


def frames(buf: bytearray) -> Iterator[bytes]:
    """Take every complete length-delimited frame (4-byte big-endian length, then the
    bytes) off the front of `buf`; an incomplete one stays for the next read."""
    pos, end = 0, len(buf)
    while end - pos >= 4:
        size = int.from_bytes(buf[pos:pos + 4], "big")
        if end - pos - 4 < size:
            break
        yield bytes(buf[pos + 4:pos + 4 + size])
        pos += 4 + size
    del buf[:pos]


def _unwrap(data: bytes) -> tuple[str, bytes]:
    """(kind, raw) of an encoded object: the magic prefix, then runtime.Unknown."""
    if not data.startswith(_MAGIC):
        raise ValueError("protobuf object without the k8s magic prefix")
    envelope: Any = _Unknown.FromString(data[4:])
    return str(envelope.typeMeta.kind), bytes(envelope.raw)


def decode_event(frame: bytes, kind: type[Message]) -> tuple[str, Message | dict[str, Any]]:
    """A watch frame to (type, object): the object a message of `kind` for ADDED,
    MODIFIED, DELETED and BOOKMARK, and a Status as its JSON shape for ERROR."""
    try:
        event: Any = _WatchEvent.FromString(frame)  # a frame is a bare WatchEvent
        obj_kind, obj_raw = _unwrap(bytes(event.object.raw))
        etype = str(event.type)
        if etype == "ERROR" or obj_kind == "Status":
            status: Any = _Status.FromString(obj_raw)
            return "ERROR", {"code": int(status.code), "reason": str(status.reason),
                             "message": str(status.message)}
        return etype, kind.FromString(obj_raw)
    except DecodeError as exc:
        raise ValueError(f"undecodable protobuf watch event: {exc}") from None


# ----- messages to the JSON shape -----------------------------------------------------


def _rfc3339(t: Any) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t.seconds)))


def _value(fd: Any, v: Any) -> Any:
    """One field's value in JSON form, every nested field included."""
    if fd.message_type is None:
        return v
    name = fd.message_type.full_name
    if name == _QUANTITY:
        return str(v.string)
    if name in _TIMES:
        return _rfc3339(v)
    if name == _INT_OR_STRING:
        return str(v.strVal) if int(v.type) == 1 else int(v.intVal)
    return to_dict(v)


def to_dict(msg: Any) -> dict[str, Any]:
    """A message and everything in it as its JSON shape (small subtrees only: affinity,
    tolerations, resources, conditions)."""
    out: dict[str, Any] = {}
    for fd, v in msg.ListFields():
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _value(vfd, x) for k, x in v.items()}
        elif fd.is_repeated:
            out[fd.name] = [_value(fd, x) for x in v]
        elif v != "":
            out[fd.name] = _value(fd, v)
    return out


def _quantities(m: Any) -> dict[str, str]:
    return {k: q.string for k, q in m.items()}


def _resources(r: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if r.requests:
        out["requests"] = _quantities(r.requests)
    if r.limits:
        out["limits"] = _quantities(r.limits)
    return out


def _container(c: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.HasField("resources"):
        out["resources"] = _resources(c.resources)
    if c.restartPolicy:
        out["restartPolicy"] = c.restartPolicy
    host_ports = [{"hostPort": p.hostPort} for p in c.ports if p.hostPort]
    if host_ports:
        out["ports"] = host_ports
    return out


def _claim_volumes(spec: Any) -> list[dict[str, Any]]:
    """Only the volumes kube-scheduler may have to bind a claim for, and only their
    kind: all `convert` asks of a volume (`PodInfo.binds_via_scheduler`)."""
    out: list[dict[str, Any]] = []
    for v in spec.volumes:
        src = v.volumeSource
        for kind in ("persistentVolumeClaim", "ephemeral"):
            if src.HasField(kind):
                out.append({"name": v.name, kind: {}})
    return out


def pod_dict(pod: Any) -> dict[str, Any]:
    """The fields of a Pod message that `convert.pod_from_k8s` reads, in their JSON
    shape; `tests/kube/test_protobuf.py` checks that a pod converts to the same `PodInfo`
    from either encoding. Field by field rather than by walking the message: a pod's
    spec carries volumes, env and managed fields that conversion never reads."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    m: dict[str, Any] = {"name": meta.name, "uid": meta.uid,
                         "resourceVersion": meta.resourceVersion}
    if meta.namespace:
        m["namespace"] = meta.namespace
    if meta.HasField("creationTimestamp"):
        m["creationTimestamp"] = _rfc3339(meta.creationTimestamp)
    if meta.HasField("deletionTimestamp"):
        m["deletionTimestamp"] = _rfc3339(meta.deletionTimestamp)
    if meta.labels:
        m["labels"] = dict(meta.labels)
    if meta.annotations:
        m["annotations"] = dict(meta.annotations)
    sp: dict[str, Any] = {"containers": [_container(c) for c in spec.containers]}
    if spec.initContainers:
        sp["initContainers"] = [_container(c) for c in spec.initContainers]
    for name in ("nodeName", "schedulerName", "preemptionPolicy"):
        v = getattr(spec, name)
        if v:
            sp[name] = v
    if spec.HasField("priority"):
        sp["priority"] = spec.priority
    if spec.nodeSelector:
        sp["nodeSelector"] = dict(spec.nodeSelector)
    if spec.overhead:
        sp["overhead"] = _quantities(spec.overhead)
    if spec.schedulingGates:
        sp["schedulingGates"] = [{"name": g.name} for g in spec.schedulingGates]
    if spec.tolerations:
        sp["tolerations"] = [to_dict(t) for t in spec.tolerations]
    if spec.volumes:
        volumes = _claim_volumes(spec)
        if volumes:
            sp["volumes"] = volumes
    if spec.resourceClaims:
        # With the claim or template each names: the planner counts their devices.
        sp["resourceClaims"] = [to_dict(c) for c in spec.resourceClaims]
    for name in ("affinity", "resources", "schedulingGroup"):  # rare: every field
        if spec.HasField(name):
            sp[name] = to_dict(getattr(spec, name))
    st: dict[str, Any] = {}
    if status.phase:
        st["phase"] = status.phase
    if status.nominatedNodeName:
        st["nominatedNodeName"] = status.nominatedNodeName
    if status.conditions:
        st["conditions"] = [{"type": c.type, "status": c.status, "reason": c.reason}
                            for c in status.conditions]
    if status.resourceClaimStatuses:
        st["resourceClaimStatuses"] = [to_dict(c) for c in status.resourceClaimStatuses]
    return {"metadata": m, "spec": sp, "status": st}

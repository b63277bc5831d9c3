"""The protobuf pod watch (`extender/kube/protobuf.py`): the descriptors are the ones the
pinned k8s.io/api compiles to, a pod converts to the same `PodInfo` from either
encoding, and the framing and envelope are read as kube-apiserver writes them."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from extender.core.model.convert import pod_from_k8s
from extender.kube import protobuf
from tests.kube.watch_wire import RICH_POD, fill_proto, watch_frame

REPO = Path(__file__).resolve().parents[2]


def test_a_pod_converts_the_same_from_protobuf_as_from_json() -> None:
    msg = fill_proto(protobuf.Pod(), RICH_POD)
    frame = watch_frame("MODIFIED", "Pod", msg.SerializeToString())
    [data] = list(protobuf.frames(bytearray(frame)))
    etype, decoded = protobuf.decode_event(data, protobuf.Pod)
    assert etype == "MODIFIED"
    obj = protobuf.pod_dict(decoded)
    assert obj["metadata"]["resourceVersion"] == "42"
    info = pod_from_k8s(obj)
    assert info == pod_from_k8s(RICH_POD)
    # Everything the rich pod sets was read, not defaulted on both sides.
    assert info.gated and info.deleting and info.unschedulable and info.priority == 7
    assert info.required_node_affinity and info.required_anti_affinity
    assert info.membership is not None and len(info.tolerations) == 2
    assert info.nominated_node == "n-7"


def test_a_minimal_pod_keeps_the_json_defaults() -> None:
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    decoded = protobuf.Pod.FromString(fill_proto(protobuf.Pod(), pod).SerializeToString())
    assert pod_from_k8s(protobuf.pod_dict(decoded)) == pod_from_k8s(pod)


def test_frames_keep_an_incomplete_frame_for_the_next_read() -> None:
    a = watch_frame("ADDED", "Pod", fill_proto(protobuf.Pod(), {"metadata": {"name": "a"}})
               .SerializeToString())
    buf = bytearray(a + a[:7])
    assert len(list(protobuf.frames(buf))) == 1
    assert bytes(buf) == a[:7]
    buf += a[7:]
    assert len(list(protobuf.frames(buf))) == 1 and not buf


def test_an_error_event_is_its_status() -> None:
    status: Any = protobuf._Status()
    status.code, status.reason, status.message = 410, "Expired", "too old"
    [data] = list(protobuf.frames(bytearray(
        watch_frame("ERROR", "Status", status.SerializeToString()))))
    assert protobuf.decode_event(data, protobuf.Pod) == (
        "ERROR", {"code": 410, "reason": "Expired", "message": "too old"})


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        protobuf.decode_event(b"\xff\xff\xff", protobuf.Pod)


@pytest.mark.skipif(shutil.which("go") is None or importlib.util.find_spec("grpc_tools") is None,
                    reason="needs go (module download) and grpcio-tools (protoc)")
def test_descriptors_are_what_the_pinned_modules_compile_to(tmp_path: Path) -> None:
    out = tmp_path / "k8s_core_v1.binpb"
    subprocess.run(["bash", str(REPO / "e2e/k8sbuild/gen-proto.sh"), str(out)], check=True,
                   timeout=300)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    shipped = descriptor_pb2.FileDescriptorSet.FromString(
        (REPO / "extender/kube/k8s_core_v1.binpb").read_bytes())
    assert fresh == shipped, "run e2e/k8sbuild/gen-proto.sh and commit the result"


def _spec_pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"volumes": [{"name": "cfg", "configMap": {"name": "x"}},
                  {"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]}, True),
    ({"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
     True),
    ({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}, True),
    ({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80},
                                                          {"containerPort": 81,
                                                           "hostPort": 8081}]}]}, True),
    ({"volumes": [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}],
      "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}, False),
])
def test_what_kube_scheduler_must_place_is_read_from_either_encoding(
    spec: dict[str, Any], expected: bool
) -> None:
    """A claim-backed volume, a resource claim or a host port sends a member through
    kube-scheduler's own plugins (`PodInfo.binds_via_scheduler`): the protobuf watch,
    which reads only what conversion needs, must carry each of them."""
    obj = _spec_pod(spec)
    msg: Any = protobuf.Pod()
    msg.metadata.name, msg.metadata.namespace, msg.metadata.uid = "p", "d", "u"
    for c in obj["spec"]["containers"]:
        pc = msg.spec.containers.add()
        pc.name, pc.image = c["name"], c["image"]
        for port in c.get("ports", []):
            pp = pc.ports.add()
            pp.containerPort = port["containerPort"]
            if "hostPort" in port:
                pp.hostPort = port["hostPort"]
    for v in obj["spec"].get("volumes", []):
        pv = msg.spec.volumes.add()
        pv.name = v["name"]
        if "persistentVolumeClaim" in v:
            pv.volumeSource.persistentVolumeClaim.claimName = "c"
        elif "ephemeral" in v:
            pv.volumeSource.ephemeral.volumeClaimTemplate.SetInParent()
        elif "configMap" in v:
            pv.volumeSource.configMap.SetInParent()
        else:
            pv.volumeSource.emptyDir.SetInParent()
    for claim in obj["spec"].get("resourceClaims", []):
        pc = msg.spec.resourceClaims.add()
        pc.name, pc.resourceClaimTemplateName = claim["name"], claim["resourceClaimTemplateName"]
        # The claim made from the template, as the pod's status names it.
        made = msg.status.resourceClaimStatuses.add()
        made.name, made.resourceClaimName = claim["name"], "p-gpu-x"
        obj["status"] = {"resourceClaimStatuses": [{"name": claim["name"],
                                                    "resourceClaimName": "p-gpu-x"}]}
    decoded = protobuf.Pod.FromString(msg.SerializeToString())
    from_json = pod_from_k8s(obj)
    assert from_json.binds_via_scheduler is expected
    assert pod_from_k8s(protobuf.pod_dict(decoded)) == from_json  # claims included


def test_a_malformed_host_port_is_a_clear_error() -> None:
    obj = _spec_pod({"containers": [{"name": "c", "ports": [{"hostPort": "x"}]}]})
    with pytest.raises(ValueError, match=r"spec.containers\[0\].ports\[0\].hostPort"):
        pod_from_k8s(obj)

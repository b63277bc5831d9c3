"""Fake kubelet and fake node behaviour other tests take for granted."""

from __future__ import annotations

import pytest

from e2e.harness.fixtures import (
    NodeSet,
    NotYet,
    create_pod,
    delete_pod,
    get_pod,
    kube,
    pod_phases,
    wait_for,
    wait_pods_phase,
)

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

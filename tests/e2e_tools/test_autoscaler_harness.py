"""The pure parts of the e2e harness around the Cluster Autoscaler
(e2e/integrations/autoscaler.py) and of the fake kubelet's handling of the nodes it makes:
which nodes lose the ``not-ready`` taint, and the node template the autoscaler's kwok
provider copies."""

from __future__ import annotations

from typing import Any

from e2e.harness.fakenodes import (
    FAKE_NODE_LABEL,
    NOT_READY_TAINT,
    PROVIDER_NODE_ANNOTATION,
    provider_node_to_untaint,
)
from e2e.integrations.autoscaler import (
    MAX_ANNOTATION,
    MIN_ANNOTATION,
    POOL_LABEL,
    provider_config,
    template,
)


def node(annotations: dict[str, str], ready: str, taints: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": "n", "annotations": annotations},
            "spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


MADE = {PROVIDER_NODE_ANNOTATION: "fake"}


def test_a_provisioners_ready_node_with_the_admission_taint_is_untainted() -> None:
    assert provider_node_to_untaint(node(MADE, "True", [NOT_READY_TAINT, "other"]))


def test_nodes_the_loop_leaves_alone() -> None:
    # added through FakeNodes (which untaints them itself), or by a test on purpose
    assert not provider_node_to_untaint(node({}, "True", [NOT_READY_TAINT]))
    # not Ready: the taint is right (set_ready(False) puts it there)
    assert not provider_node_to_untaint(node(MADE, "False", [NOT_READY_TAINT]))
    # nothing to lift
    assert not provider_node_to_untaint(node(MADE, "True", ["other"]))
    # another value of the annotation is not ours to act on
    assert not provider_node_to_untaint(node({PROVIDER_NODE_ANNOTATION: "real"}, "True",
                                              [NOT_READY_TAINT]))
    # no status, no spec: nothing to do, no crash
    assert not provider_node_to_untaint({"metadata": {"annotations": MADE}})


def test_the_template_makes_pool_nodes_the_fake_kubelet_runs() -> None:
    t = template("pool-a", 3, "4", "16Gi")
    meta = t["metadata"]
    assert meta["labels"][FAKE_NODE_LABEL] == "true"
    assert meta["labels"][POOL_LABEL] == "pool-a"
    assert meta["annotations"] == {MIN_ANNOTATION: "0", MAX_ANNOTATION: "3"}
    assert t["status"]["allocatable"]["cpu"] == "4"
    assert {"type": "Ready", "status": "True"}.items() <= next(
        c for c in t["status"]["conditions"] if c["type"] == "Ready").items()


def test_the_provider_groups_nodes_by_the_pool_label_without_its_taint() -> None:
    cfg = provider_config()
    assert cfg["readNodesFrom"] == "configmap"
    assert cfg["nodegroups"] == {"fromNodeLabelKey": POOL_LABEL}
    assert cfg["nodes"]["skipTaint"] is True

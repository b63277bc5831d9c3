"""Values that many objects repeat are kept once (docs/reliability.md, "History at
scale"): 200,000 finished pods each kept their own copy of five of them."""

from __future__ import annotations

from typing import Any

from extender.core.model import fields as convert
from extender.core.model.convert import pod_from_k8s
from extender.core.model.convert_groups import group_from_k8s


def _pod(i: int) -> dict[str, Any]:
    # Each string built anew, as a JSON parser hands them over.
    return {"metadata": {"name": f"p{i}", "namespace": "".join(["hist", "ory"]),
                         "uid": f"u{i}"},
            "spec": {"nodeName": "".join(["node", "-1"]),
                     "schedulerName": "".join(["gang-", "scheduler"]),
                     "preemptionPolicy": "".join(["Never"]),
                     "containers": [{"name": "c"}]},
            "status": {"phase": "".join(["Succ", "eeded"])}}


def test_repeated_values_are_kept_once() -> None:
    a, b = pod_from_k8s(_pod(1)), pod_from_k8s(_pod(2))
    assert (a.namespace, a.node_name, a.phase, a.scheduler_name, a.preemption_policy) == (
        "history", "node-1", "Succeeded", "gang-scheduler", "Never")
    for field in ("namespace", "node_name", "phase", "scheduler_name", "preemption_policy"):
        assert getattr(a, field) is getattr(b, field), field
    g = group_from_k8s({"metadata": {"name": "g", "namespace": "".join(["hist", "ory"])},
                        "spec": {"minMember": 2}})
    assert g.namespace is a.namespace


def test_the_shared_values_stay_bounded() -> None:
    for i in range(convert._SHARED_MAX + 10):
        convert.shared(f"value-{i}")
    assert len(convert._SHARED) <= convert._SHARED_MAX
    assert convert.shared("".join(["x", "y"])) == "xy"

"""Gangs disrupted whole (issue 45 item 3; extender/core/preemption/disruption.py), as
the issue tried it: two upstream gangs of 3, one `disruptionMode: all` and one
`single`, both bound and running; one member of each evicted through the Eviction API.
The `all` gang's other two members are evicted within 10 s and its PodGroup is a
`DisruptionTarget`; the `single` gang's are left running. The `all` gang's new pods (its
owner's restart, made here by hand) are then placed whole, and the disruption ends. And
a scheduler-plugins PodGroup asks for it with the `gang-extender.x-k8s.io/disruption-mode`
annotation.

Runs on the session's gang stack (`gang-scheduler`); the nodes are labelled for the test
and the pods select them. Fails without the feature: the `all` gang's members stay
running (as the issue saw for 30 s).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.gang import GangStack
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_pod, served_workload_version
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e


def version() -> str:
    v = served_workload_version()
    if v is None:
        pytest.skip("no version of scheduling.k8s.io PodGroups is served")
    return v


def mode(v: str, all_: bool) -> Any:
    """spec.disruptionMode as each version spells it: a one-of object from v1beta1 on,
    a string in v1alpha2."""
    if v == "v1alpha2":
        return "PodGroup" if all_ else "Pod"
    return {"all": {}} if all_ else {"single": {}}


def create_upstream(ns: str, name: str, min_count: int, v: str, all_: bool) -> None:
    kube().custom.create_namespaced_custom_object(
        "scheduling.k8s.io", v, ns, "podgroups",
        {"apiVersion": f"scheduling.k8s.io/{v}", "kind": "PodGroup",
         "metadata": {"name": name},
         "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                  "disruptionMode": mode(v, all_)}})


def conditions(ns: str, name: str, v: str) -> dict[str, dict[str, Any]]:
    obj = kube().custom.get_namespaced_custom_object("scheduling.k8s.io", v, ns, "podgroups",
                                                     name)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def evict(ns: str, name: str) -> None:
    kube().core.create_namespaced_pod_eviction(
        name, ns, {"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": name, "namespace": ns}}, _preload_content=False)


def running(ns: str, name: str) -> bool:
    """Bound, Running and not being deleted."""
    p = get_pod(ns, name) or {}
    return bool(p.get("spec", {}).get("nodeName")) and (
        p.get("status", {}).get("phase") == "Running"
        and not p.get("metadata", {}).get("deletionTimestamp"))


def test_all_evicts_the_rest_and_single_leaves_it_running(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    v, ns = version(), namespace
    sel = {"disruption-e2e": ns}
    fake_nodes.add_nodes(6, prefix=f"{ns}-n", cpu="2", memory="4Gi", labels=sel)
    for name, all_ in (("whole", True), ("single", False)):
        create_upstream(ns, name, 3, v, all_)
        for i in range(3):
            create_pod(ns, f"{name}-{i}", cpu="1", scheduler_name=GANG_SCHEDULER,
                       node_selector=sel, labels=sel,
                       spec_extra={"schedulingGroup": {"podGroupName": name}})
    pods = [f"{g}-{i}" for g in ("whole", "single") for i in range(3)]
    wait_for(lambda: all(running(ns, p) for p in pods) or NotYet(
        [p for p in pods if not running(ns, p)]), 60, "both gangs bound and running",
        logs=gang.logs())

    began = time.monotonic()
    evict(ns, "whole-0")
    evict(ns, "single-0")
    # `all`: the other two members evicted (being deleted, or gone) within 10 s.
    wait_for(lambda: not any(running(ns, p) for p in ("whole-1", "whole-2")) or NotYet(
        {p: running(ns, p) for p in ("whole-1", "whole-2")}), 10,
        "the rest of the `all` gang evicted", logs=gang.logs())
    assert time.monotonic() - began <= 10

    def disruption_target() -> dict[str, Any] | NotYet:
        c = conditions(ns, "whole", v).get("DisruptionTarget")
        return c if c is not None and c["status"] == "True" else NotYet(
            conditions(ns, "whole", v))

    dt = wait_for(disruption_target, 10, "DisruptionTarget on the `all` gang",
                  logs=gang.logs())
    assert dt["reason"] == "MemberDisrupted", dt
    # Evicted: seen being deleted, or (watch events in one batch) already gone.
    assert dt["message"].startswith(f"gang workload-api:{ns}/whole: member {ns}/whole-0 "), dt
    assert "its disruption mode is all" in dt["message"], dt
    # `single`: its other members keep running; nothing disrupts it.
    time.sleep(5)
    assert running(ns, "single-1") and running(ns, "single-2")
    assert "DisruptionTarget" not in conditions(ns, "single", v)

    # The owner restarts the job: its new pods are placed whole, and the disruption ends.
    for i in range(3):
        create_pod(ns, f"whole-new-{i}", cpu="1", scheduler_name=GANG_SCHEDULER,
                   node_selector=sel, labels=sel,
                   spec_extra={"schedulingGroup": {"podGroupName": "whole"}})
    new = [f"whole-new-{i}" for i in range(3)]
    wait_for(lambda: all(running(ns, p) for p in new) or NotYet(
        [p for p in new if not running(ns, p)]), 60, "the new attempt placed whole",
        logs=gang.logs())
    wait_for(lambda: conditions(ns, "whole", v)["DisruptionTarget"]["status"] == "False"
             or NotYet(conditions(ns, "whole", v)), 10, "the disruption over",
             logs=gang.logs())


def test_the_annotation_disrupts_a_scheduler_plugins_gang_whose_member_was_deleted(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    """A scheduler-plugins PodGroup has no disruptionMode: the annotation says it. One
    member deleted (not evicted): the other two are evicted, and the PodGroup's status
    says `DisruptionTarget`."""
    ns = namespace
    sel = {"disruption-e2e": ns}
    fake_nodes.add_nodes(3, prefix=f"{ns}-s", cpu="2", memory="4Gi", labels=sel)
    create_podgroup(ns, "sp", 3, annotations={"gang-extender.x-k8s.io/disruption-mode": "all"})
    names = [f"sp-{i}" for i in range(3)]
    for name in names:
        create_pod(ns, name, cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="sp",
                   node_selector=sel, labels=sel)
    wait_for(lambda: all(running(ns, p) for p in names) or NotYet(
        [p for p in names if not running(ns, p)]), 60, "the gang bound and running",
        logs=gang.logs())
    kube().core.delete_namespaced_pod("sp-0", ns, _preload_content=False)
    wait_for(lambda: not any(running(ns, p) for p in names[1:]) or NotYet(
        {p: running(ns, p) for p in names[1:]}), 10, "the rest evicted", logs=gang.logs())

    def disruption_target() -> dict[str, Any] | NotYet:
        obj = kube().custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1",
                                                         ns, "podgroups", "sp")
        c = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        dt = c.get("DisruptionTarget")
        return dt if dt is not None and dt["status"] == "True" else NotYet(c)

    dt = wait_for(disruption_target, 10, "DisruptionTarget on the PodGroup", logs=gang.logs())
    assert dt["reason"] == "MemberDisrupted" and dt["message"].startswith(
        f"gang {ns}/sp: member {ns}/sp-0 "), dt

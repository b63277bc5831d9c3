"""A CompositePodGroup (scheduling.k8s.io/v1alpha3, Kubernetes 1.37 alpha, gate
`CompositePodGroup`) of a leader group and a worker group, minGroupCount 2: nothing is
bound while only the leader fits, then every pod once both fit; and with the composite's
topology key, both groups in one zone (issue 45, item 2; extender/core/queue/composite_unit.py).
A composite whose own spec.disruptionMode is all, both groups placed and running: one
worker evicted through the Eviction API, the leader and the other worker are evicted
within 10 s, and the composite and both groups are `DisruptionTarget`s (issue 45, item
3; extender/core/preemption/disruption.py). A low-priority composite of two one-pod
groups, a higher-priority gang that needs one child's room: both children are evicted,
never one (extender/core/preemption/victims.py, the composite victim unit).

The local 1.37 control plane serves it (e2e/harness/versions.py: the gate and
`scheduling.k8s.io/v1alpha3=true`); the children are v1beta1 PodGroups naming it in
spec.parentCompositePodGroupName, which the API then requires to have spec.workloadRef
(the Workload it names need not exist). Runs on the session's gang stack; each fails
without its feature: the leader, a gang of one that fits, would be bound at once; without
the composite's topology, the leader and a worker land in zone a.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_pod
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.priority_stack import classes, gone

pytestmark = pytest.mark.e2e

__all__ = ["classes"]  # a fixture of priority_stack.py, used here

GROUP = "scheduling.k8s.io"
WAITING = "gang-extender.x-k8s.io/WaitingForCapacity"


def served() -> bool:
    try:
        kube().custom.list_cluster_custom_object(GROUP, "v1alpha3", "compositepodgroups",
                                                 limit=1)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def create(ns: str, version: str, plural: str, body: dict[str, Any]) -> None:
    kube().custom.create_namespaced_custom_object(GROUP, version, ns, plural, body)


def composite(ns: str, min_groups: int, topology: str = "", mode: str = "") -> None:
    spec: dict[str, Any] = {"workloadRef": {"workloadName": "lw", "templateName": "lw"},
                            "schedulingPolicy": {"gang": {"minGroupCount": min_groups}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if mode:
        spec["disruptionMode"] = {mode: {}}
    create(ns, "v1alpha3", "compositepodgroups", {
        "apiVersion": f"{GROUP}/v1alpha3", "kind": "CompositePodGroup",
        "metadata": {"name": "lw"}, "spec": spec})


def member(ns: str, name: str, cpu: str, sel: dict[str, str]) -> None:
    create_pod(ns, name, cpu=cpu, scheduler_name=GANG_SCHEDULER, node_selector=sel,
               labels=sel, spec_extra={"schedulingGroup": {"podGroupName": name.split("-")[0]}})


def child(ns: str, name: str, min_count: int) -> None:
    create(ns, "v1beta1", "podgroups", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"parentCompositePodGroupName": "lw",
                 "workloadRef": {"workloadName": "lw", "templateName": name},
                 "schedulingPolicy": {"gang": {"minCount": min_count}}}})


def conditions(ns: str, name: str, plural: str = "podgroups") -> dict[str, dict[str, Any]]:
    version = "v1alpha3" if plural == "compositepodgroups" else "v1beta1"
    obj = kube().custom.get_namespaced_custom_object(GROUP, version, ns, plural, name)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def running(ns: str, name: str) -> bool:
    """Bound, Running and not being deleted."""
    p = get_pod(ns, name) or {}
    return bool(p.get("spec", {}).get("nodeName")) and (
        p.get("status", {}).get("phase") == "Running"
        and not p.get("metadata", {}).get("deletionTimestamp"))


def test_leader_and_workers_bound_together_or_not_at_all(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    if not served():
        pytest.skip("scheduling.k8s.io/v1alpha3 CompositePodGroups are not served")
    ns, sel = namespace, {"composite-e2e": namespace}
    fake_nodes.add_node(f"{ns}-a", cpu="4", memory="8Gi", labels=sel)  # the leader and one
    composite(ns, 2)
    child(ns, "leader", 1)
    child(ns, "workers", 3)
    names = ["leader-0", "workers-0", "workers-1", "workers-2"]
    with Recorder(ns) as rec:
        for name in names:
            member(ns, name, "2", sel)

        def told() -> dict[str, Any] | NotYet:
            c = conditions(ns, "leader").get("PodGroupInitiallyScheduled")
            ok = c is not None and c["status"] == "False"
            return c if ok and c is not None else NotYet(conditions(ns, "leader"))

        c = wait_for(told, 30, "the leader told why it waits", logs=gang.logs())
        assert "part of CompositePodGroup" in c["message"], c
        assert "1 of its 2 groups with their pods fit together now" in c["message"], c

        def waiting() -> dict[str, Any] | NotYet:
            found = conditions(ns, "lw", "compositepodgroups")
            w = found.get(WAITING)
            return w if w is not None and w["status"] == "True" else NotYet(found)

        # The composite's starvation clock, kept for a restart: the API keeps our type.
        w = wait_for(waiting, 30, "the composite's wait for capacity recorded",
                     logs=gang.logs())
        assert w["reason"] == "WaitingForCapacity", w
        time.sleep(3)  # the leader alone fits: a second chance to (wrongly) bind it
        assert rec.bound() == {}, "nothing is bound while only the leader fits"
        fake_nodes.add_node(f"{ns}-b", cpu="4", memory="8Gi", labels=sel)
        wait_for(lambda: len(rec.bound()) == 4 or NotYet(rec.bound()), 30,
                 "every pod bound once both groups fit", logs=gang.logs())
    for name in ("leader", "workers"):
        def scheduled(n: str = name) -> bool | NotYet:
            found = conditions(ns, n)
            return (found.get("PodGroupInitiallyScheduled") or {}).get("status") == "True" \
                or NotYet(found)
        wait_for(scheduled, 30, f"{name} PodGroupInitiallyScheduled", logs=gang.logs())


def test_the_composite_topology_holds_for_both_groups(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    """Zone a has room for the leader only, zone b for the leader and both workers: every
    pod lands in zone b. Planned on its own, the leader would take zone a's node, the
    first of equals (checked: it does with the composite's topology left out)."""
    if not served():
        pytest.skip("scheduling.k8s.io/v1alpha3 CompositePodGroups are not served")
    ns, sel = namespace, {"composite-e2e": namespace}
    zone = "topology.kubernetes.io/zone"
    fake_nodes.add_node(f"{ns}-a0", cpu="5", memory="8Gi", labels={**sel, zone: f"{ns}-a"})
    for i in range(2):
        fake_nodes.add_node(f"{ns}-b{i}", cpu="5", memory="8Gi",
                            labels={**sel, zone: f"{ns}-b"})
    composite(ns, 2, topology=zone)
    child(ns, "leader", 1)
    child(ns, "workers", 2)
    with Recorder(ns) as rec:
        member(ns, "leader-0", "1", sel)
        for i in range(2):
            member(ns, f"workers-{i}", "4", sel)
        wait_for(lambda: len(rec.bound()) == 3 or NotYet(rec.bound()), 30,
                 "every pod bound", logs=gang.logs())
    nodes = {name: (get_pod(ns, name) or {}).get("spec", {}).get("nodeName")
             for name in ("leader-0", "workers-0", "workers-1")}
    assert all(str(n).startswith(f"{ns}-b") for n in nodes.values()), nodes


def test_a_composite_of_mode_all_is_evicted_whole_when_a_worker_is_lost(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    """Fails without the composite's mode read (before: the leader and the other worker
    kept running, each child being of mode single)."""
    if not served():
        pytest.skip("scheduling.k8s.io/v1alpha3 CompositePodGroups are not served")
    ns, sel = namespace, {"composite-e2e": namespace}
    fake_nodes.add_nodes(3, prefix=f"{ns}-n", cpu="2", memory="4Gi", labels=sel)
    composite(ns, 2, mode="all")
    stored = kube().custom.get_namespaced_custom_object(GROUP, "v1alpha3", ns,
                                                        "compositepodgroups", "lw")
    assert stored["spec"].get("disruptionMode") == {"all": {}}, "the API kept the field"
    child(ns, "leader", 1)
    child(ns, "workers", 2)
    names = ["leader-0", "workers-0", "workers-1"]
    for name in names:
        member(ns, name, "1", sel)
    wait_for(lambda: all(running(ns, p) for p in names) or NotYet(
        [p for p in names if not running(ns, p)]), 60, "both groups bound and running",
        logs=gang.logs())

    def scheduled() -> dict[str, Any] | NotYet:
        c = conditions(ns, "lw", "compositepodgroups").get(
            "CompositePodGroupInitiallyScheduled")
        return c if c is not None and c["status"] == "True" else NotYet(
            conditions(ns, "lw", "compositepodgroups"))

    c = wait_for(scheduled, 30, "the composite CompositePodGroupInitiallyScheduled",
                 logs=gang.logs())
    assert c["message"].startswith("2 of its 2 groups have their quorum bound"), c

    began = time.monotonic()
    kube().core.create_namespaced_pod_eviction(
        "workers-0", ns, {"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": "workers-0", "namespace": ns}},
        _preload_content=False)
    rest = ["leader-0", "workers-1"]
    wait_for(lambda: not any(running(ns, p) for p in rest) or NotYet(
        {p: running(ns, p) for p in rest}), 10, "the leader and the other worker evicted",
        logs=gang.logs())
    took = time.monotonic() - began
    assert took <= 10, took

    def disruption_target(name: str, plural: str) -> dict[str, Any] | NotYet:
        c = conditions(ns, name, plural).get("DisruptionTarget")
        return c if c is not None and c["status"] == "True" else NotYet(
            conditions(ns, name, plural))

    dt = wait_for(lambda: disruption_target("lw", "compositepodgroups"), 10,
                  "DisruptionTarget on the composite", logs=gang.logs())
    assert dt["reason"] == "MemberDisrupted", dt
    assert dt["message"].startswith(f"CompositePodGroup {ns}/lw is disrupted whole"), dt
    assert f"member {ns}/workers-0 " in dt["message"], dt
    for name in ("leader", "workers"):
        def on_child(n: str = name) -> dict[str, Any] | NotYet:
            return disruption_target(n, "podgroups")

        dt = wait_for(on_child, 10, f"DisruptionTarget on {name}", logs=gang.logs())
        assert dt["reason"] == "MemberDisrupted", dt
    print(f"composite of mode all: the rest evicted {took:.2f} s after the eviction")


def test_a_higher_priority_gang_evicts_the_whole_composite_never_one_child(
        gang: GangStack, fake_nodes: NodeSet, namespace: str,
        classes: dict[str, str]) -> None:
    """Two 2-CPU nodes held by a low-priority composite (minGroupCount 2: a leader and a
    worker of one 2-CPU pod each). A high-priority gang of one 2-CPU pod needs the room
    of one child: both children are evicted, never one (which would leave the composite
    running with one of the two groups it needs), and the gang is bound; the composite
    and both children are DisruptionTargets. Fails without the composite as one victim:
    only the cheapest child went."""
    if not served():
        pytest.skip("scheduling.k8s.io/v1alpha3 CompositePodGroups are not served")
    ns, sel = namespace, {"composite-e2e": namespace}
    fake_nodes.add_nodes(2, prefix=f"{ns}-n", cpu="2", memory="4Gi", labels=sel)
    composite(ns, 2)
    child(ns, "leader", 1)
    child(ns, "workers", 1)
    kids = ["leader-0", "workers-0"]
    for name in kids:
        create_pod(ns, name, cpu="2", scheduler_name=GANG_SCHEDULER, node_selector=sel,
                   labels=sel, priority_class=classes["low"],
                   spec_extra={"schedulingGroup": {"podGroupName": name.split("-")[0]}})
    wait_for(lambda: all(running(ns, p) for p in kids) or NotYet(
        [p for p in kids if not running(ns, p)]), 60, "the composite bound and running",
        logs=gang.logs())
    began = time.monotonic()
    with Recorder(ns) as rec:
        create_podgroup(ns, "high", 1)
        create_pod(ns, "high-0", cpu="2", scheduler_name=GANG_SCHEDULER, pod_group="high",
                   node_selector=sel, labels=sel, priority_class=classes["high"])
        wait_for(lambda: len(rec.bound("high")) == 1 or NotYet(rec.bound()), 60,
                 "the high gang bound", logs=gang.logs())
    took = time.monotonic() - began
    assert all(gone(ns, p) for p in kids), {p: gone(ns, p) for p in kids}
    for name in ("leader", "workers"):
        def target(n: str = name) -> dict[str, Any] | NotYet:
            c = conditions(ns, n).get("DisruptionTarget")
            return c if c is not None and c["status"] == "True" else NotYet(
                conditions(ns, n))

        dt = wait_for(target, 30, f"DisruptionTarget on {name}", logs=gang.logs())
        assert dt["reason"] == "PreemptionByScheduler", dt

    def on_composite() -> dict[str, Any] | NotYet:
        found = conditions(ns, "lw", "compositepodgroups")
        c = found.get("DisruptionTarget")
        return c if c is not None and c["status"] == "True" else NotYet(found)

    # The composite, one victim, says so itself, as upstream writes it.
    dt = wait_for(on_composite, 30, "DisruptionTarget on the composite", logs=gang.logs())
    assert dt["reason"] == "PreemptionByScheduler", dt
    assert "preempted by gang" in dt["message"] and "with every child group" in dt["message"]
    print(f"composite preempted whole: the high gang bound {took:.2f} s after it was made")

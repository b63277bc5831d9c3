"""Topology on the real control plane (issue 18, docs/topology.md): stock kube-scheduler,
the extender, fake nodes labelled with racks and zones.

Every pod is pinned to its test's nodes with a nodeSelector, so nodes other tests leave
behind cannot change the outcome.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import (
    GANG_SCHEDULER,
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    create_pod,
    create_podgroup,
)
from e2e.harness.queries import get_podgroup, served_workload_version
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e

RACK = "e2e.example.com/rack"
ZONE = "topology.kubernetes.io/zone"
REQUIRED = "gang-extender.x-k8s.io/topology-required"
PREFERRED = "gang-extender.x-k8s.io/topology-preferred"
SET = "e2e.example.com/set"


def racks(nodes: Nodes, ns: str) -> None:
    """The issue's case: racks r1 and r2 of two nodes each, room for one member (1 cpu)
    in r1 and for both in r2. Without a topology the best fit takes a1 (exactly one
    fits there) and then b1: a split gang."""
    for name, rack, cpu in (("a1", "r1", "1"), ("a2", "r1", "500m"), ("b1", "r2", "2"),
                            ("b2", "r2", "2")):
        nodes.add_node(f"{ns}-{name}", cpu=cpu, labels={RACK: rack, SET: ns})


def member(ns: str, name: str, group: str, **spec: Any) -> None:
    create_pod(ns, name, cpu="1", scheduler_name=GANG_SCHEDULER, pod_group=group,
               node_selector={SET: ns}, labels={"job": group}, spec_extra=spec or None)


def rack_of(node: str) -> str:
    obj = json.loads(kube().core.read_node(node, _preload_content=False).data)
    return str(obj["metadata"]["labels"].get(RACK) or obj["metadata"]["labels"].get(ZONE))


def bound_whole(rec: Recorder, group: str, n: int, gang: GangStack) -> dict[str, str]:
    wait_for(lambda: len(rec.bound(group)) == n or NotYet(rec.bound(group)), 30,
             f"the {n} members of {group} bound", logs=gang.logs())
    rec.assert_never_partial(group, n)
    return {name: r.node for name, r in rec.bound(group).items()}


def condition(ns: str, name: str) -> dict[str, Any]:
    st = (get_podgroup(ns, name) or {}).get("status") or {}
    for c in st.get("conditions") or []:
        if c.get("type") == "Scheduled":
            return dict(c)
    return {}


def wait_reason(ns: str, name: str, reason: str, gang: GangStack) -> dict[str, Any]:
    def check() -> dict[str, Any] | NotYet:
        c = condition(ns, name)
        return c if c.get("reason") == reason else NotYet(c)

    out = wait_for(check, 20, f"PodGroup {name}: Scheduled condition {reason}", logs=gang.logs())
    assert isinstance(out, dict)
    return out


def pg_events(ns: str, name: str) -> dict[str, dict[str, Any]]:
    raw = kube().core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name},involvedObject.kind=PodGroup",
        _preload_content=False)
    return {e["reason"]: e for e in json.loads(raw.data)["items"]}


def test_the_issue_case_without_a_topology_splits_the_gang(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    racks(fake_nodes, ns)
    create_podgroup(ns, "split", 2)
    with Recorder(ns) as rec:
        for i in range(2):
            member(ns, f"split-{i}", "split")
        placed = bound_whole(rec, "split", 2, gang)
    assert {rack_of(n) for n in placed.values()} == {"r1", "r2"}, placed


def test_the_issue_case_with_a_required_rack_binds_both_in_r2(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    racks(fake_nodes, ns)
    create_podgroup(ns, "whole", 2, annotations={REQUIRED: RACK})
    with Recorder(ns) as rec:
        for i in range(2):
            member(ns, f"whole-{i}", "whole")
        placed = bound_whole(rec, "whole", 2, gang)
    assert {rack_of(n) for n in placed.values()} == {"r2"}, placed
    reserved = wait_for(lambda: pg_events(ns, "whole").get("Reserved") or NotYet(
        sorted(pg_events(ns, "whole"))), 10, "the Reserved Event", logs=gang.logs())
    assert "in rack r2 for" in reserved["message"], reserved["message"]


def test_an_upstream_podgroup_topology_constraint_keeps_the_gang_in_one_rack(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """The issue case again, the gang an upstream Workload API PodGroup
    (scheduling.k8s.io/v1alpha2 on 1.36, v1beta1 on 1.37) whose
    spec.schedulingConstraints.topology names the rack key: it means topology-required
    (issue 19), so both members go to r2."""
    version = served_workload_version()
    if version is None:
        pytest.skip("no version of scheduling.k8s.io PodGroups is served")
    ns = namespace
    racks(fake_nodes, ns)
    kube().custom.create_namespaced_custom_object(
        "scheduling.k8s.io", version, ns, "podgroups",
        {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
         "metadata": {"name": "up"},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                  "schedulingConstraints": {"topology": [{"key": RACK}]}}})
    stored = kube().custom.get_namespaced_custom_object(
        "scheduling.k8s.io", version, ns, "podgroups", "up")
    # Dropped unless kube-apiserver has TopologyAwareWorkloadScheduling: then this test
    # would test nothing.
    assert stored["spec"].get("schedulingConstraints") == {"topology": [{"key": RACK}]}, stored
    with Recorder(ns) as rec:
        for i in range(2):
            create_pod(ns, f"up-{i}", cpu="1", scheduler_name=GANG_SCHEDULER,
                       node_selector={SET: ns},
                       spec_extra={"schedulingGroup": {"podGroupName": "up"}})
        placed = bound_whole(rec, "up", 2, gang)
    assert {rack_of(n) for n in placed.values()} == {"r2"}, placed
    reserved = wait_for(lambda: pg_events(ns, "up").get("Reserved") or NotYet(
        sorted(pg_events(ns, "up"))), 10, "the Reserved Event", logs=gang.logs())
    assert reserved["involvedObject"]["apiVersion"] == f"scheduling.k8s.io/{version}"
    msg = reserved["message"]
    assert msg.startswith(f"gang workload-api:{ns}/up: reserved 2 slot(s)") and (
        " in rack r2 for " in msg), msg


def test_a_gang_no_rack_holds_waits_naming_the_rack_then_runs_when_one_does(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    racks(fake_nodes, ns)
    create_podgroup(ns, "big", 5, annotations={REQUIRED: RACK})
    with Recorder(ns) as rec:
        for i in range(5):
            member(ns, f"big-{i}", "big")
        # No rack can ever hold it: set aside as Unplaceable until a node changes.
        cond = wait_reason(ns, "big", "Unplaceable", gang)
        assert cond["message"].startswith(f"gang {ns}/big: can never be placed"), cond
        assert (f"needs 5 × {{cpu: 1, memory: 64Mi}} in one rack ({RACK}); "
                f"the largest rack fits 4 (rack r2: ") in cond["message"], cond["message"]
        assert rec.bound() == {}
        # 5 fit across both racks, never in one: nothing binds until r2 grows.
        fake_nodes.add_node(f"{ns}-b3", cpu="1", labels={RACK: "r2", SET: ns})
        placed = bound_whole(rec, "big", 5, gang)
    assert {rack_of(n) for n in placed.values()} == {"r2"}, placed


def test_a_preferred_rack_that_holds_no_one_does_not_stop_the_gang(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    racks(fake_nodes, ns)
    create_podgroup(ns, "pref", 5, annotations={PREFERRED: RACK})
    with Recorder(ns) as rec:
        for i in range(5):
            member(ns, f"pref-{i}", "pref")
        placed = bound_whole(rec, "pref", 5, gang)
    assert {rack_of(n) for n in placed.values()} == {"r1", "r2"}


def test_a_malformed_annotation_is_a_condition_and_an_event_until_it_is_fixed(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    racks(fake_nodes, ns)
    create_podgroup(ns, "typo", 2, annotations={REQUIRED: "rack zone"})
    with Recorder(ns) as rec:
        for i in range(2):
            member(ns, f"typo-{i}", "typo")
        cond = wait_reason(ns, "typo", "InvalidTopology", gang)
        assert cond["message"] == (
            f"gang {ns}/typo: annotation {REQUIRED}: 'rack zone' is not a node label key (the "
            f"name part must be letters, digits, '-', '_' or '.', beginning and ending with a "
            f"letter or digit); the gang is not placed until the annotation is fixed")
        ev = wait_for(lambda: pg_events(ns, "typo").get("InvalidTopology") or NotYet(
            sorted(pg_events(ns, "typo"))), 10, "the InvalidTopology Event", logs=gang.logs())
        assert ev["type"] == "Warning"
        assert rec.bound() == {}
        kube().custom.patch_namespaced_custom_object(
            PG_GROUP, PG_VERSION, ns, PG_PLURAL, "typo",
            {"metadata": {"annotations": {REQUIRED: RACK}}})
        placed = bound_whole(rec, "typo", 2, gang)
    assert {rack_of(n) for n in placed.values()} == {"r2"}


def test_a_spread_among_members_is_bound_whole_whatever_order_kube_scheduler_takes(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """Two zones with room for exactly two members each, maxSkew 1: kube-scheduler's own
    PodTopologySpread filter counts the members assumed so far, so it may rule out the
    zone of a member's slot; that member takes the slot of one not yet scheduled. The
    plan takes the members by name (0 z1, 1 z2, 2 z1, 3 z2), kube-scheduler in the
    order they are created: 0, 2 (its zone z1 is ruled out then), 1, 3."""
    ns = namespace
    for z in ("z1", "z2"):
        fake_nodes.add_node(f"{ns}-{z}", cpu="2", labels={ZONE: z, SET: ns})
    create_podgroup(ns, "spread", 4)
    spread = {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"job": "spread"}}}]}
    with Recorder(ns) as rec:
        for i in (0, 2, 1, 3):
            member(ns, f"spread-{i}", "spread", **spread)
        placed = bound_whole(rec, "spread", 4, gang)
    zones = [rack_of(n) for n in placed.values()]
    assert sorted(zones) == ["z1", "z1", "z2", "z2"], placed
    # On the barrier path not one member was turned away for its zone (without the swap,
    # spread-2 is, and waits for a retry; tests/core/planner/test_topology_gangs.py keeps that).
    # With the direct commit the plan's nodes are bound as planned (the plan keeps the
    # spread as a whole), and kube-scheduler may take a member through a cycle while its
    # Binding flies: its own spread filter, counting the members it assumed, may rule out
    # the planned zone (the extender says it is committing the member), or the member
    # may be bound between kube-scheduler's pop and its snapshot ("Insufficient cpu"),
    # or before its informer saw it ("already bound"). Such a turn-away is recorded
    # (a FailedScheduling Event) but changes nothing: the zones above are the test.


def test_anti_affinity_on_a_zone_puts_one_member_in_each(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    for z in ("z1", "z2", "z3"):
        fake_nodes.add_node(f"{ns}-{z}", cpu="4", labels={ZONE: z, SET: ns})
    create_podgroup(ns, "apart", 3)
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"job": "apart"}}, "topologyKey": ZONE}]}}}
    with Recorder(ns) as rec:
        for i in range(3):
            member(ns, f"apart-{i}", "apart", **anti)
        placed = bound_whole(rec, "apart", 3, gang)
    assert sorted(rack_of(n) for n in placed.values()) == ["z1", "z2", "z3"], placed

"""Shared nodes on the real control plane: pods bound by others never over-commit a node
through a gang commit and never leave a gang partly bound (issue 16, items 1-3).

Every test puts pods of others on the gangs' nodes: pods created with `spec.nodeName`
(they bypass every scheduler) while binds wait and slots are reserved.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder, block_ports, port_pod
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.k8s import client
from e2e.harness.objects import create_pod, create_podgroup, delete_pod
from e2e.harness.queries import get_pod, get_podgroup, list_pods
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.gang_reads import member

pytestmark = pytest.mark.e2e


def intruder(ns: str, name: str, node: str, cpu: str) -> None:
    """A pod created with spec.nodeName: no scheduler sees it before it is bound."""
    create_pod(ns, name, cpu=cpu, memory="64Mi", spec_extra={"nodeName": node})


def waiting_binds(gang: GangStack, ns: str) -> dict[str, str]:
    return {h["pod"]: h["node"] for h in gang.debug()["waitingBinds"]
            if h["pod"].startswith(f"{ns}/")}


def slots(gang: GangStack, group: str) -> dict[str, str]:
    for r in gang.debug()["reservations"]:
        if r["gang"] == group:
            return {s["pod"]: s["node"] for s in r["slots"]}
    return {}


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def overcommitted(ns_list: list[str], nodes: list[str]) -> dict[str, int]:
    """Node -> CPU requested beyond 4 allocatable by the non-terminal pods bound to it."""
    used = dict.fromkeys(nodes, 0)
    for ns in ns_list:
        for p in list_pods(ns):
            node = p["spec"].get("nodeName")
            if node in used and p["status"].get("phase") not in ("Succeeded", "Failed"):
                for c in p["spec"]["containers"]:
                    used[node] += cpu_millis(c["resources"]["requests"]["cpu"])
    return {n: u - 4000 for n, u in used.items() if u > 4000}


def test_a_spec_nodename_pod_on_a_node_where_a_bind_waits_never_over_commits_it(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """The issue's case. Two members of a 3-member gang wait at the permit barrier on
    their reserved nodes; a pod created with spec.nodeName takes all of one of those
    nodes' CPU; then the third member comes through. The member on the lost node is
    moved, and the gang is bound whole with no node over-committed."""
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="share", cpu="4", memory="8Gi")
    blockers = block_ports(ns, nodes)  # keeps the third member away from the extender
    create_podgroup(ns, "g", 3)
    with Recorder(ns) as rec:
        member(ns, "g-0", "g", "3")
        member(ns, "g-1", "g", "3")
        port_pod(ns, "g-2", group="g", cpu="3")
        wait_for(lambda: len(waiting_binds(gang, ns)) == 2 or NotYet(gang.debug()), 20,
                 "two binds waiting at the barrier", logs=gang.logs())
        lost = waiting_binds(gang, ns)[f"{ns}/g-0"]
        intruder(ns, "intruder", lost, "4")
        wait_for(lambda: waiting_binds(gang, ns).get(f"{ns}/g-0") not in (lost,)
                 or NotYet(waiting_binds(gang, ns)), 10,
                 "the member on the lost node moved off it", logs=gang.logs())
        for b in blockers:
            delete_pod(ns, b)
        wait_for(lambda: len(rec.bound("g")) == 3 or NotYet(rec.bound()), 30,
                 "the whole gang bound", logs=gang.logs())
        rec.assert_never_partial("g", 3)
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in list_pods(ns)
              if p["metadata"]["name"].startswith("g-")}
    assert lost not in placed.values(), placed
    assert overcommitted([ns], nodes) == {}


def test_a_reserved_slot_whose_node_is_lost_is_re_planned_at_once(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """No bind waits for the slot yet (kube-scheduler keeps its member away): a pod bound
    there by someone else, or a cordon, moves the slot within moments, not at the
    member's next filter call."""
    ns = namespace
    nodes = fake_nodes.add_nodes(5, prefix="lost", cpu="4", memory="8Gi")
    blockers = block_ports(ns, nodes)
    create_podgroup(ns, "g", 3)
    member(ns, "g-0", "g", "3")
    port_pod(ns, "g-1", group="g", cpu="3")
    port_pod(ns, "g-2", group="g", cpu="3")
    wait_for(lambda: len(slots(gang, f"{ns}/g")) == 3 or NotYet(gang.debug()), 20,
             "the gang's reservation", logs=gang.logs())
    first = slots(gang, f"{ns}/g")
    taken = first[f"{ns}/g-1"]
    started = time.monotonic()
    intruder(ns, "intruder", taken, "2")
    wait_for(lambda: slots(gang, f"{ns}/g").get(f"{ns}/g-1") not in (None, taken)
             or NotYet(slots(gang, f"{ns}/g")), 5, "the slot moved off the taken node",
             logs=gang.logs())
    moved_in = time.monotonic() - started
    cordoned = slots(gang, f"{ns}/g")[f"{ns}/g-2"]
    fake_nodes.cordon(cordoned)
    wait_for(lambda: slots(gang, f"{ns}/g").get(f"{ns}/g-2") not in (None, cordoned)
             or NotYet(slots(gang, f"{ns}/g")), 5, "the slot moved off the cordoned node",
             logs=gang.logs())
    print(f"MEASURED slot moved {moved_in:.2f}s after the foreign pod was created")
    with Recorder(ns) as rec:
        for b in blockers:
            delete_pod(ns, b)
        wait_for(lambda: len(rec.bound("g")) == 3 or NotYet(rec.bound()), 30,
                 "the whole gang bound", logs=gang.logs())
    placed = {p["spec"]["nodeName"] for p in list_pods(ns)
              if p["metadata"]["name"].startswith("g-")}
    assert taken not in placed and cordoned not in placed, placed
    assert overcommitted([ns], nodes) == {}


DENY_BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "e2e-deny-doomed-binding"},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["pods/binding"]}]},
        "validations": [{"expression": "!request.name.startsWith('doomed-')",
                         "message": "e2e: bindings of doomed-* pods are refused"}],
    },
}


def _binding_policy(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "e2e-deny-doomed-binding"},
        "spec": {"policyName": "e2e-deny-doomed-binding", "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": namespace}}}},
    }


def test_a_gang_left_partial_after_its_commit_is_evicted_whole(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """The API server refuses one member's Binding every time (an admission policy), after
    the barrier opened: the other two are bound, the quorum never is. At the deadline
    (and the commit's grace) the two bound members are evicted through the Eviction API,
    so the gang does not hold nodes waiting for a peer that never comes."""
    ns = namespace
    fake_nodes.add_nodes(3, prefix="partial", cpu="4", memory="8Gi")
    admission = client.AdmissionregistrationV1Api(kube().api)
    admission.create_validating_admission_policy(DENY_BINDING, _preload_content=False)
    admission.create_validating_admission_policy_binding(_binding_policy(ns),
                                                         _preload_content=False)
    try:
        time.sleep(2)  # the policy reaches the API server's admission cache
        create_podgroup(ns, "doomed", 3, timeout=8)
        for i in range(2):
            member(ns, f"ok-{i}", "doomed", "1")
        member(ns, "doomed-2", "doomed", "1")
        # The two whose Bindings went through are evicted (bare pods: deleted).
        wait_for(lambda: all(
            (get_pod(ns, f"ok-{i}") or {}).get("metadata", {}).get("deletionTimestamp")
            or get_pod(ns, f"ok-{i}") is None for i in range(2))
            or NotYet([get_pod(ns, f"ok-{i}") is not None for i in range(2)]), 60,
            "the partial gang's bound members evicted", logs=gang.logs())
        def partial_events() -> list[str]:
            raw = kube().core.list_namespaced_event(
                ns, field_selector="reason=PartialGangEvicted", _preload_content=False)
            return [e["involvedObject"]["kind"] for e in json.loads(raw.data)["items"]]

        wait_for(lambda: "PodGroup" in partial_events() or NotYet(partial_events()), 15,
                 "a PartialGangEvicted Event on the PodGroup", logs=gang.logs())
        doomed = get_pod(ns, "doomed-2") or {}
        assert not doomed.get("spec", {}).get("nodeName"), "the refused member is unbound"
    finally:
        admission.delete_validating_admission_policy_binding("e2e-deny-doomed-binding",
                                                             _preload_content=False)
        admission.delete_validating_admission_policy("e2e-deny-doomed-binding",
                                                     _preload_content=False)


def test_a_gang_of_another_scheduler_is_never_planned_here(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """A complete PodGroup whose pods name another scheduler (here one that is not
    running, as when Volcano or Coscheduling is down) beside a gang of ours on the same
    two nodes: the extender reserves nothing for it and places ours. Before, the older
    foreign group took both nodes for binds that never came, and ours waited. Nor does
    it write the foreign group's status, though its owner writes none: before, once the
    new group's grace (5 s) was over, it said "0 of 2 members exist" there."""
    ns = namespace
    fake_nodes.add_nodes(2, prefix="foreign", cpu="4", memory="8Gi")
    create_podgroup(ns, "theirs", 2)
    created = time.monotonic()
    for i in range(2):
        create_pod(ns, f"theirs-{i}", cpu="3", memory="64Mi", scheduler_name="volcano",
                   pod_group="theirs")
    time.sleep(2)  # several of the extender's passes
    assert slots(gang, f"{ns}/theirs") == {}, gang.debug()["reservations"]
    create_podgroup(ns, "ours", 2)
    with Recorder(ns) as rec:
        member(ns, "ours-0", "ours", "3")
        member(ns, "ours-1", "ours", "3")
        wait_for(lambda: len(rec.bound("ours")) == 2 or NotYet(gang.debug()), 30,
                 "our gang bound beside the foreign one", logs=gang.logs())
    assert slots(gang, f"{ns}/theirs") == {}
    assert all(not p["spec"].get("nodeName") for p in list_pods(ns)
               if p["metadata"]["name"].startswith("theirs-"))
    time.sleep(max(0.0, created + 8 - time.monotonic()))  # past the grace, and a write
    assert not ((get_podgroup(ns, "theirs") or {}).get("status") or {}).get("conditions")

"""The device inventory (extender/core/devices/inventory.py): which devices a node can
use, what is allocated, a pod's claims resolved, and how many members of a shape a node's
free devices hold (the count the planner needs for the issue's two DRA gangs)."""

from __future__ import annotations

from typing import Any

from extender.cel_selectors import compile_selector
from extender.core.devices.allocate import Fit, NoFit
from extender.core.devices.inventory import MAX_COPIES, DeviceInventory
from extender.core.devices.model import (
    claim_from_k8s,
    claim_template_from_k8s,
    device_class_from_k8s,
    pod_claims_from_k8s,
    resource_slice_from_k8s,
)
from extender.core.model.types import NodeInfo

DRIVER = "gpu.example.com"


def node(name: str, **labels: str) -> NodeInfo:
    return NodeInfo(name, {"cpu": 16000}, dict(labels))


def slice_(name: str, n: int, generation: int = 0, pool: str = "", **where: Any) -> Any:
    return resource_slice_from_k8s({"metadata": {"name": name}, "spec": {
        "driver": DRIVER, "pool": {"name": pool or name, "generation": generation},
        **where, "devices": [{"name": f"gpu-{i}"} for i in range(n)]}})


def inventory() -> DeviceInventory:
    inv = DeviceInventory(compile_selector)
    inv.upsert_class(device_class_from_k8s({"metadata": {"name": "gpu"}, "spec": {
        "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}))
    inv.upsert_template(claim_template_from_k8s({
        "metadata": {"name": "two-gpus", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}}))
    return inv


def pod(*claims: dict[str, Any], statuses: Any = None) -> Any:
    return pod_claims_from_k8s({"metadata": {"name": "p", "namespace": "ml"},
                                "spec": {"resourceClaims": list(claims)},
                                "status": {"resourceClaimStatuses": statuses or []}})


TEMPLATE = {"name": "gpu", "resourceClaimTemplateName": "two-gpus"}


def test_a_node_uses_its_own_pools_then_selected_then_all_nodes_pools() -> None:
    inv = inventory()
    inv.upsert_slice(slice_("z-local", 1, nodeName="node-1"))
    inv.upsert_slice(slice_("a-rack", 1, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}))
    inv.upsert_slice(slice_("m-everywhere", 1, allNodes=True))
    inv.upsert_slice(slice_("other", 1, nodeName="node-2"))
    got = [d.pool for d in inv.devices_for(node("node-1", rack="r1"))]
    assert got == ["z-local", "a-rack", "m-everywhere"]
    assert [d.pool for d in inv.devices_for(node("node-3"))] == ["m-everywhere"]


def test_only_a_pools_newest_generation_counts() -> None:
    inv = inventory()
    inv.upsert_slice(slice_("old", 4, generation=1, pool="node-1", nodeName="node-1"))
    inv.upsert_slice(slice_("new", 2, generation=2, pool="node-1", nodeName="node-1"))
    assert len(inv.devices_for(node("node-1"))) == 2
    inv.remove_slice("new")
    assert len(inv.devices_for(node("node-1"))) == 4  # the memo is dropped on a change


def test_the_issues_nodes_hold_one_member_each() -> None:
    """Four nodes × 2 devices, members asking 2 devices from a template: one member per
    node, so one gang of 4 at a time; devices reserved for it leave none for another."""
    inv = inventory()
    nodes = [node(f"node-{i}") for i in range(4)]
    for n in nodes:
        inv.upsert_slice(slice_(f"{n.name}-gpu", 2, nodeName=n.name))
    member = inv.member_claims("ml", pod(TEMPLATE))
    assert member.missing == "" and len(member.own) == 1
    assert [inv.copies(n, member.own) for n in nodes] == [1, 1, 1, 1]
    first = [inv.fit(n, member.own) for n in nodes]
    assert all(isinstance(f, Fit) for f in first)
    reserved = frozenset().union(*(f.devices() for f in first if isinstance(f, Fit)))
    assert [inv.copies(n, member.own, reserved) for n in nodes] == [0, 0, 0, 0]
    refused = inv.fit(nodes[0], member.own, reserved)
    assert isinstance(refused, NoFit) and "needs 2 × gpu, 0 free" in refused.message


def test_fragmented_devices_do_not_hold_a_gang_of_three_times_four() -> None:
    """6 + 2 + 2 + 2 free devices: 12 in all, but members of 4 devices fit only the
    node of 6, once."""
    inv = inventory()
    inv.upsert_template(claim_template_from_k8s({
        "metadata": {"name": "four-gpus", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 4}}]}}}}))
    nodes = [node(f"node-{i}") for i in range(4)]
    for n, count in zip(nodes, (6, 2, 2, 2), strict=True):
        inv.upsert_slice(slice_(f"{n.name}-gpu", count, nodeName=n.name))
    member = inv.member_claims("ml", pod({"name": "gpu",
                                          "resourceClaimTemplateName": "four-gpus"}))
    assert sum(inv.copies(n, member.own) for n in nodes) == 1


def test_allocated_claims_take_their_devices() -> None:
    inv = inventory()
    n = node("node-1")
    inv.upsert_slice(slice_("node-1-gpu", 2, nodeName="node-1"))
    allocated: dict[str, Any] = {
        "metadata": {"name": "other", "namespace": "ml"}, "spec": {"devices": {
        "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "g", "driver": DRIVER, "pool": "node-1-gpu", "device": "gpu-0"}]}}}}
    inv.upsert_claim(claim_from_k8s(allocated))
    assert inv.allocated() == {(DRIVER, "node-1-gpu", "gpu-0")}
    member = inv.member_claims("ml", pod(TEMPLATE))
    assert inv.copies(n, member.own) == 0
    # An admin-access allocation keeps the device from no one.
    allocated["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    inv.upsert_claim(claim_from_k8s(allocated))
    assert inv.copies(n, member.own) == 1
    inv.remove_claim("ml", "other")
    assert inv.allocated() == frozenset()


def test_a_pods_claims_are_resolved_or_named_missing() -> None:
    inv = inventory()
    inv.upsert_claim(claim_from_k8s({"metadata": {"name": "p-gpu-x1", "namespace": "ml"},
                                     "spec": {"devices": {"requests": [
                                         {"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}))
    inv.upsert_claim(claim_from_k8s({"metadata": {"name": "dataset", "namespace": "ml"},
                                     "spec": {"devices": {"requests": [
                                         {"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}))
    made = inv.member_claims(
        "ml", pod(TEMPLATE, {"name": "data", "resourceClaimName": "dataset"},
                  statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]))
    assert [c.name for c in made.own] == ["ml/p-gpu-x1"]
    assert [c.name for c in made.shared] == ["ml/dataset"]
    assert inv.member_claims("ml", pod()).empty
    missing = inv.member_claims("ml", pod({"name": "x", "resourceClaimTemplateName": "nope"}))
    assert missing.missing == "resource claim template ml/nope not found"
    gone = inv.member_claims("ml", pod({"name": "x", "resourceClaimName": "nope"}))
    assert gone.missing == "resource claim ml/nope not found"


def test_a_member_without_claims_is_not_bounded_by_devices() -> None:
    assert inventory().copies(node("node-1"), ()) == MAX_COPIES


def test_a_member_that_takes_no_device_is_not_bounded_by_devices() -> None:
    inv = inventory()
    inv.upsert_slice(slice_("node-1-gpu", 1, nodeName="node-1"))
    inv.upsert_template(claim_template_from_k8s({
        "metadata": {"name": "watcher", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
            "deviceClassName": "gpu", "adminAccess": True}}]}}}}))
    member = inv.member_claims("ml", pod({"name": "w", "resourceClaimTemplateName": "watcher"}))
    assert inv.copies(node("node-1"), member.own) == MAX_COPIES

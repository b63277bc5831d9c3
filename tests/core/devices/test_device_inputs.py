"""Devices reach the core: a pod's claims on `PodInfo`, the DRA objects through the gang
manager's one device input (`on_devices`), and the informer kinds that feed it, watched
only while `resource.k8s.io/v1` is served (issue 44, step 1)."""

from __future__ import annotations

from typing import Any

from extender.cel_selectors import compile_selector
from extender.core.manager import GangManager
from extender.core.model.claims import ClaimRef
from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import NodeInfo
from extender.core.wiring import Core
from extender.kube.device_kinds import DEVICE_KINDS, RESOURCE_PATH

DRIVER = "gpu.example.com"


def _pod(spec: dict[str, Any], status: dict[str, Any] | None = None) -> Any:
    return pod_from_k8s({"metadata": {"uid": "u1", "name": "w-0", "namespace": "ml"},
                         "spec": {"containers": [], **spec}, "status": status or {}})


def test_a_pod_carries_its_claims_and_one_without_carries_none() -> None:
    p = _pod({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two"}]},
             {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "w-0-gpu-x"}]})
    assert p.claims is not None
    assert p.claims.refs == (ClaimRef("gpu", None, "two"),)
    assert p.claims.claim_name(p.claims.refs[0]) == "w-0-gpu-x"
    assert p.binds_via_scheduler  # kube-scheduler's DRA plugin allocates: no direct commit
    assert _pod({}).claims is None
    assert _pod({"resourceClaims": []}).claims is None


def test_a_malformed_claim_entry_is_a_value_error_naming_the_field() -> None:
    try:
        _pod({"resourceClaims": [{"name": "gpu"}]})
    except ValueError as e:
        assert "spec.resourceClaims[0]" in str(e)
    else:
        raise AssertionError("accepted a claim entry naming neither claim nor template")


def _objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("deviceclasses", {"metadata": {"name": "gpu"}, "spec": {"selectors": [
            {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}),
        ("resourceclaimtemplates", {"metadata": {"name": "two", "namespace": "ml"},
                                    "spec": {"spec": {"devices": {"requests": [
                                        {"name": "g", "exactly": {"deviceClassName": "gpu",
                                                                  "count": 2}}]}}}}),
        ("resourceslices", {"metadata": {"name": "n1-gpu"}, "spec": {
            "driver": DRIVER, "pool": {"name": "n1", "generation": 1}, "nodeName": "n1",
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}),
    ]


def test_the_device_kinds_feed_the_manager_and_a_deletion_takes_devices_away() -> None:
    manager = GangManager(Core.wire(selectors=compile_selector))
    manager.on_node(NodeInfo("n1", {"cpu": 16000, "pods": 110}, {}))
    kinds = {k.name: k for k in DEVICE_KINDS}
    assert set(kinds) == {"resourceslices", "deviceclasses", "resourceclaims",
                          "resourceclaimtemplates"}
    assert all(k.discover == (RESOURCE_PATH, k.name) for k in DEVICE_KINDS)  # optional API
    for name, obj in _objects():
        kinds[name].apply(manager, obj, 0.0)
    devices = manager._cache.devices
    member = devices.member(_pod({"resourceClaims": [
        {"name": "gpu", "resourceClaimTemplateName": "two"}]}))
    node = manager._cache.nodes["n1"]
    assert member.missing == "" and devices.inventory.copies(node, member.own) == 1
    epoch = manager._cache.capacity_epoch
    kinds["resourceslices"].delete(manager, "n1-gpu", 1.0)
    assert devices.inventory.copies(node, member.own) == 0
    assert manager._cache.capacity_epoch > epoch
    kinds["resourceclaimtemplates"].delete(manager, "ml/two", 1.0)
    assert "not found" in devices.member(_pod({"resourceClaims": [
        {"name": "gpu", "resourceClaimTemplateName": "two"}]})).missing


def test_a_budget_input_takes_the_object_or_its_key_when_deleted() -> None:
    from extender.core.model.types import BudgetInfo, LabelSelector

    core = Core.wire()
    manager = GangManager(core)
    manager.on_budget(BudgetInfo("ns", "pdb", LabelSelector((("app", "x"),)), 1))
    assert len(core.budgets) == 1
    manager.on_budget("ns/pdb")
    assert len(core.budgets) == 0


def test_only_a_claims_allocation_moving_has_waiting_gangs_planned_again() -> None:
    """A claim's status names who uses it and changes with every member it serves: such
    an event changes no plan and costs the queue nothing; an allocation made or released
    does."""
    from extender.core.devices.model import claim_from_k8s

    core = Core.wire(selectors=compile_selector)
    manager = GangManager(core)

    def claim(allocated: bool, users: int) -> Any:
        status: dict[str, Any] = {"reservedFor": [
            {"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(users)]}
        if allocated:
            status["allocation"] = {"devices": {"results": [
                {"request": "g", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}}
        return claim_from_k8s({"metadata": {"name": "c", "namespace": "ml", "uid": "c1"},
                               "spec": {"devices": {"requests": [
                                   {"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
                               "status": status})

    manager.on_devices("resourceclaims", "ml/c", claim(False, 0))
    epoch = core.cache.capacity_epoch
    manager.on_devices("resourceclaims", "ml/c", claim(True, 0))  # allocated
    assert core.cache.capacity_epoch > epoch
    epoch = core.cache.capacity_epoch
    manager.on_devices("resourceclaims", "ml/c", claim(True, 1))  # reserved for a pod
    manager.on_devices("resourceclaims", "ml/c", claim(True, 2))
    assert core.cache.capacity_epoch == epoch
    manager.on_devices("resourceclaims", "ml/c", None)  # deleted while allocated
    assert core.cache.capacity_epoch > epoch

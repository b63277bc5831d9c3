"""Upstream PodGroups' shared claims (scheduling.k8s.io/v1beta1 spec.resourceClaims,
Kubernetes 1.37, DRAWorkloadResourceClaims; issue 44): a member's claim matching one of
its PodGroup's is the group's one claim, planned as one allocation for the gang; the
claim the control plane made from the template is read from status.resourceClaimStatuses."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.devices.model import claim_from_k8s
from extender.core.model.claims import ClaimRef, PodClaims
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.types import WORKLOAD_API, Membership, PodInfo, gang_key
from tests.core.dra_cluster import CLASS, dra_sim
from tests.core.sim import SimScheduler, pod

GPU = ClaimRef("gpu", None, "gpu-2")


def _podgroup(claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None
              ) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": "train", "uid": "uid-train"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                     "resourceClaims": claims},
            "status": {"resourceClaimStatuses": statuses or []}}


def _member(i: int) -> PodInfo:
    return pod(f"train-{i}", cpu=1000, memory=1 << 20, membership=Membership(WORKLOAD_API,
               "train"), claims=PodClaims((GPU,), {}), binds_via_scheduler=True)


def test_the_podgroups_claims_and_their_statuses_are_read() -> None:
    g = workload_group_from_k8s(_podgroup(
        [{"name": "gpu", "resourceClaimTemplateName": "gpu-2"},
         {"name": "data", "resourceClaimName": "dataset"}],
        [{"name": "gpu", "resourceClaimName": "train-gpu-x7"}]))
    assert g.claims == PodClaims((GPU, ClaimRef("data", "dataset", None)),
                                 {"gpu": "train-gpu-x7"})
    assert workload_group_from_k8s(_podgroup([])).claims is None
    with pytest.raises(ValueError, match="exactly one of resourceClaimName"):
        workload_group_from_k8s(_podgroup([{"name": "gpu"}]))


def _slots(sim: SimScheduler) -> dict[str, str]:
    res = sim.core.ledger.reservations.get(gang_key(WORKLOAD_API, "ns", "train"))
    return {} if res is None else {s.pod.name: s.node for s in res.slots.values()}


def _train(sim: SimScheduler, statuses: list[dict[str, Any]] | None = None) -> None:
    sim.add_group(workload_group_from_k8s(_podgroup(
        [{"name": "gpu", "resourceClaimTemplateName": "gpu-2"}], statuses)))
    members = [sim.add_pod(_member(i)) for i in range(3)]
    sim.schedule(members[0].uid)


def test_a_podgroup_claim_from_a_template_is_one_allocation_for_the_gang() -> None:
    """Three members sharing the group's claim of 2 devices go on one node (before:
    each member's claim was planned as its own, on three nodes)."""
    sim = dra_sim((2, 2, 2, 2))
    _train(sim)
    on = _slots(sim)
    assert len(on) == 3 and len(set(on.values())) == 1, on


def test_the_claim_the_control_plane_made_for_the_group_pins_it_where_allocated() -> None:
    """Once made and allocated (status.resourceClaimStatuses names it), the group's claim
    is used where its devices are: node-2."""
    sim = dra_sim((2, 2, 2, 2))
    sim.manager.on_devices("resourceclaims", "ns/train-gpu-x7", claim_from_k8s({
        "metadata": {"name": "train-gpu-x7", "namespace": "ns", "uid": "c-x7"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": CLASS, "count": 2}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": CLASS, "pool": "node-2", "device": f"gpu-{j}"}
            for j in range(2)]}}}}))
    _train(sim, [{"name": "gpu", "resourceClaimName": "train-gpu-x7"}])
    on = _slots(sim)
    assert set(on.values()) == {"node-2"}, on

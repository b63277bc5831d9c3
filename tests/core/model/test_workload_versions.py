"""The upstream PodGroup in both versions the extender reads (issue 28):
scheduling.k8s.io/v1alpha2 (Kubernetes 1.36) and v1beta1 (1.37), the same gang from
either; and a PodGroup inside a CompositePodGroup (1.37 alpha), linked to it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.model.convert import pod_from_k8s
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.sources import missing_group_message
from extender.core.model.types import WORKLOAD_API
from extender.core.model.vocabulary import Reason
from tests.core.model.samples import V1ALPHA2, V1BETA1
from tests.core.sim import SimScheduler, node, pod


@pytest.mark.parametrize("obj", [V1ALPHA2, V1BETA1], ids=["v1alpha2", "v1beta1"])
def test_the_same_gang_from_either_version(obj: dict[str, Any]) -> None:
    g = workload_group_from_k8s(obj)
    assert (g.source, g.namespace, g.name, g.uid) == (WORKLOAD_API, "ml", "train", "pg-1")
    assert g.key == "workload-api:ml/train"
    assert g.min_member == 4
    assert g.topology_required == "example.com/rack" and g.topology_error == ""


def test_v1beta1_priority_class_is_carried() -> None:
    assert workload_group_from_k8s(V1BETA1).priority_class_name == "batch-high"
    assert workload_group_from_k8s(V1ALPHA2).priority_class_name is None


def test_v1beta1_basic_policy_is_a_group_of_one() -> None:
    obj = copy.deepcopy(V1BETA1)
    obj["spec"]["schedulingPolicy"] = {"basic": {}}
    assert workload_group_from_k8s(obj).min_member == 1


@pytest.mark.parametrize("field,value,where", [
    ("schedulingPolicy", {"gang": {"minCount": 0}}, "minCount must be >= 1"),
    ("parentCompositePodGroupName", 7, "parentCompositePodGroupName must be a string"),
    ("priorityClassName", ["x"], "priorityClassName must be a string"),
])
def test_malformed_v1beta1_fields_are_named(field: str, value: Any, where: str) -> None:
    obj = copy.deepcopy(V1BETA1)
    obj["spec"][field] = value
    with pytest.raises(ValueError, match=f"ml/train: .*{where}"):
        workload_group_from_k8s(obj)


def composite_child() -> dict[str, Any]:
    obj = copy.deepcopy(V1BETA1)
    obj["spec"]["parentCompositePodGroupName"] = "job-set"
    return obj


def test_a_composite_member_names_its_composite() -> None:
    """Linked to its CompositePodGroup, with which it is planned (queue/composite_unit.py);
    its own quorum and topology are read as for any PodGroup."""
    g = workload_group_from_k8s(composite_child())
    assert g.min_member == 4 and g.topology_error == ""
    assert g.parent == "composite-podgroup:ml/job-set"
    assert workload_group_from_k8s(V1BETA1).parent == ""


def _sim_with(obj: dict[str, Any], members: int) -> SimScheduler:
    sim = SimScheduler()
    for i in range(4):
        n = node(f"n{i}", cpu=4000)
        n.labels["example.com/rack"] = "r1"
        sim.add_node(n)
    sim.add_group(workload_group_from_k8s(obj))
    for i in range(members):
        sim.add_pod(pod_from_k8s({
            "metadata": {"name": f"train-{i}", "namespace": "ml", "uid": f"p-{i}",
                         "creationTimestamp": "2026-11-24T10:25:31Z"},
            "spec": {"schedulerName": "gang-scheduler",
                     "schedulingGroup": {"podGroupName": "train"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"}}))
    return sim


@pytest.mark.parametrize("obj", [V1ALPHA2, V1BETA1], ids=["v1alpha2", "v1beta1"])
def test_either_version_places_the_gang_whole(obj: dict[str, Any]) -> None:
    sim = _sim_with(obj, 4)
    for uid in sorted(sim.cache.pods):
        sim.schedule(uid)
    assert all(p.node_name for p in sim.cache.pods.values())


def test_a_composite_member_without_its_composite_places_nothing_and_says_why() -> None:
    sim = _sim_with(composite_child(), 4)
    for uid in sorted(sim.cache.pods):
        sim.schedule(uid)
    assert not any(p.node_name for p in sim.cache.pods.values())
    st = sim.status("workload-api:ml/train")
    assert st.reason == Reason.WAITING_FOR_MEMBERS
    assert st.message.startswith("gang workload-api:ml/train: part of CompositePodGroup "
                                 "ml/job-set, which is not seen (yet)")


def test_a_missing_upstream_podgroup_names_both_versions() -> None:
    msg = missing_group_message("workload-api:ml/train", pod("train-0"))
    assert msg.startswith("gang workload-api:ml/train: PodGroup ml/train (scheduling.k8s.io "
                          "v1beta1 or v1alpha2) not found")

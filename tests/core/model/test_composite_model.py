"""A CompositePodGroup (scheduling.k8s.io/v1alpha3, Kubernetes 1.37 alpha) read into
`CompositeInfo` (model/convert_groups.py): its quorum of groups, its topology key, and
what cannot be honoured said rather than raised; malformed fields named."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.model.convert_groups import composite_from_k8s
from extender.core.model.types import composite_key
from tests.core.model.samples import LEADER_WORKERS


def test_the_quorum_of_groups_and_the_topology_are_read() -> None:
    c = composite_from_k8s(LEADER_WORKERS)
    assert (c.namespace, c.name, c.uid, c.min_group_count) == ("ml", "lw", "c-1", 2)
    assert c.topology_required == "topology.kubernetes.io/zone" and c.error == ""
    assert c.key == composite_key("ml", "lw") == "composite-podgroup:ml/lw"
    assert c.creation > 0


def test_a_basic_policy_asks_for_no_quorum_of_groups() -> None:
    obj = copy.deepcopy(LEADER_WORKERS)
    obj["spec"]["schedulingPolicy"] = {"basic": {}}
    assert composite_from_k8s(obj).min_group_count == 0


@pytest.mark.parametrize("spec,error", [
    ({"parentCompositePodGroupName": "outer"},
     "spec.parentCompositePodGroupName: 'outer': a CompositePodGroup inside another is "
     "not supported"),
    ({"schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}},
     "spec.schedulingConstraints.topology: 2 constraints"),
    ({"schedulingConstraints": {"topology": [{"key": "not a key!"}]}},
     "spec.schedulingConstraints.topology[0].key: 'not a key!' is not a node label key"),
])
def test_what_cannot_be_honoured_is_said(spec: dict[str, Any], error: str) -> None:
    obj = copy.deepcopy(LEADER_WORKERS)
    obj["spec"].update(spec)
    assert composite_from_k8s(obj).error.startswith(error)


@pytest.mark.parametrize("policy,where", [
    ({"gang": {"minGroupCount": 0}}, "minGroupCount must be >= 1, got 0"),
    ({"gang": {}}, "minGroupCount must be >= 1, got 0"),
    ({"gang": {"minGroupCount": "two"}}, "minGroupCount"),
    ("gang", "spec.schedulingPolicy"),
])
def test_a_malformed_policy_is_named(policy: Any, where: str) -> None:
    obj = copy.deepcopy(LEADER_WORKERS)
    obj["spec"]["schedulingPolicy"] = policy
    with pytest.raises(ValueError, match=f"compositepodgroup.scheduling.k8s.io ml/lw: .*{where}"):
        composite_from_k8s(obj)


def test_not_an_object_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="expected an object"):
        composite_from_k8s([1])


@pytest.mark.parametrize("given,read", [
    (None, "PreemptLowerPriority"),  # the gate off, or no PriorityClass: upstream's default
    ("PreemptLowerPriority", "PreemptLowerPriority"),
    ("Never", "Never"),
])
def test_the_preemption_policy_is_read(given: str | None, read: str) -> None:
    """spec.preemptionPolicy (1.37.2, PodGroupPreemptionPolicy): Never keeps the
    composite from preempting (tests/core/preemption/test_composite_victims.py)."""
    obj = copy.deepcopy(LEADER_WORKERS)
    if given is not None:
        obj["spec"]["preemptionPolicy"] = given
    assert composite_from_k8s(obj).preemption_policy == read


@pytest.mark.parametrize("given", ["never", "Sometimes", 1])
def test_a_malformed_preemption_policy_is_named(given: Any) -> None:
    obj = copy.deepcopy(LEADER_WORKERS)
    obj["spec"]["preemptionPolicy"] = given
    with pytest.raises(ValueError,
                       match=r"compositepodgroup\.scheduling\.k8s\.io ml/lw: .*preemptionPolicy"):
        composite_from_k8s(obj)

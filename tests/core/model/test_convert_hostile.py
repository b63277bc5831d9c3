"""Every converter of core/model (pods, nodes, PodDisruptionBudgets, the group objects of
every source, ProvisioningRequests) on valid objects changed in hostile ways
(`hostile.py` says how): each gives a value or a `ValueError` naming the object, never
another exception, so the informer logs and skips the one object and the HTTP verbs
answer with an error instead of a 500.

The valid objects are the repo's own: the pod and node kube-scheduler sent (tests/wire),
and the group objects the model tests read (samples.py), made to carry every field the converters
read (affinity, spread, claims, status conditions, stages) so that each is reached.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.core.model.convert import budget_from_k8s, node_from_k8s, pod_from_k8s
from extender.core.model.convert_groups import (
    composite_from_k8s,
    group_from_k8s,
    volcano_group_from_k8s,
    workload_group_from_k8s,
)
from extender.core.model.convert_jobset import JOBSET_GANG_ANNOTATION, jobset_groups_from_k8s
from extender.core.model.phase import Previous
from extender.core.model.provisioning_request import request_from_k8s
from extender.core.model.types import (
    BACKING_OFF,
    DISRUPTION_MODE,
    MEMBER_DISRUPTED,
    TOPOLOGY_PREFERRED,
    TOPOLOGY_REQUIRED,
    WAITING_FOR_CAPACITY,
)
from tests.core.autoscaled import condition, request_json
from tests.core.model.hostile import (
    assert_named_or_value,
    every_replacement,
    hostile_settings,
    mutate,
)
from tests.core.model.samples import LEADER_WORKERS, TRAIN, V1ALPHA2, V1BETA1, VOLCANO_PG, rjob
from tests.wire import sample

_TERMS = {"nodeSelectorTerms": [{
    "matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}],
    "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}
_SELECTOR = {"matchLabels": {"gang": "g1"},
             "matchExpressions": [{"key": "app", "operator": "Exists"}]}


def _pod() -> dict[str, Any]:
    """The pod kube-scheduler sent, with every field `pod_from_k8s` reads."""
    pod: dict[str, Any] = sample("nodecachecapable-true.filter.request.json")["Pod"]
    meta, spec = pod["metadata"], pod["spec"]
    meta["labels"]["scheduling.x-k8s.io/pod-group"] = "g1"
    meta["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] = "g1-capacity"
    spec["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _TERMS},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": _SELECTOR, "topologyKey": "zone", "namespaces": ["a"],
             "namespaceSelector": {}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": _SELECTOR, "topologyKey": "kubernetes.io/hostname"}]}}
    spec["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": _SELECTOR, "minDomains": 2, "nodeAffinityPolicy": "Honor",
         "nodeTaintsPolicy": "Ignore"}]
    spec["nodeSelector"] = {"pool": "gpu"}
    spec["initContainers"] = [
        {"name": "side", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}},
        {"name": "init", "resources": {"requests": {"cpu": "2"}},
         "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    spec["overhead"] = {"cpu": "10m"}
    spec["resources"] = {"requests": {"cpu": "1500m"}}
    spec["schedulingGates"] = [{"name": "example.com/gate"}]
    spec["schedulingGroup"] = {"podGroupName": "g1"}
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]
    spec["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "d"}})
    spec["nodeName"] = ""
    pod["status"].update({
        "nominatedNodeName": "n1",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "gang-0-gpu"}]})
    return pod


def _node() -> dict[str, Any]:
    node: dict[str, Any] = sample("nodecachecapable-false.filter.request.json")["Nodes"][
        "items"][0]
    node["spec"] = {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
                    "unschedulable": False}
    node["metadata"]["annotations"] = {
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    return node


_STATUS_TIMES = {"conditions": [
    {"type": "DisruptionTarget", "status": "True", "reason": MEMBER_DISRUPTED,
     "lastTransitionTime": "2026-11-29T03:00:00Z"},
    {"type": WAITING_FOR_CAPACITY, "status": "True",
     "lastTransitionTime": "2026-11-29T03:00:00Z"},
    {"type": BACKING_OFF, "status": "True",
     "message": "count=2 requeueAt=2026-11-29T03:01:00Z; backing off"}]}

PODGROUP: dict[str, Any] = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
    "metadata": {"name": "trainer", "namespace": "ml", "uid": "g-1",
                 "creationTimestamp": "2026-11-22T07:14:48.5+01:00",
                 "annotations": {TOPOLOGY_REQUIRED: "zone", TOPOLOGY_PREFERRED: "rack",
                                 DISRUPTION_MODE: "all"}},
    "spec": {"minMember": 4, "minResources": {"cpu": "8", "nvidia.com/gpu": "16"},
             "scheduleTimeoutSeconds": 120},
    "status": {"requeueState": {"count": 2, "requeueAt": "2026-11-29T03:01:00Z"},
               "waitingForCapacitySince": "2026-11-29T03:00:00Z", **_STATUS_TIMES},
}


def _workload(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["parentCompositePodGroupName"] = "lw"
    obj["spec"]["preemptionPolicy"] = "Never"
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    obj["status"] = {**_STATUS_TIMES,
                     "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "shared"}]}
    return obj


def _staged_jobset() -> dict[str, Any]:
    """TRAIN in stages (InOrder, dependsOn), split and exclusive, with a status."""
    obj = copy.deepcopy(TRAIN)
    obj["metadata"]["annotations"] = {
        JOBSET_GANG_ANNOTATION: "per-replicated-job",
        "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack", TOPOLOGY_REQUIRED: "zone"}
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    obj["spec"]["replicatedJobs"].append(
        rjob("eval", 1, 2, completions=1, dependsOn=[{"name": "workers", "status": "Ready"}],
             annotations={JOBSET_GANG_ANNOTATION: "per-job"}))
    obj["status"] = {"restarts": 1, "replicatedJobsStatus": [
        {"name": "driver", "ready": 1, "succeeded": 0, "failed": 0},
        {"name": "workers", "ready": 2, "succeeded": 0, "failed": 0}]}
    return obj


def _composite() -> dict[str, Any]:
    obj = copy.deepcopy(LEADER_WORKERS)
    obj["spec"]["preemptionPolicy"] = "PreemptLowerPriority"
    obj["status"] = copy.deepcopy(_STATUS_TIMES)
    return obj


_PDB: dict[str, Any] = {"metadata": {"name": "pdb", "namespace": "ml"},
                        "spec": {"minAvailable": 2, "selector": _SELECTOR},
                        "status": {"disruptionsAllowed": 1, "currentHealthy": 3}}

_REQUEST = request_json([condition("Accepted"), condition("Provisioned", "False")])
_REQUEST["status"]["conditions"][1]["reason"] = "CapacityIsNotFound"

# (converter, kind its errors are named by, valid object, fields it reads that the
# object may lack)
CASES: dict[str, tuple[Callable[[Any], Any], str, dict[str, Any], tuple[str, ...]]] = {
    "pod": (pod_from_k8s, "pod", _pod(), ("deletionTimestamp", "priority", "hostPort")),
    "node": (node_from_k8s, "node", _node(), ("capacity", "unschedulable")),
    "budget": (budget_from_k8s, "poddisruptionbudget", _PDB, ()),
    "podgroup": (group_from_k8s, "podgroup", PODGROUP, ()),
    "volcano": (volcano_group_from_k8s, "volcano podgroup", VOLCANO_PG, ("annotations",)),
    "workload-v1alpha2": (workload_group_from_k8s, "podgroup.scheduling.k8s.io",
                          _workload(V1ALPHA2), ()),
    "workload-v1beta1": (workload_group_from_k8s, "podgroup.scheduling.k8s.io",
                         _workload(V1BETA1), ()),
    "composite": (composite_from_k8s, "compositepodgroup.scheduling.k8s.io", _composite(),
                  ("parentCompositePodGroupName",)),
    "jobset": (jobset_groups_from_k8s, "jobset", TRAIN, ()),
    "jobset-staged": (jobset_groups_from_k8s, "jobset", _staged_jobset(), ()),
    "provisioningrequest": (request_from_k8s, "provisioningrequest", _REQUEST, ()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_valid_objects_convert(case: str) -> None:
    """Each starting point is valid, so that a failure below is the mutation's."""
    convert, _kind, obj, _extra = CASES[case]
    convert(copy.deepcopy(obj))


@pytest.mark.parametrize("case", sorted(CASES))
@hostile_settings()
@given(data=st.data())
def test_a_hostile_object_gives_a_value_or_an_error_naming_it(
    case: str, data: st.DataObject
) -> None:
    convert, kind, obj, extra = CASES[case]
    assert_named_or_value(convert, mutate(data, obj, extra), kind)


@hostile_settings()
@given(data=st.data())
def test_a_hostile_group_status_is_read_leniently(data: st.DataObject) -> None:
    """`Previous.from_k8s` is tolerant by contract (a status someone else wrote): it
    never raises at all."""
    Previous.from_k8s(mutate(data, PODGROUP["status"]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_field_deleted_or_replaced_by_each_hostile_value(case: str) -> None:
    """Exhaustive where the property test samples: each field of the valid object, one
    at a time, deleted or replaced by each of `hostile.killers`."""
    convert, kind, obj, _extra = CASES[case]
    for path, changed in every_replacement(obj):
        try:
            assert_named_or_value(convert, changed, kind)
        except Exception as e:
            raise AssertionError(f"{case} at {path}: {type(e).__name__}: {e}") from e


def _replaced(valid: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of `valid` with the field at `path` set to `value`; the valid object stays
    as it is for the other cases."""
    obj = copy.deepcopy(valid)
    at: Any = obj
    for step in path[:-1]:
        at = at[step]
    at[path[-1]] = value
    return obj


# A list nested as deep as orjson decodes (1,024 levels; the informer and the HTTP
# verbs decode every object with it): a plain repr of it in an error message raised
# RecursionError, which escaped each of these converters in place of its ValueError.
_DEEP_JSON = orjson.loads("[" * 1000 + "]" * 1000)


@pytest.mark.parametrize(("case", "path", "message"), [
    ("budget", ("status", "disruptionsAllowed"),
     r"poddisruptionbudget ml/pdb: status.disruptionsAllowed must be an integer, "
     r"got \[\[\[\[\.\.\.\]\]\]\]$"),
    ("budget", ("spec", "selector", "matchLabels", "gang"),
     r"poddisruptionbudget ml/pdb: spec.selector.matchLabels must map strings to strings, "
     r"got 'gang': \[\[\[\[\.\.\.\]\]\]\]$"),
    ("podgroup", ("spec", "minMember"), r"podgroup ml/trainer: spec.minMember must be an"),
    ("composite", ("metadata", "creationTimestamp"),
     r"compositepodgroup.scheduling.k8s.io ml/lw: metadata.creationTimestamp must be an "
     r"RFC 3339 string, got \[\[\[\[\.\.\.\]\]\]\]$"),
    ("node", ("spec", "unschedulable"), r"node fake-node-1: spec.unschedulable must be a "
                                        r"boolean, got \[\["),
    ("node", ("status", "allocatable", "cpu"), r"node fake-node-1: invalid quantity "
                                               r"'\[\[\[\[\.\.\.\]\]\]\]' for cpu$"),
    ("provisioningrequest", ("spec", "podSets", 0, "count"),
     r"provisioningrequest ns/g-capacity: spec.podSets\[0\].count is not a count: \[\["),
])
def test_a_value_nested_as_deep_as_orjson_reads_is_named_not_a_recursion_error(
    case: str, path: tuple[Any, ...], message: str
) -> None:
    convert, _kind, valid, _extra = CASES[case]
    obj = _replaced(valid, path, _DEEP_JSON)
    with pytest.raises(ValueError, match=message):
        convert(obj)


def test_a_megabyte_string_is_cut_in_the_message() -> None:
    obj = copy.deepcopy(PODGROUP)
    obj["spec"]["minMember"] = "7" * (1 << 20)
    with pytest.raises(ValueError) as e:
        group_from_k8s(obj)
    assert len(str(e.value)) < 200 and "spec.minMember must be an integer, got '777" in str(e.value)


def test_every_field_of_a_group_status_deleted_or_replaced_is_read_leniently() -> None:
    for path, changed in every_replacement(PODGROUP["status"]):
        try:
            Previous.from_k8s(changed)
        except Exception as e:
            raise AssertionError(f"status at {path}: {type(e).__name__}: {e}") from e


def test_a_deep_condition_status_reads_as_absent() -> None:
    """`str()` of it raised RecursionError in the status writer's step, which dropped
    the status of every other gang computed in that round."""
    cond = {"type": "Scheduled", "status": _DEEP_JSON, "lastTransitionTime": _DEEP_JSON}
    assert Previous.from_k8s({"conditions": [cond]}).conditions == {"Scheduled": ("", "")}


_LONG = "x" * (200 << 10)  # an annotation may hold 256 KiB


@pytest.mark.parametrize(("case", "path"), [
    ("pod", ("spec", "affinity", "podAntiAffinity",
             "requiredDuringSchedulingIgnoredDuringExecution", 0, "labelSelector",
             "matchExpressions", 0, "operator")),
    ("podgroup", ("metadata", "annotations", DISRUPTION_MODE)),
    ("workload-v1beta1", ("spec", "preemptionPolicy")),
    ("workload-v1alpha2", ("spec", "disruptionMode")),
    ("composite", ("spec", "disruptionMode")),
    ("jobset-staged", ("metadata", "annotations", JOBSET_GANG_ANNOTATION)),
])
def test_a_long_value_is_cut_in_the_error(case: str, path: tuple[Any, ...]) -> None:
    """The value was repeated whole: one such object made a 200 KiB log line each time
    the informer skipped it."""
    convert, kind, valid, _extra = CASES[case]
    obj = _replaced(valid, path, _LONG)
    with pytest.raises(ValueError, match=f"^{kind} .*'x+\\.\\.\\.x+'") as e:
        convert(obj)
    assert len(str(e.value)) < 400


@pytest.mark.parametrize("annotation", [TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED])
def test_a_long_topology_annotation_is_cut_in_the_reason(annotation: str) -> None:
    """Kept on the group and written to its status and Events, whole before."""
    obj = copy.deepcopy(PODGROUP)
    obj["metadata"]["annotations"][annotation] = _LONG
    error = group_from_k8s(obj).topology_error
    assert "'xxx" in error and len(error) < 400, error[:400]

"""Kubernetes JSON to core types, on objects a real kube-scheduler sent (tests/wire,
recorded by ``python -m e2e.capture_wire``)."""

from __future__ import annotations

import contextlib
import copy
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.model.convert import node_from_k8s, parse_time, pod_from_k8s
from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.types import (
    LabelSelector,
    NodeSelectorTerm,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from tests.core.model.hostile import paths
from tests.wire import created_pod, sample

Gi = 1 << 30


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = sample(name)
    return data


@pytest.fixture
def pod_obj() -> dict[str, Any]:
    return copy.deepcopy(load("nodecachecapable-true.filter.request.json")["Pod"])


@pytest.fixture
def node_objs() -> list[dict[str, Any]]:
    """The Node objects of the nodeCacheCapable=false filter request, in name order
    (kube-scheduler sends them in its own order, which changes from one recording to
    the next)."""
    items: list[dict[str, Any]] = load("nodecachecapable-false.filter.request.json")["Nodes"][
        "items"
    ]
    return sorted(copy.deepcopy(items), key=lambda o: str(o["metadata"]["name"]))


# ----- pods ---------------------------------------------------------------------------


def test_real_pod(pod_obj: dict[str, Any]) -> None:
    """Identity and creation time as the API server assigned them on create (the
    recording keeps that answer beside the bodies), read from kube-scheduler's copy."""
    created = created_pod(node_cache_capable=True)
    p = pod_from_k8s(pod_obj)
    assert p.uid == created["uid"]
    assert p.key == "default/gang-0" == f"{created['namespace']}/{created['name']}"
    assert p.requests == {"cpu": 1000, "memory": Gi, "nvidia.com/gpu": 1, "pods": 1}
    assert p.labels == {"app": "wire", "gang": "g1"}
    assert p.priority == 0
    assert p.node_name == ""
    assert p.phase == "Pending"
    assert p.scheduler_name == "gang-scheduler"
    # Read independently of the converter: Python's own RFC 3339 parser.
    assert p.creation == datetime.fromisoformat(created["creationTimestamp"]).timestamp()
    assert not p.deleting and not p.gated
    assert p.node_selector == {}
    assert p.required_node_affinity is None
    assert p.tolerations == (
        Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
        Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    )
    assert p.required_anti_affinity == ()
    assert p.group is None
    assert not p.unschedulable


def test_pod_state_fields(pod_obj: dict[str, Any]) -> None:
    pod_obj["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "trainer"
    pod_obj["metadata"]["deletionTimestamp"] = "2026-11-22T07:20:00Z"
    pod_obj["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    pod_obj["spec"]["nodeName"] = "fake-node-1"
    pod_obj["spec"]["priority"] = 1000
    pod_obj["status"]["phase"] = "Running"
    p = pod_from_k8s(pod_obj)
    assert p.group == "trainer"
    assert p.deleting and p.gated
    assert p.node_name == "fake-node-1" and p.takes_capacity
    assert p.priority == 1000
    assert p.phase == "Running"
    assert p.nominated_node == ""


def test_pod_nominated_node_is_read_and_checked(pod_obj: dict[str, Any]) -> None:
    """kube-scheduler's preemption writes status.nominatedNodeName on the pod it freed
    capacity for: the cache keeps that capacity for it (`Cache.nominated_on`)."""
    pod_obj["status"]["nominatedNodeName"] = "fake-node-2"
    assert pod_from_k8s(pod_obj).nominated_node == "fake-node-2"
    pod_obj["status"]["nominatedNodeName"] = 7
    with pytest.raises(ValueError, match=r"status\.nominatedNodeName must be a string"):
        pod_from_k8s(pod_obj)


@pytest.mark.parametrize(
    ("conditions", "unschedulable"),
    [
        (None, False),
        ([], False),
        ([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}], True),
        ([{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}], True),
        ([{"type": "PodScheduled", "status": "True"}], False),
        # Gated pods were never queued; lifting the gates queues them by itself.
        ([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}], False),
        (
            [
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/4 nodes are available", "lastTransitionTime": None},
            ],
            True,
        ),
        ([{"type": "Ready", "status": "False"}], False),
    ],
)
def test_pod_scheduled_false_marks_the_pod_unschedulable(
    pod_obj: dict[str, Any], conditions: Any, unschedulable: bool
) -> None:
    pod_obj["status"]["conditions"] = conditions
    assert pod_from_k8s(pod_obj).unschedulable is unschedulable


def test_pod_defaults_for_absent_fields() -> None:
    p = pod_from_k8s({"metadata": {"name": "a", "namespace": "ns", "uid": "u"}})
    assert p.requests == {"pods": 1}
    assert p.priority == 0 and p.phase == "Pending" and p.creation == 0.0
    assert p.scheduler_name == "default-scheduler"
    assert p.labels == {} and p.tolerations == ()


def test_pod_constraints(pod_obj: dict[str, Any]) -> None:
    pod_obj["spec"]["nodeSelector"] = {"pool": "gpu"}
    pod_obj["spec"]["tolerations"].append({"key": "dedicated", "value": "ml"})
    pod_obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["a", "b"]},
                            {"key": "cores", "operator": "Gt", "values": ["16"]},
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": []}}
            ],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchLabels": {"app": "wire"},
                        "matchExpressions": [{"key": "tier", "operator": "Exists"}],
                    },
                    "topologyKey": "kubernetes.io/hostname",
                },
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaces": ["data"],
                    "namespaceSelector": {},
                },
            ]
        },
    }
    p = pod_from_k8s(pod_obj)
    assert p.node_selector == {"pool": "gpu"}
    assert p.tolerations[-1] == Toleration("dedicated", "Equal", "ml", "")
    assert p.required_node_affinity == (
        NodeSelectorTerm(
            match_expressions=(
                Requirement("zone", "In", ("a", "b")),
                Requirement("cores", "Gt", ("16",)),
            )
        ),
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n1",)),)),
    )
    assert p.required_anti_affinity == (
        PodAffinityTerm(
            LabelSelector((("app", "wire"),), (Requirement("tier", "Exists"),)),
            "kubernetes.io/hostname",
        ),
        PodAffinityTerm(
            LabelSelector((("app", "db"),)),
            "kubernetes.io/hostname",
            ("data",),
            namespace_selector=LabelSelector(),
        ),
    )


def test_pod_affinity_and_spread_constraints(pod_obj: dict[str, Any]) -> None:
    zone = "topology.kubernetes.io/zone"
    pod_obj["spec"]["affinity"] = {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"job": "t"}}, "topologyKey": zone}],
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "rack"}}],
    }}
    pod_obj["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"job": "t"}}},
        {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
         "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
        # Only scores nodes: never keeps a pod off one.
        {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    p = pod_from_k8s(pod_obj)
    assert p.required_affinity == (PodAffinityTerm(LabelSelector((("job", "t"),)), zone),)
    assert p.required_anti_affinity == ()
    assert p.spread_constraints == (
        SpreadConstraint(1, zone, LabelSelector((("job", "t"),))),
        SpreadConstraint(2, "rack", None, 3, "Ignore", "Honor"),
    )
    pod_obj["spec"]["topologySpreadConstraints"][0]["maxSkew"] = 0
    with pytest.raises(ValueError, match=r"topologySpreadConstraints\[0\].maxSkew must be >= 1"):
        pod_from_k8s(pod_obj)


def test_pod_empty_node_affinity_terms_are_kept_as_matching_nothing(
    pod_obj: dict[str, Any],
) -> None:
    pod_obj["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}
    }
    assert pod_from_k8s(pod_obj).required_node_affinity == ()


def test_pod_anti_affinity_without_selector(pod_obj: dict[str, Any]) -> None:
    pod_obj["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    (term,) = pod_from_k8s(pod_obj).required_anti_affinity
    assert term.selector is None  # selects nothing, as upstream


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    *head, last = path.split(".")
    for k in head:
        obj = obj[int(k)] if isinstance(obj, list) else obj[k]
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "spec.containers.0.resources.requests.cpu",
            "abc",
            "pod default/gang-0: invalid quantity 'abc' for cpu",
        ),
        (
            "spec.containers.0.resources.requests.memory",
            [1],
            r"pod default/gang-0: invalid quantity '\[1\]' for memory",
        ),
        ("spec.containers", "main", "pod default/gang-0: spec.containers must be a list"),
        ("spec.containers.0", 3, r"pod default/gang-0: spec.containers\[0\] must be an object"),
        ("metadata.labels", {"a": 1}, "pod default/gang-0: metadata.labels must map strings"),
        ("metadata.labels", ["a"], "pod default/gang-0: metadata.labels must be an object"),
        ("spec.priority", "high", "pod default/gang-0: spec.priority must be an integer"),
        ("spec.priority", True, "pod default/gang-0: spec.priority must be an integer"),
        ("spec.tolerations", {}, "pod default/gang-0: spec.tolerations must be a list"),
        ("spec.tolerations.0", "x", r"pod default/gang-0: spec.tolerations\[0\] must be an"),
        ("spec.tolerations.0.key", 5, r"pod default/gang-0: spec.tolerations\[0\].key must be"),
        ("spec.nodeSelector", "gpu", "pod default/gang-0: spec.nodeSelector must be an object"),
        ("spec.schedulingGates", "x", "pod default/gang-0: spec.schedulingGates must be a list"),
        ("metadata.creationTimestamp", "yesterday", "pod default/gang-0: .*invalid RFC 3339"),
        ("metadata.creationTimestamp", 5, "pod default/gang-0: .*RFC 3339"),
        ("metadata.uid", None, "pod default/gang-0: metadata.uid is missing"),
        ("spec", [], "pod default/gang-0: spec must be an object"),
        ("status", "x", "pod default/gang-0: status must be an object"),
        ("status.conditions", {}, "pod default/gang-0: status.conditions must be a list"),
        (
            "status.conditions",
            [{"type": "PodScheduled", "status": False}],
            r"pod default/gang-0: status.conditions\[0\].status must be a string",
        ),
        (
            "spec.affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "a", "operator": "Like"}]}
                        ]
                    }
                }
            },
            "pod default/gang-0: .*unknown operator 'Like'",
        ),
        (
            "spec.affinity",
            {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            },
            "pod default/gang-0: .*unknown operator 'Gt'",
        ),
    ],
)
def test_malformed_pods_raise_value_error_naming_the_pod(
    pod_obj: dict[str, Any], path: str, value: Any, message: str
) -> None:
    _set(pod_obj, path, value)
    with pytest.raises(ValueError, match=message):
        pod_from_k8s(pod_obj)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (None, "pod: expected an object"),
        ("pod", "pod: expected an object"),
        ({}, "pod: metadata.name is missing"),
        ({"metadata": "x"}, "pod: metadata must be an object"),
        ({"metadata": {"name": 5}}, "pod: metadata.name must be a string"),
        ({"metadata": {"name": "a", "namespace": "ns"}}, "pod ns/a: metadata.uid is missing"),
    ],
)
def test_pods_without_identity(obj: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pod_from_k8s(obj)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@given(data=st.data())
def test_any_corruption_of_a_pod_gives_a_pod_or_value_error(
    pod_obj: dict[str, Any], data: st.DataObject
) -> None:
    obj = copy.deepcopy(pod_obj)
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "t"}
            ]
        },
    }
    obj["spec"]["initContainers"] = [{"name": "i", "restartPolicy": "Always"}]
    path = data.draw(st.sampled_from(paths(obj)[1:]))
    value = data.draw(_json)
    target: Any = obj
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    with contextlib.suppress(ValueError):  # the only exception allowed
        pod_from_k8s(obj)


# ----- nodes --------------------------------------------------------------------------


def test_real_nodes(node_objs: list[dict[str, Any]]) -> None:
    nodes = [node_from_k8s(o) for o in node_objs]
    assert [n.name for n in nodes] == [o["metadata"]["name"] for o in node_objs]
    n = nodes[0]
    assert n.name == "fake-node-0"
    assert n.allocatable == {
        "cpu": 8000,
        "ephemeral-storage": 100 * Gi,
        "memory": 32 * Gi,
        "nvidia.com/gpu": 8,
        "pods": 110,
    }
    assert n.labels["kubernetes.io/hostname"] == "fake-node-0"
    assert n.labels["pool"] == "gpu"
    assert n.taints == ()
    assert not n.unschedulable


def test_node_taints_unschedulable_and_capacity_fallback(node_objs: list[dict[str, Any]]) -> None:
    o = node_objs[0]
    o["spec"]["unschedulable"] = True
    o["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": None},
        {"key": "gpu", "value": "a100", "effect": "NoExecute"},
    ]
    del o["status"]["allocatable"]
    o["status"]["capacity"]["cpu"] = "4"
    n = node_from_k8s(o)
    assert n.unschedulable
    assert n.taints == (
        Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),
        Taint("gpu", "a100", "NoExecute"),
    )
    assert n.allocatable["cpu"] == 4000
    assert node_from_k8s({"metadata": {"name": "bare"}}).allocatable == {}


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("status.allocatable.cpu", "eight", "node fake-node-0: invalid quantity 'eight' for cpu"),
        ("status.allocatable", "8", "node fake-node-0: status.allocatable must be an object"),
        ("spec.taints", {"key": "a"}, "node fake-node-0: spec.taints must be a list"),
        ("spec.unschedulable", "yes", "node fake-node-0: spec.unschedulable must be a boolean"),
        ("metadata.labels", {"a": None}, "node fake-node-0: metadata.labels must map"),
    ],
)
def test_malformed_nodes(
    node_objs: list[dict[str, Any]], path: str, value: Any, message: str
) -> None:
    o = node_objs[0]
    _set(o, path, value)
    with pytest.raises(ValueError, match=message):
        node_from_k8s(o)


# ----- PodGroups ----------------------------------------------------------------------


def pg(spec: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "trainer",
            "namespace": "ml",
            "uid": "g-1",
            "creationTimestamp": "2026-11-22T07:14:48.5+01:00",
        },
        "spec": spec,
    }


def test_group() -> None:
    g = group_from_k8s(
        pg(
            {
                "minMember": 4,
                "minResources": {"cpu": "8", "nvidia.com/gpu": "16"},
                "scheduleTimeoutSeconds": 120,
            }
        )
    )
    assert g.key == "ml/trainer"
    assert g.uid == "g-1"
    assert g.min_member == 4
    assert g.min_resources == {"cpu": 8000, "nvidia.com/gpu": 16}
    assert g.schedule_timeout_seconds == 120
    assert g.creation == 1795331688.5 - 3600


@pytest.mark.parametrize(
    ("spec", "min_member", "timeout", "min_resources"),
    [
        (None, 1, None, None),
        ({}, 1, None, None),
        ({"minMember": 0}, 1, None, None),
        ({"minMember": 1, "scheduleTimeoutSeconds": 0, "minResources": {}}, 1, None, None),
    ],
)
def test_group_defaults(
    spec: dict[str, Any] | None, min_member: int, timeout: int | None, min_resources: Any
) -> None:
    g = group_from_k8s(pg(spec))
    assert (g.min_member, g.schedule_timeout_seconds, g.min_resources) == (
        min_member,
        timeout,
        min_resources,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minMember": -1}, "podgroup ml/trainer: spec.minMember must be >= 1, got -1"),
        ({"minMember": "4"}, "podgroup ml/trainer: spec.minMember must be an integer"),
        ({"minMember": 2.5}, "podgroup ml/trainer: spec.minMember must be an integer"),
        ({"scheduleTimeoutSeconds": -5}, "podgroup ml/trainer: spec.scheduleTimeoutSeconds must"),
        ({"minResources": {"cpu": "lots"}}, "podgroup ml/trainer: invalid quantity 'lots' for cpu"),
        ({"minResources": ["cpu"]}, "podgroup ml/trainer: spec.minResources must be an object"),
    ],
)
def test_malformed_groups(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        group_from_k8s(pg(spec))


REQUIRED = "gang-extender.x-k8s.io/topology-required"
PREFERRED = "gang-extender.x-k8s.io/topology-preferred"


def with_annotations(annotations: dict[str, str]) -> dict[str, Any]:
    obj = pg({"minMember": 2})
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.mark.parametrize(
    ("annotations", "required", "preferred"),
    [
        ({}, "", ()),
        ({REQUIRED: "example.com/rack"}, "example.com/rack", ()),
        ({REQUIRED: " topology.kubernetes.io/zone "}, "topology.kubernetes.io/zone", ()),
        ({PREFERRED: "example.com/rack, example.com/block,example.com/rack"}, "",
         ("example.com/rack", "example.com/block")),
        ({REQUIRED: "zone", PREFERRED: "rack"}, "zone", ("rack",)),
        ({REQUIRED: "kubernetes.io/hostname"}, "kubernetes.io/hostname", ()),
    ],
)
def test_group_topology_annotations(
    annotations: dict[str, str], required: str, preferred: tuple[str, ...]
) -> None:
    g = group_from_k8s(with_annotations(annotations))
    assert (g.topology_required, g.topology_preferred, g.topology_error) == (
        required, preferred, "")


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({REQUIRED: ""}, f"annotation {REQUIRED}: '' is not a node label key (empty)"),
        ({REQUIRED: "rack zone"}, "'rack zone' is not a node label key (the name part must"),
        ({REQUIRED: "a/b/c"}, "more than one '/'"),
        ({REQUIRED: "/rack"}, "the prefix before '/' is empty"),
        ({REQUIRED: "Example.com/rack"}, "the prefix must be a DNS subdomain"),
        ({REQUIRED: "x" * 64}, "the name part is 64 characters, at most 63"),
        ({PREFERRED: "rack,,block"}, f"annotation {PREFERRED}: 'rack,,block' is not a node "
                                     "label key (an empty key)"),
        ({PREFERRED: "rack,-block"}, "key '-block': the name part must"),
        ({REQUIRED: "rack", PREFERRED: "rack,"}, "(an empty key)"),
    ],
)
def test_malformed_topology_annotations_keep_the_group_and_say_why(
    annotations: dict[str, str], message: str
) -> None:
    # Rejecting the object would leave its members with "PodGroup not found".
    g = group_from_k8s(with_annotations(annotations))
    assert g.key == "ml/trainer" and g.min_member == 2
    assert message in g.topology_error
    assert g.topology_error.endswith("the gang is not placed until the annotation is fixed")
    assert (g.topology_required, g.topology_preferred) == ("", ())


def test_parse_time() -> None:
    assert parse_time("1970-01-01T00:00:10Z") == 10.0
    assert parse_time("1970-01-01T00:00:10.250000Z") == 10.25
    assert parse_time("1970-01-01T01:00:10+01:00") == 10.0
    assert parse_time("1970-01-01T00:00:10") == 10.0  # no offset: UTC
    assert parse_time(None) == 0.0
    with pytest.raises(ValueError, match="invalid RFC 3339"):
        parse_time("10 o'clock")


# ----- priority and PodDisruptionBudgets (issue 17) ----------------------------------------


def test_preemption_policy(pod_obj: dict[str, Any]) -> None:
    assert pod_from_k8s(pod_obj).preemption_policy == "PreemptLowerPriority"
    pod_obj["spec"]["preemptionPolicy"] = "Never"
    assert pod_from_k8s(pod_obj).preemption_policy == "Never"
    pod_obj["spec"]["preemptionPolicy"] = 3
    with pytest.raises(ValueError, match=r"spec\.preemptionPolicy must be a string"):
        pod_from_k8s(pod_obj)


def test_budget() -> None:
    from extender.core.model.convert import budget_from_k8s

    obj: dict[str, Any] = {"metadata": {"name": "pdb", "namespace": "ml"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "a"}}},
           "status": {"disruptionsAllowed": 1, "currentHealthy": 3}}
    b = budget_from_k8s(obj)
    assert (b.key, b.disruptions_allowed) == ("ml/pdb", 1)
    assert b.selector == LabelSelector((("app", "a"),))
    del obj["status"]
    assert budget_from_k8s(obj).disruptions_allowed == 0  # not looked at yet: none
    del obj["spec"]["selector"]
    assert budget_from_k8s(obj).selector is None
    with pytest.raises(ValueError, match=r"poddisruptionbudget ml/pdb: status"):
        budget_from_k8s({**obj, "status": {"disruptionsAllowed": "x"}})

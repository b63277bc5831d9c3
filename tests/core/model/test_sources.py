"""Gang sources (core/model/sources.py): which gang a pod joins, each source's group object as
`GroupInfo`, Kueue's object-less groups, and that two sources never share a gang."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.core.model.convert import pod_from_k8s
from extender.core.model.convert_groups import volcano_group_from_k8s, workload_group_from_k8s
from extender.core.model.sources import (
    JOBSET,
    JOBSET_ATTEMPT_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_UID_LABEL,
    KUEUE_GROUP_LABEL,
    KUEUE_TOTAL_ANNOTATION,
    PRECEDENCE,
    VOLCANO_GROUP_ANNOTATION,
    jobset_gang_name,
    jobset_job_gang_name,
    jobset_rjob_gang_name,
    jobset_set_gang_of,
    membership,
)
from extender.core.model.types import (
    GROUP_LABEL,
    KUEUE,
    SCHEDULER_PLUGINS,
    VOLCANO,
    WORKLOAD_API,
    GroupInfo,
    Membership,
    PodInfo,
    gang_key,
    split_gang_key,
)
from extender.core.model.vocabulary import GroupRef
from tests.core.model.samples import VOLCANO_PG
from tests.core.sim import SimScheduler, group, node, pod

POD: dict[str, Any] = {
    "metadata": {"name": "w-0", "namespace": "ml", "uid": "u-0",
                 "creationTimestamp": "2026-11-24T10:25:29Z"},
    "spec": {"schedulerName": "gang-scheduler",
             "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}

# Every source's key on a pod, as (where, key, value) on the JSON above.
KEYS = {
    SCHEDULER_PLUGINS: ("labels", GROUP_LABEL, "sp"),
    WORKLOAD_API: ("spec", "schedulingGroup", {"podGroupName": "up"}),
    VOLCANO: ("annotations", VOLCANO_GROUP_ANNOTATION, "vc"),
    KUEUE: ("labels", KUEUE_GROUP_LABEL, "kq"),
    JOBSET: ("labels", JOBSET_NAME_LABEL, "js"),
}
# The JobSet controller sets the uid and attempt beside the name (a JobSet's pod).
JOBSET_UID = "6d1f0a2c-0b7e-4a55-9c1e-3f1f6a9e2b10"
NAMES = {SCHEDULER_PLUGINS: "sp", WORKLOAD_API: "up", VOLCANO: "vc", KUEUE: "kq",
         JOBSET: jobset_gang_name("js", JOBSET_UID, 0)}


def pod_json(*sources: str, total: str | None = "4") -> dict[str, Any]:
    obj = copy.deepcopy(POD)
    for source in sources:
        where, key, value = KEYS[source]
        if where == "spec":
            obj["spec"][key] = value
        else:
            obj["metadata"].setdefault(where, {})[key] = value
    if JOBSET in sources:
        obj["metadata"]["labels"].update({JOBSET_UID_LABEL: JOBSET_UID,
                                          JOBSET_ATTEMPT_LABEL: "0"})
    if KUEUE in sources and total is not None:
        obj["metadata"].setdefault("annotations", {})[KUEUE_TOTAL_ANNOTATION] = total
    return obj


# ----- which gang a pod joins ------------------------------------------------------------


@pytest.mark.parametrize("source", PRECEDENCE)
def test_each_source_alone_makes_the_pod_a_member(source: str) -> None:
    p = pod_from_k8s(pod_json(source))
    assert p.membership is not None and p.membership.source == source
    assert p.group == NAMES[source]
    assert p.gang == gang_key(source, "ml", NAMES[source])


def test_a_pod_without_any_key_is_plain() -> None:
    p = pod_from_k8s(pod_json())
    assert p.membership is None and p.gang is None


@given(st.sets(st.sampled_from(PRECEDENCE), min_size=1))
def test_the_first_source_in_precedence_wins(sources: set[str]) -> None:
    p = pod_from_k8s(pod_json(*sources))
    winner = next(s for s in PRECEDENCE if s in sources)
    assert p.membership is not None and p.membership.source == winner
    assert p.gang == gang_key(winner, "ml", NAMES[winner])


def test_precedence_is_the_documented_order() -> None:
    assert PRECEDENCE == (SCHEDULER_PLUGINS, WORKLOAD_API, VOLCANO, JOBSET, KUEUE)


@pytest.mark.parametrize("value,total", [("4", 4), (" 12 ", 12), ("0", None), ("-2", None),
                                         ("four", None), (None, None)])
def test_kueue_total_count(value: str | None, total: int | None) -> None:
    assert membership({KUEUE_GROUP_LABEL: "kq"},
                      {KUEUE_TOTAL_ANNOTATION: value} if value is not None else {},
                      "") == Membership(KUEUE, "kq", total)


def test_the_count_annotation_alone_makes_no_member() -> None:
    assert membership({}, {KUEUE_TOTAL_ANNOTATION: "4"}, "") is None


def test_a_malformed_scheduling_group_is_an_error() -> None:
    obj = pod_json()
    obj["spec"]["schedulingGroup"] = {"podGroupName": 3}
    with pytest.raises(ValueError, match=r"spec\.schedulingGroup\.podGroupName"):
        pod_from_k8s(obj)


@given(st.sampled_from(PRECEDENCE), st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?",
                                                   fullmatch=True))
def test_gang_keys_split_back(source: str, name: str) -> None:
    assert split_gang_key(gang_key(source, "ns-1", name)) == (source, "ns-1", name)
    assert GroupRef("ns-1", name, "u", source).key == gang_key(source, "ns-1", name)


def test_scheduler_plugins_keys_are_unchanged() -> None:
    assert gang_key(SCHEDULER_PLUGINS, "ml", "g") == "ml/g"
    assert GroupInfo("ml", "g", 2).key == "ml/g"
    assert GroupInfo("ml", "g", 2, source=VOLCANO).key == "volcano:ml/g"


# ----- group objects -----------------------------------------------------------------------

# Read back from kube-apiserver v1.36.3 (GenericWorkload and
# TopologyAwareWorkloadScheduling on): the API server added the finalizer, disruptionMode
# and podGroupTemplateRef.
UPSTREAM: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
    "metadata": {"name": "pg1", "namespace": "default",
                 "uid": "227e0d5b-a06c-423c-aba6-edaeadf42ade",
                 "creationTimestamp": "2026-11-24T10:25:29Z",
                 "finalizers": ["scheduling.k8s.io/podgroup-protection"]},
    "spec": {"disruptionMode": "Pod", "podGroupTemplateRef": None,
             "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
             "schedulingPolicy": {"gang": {"minCount": 3}}},
    "status": {},
}


def test_upstream_podgroup() -> None:
    g = workload_group_from_k8s(UPSTREAM)
    assert (g.namespace, g.name, g.min_member, g.source) == ("default", "pg1", 3, WORKLOAD_API)
    assert g.uid == "227e0d5b-a06c-423c-aba6-edaeadf42ade"
    assert g.topology_required == "topology.kubernetes.io/zone"
    assert g.key == "workload-api:default/pg1"
    assert g.creation == 1795515929.0


def test_upstream_basic_policy_is_a_group_of_one() -> None:
    obj = copy.deepcopy(UPSTREAM)
    obj["spec"]["schedulingPolicy"] = {"basic": {}}
    del obj["spec"]["schedulingConstraints"]
    g = workload_group_from_k8s(obj)
    assert g.min_member == 1 and g.topology_required == ""


@pytest.mark.parametrize("topology,error", [
    ([{"key": "a/b/c"}], "spec.schedulingConstraints.topology[0].key: 'a/b/c' is not a node "
                         "label key (more than one '/')"),
    ([{"key": ""}], "spec.schedulingConstraints.topology[0].key: '' is not a node label key "
                    "(empty)"),
    ([{"key": "example.com/rack"}, {"key": "topology.kubernetes.io/zone"}],
     "spec.schedulingConstraints.topology: 2 constraints ('example.com/rack', "
     "'topology.kubernetes.io/zone'); only one is supported, as the API allows"),
])
def test_an_upstream_topology_key_that_is_not_usable_keeps_the_group_and_says_why(
        topology: list[dict[str, str]], error: str) -> None:
    """The object is kept (its members would otherwise be told "PodGroup not found"); the
    gang is not placed, with `topology_error` as its InvalidTopology message."""
    obj = copy.deepcopy(UPSTREAM)
    obj["spec"]["schedulingConstraints"] = {"topology": topology}
    g = workload_group_from_k8s(obj)
    assert g.topology_required == "" and g.topology_error.startswith(error), g.topology_error
    assert g.topology_error.endswith("; the gang is not placed until it is fixed")


@pytest.mark.parametrize("spec,where", [
    ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "minCount must be >= 1"),
    ({"schedulingPolicy": {"gang": {"minCount": "3"}}}, "minCount must be an integer"),
    ({"schedulingPolicy": {"gang": {"minCount": 2}},
      "schedulingConstraints": {"topology": "zone"}}, "topology must be a list"),
])
def test_malformed_upstream_podgroups_are_named(spec: dict[str, Any], where: str) -> None:
    obj = copy.deepcopy(UPSTREAM)
    obj["spec"] = spec
    with pytest.raises(ValueError, match=f"default/pg1: .*{where}"):
        workload_group_from_k8s(obj)


def test_volcano_podgroup() -> None:
    g = volcano_group_from_k8s(VOLCANO_PG)
    assert (g.namespace, g.name, g.min_member, g.source) == ("ml", "mpi", 5, VOLCANO)
    assert g.min_resources == {"cpu": 10000, "memory": 20 << 30}
    assert g.priority_class_name == "high"
    assert g.schedule_timeout_seconds is None
    assert g.key == "volcano:ml/mpi"


def test_volcano_minmember_zero_is_one_and_negative_is_refused() -> None:
    obj = copy.deepcopy(VOLCANO_PG)
    obj["spec"] = {"minMember": 0}
    assert volcano_group_from_k8s(obj).min_member == 1
    obj["spec"] = {"minMember": -1}
    with pytest.raises(ValueError, match=r"ml/mpi: spec\.minMember"):
        volcano_group_from_k8s(obj)


# ----- in the gang manager ----------------------------------------------------------------


def kueue_pod(name: str, total: int | None, group_name: str = "kq", **kw: Any) -> PodInfo:
    return pod(name, membership=Membership(KUEUE, group_name, total), **kw)


def member(name: str, source: str, group_name: str, **kw: Any) -> PodInfo:
    return pod(name, membership=Membership(source, group_name), **kw)


def test_kueue_pods_are_never_bound_one_by_one() -> None:
    """The report of issue 19: four pods of a Kueue pod group, room for three; three were
    bound one by one as plain pods. Now none is, until the fourth fits."""
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=1000))
    pods = [sim.add_pod(kueue_pod(f"kq-{i}", 4)) for i in range(4)]
    sim.run_all()
    assert sim.bound() == []
    g = sim.manager.reads.group("kueue:ns/kq")
    assert g is not None and g.min_member == 4 and g.source == KUEUE
    assert "Unplaceable" in str(sim.status("kueue:ns/kq").reason)  # 3 nodes for 4 pods
    sim.add_node(node("n3", cpu=1000))
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == [p.name for p in pods]


def test_kueue_group_follows_its_pods() -> None:
    sim = SimScheduler()
    sim.add_node(node("n0"))
    a = sim.add_pod(kueue_pod("kq-0", 2, creation=50.0))
    assert sim.manager.reads.group("kueue:ns/kq") == GroupInfo(
        "ns", "kq", 2, uid="kueue:ns/kq", creation=50.0, source=KUEUE)
    b = sim.add_pod(kueue_pod("kq-1", 3, creation=60.0))  # the largest count wins
    g = sim.manager.reads.group("kueue:ns/kq")
    assert g is not None and g.min_member == 3
    sim.delete(b.uid)
    g = sim.manager.reads.group("kueue:ns/kq")
    assert g is not None and g.min_member == 2 and g.creation == 50.0
    sim.delete(a.uid)
    assert sim.manager.reads.group("kueue:ns/kq") is None  # gone with its last pod


def test_kueue_group_keeps_its_place_when_its_oldest_pod_is_replaced() -> None:
    sim = SimScheduler()
    old = sim.add_pod(kueue_pod("kq-0", 2, creation=50.0))
    sim.add_pod(kueue_pod("kq-1", 2, creation=60.0))
    sim.delete(old.uid)
    sim.add_pod(kueue_pod("kq-2", 2, creation=70.0))
    g = sim.manager.reads.group("kueue:ns/kq")
    assert g is not None and g.creation == 50.0


def test_kueue_pods_without_a_count_wait_with_the_reason() -> None:
    sim = SimScheduler()
    sim.add_node(node("n0"))
    p = sim.add_pod(kueue_pod("kq-0", None))
    assert sim.schedule(p.uid) == "rejected"
    assert KUEUE_TOTAL_ANNOTATION in sim.last_filter[p.uid]
    assert sim.manager.reads.group("kueue:ns/kq") is None


def test_a_pod_relabelled_out_of_a_kueue_group_shrinks_it_away() -> None:
    sim = SimScheduler()
    p = sim.add_pod(kueue_pod("kq-0", 2))
    assert sim.manager.reads.group("kueue:ns/kq") is not None
    sim.add_pod(dataclasses.replace(p, membership=None))
    assert sim.manager.reads.group("kueue:ns/kq") is None


@pytest.mark.parametrize("source", [WORKLOAD_API, VOLCANO])
def test_a_missing_group_object_is_named_with_its_source(source: str) -> None:
    sim = SimScheduler()
    sim.add_node(node("n0"))
    p = sim.add_pod(member("m-0", source, "g"))
    assert sim.schedule(p.uid) == "rejected"
    msg = sim.last_filter[p.uid]
    assert f"gang {source}:ns/g" in msg
    assert {WORKLOAD_API: "spec.schedulingGroup.podGroupName",
            VOLCANO: VOLCANO_GROUP_ANNOTATION}[source] in msg


def test_same_name_in_two_sources_is_two_gangs() -> None:
    """A scheduler-plugins PodGroup and a Volcano PodGroup both named g in one namespace:
    each source's pods form their own gang, with their own quorum."""
    sim = SimScheduler()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.add_group(group("g", 2))
    sim.add_group(GroupInfo("ns", "g", 3, uid="v-g", source=VOLCANO))
    sp = [sim.add_pod(pod(f"sp-{i}", "g")) for i in range(2)]
    vc = [sim.add_pod(member(f"vc-{i}", VOLCANO, "g")) for i in range(2)]
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == [p.name for p in sp]
    assert sim.status("volcano:ns/g").message.startswith("gang volcano:ns/g: 2 of 3")
    assert {p.uid for p in sim.manager.reads.group_pods("ns", "g", VOLCANO)} == {p.uid for p in vc}


def test_a_pod_with_keys_of_two_sources_counts_for_one_gang_only() -> None:
    """A pod labelled for scheduler-plugins' g and annotated for Volcano's g (both exist)
    is a member of the scheduler-plugins gang only: the Volcano gang never counts it."""
    sim = SimScheduler()
    sim.add_node(node("n0"))
    sim.add_group(group("g", 1))
    sim.add_group(GroupInfo("ns", "g", 1, uid="v-g", source=VOLCANO))
    both = pod_from_k8s({
        "metadata": {"name": "both", "namespace": "ns", "uid": "u-both",
                     "labels": {GROUP_LABEL: "g"},
                     "annotations": {VOLCANO_GROUP_ANNOTATION: "g"}},
        "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c"}]}})
    sim.add_pod(both)
    assert [p.uid for p in sim.manager.reads.group_pods("ns", "g")] == ["u-both"]
    assert sim.manager.reads.group_pods("ns", "g", VOLCANO) == []
    sim.run_all()
    assert [p.name for p in sim.bound()] == ["both"]
    rows = {r.gang: r.members for r in sim.manager.reads.queue()}
    assert rows.get("volcano:ns/g", 0) == 0


def test_a_split_gang_is_read_back_to_its_jobset_attempt_s_gang() -> None:
    """The reading of a split gang's name is the inverse of the names the split makes,
    and the attempt's own gang is no split gang."""
    set_gang = jobset_gang_name("train", "0123456789ab", 2)
    assert jobset_set_gang_of(jobset_job_gang_name(set_gang, "workers", 3)) == set_gang
    assert jobset_set_gang_of(jobset_rjob_gang_name(set_gang, "driver")) == set_gang
    assert jobset_set_gang_of(set_gang) is None
    assert jobset_set_gang_of("plain") is None

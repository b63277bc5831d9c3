"""Whole-gang placement: examples for each rule, then properties over random clusters."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.cache.snapshot import Snapshot
from extender.core.model.constraints import anti_affinity_conflict, node_matches
from extender.core.model.types import (
    LabelSelector,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    Resources,
    Taint,
    Toleration,
)
from extender.core.planner import Plan, Shortfall, min_resources_shortfall, plan_gang

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
Gi = 1 << 30


def mk_node(name: str, labels: dict[str, str] | None = None, **kw: Any) -> NodeInfo:
    return NodeInfo(
        name,
        {"cpu": 64_000, "memory": 256 * Gi, "pods": 110, GPU: 8},
        {HOST: name, **(labels or {})},
        **kw,
    )


def mk_pod(name: str, ns: str = "ml", **req: int) -> PodInfo:
    requests: Resources = {"pods": 1}
    for k, v in req.items():
        requests[GPU if k == "gpu" else k] = v
    return PodInfo(uid=f"uid-{name}", namespace=ns, name=name, requests=requests)


def members(n: int, prefix: str = "w", **kw: Any) -> list[PodInfo]:
    extra = {k: kw.pop(k) for k in list(kw) if k not in ("cpu", "memory", "gpu")}
    out = []
    for i in range(n):
        p = mk_pod(f"{prefix}-{i}", **kw)
        for k, v in extra.items():
            setattr(p, k, v)
        out.append(p)
    return out


def cluster(**free_by_node: Resources) -> tuple[dict[str, NodeInfo], dict[str, Resources]]:
    nodes = {n: mk_node(n) for n in free_by_node}
    free = {n: {"pods": 110, **f} for n, f in free_by_node.items()}
    return nodes, free


def plan(
    pods: Sequence[PodInfo],
    nodes: Mapping[str, NodeInfo],
    free: Mapping[str, Resources],
    need: int | None = None,
    on_node: Mapping[str, Sequence[PodInfo]] | None = None,
    allowed: Mapping[str, Collection[str]] | None = None,
) -> Plan | Shortfall:
    return plan_gang(pods, len(pods) if need is None else need,
                     Snapshot(nodes, free, on_node or {}), allowed)


def spread(app: str) -> tuple[PodAffinityTerm, ...]:
    return (PodAffinityTerm(LabelSelector((("app", app),)), HOST),)


# ----- examples -----------------------------------------------------------------------


def test_fragmented_gpus_do_not_add_up() -> None:
    # 12 GPUs free in total, but only one node has room for a 4-GPU member.
    nodes, free = cluster(a={GPU: 6}, b={GPU: 2}, c={GPU: 2}, d={GPU: 2})
    result = plan(members(3, gpu=4), nodes, free)
    assert isinstance(result, Shortfall)
    assert (result.need, result.fit) == (3, 1)
    assert result.message.startswith(
        "needs 3 × {nvidia.com/gpu: 4}; 1 fit; largest shortfall on nvidia.com/gpu"
    )
    assert "split across nodes" in result.message
    assert result.pod == "ml/w-1"


def test_whole_gang_plan() -> None:
    nodes, free = cluster(a={GPU: 8}, b={GPU: 8})
    result = plan(members(4, gpu=4), nodes, free)
    assert isinstance(result, Plan)
    assert sorted(result.assignments) == [f"uid-w-{i}" for i in range(4)]
    assert sorted(result.assignments.values()) == ["a", "a", "b", "b"]


def test_no_aggregate_fit() -> None:
    nodes, free = cluster(a={"cpu": 3000}, b={"cpu": 3000})
    result = plan(members(1, cpu=4000), nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 0
    assert "largest shortfall on cpu" in result.message


def test_best_fit_prefers_the_tightest_node() -> None:
    nodes, free = cluster(roomy={GPU: 8}, tight={GPU: 4}, tighter={GPU: 2})
    result = plan(members(1, gpu=4), nodes, free)
    assert isinstance(result, Plan) and result.assignments == {"uid-w-0": "tight"}


def test_zero_free_and_missing_nodes() -> None:
    nodes, free = cluster(a={"cpu": 1000})
    free["ghost"] = {"cpu": 8000, "pods": 10}  # not a known node: never used
    nodes["nofree"] = mk_node("nofree")  # no free entry: nothing free
    nodes["over"] = mk_node("over")
    free["over"] = {"cpu": -500, "pods": 10}  # over-committed: nothing fits
    result = plan(members(2, cpu=1000), nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 1


def test_pods_resource_counts() -> None:
    nodes, free = cluster(a={"cpu": 8000, "pods": 1})
    result = plan(members(2, cpu=100), nodes, free)
    assert isinstance(result, Shortfall) and "largest shortfall on pods" in result.message


def test_biggest_shape_first() -> None:
    # The launcher comes first in preference order and fits "a" as tightly as "b";
    # placed first, it would take "a", the only node the 8-GPU worker can use.
    nodes, free = cluster(a={"cpu": 2000, GPU: 8}, b={"cpu": 2000})
    launcher = mk_pod("launcher", cpu=2000)
    worker = mk_pod("worker", cpu=2000, gpu=8)
    result = plan([launcher, worker], nodes, free)
    assert isinstance(result, Plan)
    assert result.assignments == {"uid-worker": "a", "uid-launcher": "b"}


def test_node_selector_and_taints_of_other_members() -> None:
    nodes = {
        "a": mk_node("a", {"pool": "cpu"}),
        "b": mk_node("b", {"pool": "gpu"}, taints=(Taint("gpu", "", "NoSchedule"),)),
        "c": mk_node("c", {"pool": "gpu"}),
    }
    free = {n: {"cpu": 1000, "pods": 10} for n in nodes}
    pods = members(2, cpu=1000, node_selector={"pool": "gpu"})
    result = plan(pods, nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 1
    assert "1 node(s) didn't match node selector" in result.message
    assert "1 node(s) had untolerated taint {gpu}" in result.message
    tolerant = members(
        2, cpu=1000, node_selector={"pool": "gpu"}, tolerations=(Toleration("gpu", "Exists"),)
    )
    result = plan(tolerant, nodes, free)
    assert isinstance(result, Plan) and sorted(result.assignments.values()) == ["b", "c"]


def test_no_node_matches() -> None:
    nodes, free = cluster(a={"cpu": 1000}, b={"cpu": 1000})
    result = plan(members(2, cpu=1000, node_selector={"pool": "x"}), nodes, free)
    assert isinstance(result, Shortfall)
    assert result.message == (
        "needs 2 × {cpu: 1}; 0 fit; no node matches; excluded: 2 node(s) didn't match node selector"
    )


def test_unschedulable_node() -> None:
    nodes, free = cluster(a={"cpu": 1000})
    nodes["a"].unschedulable = True
    result = plan(members(1, cpu=1000), nodes, free)
    assert isinstance(result, Shortfall) and "1 node(s) were unschedulable" in result.message


def test_resource_no_node_has() -> None:
    nodes, free = cluster(a={GPU: 8}, b={GPU: 8})
    result = plan(members(1, gpu=9), nodes, free)
    assert isinstance(result, Shortfall)
    assert "no eligible node has {nvidia.com/gpu: 9} allocatable" in result.message


def test_self_anti_affinity_needs_distinct_nodes() -> None:
    nodes, free = cluster(a={"cpu": 8000}, b={"cpu": 8000}, c={"cpu": 8000})
    pods = members(4, cpu=1000, labels={"app": "web"}, required_anti_affinity=spread("web"))
    result = plan(pods, nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 3
    assert result.message == (
        "4 × {cpu: 1} need distinct nodes (anti-affinity on kubernetes.io/hostname); "
        "3 eligible node(s)"
    )
    result = plan(pods[:3], nodes, free)
    assert isinstance(result, Plan) and sorted(result.assignments.values()) == ["a", "b", "c"]


def test_anti_affinity_with_pods_already_on_nodes() -> None:
    nodes, free = cluster(a={"cpu": 8000}, b={"cpu": 8000})
    db = PodInfo(
        "uid-db",
        "ml",
        "db",
        {"cpu": 1, "pods": 1},
        labels={"app": "db"},
        node_name="a",
        required_anti_affinity=spread("web"),
    )
    pods = members(2, cpu=1000, labels={"app": "web"})
    result = plan(pods, nodes, free, on_node={"a": [db]})
    assert isinstance(result, Plan) and set(result.assignments.values()) == {"b"}
    # The other direction: the members' terms select the pod already there.
    picky = members(2, cpu=1000, required_anti_affinity=spread("db"))
    result = plan(picky, nodes, free, on_node={"a": [db]})
    assert isinstance(result, Plan) and set(result.assignments.values()) == {"b"}
    # Blocked everywhere.
    result = plan(pods, nodes, free, on_node={"a": [db], "b": [db]})
    assert isinstance(result, Shortfall) and result.fit == 0
    assert "2 node(s) didn't satisfy anti-affinity with pods already there" in result.message


def test_anti_affinity_between_shapes_of_one_gang() -> None:
    nodes, free = cluster(a={"cpu": 8000})
    ps = mk_pod("ps", cpu=2000)
    ps.labels = {"role": "ps"}
    worker = mk_pod("worker", cpu=1000)
    worker.required_anti_affinity = (PodAffinityTerm(LabelSelector((("role", "ps"),)), HOST),)
    result = plan([ps, worker], nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 1
    nodes, free = cluster(a={"cpu": 8000}, b={"cpu": 8000})
    result = plan([ps, worker], nodes, free)
    assert isinstance(result, Plan)
    assert result.assignments["uid-ps"] != result.assignments["uid-worker"]


def test_allowed_restricts_only_the_pods_listed() -> None:
    nodes, free = cluster(a={"cpu": 8000}, b={"cpu": 1000}, c={"cpu": 1000})
    pods = members(2, cpu=1000)
    result = plan(pods, nodes, free, allowed={"uid-w-0": ["c", "c", "nowhere"]})
    assert isinstance(result, Plan)
    assert result.assignments["uid-w-0"] == "c"
    assert result.assignments["uid-w-1"] == "b"  # best fit among all nodes
    result = plan(pods, nodes, free, allowed={"uid-w-0": []})
    assert isinstance(result, Shortfall) and result.pod == "ml/w-0"
    assert "3 node(s) not feasible for kube-scheduler" in result.message


def test_stand_ins_when_only_some_members_are_needed() -> None:
    nodes, free = cluster(a={"cpu": 2000})
    pods = [mk_pod("p0", cpu=500), mk_pod("p1", cpu=2000), mk_pod("p2", cpu=500)]
    result = plan(pods, nodes, free, need=2)
    assert isinstance(result, Plan)
    assert sorted(result.assignments) == ["uid-p0", "uid-p2"]
    # Preferred members are placed when they fit.
    nodes, free = cluster(a={"cpu": 4000})
    result = plan(pods, nodes, free, need=2)
    assert isinstance(result, Plan) and sorted(result.assignments) == ["uid-p0", "uid-p1"]


def test_need_outside_range() -> None:
    nodes, free = cluster(a={"cpu": 8000})
    pods = members(2, cpu=1000)
    assert plan(pods, nodes, free, need=0) == Plan({})
    result = plan(pods, nodes, free, need=3)
    assert isinstance(result, Shortfall) and (result.need, result.fit) == (3, 2)
    assert result.message == "needs 3 members, only 2 waiting to be placed"
    result = plan([], nodes, free, need=1)
    assert isinstance(result, Shortfall) and result.fit == 0


def test_repeated_pod_is_one_pod() -> None:
    nodes, free = cluster(a={"cpu": 1000})
    p = mk_pod("p", cpu=1000)
    result = plan([p, p], nodes, free, need=1)
    assert result == Plan({"uid-p": "a"})
    result = plan([p, p], nodes, free, need=2)
    assert isinstance(result, Shortfall)


def test_heterogeneous_shortfall_names_the_shape_and_the_total() -> None:
    nodes, free = cluster(a={"cpu": 4000, GPU: 4})
    pods = [mk_pod("launcher", cpu=1000), *members(2, gpu=4)]
    result = plan(pods, nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 2
    assert result.message.startswith("needs 2 × {nvidia.com/gpu: 4}; 1 fit")
    assert result.message.endswith("; 2 of 3 members placed in all")
    assert result.pod == "ml/w-1"


def test_deterministic() -> None:
    nodes, free = cluster(**{f"n{i}": {"cpu": 1000 * (i % 3 + 1)} for i in range(20)})
    pods = members(10, cpu=1000)
    assert plan(pods, nodes, free) == plan(pods, nodes, free)


def test_inputs_are_not_modified() -> None:
    nodes, free = cluster(a={"cpu": 2000}, b={"cpu": 2000})
    before = {k: dict(v) for k, v in free.items()}
    assert isinstance(plan(members(3, cpu=1000), nodes, free), Plan)
    assert free == before


def test_min_resources_shortfall() -> None:
    assert min_resources_shortfall({"cpu": 8000, GPU: 4}, {"cpu": 8000}) is None
    assert min_resources_shortfall({}, {}) is None
    msg = min_resources_shortfall({"cpu": 6000, GPU: 4}, {"cpu": 8000, GPU: 16})
    assert msg is not None
    assert msg.startswith("minResources {cpu: 8, nvidia.com/gpu: 16} exceed free")
    assert "largest shortfall on nvidia.com/gpu (short nvidia.com/gpu: 12)" in msg


# ----- properties ---------------------------------------------------------------------

ZONES = ("a", "b")


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n_nodes = draw(st.integers(1, 6))
    nodes: dict[str, NodeInfo] = {}
    free: dict[str, Resources] = {}
    for i in range(n_nodes):
        name = f"n{i}"
        taints = (Taint("dedicated", "x", "NoSchedule"),) if draw(st.booleans()) else ()
        nodes[name] = NodeInfo(
            name,
            {"cpu": 4000, "memory": 8 * Gi, "pods": 8, GPU: 4},
            {HOST: name, "zone": draw(st.sampled_from(ZONES))},
            taints,
            unschedulable=draw(st.integers(0, 9)) == 0,
        )
        if draw(st.integers(0, 9)) > 0:
            free[name] = {
                "cpu": draw(st.integers(-1, 16)) * 250,
                "memory": draw(st.integers(0, 8)) * Gi,
                "pods": draw(st.integers(0, 6)),
                GPU: draw(st.integers(0, 4)),
            }
    pods: list[PodInfo] = []
    n_shapes = draw(st.integers(1, 3))
    for s in range(n_shapes):
        req: Resources = {
            "cpu": draw(st.integers(0, 8)) * 250,
            "memory": draw(st.integers(0, 3)) * Gi,
            "pods": 1,
        }
        gpu = draw(st.integers(0, 2))
        if gpu:
            req[GPU] = gpu
        selector = {"zone": draw(st.sampled_from(ZONES))} if draw(st.booleans()) else {}
        tol = (Toleration("dedicated", "Exists"),) if draw(st.booleans()) else ()
        anti: tuple[PodAffinityTerm, ...] = ()
        if draw(st.booleans()):
            target = draw(st.integers(0, n_shapes - 1))
            anti = (PodAffinityTerm(LabelSelector((("shape", str(target)),)), HOST),)
        for m in range(draw(st.integers(1, 4))):
            pods.append(
                PodInfo(
                    uid=f"u{s}-{m}",
                    namespace="ml",
                    name=f"s{s}-{m}",
                    requests=dict(req),
                    labels={"shape": str(s), "index": str(m)},
                    node_selector=dict(selector),
                    tolerations=tol,
                    required_anti_affinity=anti,
                )
            )
    pods = draw(st.permutations(pods))
    on_node: dict[str, list[PodInfo]] = {}
    for name in nodes:
        if draw(st.integers(0, 3)) == 0:
            term = PodAffinityTerm(LabelSelector((("shape", draw(st.sampled_from("012"))),)), HOST)
            on_node[name] = [
                PodInfo(
                    f"x-{name}",
                    "ml",
                    f"x-{name}",
                    {"pods": 1},
                    labels={"shape": draw(st.sampled_from("0129"))},
                    node_name=name,
                    required_anti_affinity=(term,) if draw(st.booleans()) else (),
                )
            ]
    allowed = None
    if draw(st.booleans()):
        allowed = {pods[0].uid: draw(st.lists(st.sampled_from(sorted(nodes)), unique=True))}
    need = draw(st.integers(1, len(pods)))
    return {
        "pods": pods,
        "need": need,
        "nodes": nodes,
        "free": free,
        "on_node": on_node,
        "allowed": allowed,
    }


@settings(max_examples=600, deadline=None)
@given(scenarios())
def test_plans_are_sound(sc: dict[str, Any]) -> None:
    """(a) exactly `need` distinct pods, no node over-committed; (c) every constraint
    and anti-affinity (with pods already there and between members) respected."""
    pods: list[PodInfo] = sc["pods"]
    need: int = sc["need"]
    nodes: dict[str, NodeInfo] = sc["nodes"]
    free: dict[str, Resources] = sc["free"]
    on_node: dict[str, list[PodInfo]] = sc["on_node"]
    allowed: dict[str, list[str]] | None = sc["allowed"]
    result = plan_gang(pods, need, Snapshot(nodes, free, on_node), allowed)
    if isinstance(result, Shortfall):
        assert 0 <= result.fit < need
        assert result.message
        assert result.pod is None or result.pod in {p.key for p in pods}
        return
    by_uid = {p.uid: p for p in pods}
    assert len(result.assignments) == need
    assert set(result.assignments) <= set(by_uid)
    used: dict[str, Resources] = {}
    placed: dict[str, list[PodInfo]] = {}
    for uid, node in result.assignments.items():
        pod = by_uid[uid]
        assert node in nodes and node in free
        assert node_matches(pod, nodes[node]) is None
        if allowed is not None and uid in allowed:
            assert node in allowed[uid]
        for k, v in pod.requests.items():
            used.setdefault(node, {})[k] = used.get(node, {}).get(k, 0) + v
        placed.setdefault(node, []).append(pod)
    for node, u in used.items():
        for k, v in u.items():
            assert v <= free[node].get(k, 0) or v == 0, f"{node} over-committed on {k}"
    for node, ps in placed.items():
        for p in ps:
            others = [*on_node.get(node, []), *(q for q in ps if q is not p)]
            assert anti_affinity_conflict(p, others) is None


@st.composite
def homogeneous(draw: st.DrawFn) -> tuple[list[PodInfo], int, dict[str, Resources], bool]:
    req: Resources = {"pods": 1}
    for r, hi, unit in (("cpu", 8, 500), ("memory", 4, Gi), (GPU, 4, 1)):
        v = draw(st.integers(0, hi))
        if v:
            req[r] = v * unit
    one_per_node = draw(st.booleans())
    n = draw(st.integers(1, 12))
    pods = [
        PodInfo(
            f"u{i}",
            "ml",
            f"p{i}",
            dict(req),
            labels={"app": "x", "i": str(i)},
            required_anti_affinity=spread("x") if one_per_node else (),
        )
        for i in range(n)
    ]
    free = {
        f"n{j}": {
            "cpu": draw(st.integers(0, 32)) * 500,
            "memory": draw(st.integers(0, 16)) * Gi,
            GPU: draw(st.integers(0, 8)),
            "pods": draw(st.integers(0, 10)),
        }
        for j in range(draw(st.integers(0, 8)))
    }
    return pods, draw(st.integers(1, n)), free, one_per_node


@settings(max_examples=600, deadline=None)
@given(homogeneous())
def test_homogeneous_gangs_are_planned_iff_per_node_counts_add_up(
    case: tuple[list[PodInfo], int, dict[str, Resources], bool],
) -> None:
    """(b) completeness for one shape without node constraints, and (d) the fit
    reported is exactly what the nodes can take."""
    pods, need, free, one_per_node = case
    nodes = {n: mk_node(n) for n in free}
    req = pods[0].requests
    total = 0
    for f in free.values():
        count = min(f.get(r, 0) // v for r, v in req.items() if v > 0)
        total += min(count, 1) if one_per_node else max(count, 0)
    result = plan_gang(pods, need, Snapshot(nodes, free, {}))
    if total >= need:
        assert isinstance(result, Plan)
    else:
        assert isinstance(result, Shortfall)
        assert result.fit == total


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=8),
    st.integers(1, 8),
    st.integers(1, 6),
)
def test_fragmentation(gpus_free: list[int], per_member: int, n: int) -> None:
    """(d) free GPUs per node, not their sum, decide how many members fit."""
    nodes, free = cluster(**{f"n{i}": {GPU: g} for i, g in enumerate(gpus_free)})
    fit = sum(g // per_member for g in gpus_free)
    result = plan(members(n, gpu=per_member), nodes, free)
    if fit >= n:
        assert isinstance(result, Plan)
    else:
        assert isinstance(result, Shortfall) and result.fit == fit
        assert f"needs {n} × {{nvidia.com/gpu: {per_member}}}; {fit} fit" in result.message


@pytest.mark.parametrize("n_nodes", [1, 50, 300])
def test_large_gang_matches_per_node_counts(n_nodes: int) -> None:
    # Many exact-fit nodes: the early stop of the node scan must still see them all.
    nodes, free = cluster(**{f"n{i:03d}": {GPU: 8 if i % 2 else 4} for i in range(n_nodes)})
    capacity = sum(f[GPU] // 4 for f in free.values())
    for n in (capacity, capacity + 1):
        result = plan(members(n, gpu=4), nodes, free)
        assert isinstance(result, Plan) == (n <= capacity)
        if isinstance(result, Plan):
            # The half-full nodes (exactly one member each) are used first.
            per_node: dict[str, int] = {}
            for node in result.assignments.values():
                per_node[node] = per_node.get(node, 0) + 1
            assert all(per_node[n] <= free[n][GPU] // 4 for n in per_node)


def test_shortfall_caused_by_the_gangs_own_members() -> None:
    nodes, free = cluster(a={"cpu": 2000, GPU: 8})
    pods = [mk_pod("worker", cpu=1000, gpu=8), mk_pod("ps", cpu=1500)]
    result = plan(pods, nodes, free)
    assert isinstance(result, Shortfall) and result.fit == 1 and result.pod == "ml/ps"
    assert result.message == (
        "needs 1 × {cpu: 1500m}; 0 fit; the gang's other members take the room it needs "
        "(1 would fit alone); 1 of 2 members placed in all"
    )


def test_one_per_node_still_prefers_tight_nodes() -> None:
    nodes, free = cluster(roomy={"cpu": 8000}, tight={"cpu": 1000}, mid={"cpu": 2000})
    pods = members(2, cpu=1000, labels={"app": "web"}, required_anti_affinity=spread("web"))
    result = plan(pods, nodes, free)
    assert isinstance(result, Plan) and sorted(result.assignments.values()) == ["mid", "tight"]

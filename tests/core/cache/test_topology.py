"""Topology-aware placement (docs/topology.md): the domain a gang is planned in, and
the constraints between members planned with it. Examples for each rule, then
properties over random labelled clusters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domain
from extender.core.model.constraints import node_matches
from extender.core.model.types import (
    GroupInfo,
    LabelSelector,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    SpreadConstraint,
)
from extender.core.planner import Plan, Shortfall, extra_nodes, plan_group

HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"
BLOCK = "example.com/block"
ZONE = "topology.kubernetes.io/zone"
JOB = (("job", "t"),)


def node(name: str, cpu: int = 8000, **labels: str) -> NodeInfo:
    keys = {"rack": RACK, "block": BLOCK, "zone": ZONE}
    return NodeInfo(name, {"cpu": cpu, "pods": 110},
                    {HOST: name, **{keys[k]: v for k, v in labels.items()}})


def cluster(*nodes: NodeInfo, free: Mapping[str, int] | None = None) -> Snapshot:
    """`free`: cpu free per node (default: all of it)."""
    f = free or {}
    return Snapshot({n.name: n for n in nodes},
                    {n.name: {"cpu": f.get(n.name, n.allocatable["cpu"]), "pods": 110}
                     for n in nodes}, {})


def gang(n: int, cpu: int = 2000, prefix: str = "w", **kw: Any) -> list[PodInfo]:
    return [PodInfo(f"uid-{prefix}-{i}", "ml", f"{prefix}-{i}", {"cpu": cpu, "pods": 1},
                    labels={"job": "t", "index": str(i)}, creation=float(i), **kw)
            for i in range(n)]


def group(n: int, required: str = "", preferred: tuple[str, ...] = (), **kw: Any) -> GroupInfo:
    return GroupInfo("ml", "t", n, topology_required=required, topology_preferred=preferred,
                     **kw)


def plan(g: GroupInfo, pods: Sequence[PodInfo], snap: Snapshot) -> Plan | Shortfall:
    return plan_group(g, pods, 0, snap)


def racks_of(result: Plan | Shortfall, snap: Snapshot, key: str = RACK) -> set[str | None]:
    assert isinstance(result, Plan), result
    return {snap.nodes[n].labels.get(key) for n in result.assignments.values()}


# ----- the domain ----------------------------------------------------------------------


def two_racks() -> Snapshot:
    """The issue's case: room for one member in rack r1 (on a1), for both in r2."""
    return cluster(node("a1", rack="r1"), node("a2", rack="r1"), node("b1", rack="r2"),
                   node("b2", rack="r2"), free={"a1": 2000, "a2": 1000, "b1": 2000, "b2": 2000})


def test_without_a_topology_a_gang_is_split_across_racks() -> None:
    snap = two_racks()
    assert racks_of(plan(group(2), gang(2), snap), snap) == {"r1", "r2"}


def test_a_required_rack_keeps_the_gang_whole() -> None:
    snap = two_racks()
    result = plan(group(2, required=RACK), gang(2), snap)
    assert isinstance(result, Plan)
    assert sorted(result.assignments.values()) == ["b1", "b2"]
    assert result.domain == Domain((RACK,), ("r2",), 1)


def test_the_tightest_rack_that_fits_is_chosen() -> None:
    # Room for 2 × {cpu: 2} members: r1 4, r2 2, r3 3, r4 1 (too small).
    snap = cluster(node("a", rack="r1"), node("b", rack="r2"), node("c", rack="r3"),
                   node("d", rack="r4"), free={"a": 8000, "b": 4000, "c": 6000, "d": 2000})
    assert racks_of(plan(group(2, required=RACK), gang(2), snap), snap) == {"r2"}
    assert racks_of(plan(group(3, required=RACK), gang(3), snap), snap) == {"r3"}
    assert racks_of(plan(group(4, required=RACK), gang(4), snap), snap) == {"r1"}


def test_ties_go_to_the_smaller_label_value() -> None:
    snap = cluster(node("x", rack="r9"), node("y", rack="r10"), node("z", rack="r2"))
    assert racks_of(plan(group(2, required=RACK), gang(2), snap), snap) == {"r10"}


def test_nodes_without_the_label_never_qualify() -> None:
    snap = cluster(node("bare"), node("a", rack="r1"), free={"a": 2000})
    result = plan(group(2, required=RACK), gang(2), snap)
    assert isinstance(result, Shortfall)
    assert result.message == (
        "needs 2 × {cpu: 2} in one rack (example.com/rack); the largest rack fits 1 "
        "(rack r1: largest shortfall on cpu)")
    nobody = plan(group(1, required=ZONE), gang(1), snap)
    assert isinstance(nobody, Shortfall)
    assert nobody.message == ("needs 1 × {cpu: 2} in one zone (topology.kubernetes.io/zone); "
                              "no node has label topology.kubernetes.io/zone")


def test_the_hostname_as_the_key_puts_the_whole_gang_on_one_node() -> None:
    # b has room for one member, a for four: a split over both would fit, one node only a.
    snap = cluster(node("a"), node("b"), free={"b": 2000})
    result = plan(group(3, required=HOST), gang(3), snap)
    assert isinstance(result, Plan) and set(result.assignments.values()) == {"a"}
    result = plan(group(5, required=HOST), gang(5), snap)
    assert isinstance(result, Shortfall) and "the largest node fits 4" in result.message


def test_why_it_waits_names_the_rack_and_how_many_fit() -> None:
    snap = cluster(node("a1", rack="r1"), node("a2", rack="r1"), node("b1", rack="r2"),
                   free={"a1": 8000, "a2": 8000, "b1": 8000})
    result = plan(group(5, required=RACK), gang(5, cpu=4000), snap)
    assert isinstance(result, Shortfall)
    assert (result.need, result.fit) == (5, 4)
    assert result.message == (
        "needs 5 × {cpu: 4} in one rack (example.com/rack); the largest rack fits 4 "
        "(rack r1: largest shortfall on cpu); 2 racks in all")


def test_preferred_keys_are_tried_narrowest_first_then_anywhere() -> None:
    nodes = (node("a", rack="r1", block="b1"), node("b", rack="r2", block="b1"),
             node("c", rack="r3", block="b2"), node("d", rack="r4", block="b2"))
    pref = (RACK, BLOCK)
    # A rack fits 2 members (the tightest: r2); a block fits 3 (b2); only all nodes fit 5.
    free = {"a": 2000, "b": 4000, "c": 2000, "d": 4000}
    snap = cluster(*nodes, free=free)
    two = plan(group(2, preferred=pref), gang(2), snap)
    assert racks_of(two, snap) == {"r2"}
    assert isinstance(two, Plan) and two.domain == Domain((RACK,), ("r2",), 0)
    three = plan(group(3, preferred=pref), gang(3), snap)
    assert racks_of(three, snap, BLOCK) == {"b1"}
    assert isinstance(three, Plan) and three.domain == Domain((BLOCK,), ("b1",), 0)
    free = {"a": 2000, "b": 2000, "c": 2000, "d": 2000}
    four = plan(group(3, preferred=pref), gang(3), cluster(*nodes, free=free))
    assert isinstance(four, Plan) and four.domain is None
    assert len(set(four.assignments.values())) == 3
    # A preferred key no node carries is not an error: its level is skipped.
    skip = plan(group(3, preferred=(ZONE, BLOCK)), gang(3), snap)
    assert isinstance(skip, Plan) and skip.domain == Domain((BLOCK,), ("b1",), 0)


def test_required_bounds_the_search_and_preferred_orders_inside_it() -> None:
    nodes = (node("a", rack="r1", block="b1"), node("b", rack="r2", block="b1"),
             node("c", rack="r3", block="b2"))
    snap = cluster(*nodes, free={"a": 4000, "b": 2000, "c": 8000})
    # Rack r3 alone fits 3; so does block b1 (r1 + r2). The rack comes first.
    result = plan(group(3, required=BLOCK, preferred=(RACK,)), gang(3), snap)
    assert isinstance(result, Plan) and result.domain == Domain((BLOCK, RACK), ("b2", "r3"), 1)
    snap = cluster(*nodes, free={"a": 4000, "b": 2000, "c": 4000})
    result = plan(group(3, required=BLOCK, preferred=(RACK,)), gang(3), snap)
    assert isinstance(result, Plan) and result.domain == Domain((BLOCK,), ("b1",), 1)
    # 4 fit only across blocks: never placed there.
    short = plan(group(4, required=BLOCK, preferred=(RACK,)), gang(4), snap)
    assert isinstance(short, Shortfall)
    assert short.message.startswith("needs 4 × {cpu: 2} in one block (example.com/block); "
                                    "the largest block fits 3 (block b1: ")


def test_a_gang_with_bound_members_stays_in_their_rack() -> None:
    snap = cluster(node("a", rack="r1"), node("b", rack="r2"), free={"a": 2000, "b": 8000})
    pods = gang(3)
    bound = PodInfo("uid-x", "ml", "x", {"cpu": 2000, "pods": 1}, node_name="a")
    result = plan_group(group(3, required=RACK), [bound, *pods[:2]], 0, snap)
    assert isinstance(result, Shortfall)  # r1 has no room for the other two
    assert "the largest rack fits 1 (rack r1" in result.message
    spread = PodInfo("uid-y", "ml", "y", {"cpu": 2000, "pods": 1}, node_name="b")
    result = plan_group(group(3, required=RACK), [bound, spread, pods[0]], 0, snap)
    assert isinstance(result, Shortfall)
    assert result.message.endswith("its bound members are in different racks (r1, r2)")


def test_a_malformed_annotation_places_nothing() -> None:
    g = group(2, topology_error="annotation x: 'a b' is not a node label key")
    result = plan(g, gang(2), two_racks())
    assert isinstance(result, Shortfall) and result.invalid
    assert result.message == "annotation x: 'a b' is not a node label key"


def test_a_gang_of_several_shapes_fits_in_one_rack_or_says_which() -> None:
    # The launcher fits twice in r1, once in r2 (on c): r2 is the tighter rack.
    snap = cluster(node("a", cpu=16000, rack="r1"), node("b", rack="r2"), node("c", rack="r2"),
                   free={"a": 16000, "b": 2000, "c": 6000})
    pods = gang(1, cpu=6000, prefix="launcher") + gang(2, cpu=1000)
    result = plan(group(3, required=RACK), pods, snap)
    assert racks_of(result, snap) == {"r2"}
    pods = gang(1, cpu=7000, prefix="launcher") + gang(2, cpu=1000)
    result = plan(group(3, required=RACK), pods, snap)
    assert racks_of(result, snap) == {"r1"}


def test_elastic_extras_stay_in_the_domain_while_it_has_room() -> None:
    snap = two_racks()
    bound = [PodInfo(f"b{i}", "ml", f"b{i}", {"cpu": 1, "pods": 1}, node_name=n)
             for i, n in enumerate(("b1", "b2"))]
    feasible = ["a1", "a2", "b1", "b2"]
    assert extra_nodes(group(2, required=RACK), bound, feasible, snap.nodes) == (["b1", "b2"], "")
    assert extra_nodes(group(2, preferred=(RACK,)), bound, ["a1", "b2"], snap.nodes) == (
        ["b2"], "")
    # The rack is full: a preferred rack lets the extra go elsewhere, a required one not.
    assert extra_nodes(group(2, preferred=(RACK,)), bound, ["a1"], snap.nodes) == (["a1"], "")
    nodes, why = extra_nodes(group(2, required=RACK), bound, ["a1"], snap.nodes)
    assert nodes == [] and why == ("gang ml/t: its members must stay in one rack (rack r2), "
                                   "which has no room for another member")
    assert extra_nodes(group(2), bound, ["a1"], snap.nodes) == (["a1"], "")


# ----- constraints between members -------------------------------------------------------


def zones(per_zone: int = 2, cpu: int = 8000) -> Snapshot:
    return cluster(*(node(f"{z}{i}", cpu=cpu, zone=z) for z in "abc" for i in range(per_zone)))


def anti(key: str) -> tuple[PodAffinityTerm, ...]:
    return (PodAffinityTerm(LabelSelector(JOB), key),)


def test_anti_affinity_on_a_zone_puts_one_member_per_zone() -> None:
    snap = zones()
    result = plan(group(3), gang(3, required_anti_affinity=anti(ZONE)), snap)
    assert isinstance(result, Plan)
    assert racks_of(result, snap, ZONE) == {"a", "b", "c"}
    short = plan(group(4), gang(4, required_anti_affinity=anti(ZONE)), snap)
    assert isinstance(short, Shortfall) and short.fit == 3
    assert "node(s) in a topology.kubernetes.io/zone with a member w-3 repels" in short.message


def test_anti_affinity_on_a_zone_with_pods_already_there() -> None:
    snap = zones()
    there = PodInfo("old", "ml", "old", {"cpu": 1, "pods": 1}, labels=dict(JOB), node_name="a0")
    snap = Snapshot(snap.nodes, snap.free, {"a0": [there]})
    result = plan(group(2), gang(2, required_anti_affinity=anti(ZONE)), snap)
    assert racks_of(result, snap, ZONE) == {"b", "c"}
    # And the other way: a pod there whose own zone term repels the members. Zone b's
    # nodes are the tightest fit, so without the term the gang would go there.
    snap = Snapshot(snap.nodes, {**snap.free, "b0": {"cpu": 2000, "pods": 110},
                                 "b1": {"cpu": 2000, "pods": 110}}, {})
    assert racks_of(plan(group(2), gang(2), snap), snap, ZONE) == {"b"}
    repeller = PodInfo("r", "ml", "r", {"cpu": 1, "pods": 1}, node_name="b0",
                       required_anti_affinity=anti(ZONE))
    snap = Snapshot(snap.nodes, snap.free, {"b0": [repeller]})
    assert "b" not in racks_of(plan(group(2), gang(2), snap), snap, ZONE)


def test_pod_affinity_on_a_zone_keeps_the_gang_in_one_zone() -> None:
    snap = cluster(node("a0", zone="a"), node("a1", zone="a"), node("b0", zone="b"),
                   free={"a0": 4000, "a1": 2000, "b0": 8000})
    aff = anti(ZONE)  # the same term, as affinity
    result = plan(group(4), gang(4, required_affinity=aff), snap)
    assert racks_of(result, snap, ZONE) == {"b"}
    assert isinstance(result, Plan) and result.domain == Domain((ZONE,), ("b",), 1)
    # Pods the term selects already run in zone a: the gang must join them there.
    there = PodInfo("old", "ml", "old", {"cpu": 1, "pods": 1}, labels=dict(JOB), node_name="a0")
    snap2 = Snapshot(snap.nodes, snap.free, {"a0": [there]})
    assert racks_of(plan(group(3), gang(3, required_affinity=aff), snap2), snap2, ZONE) == {"a"}
    short = plan(group(4), gang(4, required_affinity=aff), snap2)
    assert isinstance(short, Shortfall)
    assert "the largest zone fits 3 (zone a:" in short.message


def test_pod_affinity_that_selects_no_pod_is_not_planned() -> None:
    aff = (PodAffinityTerm(LabelSelector((("role", "ps"),)), ZONE),)
    result = plan(group(2), gang(2, required_affinity=aff), zones())
    assert isinstance(result, Shortfall)
    assert "selects no pod, not even a member of the gang" in result.message


def test_pod_affinity_that_selects_no_pod_says_what_it_awaits_and_whether_it_fits() -> None:
    """What the queue needs to tell a gang that waits for a pod (issue 42) from one that
    can never be placed: the terms awaited, and whether it fits but for them."""
    aff = (PodAffinityTerm(LabelSelector((("role", "ps"),)), ZONE),)
    fits = plan(group(2), gang(2, required_affinity=aff), zones())
    assert isinstance(fits, Shortfall) and fits.fits_otherwise, fits
    assert [(a.member, a.term) for a in fits.awaits] == [("ml/w-0", aff[0])]  # once
    assert fits.pod == "ml/w-0"
    assert "member ml/w-0 (pods with role=ps in namespace ml, topologyKey " \
           f"{ZONE})" in fits.message, fits.message
    # No zone holds three even once the pod comes: that shortfall, awaits said too.
    short = plan(group(3), gang(3, cpu=8000, required_affinity=aff), zones())
    assert isinstance(short, Shortfall) and not short.fits_otherwise, short
    assert short.awaits and "the largest zone fits 2" in short.message, short.message
    # A term with no labelSelector selects no pod, ever: nothing to wait for.
    never = (PodAffinityTerm(None, ZONE),)
    gone = plan(group(2), gang(2, required_affinity=never), zones())
    assert isinstance(gone, Shortfall) and not gone.awaits, gone
    assert "has no labelSelector" in gone.message
    # Once a pod the term selects runs, the gang joins it.
    ps = PodInfo("ps", "ml", "ps", {"cpu": 1, "pods": 1}, labels={"role": "ps"},
                 node_name="b0")
    snap = zones()
    there = Snapshot(snap.nodes, snap.free, {"b0": [ps]})
    assert racks_of(plan(group(2), gang(2, required_affinity=aff), there), there, ZONE) == {"b"}


def spread(key: str = ZONE, skew: int = 1, **kw: Any) -> tuple[SpreadConstraint, ...]:
    return (SpreadConstraint(skew, key, LabelSelector(JOB), **kw),)


def counts(result: Plan | Shortfall, snap: Snapshot, key: str = ZONE) -> list[int]:
    assert isinstance(result, Plan), result
    c: dict[str, int] = {}
    for n in result.assignments.values():
        z = snap.nodes[n].labels[key]
        c[z] = c.get(z, 0) + 1
    return sorted(c.values())


def test_spread_with_max_skew_balances_the_members() -> None:
    snap = zones()
    assert counts(plan(group(6), gang(6, spread_constraints=spread()), snap), snap) == [2, 2, 2]
    assert counts(plan(group(5), gang(5, spread_constraints=spread()), snap), snap) == [1, 2, 2]
    # Zone c has room for one member: with maxSkew 1 the others may hold two each.
    snap = cluster(*(node(f"{z}{i}", zone=z) for z in "ab" for i in range(2)),
                   node("c0", cpu=2000, zone="c"))
    assert counts(plan(group(5), gang(5, spread_constraints=spread()), snap), snap) == [1, 2, 2]
    short = plan(group(6), gang(6, spread_constraints=spread()), snap)
    assert isinstance(short, Shortfall) and short.fit == 5
    assert "would exceed maxSkew 1" in short.message


def test_spread_counts_the_pods_already_there_and_min_domains() -> None:
    snap = zones()
    there = [PodInfo(f"o{i}", "ml", f"o{i}", {"cpu": 1, "pods": 1}, labels=dict(JOB),
                     node_name="a0") for i in range(2)]
    snap = Snapshot(snap.nodes, snap.free, {"a0": there})
    result = plan(group(4), gang(4, spread_constraints=spread()), snap)
    assert counts(result, snap) == [2, 2]  # b and c catch up with a first
    # minDomains 4 with 3 zones: the minimum counts as 0, so at most 1 per zone.
    snap = zones()
    short = plan(group(4), gang(4, spread_constraints=spread(min_domains=4)), snap)
    assert isinstance(short, Shortfall) and short.fit == 3


def test_spread_on_nodes_without_the_key_is_refused() -> None:
    snap = cluster(node("bare"), node("a0", zone="a"))
    result = plan(group(2), gang(2, spread_constraints=spread(skew=2)), snap)
    assert isinstance(result, Plan) and set(result.assignments.values()) == {"a0"}


def test_relations_and_a_required_rack_together() -> None:
    # Two racks, each across two zones: one member per zone only fits in rack r2.
    snap = cluster(node("a", rack="r1", zone="x"), node("b", rack="r1", zone="x"),
                   node("c", rack="r2", zone="x"), node("d", rack="r2", zone="y"))
    result = plan(group(2, required=RACK), gang(2, required_anti_affinity=anti(ZONE)), snap)
    assert isinstance(result, Plan) and sorted(result.assignments.values()) == ["c", "d"]


def test_a_required_rack_that_contradicts_a_spread_says_what_the_spread_excluded() -> None:
    # Rack r1 is all in zone x; a spread over zones with maxSkew 1 wants one member in y.
    snap = cluster(node("a", rack="r1", zone="x"), node("b", rack="r1", zone="x"),
                   node("c", rack="r2", zone="y"))
    spread = (SpreadConstraint(1, ZONE, LabelSelector(JOB)),)
    result = plan(group(2, required=RACK), gang(2, spread_constraints=spread), snap)
    assert isinstance(result, Shortfall) and result.fit == 1
    assert ("excluded: 2 node(s) where the spread over topology.kubernetes.io/zone would "
            "exceed maxSkew 1") in result.message


# ----- properties ------------------------------------------------------------------------


@st.composite
def labelled(draw: st.DrawFn) -> tuple[Snapshot, int, int]:
    """Racks in blocks, some nodes without labels; a gang of one shape."""
    nodes, free = [], {}
    for i in range(draw(st.integers(1, 9))):
        if draw(st.integers(0, 5)):
            rack = draw(st.integers(0, 3))
            nodes.append(node(f"n{i}", rack=f"r{rack}", block=f"b{rack // 2}"))
        else:
            nodes.append(node(f"n{i}"))
        free[f"n{i}"] = draw(st.sampled_from((0, 1000, 2000, 3000, 4000, 6000, 8000)))
    return cluster(*nodes, free=free), draw(st.integers(1, 6)), draw(
        st.sampled_from((1000, 2000, 3000)))


def rooms(snap: Snapshot, key: str, cpu: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, n in snap.nodes.items():
        v = n.labels.get(key)
        if v is not None:
            out[v] = out.get(v, 0) + snap.free[name]["cpu"] // cpu
    return out


def sound(result: Plan, snap: Snapshot, pods: Sequence[PodInfo]) -> None:
    used: dict[str, int] = {}
    by_uid = {p.uid: p for p in pods}
    for uid, n in result.assignments.items():
        used[n] = used.get(n, 0) + by_uid[uid].requests["cpu"]
        assert node_matches(by_uid[uid], snap.nodes[n]) is None
    for n, cpu in used.items():
        assert cpu <= snap.free[n]["cpu"], f"node {n} over-committed"


@settings(max_examples=300, deadline=None)
@given(labelled())
def test_a_required_gang_is_never_split_and_takes_the_tightest_rack(
    case: tuple[Snapshot, int, int],
) -> None:
    snap, n, cpu = case
    pods = gang(n, cpu=cpu)
    result = plan(group(n, required=RACK), pods, snap)
    room = rooms(snap, RACK, cpu)
    fitting = sorted((r, v) for v, r in room.items() if r >= n)
    if not fitting:
        assert isinstance(result, Shortfall)
        assert result.message.startswith(f"needs {n} × {{cpu: {cpu // 1000}}} in one rack")
        return
    assert isinstance(result, Plan), result
    sound(result, snap, pods)
    assert racks_of(result, snap) == {fitting[0][1]}  # never split, never unlabelled
    assert result.domain == Domain((RACK,), (fitting[0][1],), 1)


@settings(max_examples=300, deadline=None)
@given(labelled())
def test_the_preferred_order_is_followed(case: tuple[Snapshot, int, int]) -> None:
    snap, n, cpu = case
    pods = gang(n, cpu=cpu)
    result = plan(group(n, preferred=(RACK, BLOCK)), pods, snap)
    total = sum(f["cpu"] // cpu for f in snap.free.values())
    if total < n:
        assert isinstance(result, Shortfall)
        return
    assert isinstance(result, Plan), result
    sound(result, snap, pods)
    for key in (RACK, BLOCK):
        fitting = sorted((r, v) for v, r in rooms(snap, key, cpu).items() if r >= n)
        if fitting:
            assert racks_of(result, snap, key) == {fitting[0][1]}
            assert result.domain == Domain((key,), (fitting[0][1],), 0)
            return
    assert result.domain is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from((0, 2000, 4000, 6000)), min_size=2, max_size=8),
       st.integers(1, 8), st.integers(1, 2), st.integers(0, 3))
def test_a_spread_plan_keeps_every_member_within_max_skew(
    free: list[int], n: int, skew: int, existing: int,
) -> None:
    """Wherever a member goes, its zone holds at most the emptiest eligible zone's count
    plus maxSkew (the pods already there included): what makes the plan one that
    kube-scheduler accepts in any order, with slots swapped (Reservations.move)."""
    nodes = [node(f"n{i}", zone="abc"[i % 3]) for i in range(len(free))]
    snap = cluster(*nodes, free=dict(zip((x.name for x in nodes), free, strict=True)))
    old = [PodInfo(f"o{i}", "ml", f"o{i}", {"cpu": 1, "pods": 1}, labels=dict(JOB),
                   node_name="n0") for i in range(existing)]
    snap = Snapshot(snap.nodes, snap.free, {"n0": old})
    result = plan(group(n), gang(n, spread_constraints=spread(skew=skew)), snap)
    if isinstance(result, Shortfall):
        return
    sound(result, snap, gang(n))
    count = dict.fromkeys({x.labels[ZONE] for x in nodes}, 0)
    count["a"] += existing
    for name in result.assignments.values():
        count[snap.nodes[name].labels[ZONE]] += 1
    low = min(count.values())
    for name in result.assignments.values():
        assert count[snap.nodes[name].labels[ZONE]] <= low + skew + (
            existing if snap.nodes[name].labels[ZONE] == "a" else 0)


def test_extras_of_members_bound_without_the_label_do_not_go_to_unlabelled_nodes() -> None:
    snap = cluster(node("bare"), node("other"), node("b1", rack="r2"))
    bound = [PodInfo("b0", "ml", "b0", {"cpu": 1, "pods": 1}, node_name="bare"),
             PodInfo("b1", "ml", "b1", {"cpu": 1, "pods": 1}, node_name="b1")]
    assert extra_nodes(group(2, preferred=(RACK,)), bound, ["other", "b1"], snap.nodes) == (
        ["b1"], "")
    nodes, why = extra_nodes(group(2, required=RACK), bound[:1], ["other"], snap.nodes)
    assert nodes == [] and "(none)" in why

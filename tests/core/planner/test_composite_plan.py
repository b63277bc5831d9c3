"""`plan_composite`: a CompositePodGroup's children planned largest first, then, when
that places fewer than minGroupCount of them, a bounded search over choices of children
(`planner/composite_plan.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from extender.core.cache.snapshot import Snapshot
from extender.core.model.types import CompositeInfo, NodeInfo, composite_key
from extender.core.planner import Plan, plan_group
from extender.core.planner.composite_plan import (
    SEARCH_PLANS,
    Child,
    plan_composite,
    search_budget,
)
from tests.core.sim import group, node, pod

PARENT = composite_key("ns", "c")
ZONE = "topology.kubernetes.io/zone"


def cluster(*nodes: NodeInfo) -> Snapshot:
    return Snapshot({n.name: n for n in nodes}, {n.name: dict(n.allocatable) for n in nodes},
                    {})


def child(name: str, count: int, cpu: int, memory: int = 1 << 30) -> Child:
    return Child(group(name, count, parent=PARENT),
                 [pod(f"{name}-{i}", name, cpu=cpu, memory=memory) for i in range(count)])


def spreader_and_pairs() -> list[Child]:
    """"a" (2 pods of 3 CPU) takes most of both 4-CPU nodes; "b" and "c" (2 pods of 2
    CPU each) fill the two nodes exactly, together, but neither fits beside "a"."""
    return [child("a", 2, 3000), child("b", 2, 2000), child("c", 2, 2000)]


def test_children_of_different_shapes_are_placed_largest_first() -> None:
    """Alone, "a" (1 CPU, 20 GiB) takes n0, the first of two nodes that each fit one
    copy of it, and "b" (4 CPU) then has no node: planned by name, the composite does
    not fit. Its biggest pod first, "b" takes n0 and "a" fits on n1."""
    snap = cluster(node("n0", cpu=4000), node("n1", cpu=1000))
    a = child("a", 1, 1000, memory=20 << 30)
    b = child("b", 1, 4000)
    alone = plan_group(a.group, a.members, 0, snap)
    assert isinstance(alone, Plan) and alone.assignments == {a.members[0].uid: "n0"}
    out = plan_composite(CompositeInfo("ns", "c", 2), [a, b], snap, plan_group, budget=0)
    assert out.placed
    assert {k: list(p.assignments.values()) for k, p in out.plans.items()} == {
        "ns/b": ["n0"], "ns/a": ["n1"]}


def test_a_child_that_keeps_two_others_out_is_left_out() -> None:
    """minGroupCount 2 of 3: the first pass places "a" (the biggest pods) and then
    neither other child; the search leaves "a" out and places "b" and "c", one node
    each, and says why "a" did not fit beside them."""
    snap = cluster(node("n0", cpu=4000), node("n1", cpu=4000))
    first = plan_composite(CompositeInfo("ns", "c", 2), spreader_and_pairs(), snap,
                           plan_group, budget=0)
    assert not first.placed and list(first.plans) == ["ns/a"]
    assert first.searched == "bound"
    out = plan_composite(CompositeInfo("ns", "c", 2), spreader_and_pairs(), snap, plan_group)
    assert out.placed
    assert sorted(out.plans) == ["ns/b", "ns/c"]
    nodes = [sorted(set(p.assignments.values())) for p in out.plans.values()]
    assert sorted(nodes) == [["n0"], ["n1"]]
    assert out.short["ns/a"].message.startswith("needs 2 × {cpu: 3, memory: 1Gi}; 0 fit")


def test_an_impossible_composite_says_every_choice_was_tried() -> None:
    """All three at once cannot fit: the first pass's shortfalls are kept, one per child
    it could not place, naming the child's first pod not placed and how many."""
    snap = cluster(node("n0", cpu=4000), node("n1", cpu=4000))
    out = plan_composite(CompositeInfo("ns", "c", 3), spreader_and_pairs(), snap, plan_group)
    assert not out.placed and out.searched == "every"
    assert list(out.plans) == ["ns/a"]
    assert {k: (s.pod, s.need - s.fit) for k, s in out.short.items()} == {
        "ns/b": ("ns/b-0", 2), "ns/c": ("ns/c-0", 2)}


def test_the_search_stops_at_its_budget() -> None:
    """Eight children of one 3-CPU pod on four 4-CPU nodes, minGroupCount 5: at most
    four fit (one per node), which only trying every choice shows; the search makes the
    plans its bound allows and says it stopped there. With six children, every choice
    is tried within it."""
    snap = cluster(*(node(f"n{i}", cpu=4000) for i in range(4)))
    kids = [child(f"k{i}", 1, 3000) for i in range(8)]
    out = plan_composite(CompositeInfo("ns", "c", 5), kids, snap, plan_group)
    assert not out.placed and out.searched == "bound"
    assert out.tried == SEARCH_PLANS
    assert len(out.plans) == 4
    small = plan_composite(CompositeInfo("ns", "c", 5), kids[:6], snap, plan_group)
    assert not small.placed and small.searched == "every"
    assert 0 < small.tried < SEARCH_PLANS


def test_the_bound_shrinks_with_the_cluster() -> None:
    """Each plan of a child looks at every node: the search's plans are bounded so
    that its work is about the same at any size, never below one plan per child."""
    assert search_budget(8, 100) == SEARCH_PLANS
    assert search_budget(8, 1000) == 64
    assert search_budget(8, 5000) == 12
    assert search_budget(8, 50_000) == 8


def test_the_search_runs_in_each_domain_of_the_composite_key() -> None:
    """Zone a has one 4-CPU node (nothing but "a" fits there); zone b has two, where the
    first pass places only "a" and the search places "b" and "c"."""
    nodes = []
    for name, zone in (("a0", "a"), ("b0", "b"), ("b1", "b")):
        n = node(name, cpu=4000)
        n.labels[ZONE] = zone
        nodes.append(n)
    snap = cluster(*nodes)
    comp = CompositeInfo("ns", "c", 2, topology_required=ZONE)
    out = plan_composite(comp, spreader_and_pairs(), snap, plan_group)
    assert out.placed and sorted(out.plans) == ["ns/b", "ns/c"]
    assert {n for p in out.plans.values() for n in p.assignments.values()} == {"b0", "b1"}
    assert all(p.domain is not None and p.domain.values == ("b",)
               for p in out.plans.values())


def test_the_search_keeps_every_child_that_fits_without_the_one_left_out() -> None:
    """minGroupCount 2 of 4: "a" (3 pods of 3 CPU) takes most of all three nodes, so the
    first pass places it alone. Without it, "b", "c" and "d" (one pod of 2 CPU) all fit:
    all three are placed, not just the two the count asks for; "a" is not."""
    snap = cluster(*(node(f"n{i}", cpu=4000) for i in range(3)))
    kids: Sequence[Child] = [child("a", 3, 3000), child("b", 2, 2000), child("c", 2, 2000),
                             child("d", 1, 2000)]
    out = plan_composite(CompositeInfo("ns", "c", 2), kids, snap, plan_group)
    assert out.placed
    assert list(out.plans) == ["ns/b", "ns/c", "ns/d"]
    assert list(out.short) == ["ns/a"]

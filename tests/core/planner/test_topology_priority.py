"""Topology next to priorities (issue 18 point 4, with issue 17): a preemptor that must
stay in one rack evicts only inside one rack, the least harmful rack's victims; the
starvation guard's forward hold of such a gang is inside one rack, on the nodes that
free soonest. Plain data, the gang manager driven by `tests/core/workload.py`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.cache.snapshot import Snapshot
from extender.core.model.config import Config
from extender.core.model.types import GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import EvictPods, GangHeld, GangReserved, Preempting, Reason
from extender.core.planner import Plan, Shortfall, plan_group
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, pod
from tests.core.workload import Driver, Job

RACK = "example.com/rack"


def rack_node(name: str, rack: str | None, cpu: int = 4000) -> NodeInfo:
    labels = {"kubernetes.io/hostname": name, **({RACK: rack} if rack else {})}
    return NodeInfo(name, {"cpu": cpu, "memory": 32 << 30, "pods": 110}, labels)


def racks(layout: dict[str, str | None], preemption: bool = True,
          starvation: float | None = None) -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, preemption=preemption,
                                        starvation_after_seconds=starvation)))
    for name, rack in layout.items():
        sim.add_node(rack_node(name, rack))
    return sim


def low(sim: SimScheduler, name: str, node: str, creation: float, cpu: int = 4000,
        gang: str | None = None) -> PodInfo:
    """A priority-1 pod running on `node`, bound by another scheduler."""
    return sim.bind_foreign(pod(name, gang, cpu=cpu, memory=1 << 20, priority=1,
                                creation=creation), node)


def preempting(sim: SimScheduler) -> list[Preempting]:
    return [a for a in sim.actions if isinstance(a, Preempting)]


def rack_of(sim: SimScheduler, node: str) -> str | None:
    return sim.cache.nodes[node].labels.get(RACK)


# ----- preemption -------------------------------------------------------------------------


def test_a_rack_gang_evicts_in_the_rack_where_it_harms_least() -> None:
    # r1's two nodes run a and b, the youngest pods; r2 has n2 free and c, the oldest,
    # on n3. Across the cluster the harm order takes a and b first, and with them r1
    # fits: two pods evicted. Inside r2, c alone makes room: one pod.
    sim = racks({"n0": "r1", "n1": "r1", "n2": "r2", "n3": "r2"})
    low(sim, "a", "n0", creation=3.0)
    low(sim, "b", "n1", creation=2.0)
    low(sim, "c", "n3", creation=1.0)
    high = Job("high", at=0, run=100, cpu=4000, members=2, priority=10, required=RACK)
    driver = Driver(sim, [high])
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    (report,) = preempting(sim)
    assert [v.name for v in report.victims] == ["pod ns/c"], report.victims
    assert "on node(s) n2, n3 in rack r2 is held for it" in report.message, report.message
    assert {rack_of(sim, p.node_name) for p in sim.bound("high")} == {"r2"}
    assert sim.overcommits == []


def test_a_victim_gang_spread_over_two_racks_is_not_evicted_for_one() -> None:
    # Only the low gang, with a member in each rack, plus one plain pod in the same rack
    # would make room; evicting it would harm the other rack for nothing.
    sim = racks({"n0": "r1", "n1": "r1", "n2": "r2", "n3": "r2"})
    sim.add_group(group("spread", 2))
    low(sim, "spread-0", "n0", creation=1.0, gang="spread")
    low(sim, "spread-1", "n2", creation=1.0, gang="spread")
    low(sim, "d", "n1", creation=2.0)
    low(sim, "e", "n3", creation=2.0)
    high = Job("high", at=0, run=100, cpu=4000, members=2, priority=10, required=RACK)
    driver = Driver(sim, [high])
    driver.run(3)
    assert not preempting(sim)
    assert not [a for a in sim.actions if isinstance(a, EvictPods)]
    st = sim.status("ns/high")
    assert st.reason == Reason.INSUFFICIENT_CAPACITY, st
    assert ("it evicts only inside the one rack it needs, and no rack has lower-priority "
            "work whose eviction makes room") in st.message, st.message


def test_without_a_topology_the_same_cluster_evicts_where_the_harm_order_says() -> None:
    """The rule for gangs without a topology is unchanged: the shortest prefix of the
    harm order (the youngest first)."""
    sim = racks({"n0": "r1", "n1": "r1", "n2": "r2", "n3": "r2"})
    low(sim, "a", "n0", creation=3.0)
    low(sim, "b", "n1", creation=2.0)
    low(sim, "c", "n3", creation=1.0)
    high = Job("high", at=0, run=100, cpu=4000, members=2, priority=10)
    driver = Driver(sim, [high])
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    (report,) = preempting(sim)
    assert [v.name for v in report.victims] == ["pod ns/a"], report.victims


@st.composite
def rack_clusters(draw: st.DrawFn) -> tuple[dict[str, str | None], list[tuple[str, int, int]],
                                            int]:
    """Nodes in up to 3 racks (some unlabelled), low-priority pods of 1-4 cpu on them,
    and the size of a high-priority gang of 2-cpu members that needs one rack."""
    layout: dict[str, str | None] = {}
    for i in range(draw(st.integers(2, 7))):
        layout[f"n{i}"] = draw(st.sampled_from(("r0", "r1", "r2", None)))
    pods = []
    for i, name in enumerate(layout):
        for j in range(draw(st.integers(1, 2))):
            pods.append((name, draw(st.sampled_from((1000, 2000, 4000))) // (j + 1), i * 3 + j))
    return layout, pods, draw(st.integers(1, 4))


def test_the_whole_cluster_is_planned_for_the_least_harmful_domain_only() -> None:
    """Every one-node domain makes room for the preemptor; each is searched on its own
    node without explaining failed tries, and only the chosen set is planned on the
    whole cluster. Planning every domain's set on the whole cluster made the search
    quadratic (15-18 s at 5,000 nodes, `lab.experiments.preemption_domains`)."""
    whole: list[int] = []
    explained: list[bool] = []  # per try inside one domain: was a failure explained?

    def planner(g: GroupInfo, members: Sequence[PodInfo], succeeded: int,
                view: Snapshot, explain: bool = True) -> Plan | Shortfall:
        if len(view.nodes) == 30:
            whole.append(1)
        else:
            explained.append(explain)
        return plan_group(g, members, succeeded, view, explain)

    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, preemption=True),
                                 planner))
    for i in range(30):
        sim.add_node(rack_node(f"n{i}", None))
        low(sim, f"low-{i}", f"n{i}", creation=float(i))
    sim.add_group(group("high", 1, topology_required="kubernetes.io/hostname"))
    sim.add_pod(pod("high-0", "high", cpu=4000, memory=1 << 20, priority=10))
    sim.tick()
    (report,) = preempting(sim)
    # Equal harm everywhere: the smaller label value decides (domains.py's rule).
    assert [v.name for v in report.victims] == ["pod ns/low-0"]
    # The queue's failed plan, the test that it could be placed on the nodes emptied
    # (once per set of nodes, `queue/unplaceable.py`), the check that pods leaving do
    # not make room, the chosen set.
    assert len(whole) == 4, len(whole)
    # The search only asks whether a set fits: explaining each failed try was two
    # thirds of its cost.
    assert explained and not any(explained)


@settings(max_examples=100, deadline=None)
@given(rack_clusters())
def test_property_a_rack_gang_evicts_only_inside_the_rack_it_is_placed_in(
    case: tuple[dict[str, str | None], list[tuple[str, int, int]], int],
) -> None:
    layout, pods, members = case
    sim = racks(layout)
    node_of: dict[str, str] = {}  # every low pod's node (victims are deleted at once)
    for k, (node, cpu, created) in enumerate(pods):
        if sum(p.requests["cpu"] for p in sim.cache.pods.values()
               if p.node_name == node) + cpu <= 4000:
            node_of[low(sim, f"p{k}", node, creation=float(created), cpu=cpu).uid] = node
    high = Job("high", at=0, run=100, cpu=2000, members=members, priority=10, required=RACK)
    driver = Driver(sim, [high])
    driver.run(2)
    held = [r for r in sim.manager.reads.reservations() if r.gang == "ns/high"]
    where = {rack_of(sim, s.node) for r in held for s in r.slots} | {
        rack_of(sim, p.node_name) for p in sim.bound("high")}
    assert len(where) <= 1 and None not in where, where  # never split, never unlabelled
    evicted = {node_of[p.uid] for a in driver.evicted for p in a.pods}
    if evicted:
        assert where and {rack_of(sim, n) for n in evicted} <= where, (evicted, where)
    assert sim.overcommits == []


# ----- the starvation guard ----------------------------------------------------------------


def test_the_forward_hold_of_a_rack_gang_is_in_one_rack_on_the_nodes_freeing_first() -> None:
    # Rack r1: a and b run long pods of the gang scheduler, c is free; r2: d runs one.
    # Once they finish r1 holds the gang of 2 (r2 never does); of r1's nodes, c is free
    # now, so the hold takes c and waits for one other node, not for two.
    sim = racks({"a": "r1", "b": "r1", "c": "r1", "d": "r2"}, preemption=False,
                starvation=1.0)
    for name in ("a", "b", "d"):
        busy = pod(f"busy-{name}", cpu=4000, memory=1 << 20)
        sim.add_pod(busy)
        sim.manager.on_pod(dataclasses.replace(busy, node_name=name, phase="Running"), sim.now)
    big = Job("big", at=0, run=10, cpu=4000, members=2, required=RACK)
    driver = Driver(sim, [big])
    driver.run_until(lambda: any(isinstance(a, GangHeld) for a in sim.actions), 5)
    (res,) = [r for r in sim.manager.reads.reservations() if r.gang == "ns/big"]
    assert res.held == "starvation" and res.domain == "rack r1"
    nodes = {s.node for s in res.slots}
    assert "c" in nodes and {rack_of(sim, n) for n in nodes} == {"r1"}, nodes
    st = sim.status("ns/big")
    assert st.reason == Reason.CAPACITY_HELD
    assert "2 slot(s) held for it on node(s) a, c in rack r1, freeing as the pods on a finish" \
        in st.message, st.message
    # a's pod finishes: the hold becomes a reservation, still bound to rack r1 (so a slot
    # that moves stays there), and the gang is bound there.
    sim.finish(next(u for u, p in sim.cache.pods.items() if p.name == "busy-a"))
    driver.run_until(lambda: driver.gang_bound_at(big) is not None, 5)
    reserved = [a for a in sim.actions if isinstance(a, GangReserved)]
    assert reserved and "in rack r1 for 30s" in reserved[0].message, reserved
    assert {rack_of(sim, p.node_name) for p in sim.bound("big")} == {"r1"}

"""Topology through the gang manager (docs/topology.md): the domain is kept by every
move of a slot (kube-scheduler excluded the node, the node was lost, a bind went
elsewhere, a member was replaced), elastic extras follow the quorum, and a spread
among members is bound whole whatever order kube-scheduler takes the members in."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from extender.core.model.convert import pod_from_k8s
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.types import LabelSelector, NodeInfo, PodInfo, SpreadConstraint
from extender.core.model.vocabulary import BindOutcome, GangReserved, Reason
from tests.core.sim import SimScheduler, group, node, pod

RACK = "example.com/rack"
ZONE = "topology.kubernetes.io/zone"


def racked(name: str, rack: str, cpu: int = 2000) -> NodeInfo:
    n = node(name, cpu=cpu)
    n.labels[RACK] = rack
    return n


def issue_case(required: str = "", preferred: tuple[str, ...] = ()) -> SimScheduler:
    """Racks r1 and r2 of two nodes each: room for one member in r1, for both in r2 (and
    a spare node in each rack for moved slots)."""
    sim = SimScheduler()
    for n in (racked("a1", "r1"), racked("a2", "r1", cpu=1000), racked("b1", "r2"),
              racked("b2", "r2")):
        sim.add_node(n)
    sim.add_group(group("g", 2, topology_required=required, topology_preferred=preferred))
    return sim


def rack_of(sim: SimScheduler, name: str) -> str:
    return sim.cache.nodes[name].labels[RACK]


def members(sim: SimScheduler, n: int = 2, cpu: int = 2000) -> list[PodInfo]:
    return [sim.add_pod(pod(f"g-{i}", "g", cpu=cpu)) for i in range(n)]


def slots(sim: SimScheduler) -> dict[str, str]:
    return {s.pod.name: s.node for s in sim.core.ledger.reservations["ns/g"].slots.values()}


def test_the_issue_case_is_split_without_a_topology() -> None:
    sim = issue_case()
    for p in members(sim):
        sim.schedule(p.uid)
    assert {rack_of(sim, p.node_name) for p in sim.bound("g")} == {"r1", "r2"}


def test_the_issue_case_with_a_required_rack_binds_in_one_rack() -> None:
    sim = issue_case(RACK)
    pods = members(sim)
    assert [sim.schedule(p.uid) for p in pods] == ["held", "bound"]
    assert {rack_of(sim, p.node_name) for p in sim.bound("g")} == {"r2"}
    reserved = [a for a in sim.actions if type(a).__name__ == "GangReserved"]
    assert "reserved 2 slot(s) on 2 node(s) in rack r2 for 30s" in reserved[0].message  # type: ignore[attr-defined]


def test_a_slot_kube_scheduler_excludes_moves_only_inside_the_rack() -> None:
    sim = issue_case(RACK)
    sim.add_node(racked("b3", "r2"))
    a, b = members(sim)
    res = sim.manager.filter(a, ["a1", "b1", "b2", "b3"], sim.now)
    mine = res.nodes[0]
    # kube-scheduler now excludes the reserved node (a host port, say): r2's spare, never r1.
    others = [n for n in ("a1", "b1", "b2", "b3") if n != mine]
    moved = sim.manager.filter(a, others, sim.now)
    assert moved.nodes and rack_of(sim, moved.nodes[0]) == "r2"
    # Nothing left in r2: the member is turned away rather than sent to r1.
    res = sim.manager.filter(b, ["a1"], sim.now)
    assert res.nodes == []
    assert "no other node in rack r2 has {cpu: 2, memory: 1Gi} free" in next(
        iter(res.unresolvable.values()))
    assert set(slots(sim).values()) <= {"b1", "b2", "b3"}


def test_a_preferred_rack_lets_a_slot_leave_when_it_must() -> None:
    sim = issue_case(preferred=(RACK,))
    a, _ = members(sim)
    sim.manager.filter(a, ["a1", "b1", "b2"], sim.now)
    assert {rack_of(sim, n) for n in slots(sim).values()} == {"r2"}
    moved = sim.manager.filter(a, ["a1"], sim.now)
    assert moved.nodes == ["a1"]


def test_a_lost_node_moves_the_slot_inside_the_rack_or_drops_it() -> None:
    sim = issue_case(RACK)
    sim.add_node(racked("b3", "r2"))
    a, _ = members(sim)
    assert sim.schedule(a.uid) == "held"
    lost = slots(sim)["g-0"]
    sim.add_node(dataclasses.replace(sim.cache.nodes[lost], unschedulable=True))  # cordon
    sim.drain()
    assert rack_of(sim, slots(sim)["g-0"]) == "r2" and slots(sim)["g-0"] != lost
    assert "its slot moved to node" in dict(sim.failed_binds)[a.uid]
    # r2 runs out of room: the slot is dropped, not moved to r1 (which has room).
    now = slots(sim)["g-0"]
    sim.add_node(dataclasses.replace(sim.cache.nodes[now], unschedulable=True))
    assert "g-0" not in slots(sim)
    assert sim.cache.free["a1"]["cpu"] == 2000
    # The rack gets room back: the member's next filter takes a replacement slot there.
    sim.add_node(dataclasses.replace(sim.cache.nodes[lost], unschedulable=False))
    sim.run_all()
    assert {rack_of(sim, p.node_name) for p in sim.bound("g")} == {"r2"}
    assert len(sim.bound("g")) == 2 and sim.overcommits == []


def test_a_bind_to_a_node_outside_the_rack_is_refused() -> None:
    sim = issue_case(RACK)
    a, _ = members(sim)
    sim.manager.filter(a, ["a1", "b1", "b2"], sim.now)
    assert [r.domain for r in sim.manager.reads.reservations()] == ["rack r2"]  # /debug views
    d = sim.manager.bind(a.namespace, a.name, a.uid, "a1", sim.now)
    assert d.outcome is BindOutcome.ERROR
    assert rack_of(sim, slots(sim)["g-0"]) == "r2"


def test_a_replacement_member_gets_a_slot_inside_the_rack() -> None:
    sim = issue_case(RACK)
    sim.add_node(racked("b3", "r2"))
    a, b = members(sim)
    assert sim.schedule(a.uid) == "held"
    sim.delete(b.uid)  # a1 in r1 is the first node that fits its replacement
    c = sim.add_pod(pod("g-2", "g", cpu=2000))
    assert sim.schedule(c.uid) == "bound"
    assert {rack_of(sim, p.node_name) for p in sim.bound("g")} == {"r2"}


@pytest.mark.parametrize(("required", "where"), [(True, []), (False, ["a1"])])
def test_elastic_extras_follow_the_quorum_while_its_rack_has_room(
    required: bool, where: list[str]
) -> None:
    sim = issue_case(RACK) if required else issue_case(preferred=(RACK,))
    sim.add_node(racked("b3", "r2"))
    pods = members(sim, 3)  # the quorum of 2 in r2, and the extra too, though a1 is free
    for p in pods:
        sim.schedule(p.uid)
    assert {rack_of(sim, p.node_name) for p in sim.bound("g")} == {"r2"}
    assert len(sim.bound("g")) == 3
    extra = sim.add_pod(pod("g-3", "g", cpu=2000))  # r2 is full now
    res = sim.manager.filter(extra, sim.feasible(extra), sim.now)
    assert res.nodes == where
    if required:
        assert "must stay in one rack (rack r2), which has no room" in next(
            iter(res.unresolvable.values()))


# ----- a spread among members, in every order ----------------------------------------------


class SpreadScheduler(SimScheduler):
    """kube-scheduler with its PodTopologySpread filter: skew counted over the bound and
    the assumed pods (a member whose bind the extender holds is assumed)."""

    def feasible(self, p: PodInfo) -> list[str]:
        names = super().feasible(p)
        for c in p.spread_constraints:
            count = {n.labels[c.topology_key]: 0 for n in self.cache.nodes.values()
                     if c.topology_key in n.labels}
            for q in self.cache.pods.values():
                on = q.node_name or self.assumed.get(q.uid)
                if on and q.uid != p.uid and q.labels.get("job") == "t":
                    count[self.cache.nodes[on].labels[c.topology_key]] += 1
            low = min(count.values())
            names = [n for n in names
                     if count[self.cache.nodes[n].labels[c.topology_key]] + 1 - low
                     <= c.max_skew]
        return names


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_a_spread_gang_is_bound_whole_in_any_order(order: tuple[int, ...]) -> None:
    """Two zones with room for exactly two members each, maxSkew 1. kube-scheduler
    takes the members in `order`; whenever it rules out the zone of a member's own slot
    (the other zone is behind), the member takes the slot of one not yet scheduled."""
    sim = SpreadScheduler()
    for z in "xy":
        n = node(f"{z}0", cpu=2000)
        n.labels[ZONE] = z
        sim.add_node(n)
    sim.add_group(group("g", 4))
    spread = (SpreadConstraint(1, ZONE, LabelSelector((("job", "t"),))),)
    pods = [sim.add_pod(pod(f"g-{i}", "g", cpu=1000, labels={"job": "t"},
                            spread_constraints=spread)) for i in range(4)]
    sim.manager.filter(pods[0], sim.feasible(pods[0]), sim.now)  # reserves: 2 per zone
    for i in order:
        assert sim.schedule(pods[i].uid) in ("held", "bound"), sim.last_filter
    bound = sim.bound("g")
    assert len(bound) == 4 and sim.overcommits == []
    assert sorted(p.node_name for p in bound) == ["x0", "x0", "y0", "y0"]


def test_a_gang_that_fits_no_rack_is_not_said_to_wait_behind_another() -> None:
    """Without gang h's reservation the three members would fit in the cluster, but
    in no one rack: the gang does not fit, it is not waiting behind h."""
    sim = SimScheduler()
    for n in (racked("a1", "r1"), racked("b1", "r2"), racked("b2", "r2")):
        sim.add_node(n)
    sim.add_group(group("h", 2))
    held = [sim.add_pod(pod(f"h-{i}", "h", cpu=1000)) for i in range(2)]
    assert sim.schedule(held[0].uid) == "held"  # h reserves; its other member never comes
    sim.add_group(group("g", 3, topology_required=RACK))
    pods = members(sim, 3)
    assert sim.schedule(pods[0].uid) == "rejected"
    st = sim.status("ns/g")
    assert st.reason == "Unplaceable", st  # no rack can ever hold it
    assert st.message.startswith("gang ns/g: can never be placed"), st.message
    assert "needs 3 × {cpu: 2, memory: 1Gi} in one rack" in st.message


# ----- the upstream Workload API's topology constraint (issue 19) ----------------------------


def upstream_case(topology: list[dict[str, str]] | None) -> SimScheduler:
    """The issue case, the gang an upstream PodGroup (scheduling.k8s.io/v1alpha2) whose
    members join it by spec.schedulingGroup."""
    sim = SimScheduler()
    for n in (racked("a1", "r1"), racked("a2", "r1", cpu=1000), racked("b1", "r2"),
              racked("b2", "r2")):
        sim.add_node(n)
    spec: dict[str, object] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    if topology is not None:
        spec["schedulingConstraints"] = {"topology": topology}
    sim.add_group(workload_group_from_k8s({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "up", "namespace": "ns", "uid": "up-1",
                     "creationTimestamp": "2026-11-24T10:00:00Z"},
        "spec": spec}))
    for i in range(2):
        sim.add_pod(pod_from_k8s({
            "metadata": {"name": f"up-{i}", "namespace": "ns", "uid": f"up-pod-{i}",
                         "creationTimestamp": "2026-11-24T10:00:01Z"},
            "spec": {"schedulerName": "gang-scheduler", "schedulingGroup": {"podGroupName": "up"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
            "status": {"phase": "Pending"}}))
    return sim


def upstream_racks(sim: SimScheduler) -> set[str]:
    for uid in sorted(sim.cache.pods):
        sim.schedule(uid)
    return {rack_of(sim, p.node_name) for p in sim.cache.pods.values() if p.node_name}


def test_an_upstream_podgroup_without_a_topology_constraint_is_split() -> None:
    assert upstream_racks(upstream_case(None)) == {"r1", "r2"}


def test_an_upstream_topology_constraint_is_topology_required() -> None:
    sim = upstream_case([{"key": RACK}])
    assert upstream_racks(sim) == {"r2"}
    reserved = [a for a in sim.actions if isinstance(a, GangReserved)]
    assert reserved[0].message == (
        "gang workload-api:ns/up: reserved 2 slot(s) on 2 node(s) in rack r2 for 30s")


def test_a_malformed_upstream_topology_key_places_nothing_and_says_why() -> None:
    sim = upstream_case([{"key": "rack zone"}])
    assert upstream_racks(sim) == set()
    st = sim.status("workload-api:ns/up")
    assert st.reason == Reason.INVALID_TOPOLOGY
    assert st.message == (
        "gang workload-api:ns/up: spec.schedulingConstraints.topology[0].key: 'rack zone' is "
        "not a node label key (the name part must be letters, digits, '-', '_' or '.', "
        "beginning and ending with a letter or digit); the gang is not placed until it is "
        "fixed")

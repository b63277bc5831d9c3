"""CompositePodGroups (Kubernetes 1.37 alpha): a composite's child groups, each with its
own quorum, are planned together: at least minGroupCount of them placed in one pass or
none, inside one domain of the composite's topology key, and committed together
(`queue/composite_unit.py`, `planner/composite_plan.py`, `Ledger.commit`)."""

from __future__ import annotations

from extender.core.model.config import Config
from extender.core.model.types import CompositeInfo, PodInfo, composite_key
from extender.core.model.vocabulary import Reason
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

ZONE = "topology.kubernetes.io/zone"
PARENT = composite_key("ns", "lw")


def composite(min_groups: int = 2) -> CompositeInfo:
    return CompositeInfo("ns", "lw", min_groups, uid="c-lw")


def leader_and_workers(sim: SimScheduler, workers: int = 3, cpu: int = 4000,
                       with_composite: bool = True) -> list[PodInfo]:
    """A leader group of one pod and a worker group of `workers`, both children of
    ns/lw; every pod `cpu`."""
    if with_composite:
        sim.manager.on_group(composite(), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT))
    sim.add_group(group("workers", workers, parent=PARENT))
    pods = [pod("leader-0", "leader", cpu=cpu)]
    pods += [pod(f"workers-{i}", "workers", cpu=cpu) for i in range(workers)]
    for p in pods:
        sim.add_pod(p)
    return pods


def schedule_all(sim: SimScheduler, pods: list[PodInfo]) -> None:
    for p in pods:
        sim.schedule(p.uid)


def bound(sim: SimScheduler, pods: list[PodInfo]) -> list[str]:
    return [p.name for p in pods if sim.cache.pods[p.uid].node_name]


def test_nothing_is_bound_until_both_groups_fit_then_all_are() -> None:
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = leader_and_workers(sim)
    schedule_all(sim, pods)
    assert bound(sim, pods) == []  # the leader alone would fit: it waits for its workers
    for gang in ("ns/leader", "ns/workers"):
        st = sim.status(gang)
        assert st.reason == Reason.INSUFFICIENT_CAPACITY
        assert "part of CompositePodGroup ns/lw" in st.message
        assert ("1 of its 2 groups with their pods fit together now (ns/workers) (no "
                "other choice of 2 of them fits either), so none is placed") in st.message
    assert sim.status("ns/leader").message.endswith(
        "this one: 1 of the 1 pod(s) it needs do not fit (the first: ns/leader-0): needs "
        "1 × {cpu: 4, memory: 1Gi}; 0 fit; largest shortfall on cpu")
    sim.add_node(node("n3", cpu=4000))
    schedule_all(sim, pods)
    assert sorted(bound(sim, pods)) == sorted(p.name for p in pods)


def test_a_child_alone_waits_for_its_siblings_pods() -> None:
    sim = SimScheduler()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.manager.on_group(composite(), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT))
    sim.add_group(group("workers", 3, parent=PARENT))
    leader = sim.add_pod(pod("leader-0", "leader", cpu=4000))
    sim.schedule(leader.uid)
    assert not sim.cache.pods[leader.uid].node_name
    st = sim.status("ns/leader")
    assert st.reason == Reason.WAITING_FOR_MEMBERS
    assert "2 at least (minGroupCount); 1 has its quorum of pods (ns/leader)" in st.message


def test_a_child_of_a_composite_not_seen_is_not_placed() -> None:
    sim = SimScheduler()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = leader_and_workers(sim, with_composite=False)
    schedule_all(sim, pods)
    assert bound(sim, pods) == []
    assert "CompositePodGroup ns/lw, which is not seen (yet)" in sim.status("ns/leader").message
    sim.manager.on_group(composite(), sim.now)
    schedule_all(sim, pods)
    assert len(bound(sim, pods)) == 4


def test_a_composite_deleted_leaves_its_children_waiting() -> None:
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = leader_and_workers(sim)
    sim.manager.on_group_deleted(PARENT)
    assert PARENT not in sim.cache.composites
    schedule_all(sim, pods)
    assert bound(sim, pods) == []
    assert "not seen (yet)" in sim.status("ns/leader").message


def test_the_composite_topology_holds_for_every_child() -> None:
    """Zone a has room for the leader only, zone b for everyone: planned alone, the
    leader would take zone a's node (first of equals); the composite's domain puts all
    of them in zone b."""
    sim = SimScheduler()
    zones = {"a0": "a", "b0": "b", "b1": "b", "b2": "b"}
    for name, zone in zones.items():
        n = node(name, cpu=8000)
        n.labels[ZONE] = zone
        sim.add_node(n)
    sim.manager.on_group(CompositeInfo("ns", "lw", 2, topology_required=ZONE), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT))
    sim.add_group(group("workers", 2, parent=PARENT))
    pods = [pod("leader-0", "leader", cpu=1000),
            *(pod(f"workers-{i}", "workers", cpu=8000) for i in range(2))]
    for p in pods:
        sim.add_pod(p)
    schedule_all(sim, pods)
    where = {zones[sim.cache.pods[p.uid].node_name] for p in pods}
    assert where == {"b"}


def test_a_malformed_composite_places_none_of_its_groups() -> None:
    sim = SimScheduler()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.manager.on_group(CompositeInfo("ns", "lw", 2, error="nested"), sim.now)
    pods = leader_and_workers(sim, with_composite=False)
    schedule_all(sim, pods)
    assert bound(sim, pods) == []
    st = sim.status("ns/workers")
    assert st.reason == Reason.INVALID_TOPOLOGY
    assert st.message == ("gang ns/workers: CompositePodGroup ns/lw: nested; none of its "
                          "groups is placed until it is fixed")


def test_a_basic_composite_places_each_child_on_its_own() -> None:
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.manager.on_group(composite(0), sim.now)
    pods = leader_and_workers(sim, with_composite=False)
    schedule_all(sim, pods)
    assert bound(sim, pods) == ["leader-0"]


def test_two_of_three_children_placed_the_third_later_on_its_own() -> None:
    """minGroupCount 2 of 3 children: the two that fit are placed together; once the
    composite is placed, the third is a gang of its own, placed when room comes."""
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.manager.on_group(composite(2), sim.now)
    for name, n in (("a", 1), ("b", 2), ("c", 2)):
        sim.add_group(group(name, n, parent=PARENT))
    pods = {name: [sim.add_pod(pod(f"{name}-{i}", name, cpu=4000)) for i in range(n)]
            for name, n in (("a", 1), ("b", 2), ("c", 2))}
    everyone = [p for ps in pods.values() for p in ps]
    schedule_all(sim, everyone)
    assert sorted(bound(sim, everyone)) == ["a-0", "b-0", "b-1"]
    assert sim.status("ns/c").reason == Reason.INSUFFICIENT_CAPACITY
    for i in (3, 4):
        sim.add_node(node(f"n{i}", cpu=4000))
    schedule_all(sim, pods["c"])
    assert sorted(bound(sim, pods["c"])) == ["c-0", "c-1"]


def test_a_child_commits_only_with_its_siblings() -> None:
    """At the bind barrier: the leader's quorum (one pod) is ready at its own bind, but
    its Binding waits until the workers' binds are there too; then all are bound."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=False)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = leader_and_workers(sim)
    assert sim.schedule(pods[0].uid) == "held"
    assert sim.schedule(pods[1].uid) == "held"
    assert sim.schedule(pods[2].uid) == "held"
    assert bound(sim, pods) == []
    sim.schedule(pods[3].uid)
    assert len(bound(sim, pods)) == 4


def test_direct_commit_binds_the_composite_at_once() -> None:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=True)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = leader_and_workers(sim)
    sim.schedule(pods[0].uid)
    assert len(bound(sim, pods)) == 4


def test_a_sibling_gone_after_the_plan_leaves_the_rest_uncommitted() -> None:
    """Reserved together, then the leader's PodGroup is deleted before the commit: the
    workers alone are fewer groups than minGroupCount, so their binds keep waiting."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=False)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = leader_and_workers(sim)
    for p in pods[1:]:
        assert sim.schedule(p.uid) == "held"
    sim.manager.on_group_deleted("ns/leader")
    sim.add_group(group("workers", 3, parent=PARENT))  # any event that commits
    sim.drain()
    assert bound(sim, pods) == []


def test_children_of_different_shapes_are_bound_where_name_order_would_not_fit() -> None:
    """n0 (4 CPU) and n1 (1 CPU) each fit one copy of the "a" pod (1 CPU, 20 GiB), and
    alone it takes n0; planned by name, "b" (4 CPU) would then find no node and nothing
    would be bound. Largest first, both are bound."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=4000))
    sim.add_node(node("n1", cpu=1000))
    sim.manager.on_group(composite(2), sim.now)
    sim.add_group(group("a", 1, parent=PARENT))
    sim.add_group(group("b", 1, parent=PARENT))
    pods = [sim.add_pod(pod("a-0", "a", cpu=1000, memory=20 << 30)),
            sim.add_pod(pod("b-0", "b", cpu=4000))]
    schedule_all(sim, pods)
    assert {p.name: sim.cache.pods[p.uid].node_name for p in pods} == {"a-0": "n1",
                                                                       "b-0": "n0"}


def spreader_and_pairs(sim: SimScheduler, min_groups: int) -> list[PodInfo]:
    """Two 4-CPU nodes; "a" (2 pods of 3 CPU, the biggest, planned first) leaves neither
    "b" nor "c" (2 pods of 2 CPU each) room, and they fill both nodes together."""
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.manager.on_group(composite(min_groups), sim.now)
    out = []
    for name, cpu in (("a", 3000), ("b", 2000), ("c", 2000)):
        sim.add_group(group(name, 2, parent=PARENT))
        out += [sim.add_pod(pod(f"{name}-{i}", name, cpu=cpu)) for i in range(2)]
    return out


def test_the_children_that_fit_together_are_bound_not_the_first_that_fits() -> None:
    sim = SimScheduler()
    pods = spreader_and_pairs(sim, 2)
    schedule_all(sim, pods)
    assert sorted(bound(sim, pods)) == ["b-0", "b-1", "c-0", "c-1"]
    st = sim.status("ns/a")
    assert st.reason == Reason.INSUFFICIENT_CAPACITY
    assert "2 of the 2 pod(s) it needs do not fit (the first: ns/a-0)" in st.message


def test_an_impossible_composite_names_the_child_the_pod_and_how_many() -> None:
    sim = SimScheduler()
    pods = spreader_and_pairs(sim, 3)
    schedule_all(sim, pods)
    assert bound(sim, pods) == []
    st = sim.status("ns/b")
    assert st.reason == Reason.INSUFFICIENT_CAPACITY
    assert st.message == (
        "gang ns/b: part of CompositePodGroup ns/lw, whose groups are placed together, 3 "
        "at least (minGroupCount); 1 of its 3 groups with their pods fit together now "
        "(ns/a) (no other choice of 3 of them fits either), so none is placed; this one: "
        "2 of the 2 pod(s) it needs do not fit (the first: ns/b-0): needs 2 × {cpu: 2, "
        "memory: 1Gi}; 0 fit; largest shortfall on cpu")
    assert "this one: 2 of the 2 pod(s) it needs do not fit (the first: ns/c-0)" in (
        sim.status("ns/c").message)
    assert "this one" not in sim.status("ns/a").message

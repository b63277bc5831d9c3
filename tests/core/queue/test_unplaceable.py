"""Gangs that can never be placed (`core/queue/unplaceable.py`) and the starvation guard
that protects every starving gang that can (`core/queue/starvation.py`), on plain data.

The issue's cases: an older gang of 3 members × 4 GPUs that no node has, then the
stream of the starvation work (1-CPU single-pod gangs every 0.6 s, 4 s each) and a
gang that needs all 4 nodes; and two node pools, each with a starving gang.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from extender.core.cache.snapshot import Snapshot
from extender.core.model.config import Config
from extender.core.model.types import (
    GroupInfo,
    LabelSelector,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
)
from extender.core.model.vocabulary import CreateRequest, GangHeld, Reason
from extender.core.planner import Plan, Shortfall, plan_group
from extender.core.wiring import Core
from tests.core.queue.restart import recorded, written
from tests.core.sim import SimScheduler, group, node, pod
from tests.core.workload import Driver, Job

AFTER = 5.0
RACK = "topology.kubernetes.io/rack"


def labelled(n: NodeInfo, **labels: str) -> NodeInfo:
    return dataclasses.replace(n, labels={**n.labels, **{k.replace("_", "."): v
                                                         for k, v in labels.items()}})


def sim_with(nodes: Sequence[NodeInfo], after: float | None = AFTER) -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=after, preemption=False)))
    for n in nodes:
        sim.add_node(n)
    return sim


def gang(sim: SimScheduler, name: str, size: int, **kw: Any) -> list[PodInfo]:
    g_kw = {k: v for k, v in kw.items() if k in ("min_resources", "topology_required")}
    p_kw = {k: v for k, v in kw.items() if k not in g_kw}
    sim.add_group(group(name, size, **g_kw))
    return [sim.add_pod(pod(f"{name}-{i}", name, **p_kw)) for i in range(size)]


# ----- each cause, and its message ---------------------------------------------------------


def test_resources_beyond_any_node() -> None:
    sim = sim_with([node(f"n{i}", gpu=2) for i in range(3)])
    gang(sim, "g", 3, gpu=4)
    sim.run_all()
    st = sim.status("ns/g")
    assert st.reason == Reason.UNPLACEABLE, st
    assert st.message.startswith("gang ns/g: can never be placed on this cluster's nodes"), st
    assert "needs 3 × {cpu: 1, memory: 1Gi, nvidia.com/gpu: 4}; 0 fit" in st.message
    assert "no eligible node has {nvidia.com/gpu: 4} allocatable (the most any has: " \
           "nvidia.com/gpu: 2)" in st.message, st.message
    assert st.message.endswith("at most 0 of 3 members could ever fit"), st.message
    assert sim.manager.reads.waiting_since("ns/g") is None  # not waiting for capacity


def test_a_node_selector_matching_too_few_nodes() -> None:
    nodes = [labelled(node(f"a{i}", cpu=4000), pool="a") for i in range(2)]
    nodes += [labelled(node(f"b{i}", cpu=4000), pool="b") for i in range(3)]
    sim = sim_with(nodes)
    gang(sim, "g", 3, cpu=3000, node_selector={"pool": "a"})
    sim.run_all()
    st = sim.status("ns/g")
    assert st.reason == Reason.UNPLACEABLE, st
    assert "needs 3 × {cpu: 3, memory: 1Gi}; 2 fit" in st.message, st.message
    assert "excluded: 3 node(s) didn't match node selector" in st.message, st.message
    assert "at most 2 of 3 members could ever fit" in st.message


def test_a_topology_domain_too_small() -> None:
    nodes = [labelled(node(f"{r}{i}", cpu=4000), **{"topology_kubernetes_io/rack": r})
             for r in ("x", "y") for i in range(2)]
    sim = sim_with(nodes)
    gang(sim, "g", 3, cpu=4000, topology_required=RACK)
    sim.run_all()
    st = sim.status("ns/g")
    assert st.reason == Reason.UNPLACEABLE, st
    assert "in one rack" in st.message and "at most 2 of 3" in st.message, st.message


def test_min_resources_beyond_the_cluster() -> None:
    sim = sim_with([node(f"n{i}", cpu=4000) for i in range(2)])
    gang(sim, "g", 2, min_resources={"cpu": 12000})
    sim.run_all()
    st = sim.status("ns/g")
    assert st.reason == Reason.UNPLACEABLE, st
    assert "minResources {cpu: 12} exceed free {cpu: 8}" in st.message, st.message


def test_a_gang_that_only_waits_for_capacity_is_not_unplaceable() -> None:
    sim = sim_with([node("n0", cpu=4000)])
    sim.add_pod(pod("other", cpu=3000, node_name="n0"))  # the gang scheduler's: it goes
    gang(sim, "g", 2, cpu=2000)
    sim.run_all()
    assert sim.status("ns/g").reason == Reason.INSUFFICIENT_CAPACITY


# ----- examined again when nodes change, and only then ----------------------------------


def counting_sim(nodes: Sequence[NodeInfo]) -> tuple[SimScheduler, list[str]]:
    planned: list[str] = []

    def planner(g: GroupInfo, m: Sequence[PodInfo], succeeded: int, view: Snapshot,
                explain: bool = True) -> Plan | Shortfall:
        planned.append(g.key)
        return plan_group(g, m, succeeded, view, explain)

    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER), planner))
    for n in nodes:
        sim.add_node(n)
    return sim, planned


def test_a_node_that_fits_is_added_and_the_gang_is_placed() -> None:
    sim, _ = counting_sim([node(f"n{i}", gpu=2) for i in range(3)])
    gang(sim, "g", 3, gpu=4)
    sim.run_all()
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE
    for i in range(3):
        sim.add_node(node(f"g{i}", gpu=4))
    sim.run_all()
    assert len(sim.bound("g")) == 3
    assert sim.status("ns/g").reason == Reason.BOUND


def test_a_relabelled_node_is_examined_again() -> None:
    nodes = [labelled(node(f"n{i}", cpu=4000), pool="b") for i in range(2)]
    sim, _ = counting_sim(nodes)
    gang(sim, "g", 2, cpu=3000, node_selector={"pool": "a"})
    sim.run_all()
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE
    sim.manager.on_node(labelled(nodes[0], pool="a"))
    sim.run_all()
    st = sim.status("ns/g")
    assert st.reason == Reason.UNPLACEABLE and "at most 1 of 2" in st.message, st
    sim.manager.on_node(labelled(nodes[1], pool="a"))
    sim.run_all()
    assert len(sim.bound("g")) == 2


def test_pods_coming_and_going_do_not_plan_an_unplaceable_gang_again() -> None:
    """Set aside, the gang costs nothing per tick: no plan of it, however often
    capacity frees elsewhere, until a node changes."""
    sim, planned = counting_sim([node(f"n{i}", cpu=4000, gpu=2) for i in range(2)])
    gang(sim, "g", 3, gpu=4)
    sim.run_all()
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE
    planned.clear()
    driver = Driver(sim, [Job(f"s{i}", at=i * 0.6, run=1.0) for i in range(20)])
    driver.run(15)
    assert all(driver.gang_bound_at(j) is not None for j in driver.jobs)
    assert "ns/g" not in planned, planned.count("ns/g")
    sim.manager.on_node(dataclasses.replace(sim.cache.nodes["n0"],
                                            labels={"kubernetes.io/hostname": "n0", "x": "1"}))
    sim.tick()
    assert "ns/g" in planned  # a node changed: examined again
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE


# ----- the guard: every starving gang that can be placed ---------------------------------


def stream(pool: dict[str, str], prefix: str, start: float = 0.0) -> list[Job]:
    return [Job(f"{prefix}{i:03d}", at=start + i * 0.6, run=4.0, selector=pool)
            for i in range(150)]


def hold_and_bound(sim: SimScheduler, driver: Driver, jobs: Sequence[Job],
                   limit: float) -> dict[str, tuple[float | None, float, float | None]]:
    """Per job: (when a hold was made, the longest remaining run on its nodes then,
    when it was bound)."""
    seen = 0
    out: dict[str, tuple[float | None, float, float | None]] = {
        j.name: (None, 0.0, None) for j in jobs}
    while driver.t < limit and any(driver.gang_bound_at(j) is None for j in jobs):
        driver.step()
        for a in sim.actions[seen:]:
            if isinstance(a, GangHeld) and a.group.name in out:
                nodes = {s.node for s in a.slots}
                left = max((at - sim.now for uid, at in driver.finish_at.items()
                            if sim.cache.pods[uid].node_name in nodes), default=0.0)
                out[a.group.name] = (driver.t, left, None)
        seen = len(sim.actions)
    return {j.name: (out[j.name][0], out[j.name][1], driver.gang_bound_at(j)) for j in jobs}


def test_an_unplaceable_older_gang_does_not_keep_the_guard_from_the_starving_one() -> None:
    """The issue's report: without this, the head of the queue is the GPU gang no node
    can hold, and the 4-node gang is never protected (still unbound after 60 s)."""
    sim = sim_with([node(f"n{i}", cpu=4000, gpu=2) for i in range(4)])
    gpu = Job("gpu", at=0.0, run=30.0, gpu=4, members=3)
    big = Job("big", at=2.0, run=30.0, cpu=4000, members=4)
    driver = Driver(sim, [gpu, *stream({}, "s"), big])
    got = hold_and_bound(sim, driver, [big], 60)
    held_at, left, bound = got["big"]
    assert bound is not None and held_at is not None, got
    assert held_at - 2.0 <= AFTER + 0.5
    assert bound - 2.0 <= AFTER + left + 0.5, (bound, left)
    st = sim.status("ns/gpu")
    assert st.reason == Reason.UNPLACEABLE, st
    print(f"MEASURED big waited {bound - 2.0:.1f}s beside the unplaceable gang")


def test_two_node_pools_each_with_a_starving_gang_both_get_a_hold() -> None:
    """By the old rule only the head of the queue (pool a's gang) was guarded: pool
    b's big gang starved behind a stream of its own."""
    nodes = [labelled(node(f"{p}{i}", cpu=4000), pool=p) for p in "ab" for i in range(2)]
    sim = sim_with(nodes)
    big_a = Job("biga", at=2.0, run=30.0, cpu=4000, members=2, selector={"pool": "a"})
    big_b = Job("bigb", at=2.1, run=30.0, cpu=4000, members=2, selector={"pool": "b"})
    jobs = [*stream({"pool": "a"}, "a"), *stream({"pool": "b"}, "b", 0.3), big_a, big_b]
    driver = Driver(sim, jobs)
    got = hold_and_bound(sim, driver, [big_a, big_b], 60)
    for job in (big_a, big_b):
        held_at, left, bound = got[job.name]
        assert held_at is not None and bound is not None, (job.name, got)
        assert held_at - job.at <= AFTER + 0.5, (job.name, got)
        assert bound - job.at <= AFTER + left + 0.5, (job.name, got)


def test_a_starving_gang_never_holds_a_node_an_older_holder_holds() -> None:
    """Holds never share a node: a younger hold there would keep the older one from
    becoming a reservation when its part of the node frees (here at 8 s, when the
    first filler ends, instead of 16 s). The younger one gets its hold after."""
    sim = sim_with([node("n0", cpu=4000)])
    fillers = [Job("f0", at=0, run=8.0, cpu=2000), Job("f1", at=0, run=16.0, cpu=2000)]
    old = Job("old", at=0.5, run=3.0, cpu=2000)
    young = Job("young", at=1.0, run=3.0, cpu=2000)
    driver = Driver(sim, [*fillers, old, young])
    driver.run(7.0)
    held = [(r.gang, r.held) for r in sim.manager.reads.reservations()]
    assert held == [("ns/old", "starvation")], held
    driver.run_until(lambda: driver.gang_bound_at(young) is not None, 30)
    assert (driver.gang_bound_at(old) or 99) <= 8.1 + 0.5, driver.gang_bound_at(old)
    assert (driver.gang_bound_at(young) or 99) <= 16.1 + 0.5, driver.gang_bound_at(young)


def test_each_starving_gang_keeps_its_own_wait_over_a_restart() -> None:
    """`waitingForCapacitySince` per gang: after a restart, the gangs of both pools are
    held `--starvation-after` after their own recorded start, not after the restart;
    the unplaceable gang records no wait."""

    def cluster(now: float, groups: Sequence[GroupInfo]) -> SimScheduler:
        sim = sim_with([labelled(node(f"{p}{i}", cpu=4000, gpu=2), pool=p)
                        for p in "ab" for i in range(2)], after=10.0)
        sim.now = now
        for n in sim.cache.nodes:  # fillers of the gang scheduler: they finish some day
            sim.add_pod(pod(f"fill-{n}", cpu=3000, node_name=n, phase="Running"))
        for g in groups:
            sim.add_group(g)
            for i in range(2):
                spec: dict[str, Any] = ({"gpu": 4} if g.name == "gpu" else
                                        {"cpu": 4000, "node_selector": {"pool": g.name}})
                sim.add_pod(pod(f"{g.name}-{i}", g.name, **spec))
        return sim

    first = cluster(1000.0, [group("a", 2), group("b", 2, creation=1.0), group("gpu", 2)])
    first.tick()
    first.tick(3)
    assert first.status("ns/gpu").reason == Reason.UNPLACEABLE
    assert written(first, "ns/gpu").to_k8s()["waitingForCapacitySince"] is None
    pgs = [recorded(first, f"ns/{n}") for n in ("a", "b", "gpu")]
    assert [p.waiting_since for p in pgs] == [1000.0, 1000.0, 0.0]  # 0: none
    second = cluster(first.now + 4, pgs)  # restarted 7 s into the waits
    second.tick()
    assert not [a for a in second.actions if isinstance(a, GangHeld)]
    second.tick(3.1)
    held = sorted(a.group.name for a in second.actions if isinstance(a, GangHeld))
    assert held == ["a", "b"], held


# ----- pod affinity to pods that may still come: waits, never set aside -------------------
# The finding: 3 × 4 CPU on four 4-CPU nodes of one zone, the third member with a
# required pod affinity to a pod that does not exist yet. It was set aside as
# Unplaceable, not planned again when the pod came (only nodes changing did that), and
# asked the autoscaler for nodes that could not help.

ZONE = "topology.kubernetes.io/zone"
DB = LabelSelector((("app", "db"),))


def zone_nodes(count: int = 4) -> list[NodeInfo]:
    return [labelled(node(f"n{i}", cpu=4000), **{"topology_kubernetes_io/zone": "z"})
            for i in range(count)]


def affinity_gang(sim: SimScheduler, name: str = "g", **kw: Any) -> list[PodInfo]:
    """3 × 4 CPU; the third member must be in a zone where a pod `app=db` runs."""
    sim.add_group(group(name, 3))
    term = (PodAffinityTerm(DB, ZONE),)
    return [sim.add_pod(pod(f"{name}-{i}", name, cpu=4000,
                            required_affinity=term if i == 2 else (), **kw))
            for i in range(3)]


def db_pod() -> PodInfo:
    return pod("db", cpu=1000, labels={"app": "db"})


def test_a_gang_whose_pod_affinity_selects_no_pod_yet_waits_for_one() -> None:
    sim = sim_with(zone_nodes())
    affinity_gang(sim)
    sim.run_all()
    sim.tick(0.1)
    st = sim.status("ns/g")
    assert st.reason == Reason.WAITING_FOR_POD_AFFINITY, st
    assert st.message.startswith("gang ns/g: waits for a pod"), st.message
    assert "member ns/g-2" in st.message and "app=db" in st.message, st.message
    assert ZONE in st.message and "planned again when one appears" in st.message
    assert not sim.bound("g")
    # Not waiting for capacity: no starvation clock, no hold.
    assert sim.manager.reads.waiting_since("ns/g") is None


def test_the_gang_is_placed_whole_once_a_pod_its_affinity_selects_is_bound() -> None:
    sim, planned = counting_sim(zone_nodes())
    affinity_gang(sim)
    sim.run_all()
    sim.tick(0.1)
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_POD_AFFINITY
    planned.clear()
    # Pods that do not match come and go: the gang is not planned again for them.
    other = sim.bind_foreign(pod("web", cpu=1000, labels={"app": "web"}), "n3")
    sim.tick(0.1)
    sim.delete(other.uid)
    sim.tick(0.1)
    assert "ns/g" not in planned, planned
    # The pod it waits for is bound onto one node: three are left, and take the gang.
    sim.bind_foreign(db_pod(), "n3")
    sim.tick(0.1)
    sim.run_all()
    assert "ns/g" in planned
    assert len(sim.bound("g")) == 3, sim.status("ns/g")
    assert {p.node_name for p in sim.bound("g")} == {"n0", "n1", "n2"}
    assert sim.status("ns/g").reason == Reason.BOUND
    assert not sim.overcommits


def test_a_running_pod_relabelled_to_match_places_the_gang_too() -> None:
    """Not only a new pod: one already bound whose labels come to match, and the members
    kube-scheduler asks about are told what the gang waits for meanwhile."""
    sim = sim_with(zone_nodes())
    web = sim.bind_foreign(pod("web", cpu=1000, labels={"app": "web"}), "n3")
    affinity_gang(sim)
    sim.run_all()
    sim.tick(0.1)
    g0 = next(p for p in sim.cache.gang_pods("ns/g") if p.name == "g-0")
    assert "waits for a pod" in sim.last_filter[g0.uid], sim.last_filter
    sim.manager.on_pod(dataclasses.replace(web, labels={"app": "db"}), sim.now)
    sim.tick(0.1)
    sim.run_all()
    assert len(sim.bound("g")) == 3, sim.status("ns/g")


def autoscaled(nodes: Sequence[NodeInfo]) -> SimScheduler:
    """`sim_with`, and a served ProvisioningRequest API."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=None, preemption=False,
                                        provisioning=True)))
    sim.manager.provisioning_served(True)
    for n in nodes:
        sim.add_node(n)
    return sim


def settle(sim: SimScheduler) -> None:
    for _ in range(3):
        sim.run_all()
        sim.tick(1.0)


def test_a_gang_waiting_for_its_pod_affinity_asks_no_autoscaler() -> None:
    """Short of capacity as well, it asks for none while the pod is missing: nodes alone
    would not place it. Once the pod is bound, capacity is what is missing: it asks."""
    small = labelled(node("small", cpu=1000), **{"topology_kubernetes_io/zone": "z"})
    sim = autoscaled([*zone_nodes(3), small])
    sim.add_pod(pod("busy", cpu=3000, node_name="n2", phase="Running"))  # it finishes
    affinity_gang(sim)
    settle(sim)
    assert not [a for a in sim.actions if isinstance(a, CreateRequest)]
    st = sim.status("ns/g")
    assert st.reason == Reason.WAITING_FOR_POD_AFFINITY, st
    assert "; even then: needs 2 × {cpu: 4, memory: 1Gi} + 1 × {cpu: 4, memory: 1Gi} in one " \
           "zone" in st.message, st.message
    sim.bind_foreign(db_pod(), "small")
    settle(sim)
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_PROVISIONING, sim.status("ns/g")
    assert len([a for a in sim.actions if isinstance(a, CreateRequest)]) == 1


def test_a_node_selector_matching_no_node_is_still_unplaceable() -> None:
    sim = sim_with(zone_nodes())
    gang(sim, "g", 2, cpu=1000, node_selector={"pool": "gpu"})
    affinity_gang(sim, "h", node_selector={"pool": "gpu"})  # and its affinity, too
    sim.run_all()
    sim.tick(0.1)
    for key in ("ns/g", "ns/h"):
        st = sim.status(key)
        assert st.reason == Reason.UNPLACEABLE, st
        assert "didn't match node selector" in st.message, st.message


def test_a_zone_too_small_for_a_gang_waiting_for_its_pod_affinity_is_unplaceable() -> None:
    """Whatever pod comes, no zone holds the gang: that is never. More nodes alone would
    not place it either (the pod is missing too): no autoscaler is asked."""
    sim = autoscaled(zone_nodes(2))
    affinity_gang(sim)
    settle(sim)
    st = sim.status("ns/g")
    assert st.reason == Reason.UNPLACEABLE, st
    assert "at most 2 of 3" in st.message, st.message
    assert "besides, the required pod affinity of member ns/g-2" in st.message, st.message
    assert not [a for a in sim.actions if isinstance(a, CreateRequest)]

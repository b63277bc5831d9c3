"""Capacity nominated by kube-scheduler's preemption (`status.nominatedNodeName`,
architecture.md §11): kube-scheduler evicts victims for a pending pod and keeps what
they free for it, from pods of equal or lower priority, until the pod is bound, deleted
or its nomination is cleared. A gang's commit (direct or at the barrier) and a plain
pod's filter and bind keep off that capacity by the same rule; the planner does not
count it, so a member planned onto it is moved at its commit, or waits."""

from __future__ import annotations

import dataclasses

from extender.core.model.config import Config
from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import BindOutcome
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


def sim_with(direct: bool = True) -> SimScheduler:
    return SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=direct)))


def reserved_mixed_gang(sim: SimScheduler, nodes: int) -> tuple[list[PodInfo], dict[str, str]]:
    """A gang of 3 × 6 CPU on `nodes` 8-CPU nodes, reserved; its first member needs
    kube-scheduler's plugins (a volume), so nothing commits before its bind request.
    Returns the members and their slots (uid -> node)."""
    for i in range(nodes):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3))
    pods = [pod(f"g-{i}", "g", cpu=6000) for i in range(3)]
    pods[0] = dataclasses.replace(pods[0], binds_via_scheduler=True)
    for p in pods:
        sim.add_pod(p)
    sim.tick(1)
    [res] = sim.manager.reads.reservations()
    assert not sim.bound("g")
    return pods, {s.pod.uid: s.node for s in res.slots}


def preemptor(name: str, node_name: str, priority: int, cpu: int = 6000,
              scheduler: str = "default-scheduler") -> PodInfo:
    """A pending pod kube-scheduler's preemption nominated to `node_name`."""
    return pod(name, cpu=cpu, priority=priority, nominated_node=node_name,
               scheduler_name=scheduler)


def test_a_commit_moves_a_member_off_capacity_nominated_to_an_equal_priority_pod() -> None:
    sim = sim_with()
    pods, slots = reserved_mixed_gang(sim, nodes=4)
    kept = slots[pods[1].uid]
    sim.add_pod(preemptor("p", kept, priority=0))
    assert sim.schedule(pods[0].uid) == "bound"  # its bind request commits the gang
    placed = {p.uid: p.node_name for p in sim.bound("g")}
    assert len(placed) == 3 and kept not in placed.values()
    assert not sim.overcommits


def test_the_commit_waits_while_no_other_node_has_room_and_goes_once_it_ends() -> None:
    for end in ("cleared", "bound elsewhere", "deleted"):
        sim = sim_with()
        pods, slots = reserved_mixed_gang(sim, nodes=3)
        kept = slots[pods[1].uid]
        p = sim.add_pod(preemptor("p", kept, priority=5))
        assert sim.schedule(pods[0].uid) == "held"  # waits at the barrier: no commit
        assert not sim.bound("g")
        # kube-scheduler retries the member whose slot was dropped: still nominated, so
        # its filter call is turned away (not passed onto the nominated node).
        assert sim.schedule(pods[1].uid) == "rejected" and not sim.bound("g")
        assert "has room for pod ns/g-1" in sim.last_filter[pods[1].uid]
        if end == "cleared":
            sim.add_pod(dataclasses.replace(p, nominated_node=""))
        elif end == "bound elsewhere":
            sim.add_node(node("n9"))
            sim.bind_foreign(p, "n9")
        else:
            sim.delete(p.uid)
        sim.drain()
        # Turned away meanwhile, kube-scheduler may have parked it: woken at once.
        assert (pods[1].namespace, pods[1].name, pods[1].uid) in sim.woken, end
        sim.schedule(pods[1].uid)
        placed = {m.uid: m.node_name for m in sim.bound("g")}
        assert len(placed) == 3 and placed[pods[1].uid] == kept, end
        assert not sim.overcommits


def test_a_lower_priority_nomination_does_not_keep_a_gang_off() -> None:
    sim = sim_with()
    pods, slots = reserved_mixed_gang(sim, nodes=3)
    kept = slots[pods[1].uid]
    sim.add_pod(preemptor("p", kept, priority=-1))
    assert sim.schedule(pods[0].uid) == "bound"
    assert {m.uid: m.node_name for m in sim.bound("g")}[pods[1].uid] == kept


def test_a_member_nominated_itself_is_not_kept_off_its_own_nomination() -> None:
    """kube-scheduler may nominate one of our pods after its own preemption ran for it:
    that claim is the pod's own, and counted for every other pod only."""
    sim = sim_with()
    pods, slots = reserved_mixed_gang(sim, nodes=3)
    kept = slots[pods[1].uid]
    sim.add_pod(dataclasses.replace(sim.cache.pods[pods[1].uid], nominated_node=kept))
    assert sim.cache.nominated_on(kept, 0) == []  # its slot there is its charge
    assert sim.schedule(pods[0].uid) == "bound"
    assert {m.uid: m.node_name for m in sim.bound("g")}[pods[1].uid] == kept


def test_the_barrier_commit_keeps_off_nominated_capacity_too() -> None:
    sim = sim_with(direct=False)
    for i in range(3):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3))
    pods = [sim.add_pod(pod(f"g-{i}", "g", cpu=6000)) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "held"
    assert sim.schedule(pods[1].uid) == "held"
    [res] = sim.manager.reads.reservations()
    kept = next(s.node for s in res.slots if s.pod.uid == pods[2].uid)
    p = sim.add_pod(preemptor("p", kept, priority=0))
    assert sim.schedule(pods[2].uid) != "bound"
    assert not sim.bound("g")
    sim.add_pod(dataclasses.replace(p, nominated_node=""))
    sim.run_all()
    assert len(sim.bound("g")) == 3 and not sim.overcommits


def test_a_plain_pod_is_kept_off_capacity_nominated_to_a_pod_of_equal_or_higher_priority(
) -> None:
    sim = sim_with()
    sim.add_node(node("n0"))
    sim.add_node(node("n1"))
    p = sim.add_pod(preemptor("p", "n0", priority=10))
    plain = sim.add_pod(pod("plain", cpu=4000, priority=10))
    result = sim.manager.filter(plain, ["n0", "n1"], sim.now)
    assert result.nodes == ["n1"]
    assert "nominated to pod(s) ns/p" in result.unresolvable["n0"]
    decision = sim.manager.bind("ns", "plain", plain.uid, "n0", sim.now)
    assert decision.outcome is BindOutcome.ERROR and "ns/p" in decision.message
    small = sim.add_pod(pod("small", cpu=2000, priority=10))  # fits beside p's 6 CPU
    assert sim.manager.filter(small, ["n0"], sim.now).nodes == ["n0"]
    higher = sim.add_pod(pod("higher", cpu=4000, priority=11))
    assert sim.manager.filter(higher, ["n0"], sim.now).nodes == ["n0"]
    # The nominated pod itself: its nomination is its own claim, not a claim against it.
    assert sim.manager.filter(p, ["n0"], sim.now).nodes == ["n0"]
    sim.add_pod(dataclasses.replace(p, nominated_node=""))
    assert sim.manager.filter(plain, ["n0"], sim.now).nodes == ["n0"]
    assert sim.manager.bind("ns", "plain", plain.uid, "n0", sim.now).outcome is (
        BindOutcome.WAIT)


def test_the_cache_keeps_nominations_per_node_as_pods_change() -> None:
    sim = sim_with()
    sim.add_node(node("n0"))
    a = sim.add_pod(preemptor("a", "n0", priority=3, cpu=1000))
    b = sim.add_pod(preemptor("b", "n0", priority=1, cpu=2000))
    cache = sim.cache
    assert cache.nominated_requests("n0", 1)["cpu"] == 3000
    assert cache.nominated_requests("n0", 2)["cpu"] == 1000  # b's priority is below
    assert cache.nominated_requests("n0", 1, but=a.uid)["cpu"] == 2000  # a's own
    sim.add_pod(dataclasses.replace(a, nominated_node="n1"))  # nominated elsewhere
    assert [p.name for p in cache.nominated_on("n0", 0)] == ["b"]
    assert [p.name for p in cache.nominated_on("n1", 0)] == ["a"]
    sim.add_pod(dataclasses.replace(b, deleting=True))
    assert cache.nominated_on("n0", 0) == [] and "n0" not in cache.nominated
    sim.delete(a.uid)
    assert not cache.nominated


def test_a_member_moved_by_the_commit_is_checked_on_its_new_node_too() -> None:
    """The move fits a member into free capacity, not around nominations: the only other
    node with room is nominated too, so the commit waits rather than bind it there."""
    sim = sim_with()
    pods, slots = reserved_mixed_gang(sim, nodes=4)
    kept = slots[pods[1].uid]
    spare = ({"n0", "n1", "n2", "n3"} - set(slots.values())).pop()
    first = sim.add_pod(preemptor("p", kept, priority=0))
    sim.add_pod(preemptor("q", spare, priority=0))
    assert sim.schedule(pods[0].uid) == "held"
    assert not sim.bound("g") and not sim.overcommits
    sim.add_pod(dataclasses.replace(first, nominated_node=""))
    sim.schedule(pods[1].uid)  # kube-scheduler's next cycle of the moved member
    placed = {m.uid: m.node_name for m in sim.bound("g")}
    assert len(placed) == 3 and spare not in placed.values()

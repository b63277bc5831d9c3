"""The starvation guard (`core/queue/starvation.py`): the head of the queue that has
waited `starvation_after_seconds` for capacity gets the capacity of its best plan held
as it frees up; younger gangs and plain pods use only capacity outside it.

The issue's stream, on plain data: an older gang that needs all 4 nodes, created while
1-CPU single-pod gangs arrive every 0.6 s and run 4 s each.
"""

from __future__ import annotations

import dataclasses

import pytest

from extender.core.model.config import Config
from extender.core.model.types import CompositeInfo
from extender.core.model.vocabulary import GangHeld, GangReserved, GangTimedOut, Reason
from extender.core.wiring import Core
from tests.core.queue.held_capacity import held_cluster
from tests.core.sim import SimScheduler, node, pod
from tests.core.workload import Driver, Job

AFTER = 5.0
RUN = 4.0


def stream_cluster(after: float | None) -> tuple[SimScheduler, Driver, Job]:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=after, preemption=False)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    small = [Job(f"s{i:03d}", at=i * 0.6, run=RUN) for i in range(200)]
    big = Job("big", at=2.0, run=30.0, cpu=4000, members=4)
    return sim, Driver(sim, [*small, big]), big


def test_without_the_guard_the_big_gang_starves() -> None:
    _, driver, big = stream_cluster(after=None)
    driver.run(60)
    assert driver.gang_bound_at(big) is None


def test_the_big_gang_is_placed_within_the_bound_and_younger_ones_keep_running() -> None:
    sim, driver, big = stream_cluster(after=AFTER)
    idle_cpu_seconds = 0.0
    held_at: float | None = None
    longest_left = 0.0
    while driver.gang_bound_at(big) is None and driver.t < 60:
        driver.step()
        held = [a for a in sim.actions if isinstance(a, GangHeld)]
        if held and held_at is None:
            held_at = driver.t
            nodes = {s.node for s in held[0].slots}
            longest_left = max((at - sim.now for uid, at in driver.finish_at.items()
                                if sim.cache.pods[uid].node_name in nodes), default=0.0)
        idle_cpu_seconds += (sim.manager.reads.gauges().held_idle or {}).get("cpu", 0) / 1000 * 0.1
    bound = driver.gang_bound_at(big)
    assert bound is not None and held_at is not None
    waited = bound - 2.0
    # The bound: --starvation-after, plus the longest remaining run on its plan's nodes
    # when the hold was made, plus the steps of this simulation (a tick, a retry).
    assert held_at - 2.0 <= AFTER + 0.5
    assert waited <= AFTER + longest_left + 0.5, (waited, longest_left)
    # It held at most 4 s of 16 CPUs; half of it on average (pods finish evenly).
    assert 0 < idle_cpu_seconds <= 16 * RUN
    print(f"MEASURED waited {waited:.1f}s (hold after {held_at - 2.0:.1f}s, longest "
          f"remaining run {longest_left:.1f}s); held idle {idle_cpu_seconds:.1f} cpu-seconds")
    status = sim.status("ns/big")
    assert status.reason in (Reason.RESERVED, Reason.BOUND)
    assert [a for a in sim.actions if isinstance(a, GangReserved) and a.group.key == "ns/big"]
    # Younger gangs kept being placed before the hold (backfill) and after the big one.
    before = [j for j in driver.jobs if j.name.startswith("s") and j.at < held_at]
    assert all(driver.gang_bound_at(j) is not None for j in before[:-2])


def test_the_hold_says_where_and_why_and_keeps_younger_pods_off() -> None:
    sim, driver, big = stream_cluster(after=AFTER)
    driver.run_until(lambda: any(isinstance(a, GangHeld) for a in sim.actions), 20)
    st = sim.status("ns/big")
    assert st.reason == Reason.CAPACITY_HELD, st
    assert "held for it on node(s) n0, n1, n2, n3" in st.message, st.message
    assert "younger gangs and pods use only capacity elsewhere" in st.message
    (res,) = [r for r in sim.manager.reads.reservations() if r.gang == "ns/big"]
    assert res.held == "starvation"
    # A member asking kube-scheduler's filter is told to wait, its slot stays put.
    member = sim.cache.pods[big.uids[0]]
    out = sim.manager.filter(member, ["n0", "n1", "n2", "n3"], sim.now)
    assert not out.nodes and "held for it" in next(iter(out.unresolvable.values()))
    # Nothing younger is bound on a held node while the hold lasts.
    start = sim.now
    while any(r.held for r in sim.manager.reads.reservations()):
        driver.step()
    younger = [u for u, at in driver.bound_at.items() if at > start
               and sim.cache.pods.get(u) is not None and sim.cache.pods[u].group != "big"]
    assert not younger, [sim.cache.pods[u].key for u in younger]


def test_a_plain_pod_is_kept_off_held_capacity() -> None:
    sim, driver, _ = stream_cluster(after=AFTER)
    driver.run_until(lambda: any(isinstance(a, GangHeld) for a in sim.actions), 20)
    plain = Job("plain", at=driver.t, run=1.0, plain=True)
    driver.arrive(plain)
    p = sim.cache.pods[plain.uids[0]]
    feasible = sim.feasible(p)
    out = sim.manager.filter(p, feasible, sim.now)
    assert not out.nodes, out  # every node is held for the big gang
    assert all("held for gang(s) ns/big" in m for m in out.unresolvable.values())


def test_an_impossible_head_holds_nothing_and_the_next_one_is_not_blocked() -> None:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=1.0, preemption=False)))
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    huge = Job("huge", at=0, run=10, cpu=8000, members=1)  # fits no node
    small = Job("small", at=0.5, run=10, cpu=1000)
    driver = Driver(sim, [huge, small])
    driver.run(5)
    assert not [r for r in sim.manager.reads.reservations() if r.held]
    assert driver.gang_bound_at(small) is not None
    assert sim.status("ns/huge").reason == Reason.UNPLACEABLE


def test_the_holder_is_taken_over_by_a_gang_ahead_of_it() -> None:
    """A gang of higher priority arrives while the forward reservation is held and
    starves in turn: it takes the hold over, and the old holder, still counting its
    wait, gets it back once the newcomer is placed."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER, preemption=False)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    fillers = [Job(f"f{i}", at=0, run=20.0, cpu=1000) for i in range(4)]
    big = Job("big", at=0.5, run=5.0, cpu=4000, members=4)
    urgent = Job("urgent", at=6.0, run=5.0, cpu=4000, members=4, priority=10)
    driver = Driver(sim, [*fillers, big, urgent])
    driver.run(6.5)
    held = [(r.gang, r.held) for r in sim.manager.reads.reservations()]
    assert held == [("ns/big", "starvation")]
    driver.run(6)  # urgent has waited 5 s now
    assert [(r.gang, r.held) for r in sim.manager.reads.reservations()] == [
        ("ns/urgent", "starvation")]
    assert sim.status("ns/big").reason in (Reason.INSUFFICIENT_CAPACITY,
                                           Reason.WAITING_BEHIND_OLDER_GANG)
    driver.run_until(lambda: driver.gang_bound_at(urgent) is not None, 20)
    assert (driver.gang_bound_at(urgent) or 99) <= 20.5
    driver.run_until(lambda: driver.gang_bound_at(big) is not None, 20)
    assert (driver.gang_bound_at(big) or 99) <= 25.5 + 0.5


def test_a_pod_bound_by_others_on_a_held_node_does_not_move_the_hold() -> None:
    """Free capacity below zero is what a hold is: the repair of lost nodes leaves it."""
    sim, _, _ = held_cluster()
    (res,) = sim.manager.reads.reservations()
    node_name = res.slots[0].node
    sim.bind_foreign(pod("intruder", cpu=500), node_name)
    (after,) = sim.manager.reads.reservations()
    assert after.held == "starvation" and {s.node for s in after.slots} == {
        s.node for s in res.slots}


def test_a_cordoned_held_node_gives_the_hold_up_and_the_gang_is_planned_again() -> None:
    sim, driver, _ = held_cluster()
    (res,) = sim.manager.reads.reservations()
    lost = res.slots[0].node
    n = sim.cache.nodes[lost]
    sim.manager.on_node(dataclasses.replace(n, unschedulable=True))
    sim.drain()
    assert not sim.manager.reads.reservations()
    driver.run(0.2)  # the next pass holds the other two nodes
    (again,) = sim.manager.reads.reservations()
    assert again.held == "starvation" and lost not in {s.node for s in again.slots}


def test_the_hold_and_its_idle_capacity_are_gauges() -> None:
    from extender.reporting.metrics import Metrics

    sim, _, _ = held_cluster()
    m = Metrics()
    m.refresh(sim.manager.reads)
    value = m.registry.get_sample_value
    assert value("gang_extender_capacity_held_reservations") == 1
    # Two nodes held for 4 cpu each, 3 taken by the fillers on each: 1 cpu idle each.
    assert value("gang_extender_capacity_held_idle", {"resource": "cpu"}) == 2.0


# How a gang's pods all leave: deleted, or deleted and created again naming another
# scheduler (a pod's schedulerName cannot change), as a user moving the job does.
LEAVING = pytest.mark.parametrize("theirs", [False, True], ids=["deleted", "other-scheduler"])
# A plain gang, or a child of a CompositePodGroup whose policy is basic (minGroupCount
# 0: each child waits and holds on its own clock).
KINDS = pytest.mark.parametrize("child", [False, True], ids=["plain", "basic-child"])


def big_gang(child: bool) -> tuple[SimScheduler, Driver, Job]:
    sim, driver, big = stream_cluster(after=AFTER)
    if child:
        basic = CompositeInfo("ns", "lw", 0, uid="c-lw")
        sim.manager.on_group(basic, sim.now)
        big.parent = basic.key
    return sim, driver, big


def replace_pods(sim: SimScheduler, big: Job, scheduler: str | None) -> list[str]:
    """Every pod of `big` deleted; with `scheduler`, as many created again naming it.
    Returns the new pods' uids; another scheduler's are left pending (this simulated
    kube-scheduler does not place them)."""
    for uid in big.uids:
        if uid in sim.cache.pods:
            sim.delete(uid)
    big.uids = []
    if scheduler is None:
        return []
    for i in range(big.members):
        p = sim.add_pod(pod(f"big-{scheduler}-{i}", "big", cpu=big.cpu, memory=1 << 20,
                            creation=sim.now, scheduler_name=scheduler))
        big.uids.append(p.uid)
    if scheduler != "gang-scheduler":
        sim.held.update(big.uids)
    return list(big.uids)


def big_holds(sim: SimScheduler) -> list[GangHeld]:
    return [a for a in sim.actions if isinstance(a, GangHeld) and a.group.key == "ns/big"]


@LEAVING
@KINDS
def test_a_gang_whose_pods_all_left_starts_its_wait_afresh(theirs: bool, child: bool) -> None:
    """The big gang waits for capacity, not starving yet; then none of its pods is ours.
    Its wait ends, as a deleted gang's does: kept, it went on counting while the gang
    had nothing waiting here, and pods of ours created much later were held for at
    once, before --starvation-after."""
    sim, driver, big = big_gang(child)
    driver.run_until(lambda: sim.manager.reads.waiting_since("ns/big") is not None, 10)
    driver.run(1.0)
    assert not big_holds(sim)
    other = replace_pods(sim, big, "other-scheduler" if theirs else None)
    assert sim.manager.reads.waiting_since("ns/big") is None
    driver.run(3 * AFTER)
    assert sim.manager.reads.waiting_since("ns/big") is None and not big_holds(sim)
    for uid in other:
        sim.delete(uid)
    replace_pods(sim, big, "gang-scheduler")
    back = sim.now
    driver.run_until(lambda: bool(big_holds(sim)), 3 * AFTER)
    (hold,) = big_holds(sim)
    assert AFTER <= hold.waited <= AFTER + 0.5, hold.waited
    assert sim.now - back >= AFTER
    assert sim.overcommits == []


@LEAVING
@KINDS
def test_a_starving_gang_whose_pods_all_left_gives_its_hold_up(theirs: bool,
                                                                 child: bool) -> None:
    """The big gang starved and holds; then none of its pods is ours. Its hold goes:
    every slot went with its pod, and kept, the empty hold became a reservation of
    nothing at the next pass, timed out, and counted against the gang's backoff."""
    sim, driver, big = big_gang(child)
    driver.run_until(lambda: bool(big_holds(sim)), 10)
    assert [r.held for r in sim.manager.reads.reservations()] == ["starvation"]
    other = replace_pods(sim, big, "other-scheduler" if theirs else None)
    assert not sim.manager.reads.reservations()
    driver.run(40.0)  # past the gang's 30 s timeout
    assert not [a for a in sim.actions if isinstance(a, (GangReserved, GangTimedOut))
                and a.group.key == "ns/big"]
    assert sim.core.backoffs.get("ns/big") is None
    for uid in other:
        sim.delete(uid)
    replace_pods(sim, big, "gang-scheduler")
    driver.run_until(lambda: driver.gang_bound_at(big) is not None, 3 * AFTER + 10)
    assert driver.gang_bound_at(big) is not None
    assert sim.overcommits == []

"""The filter's assembly wait on plain data: a member of a gang that is still being
created is asked to wait for the rest instead of being turned away into kube-scheduler's
pod backoff, but only while its gang is visibly arriving fast enough."""

from __future__ import annotations

import dataclasses

from extender.core.model.config import BackoffPolicy
from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import GroupRef, Reason, WakePods
from tests.core.sim import FOUR_NODES, SimScheduler, four_nodes, group, pod


def arrive(sim: SimScheduler, name: str, gang: str, at: float) -> PodInfo:
    """A member created at `at` and seen by the watch at once."""
    sim.now = at
    return sim.add_pod(pod(name, gang, creation=at))


def test_member_of_an_arriving_gang_waits_then_gets_its_slot_without_a_turn_away() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 4))
    t = sim.now
    first = arrive(sim, "g-0", "g", t)
    res = sim.manager.filter(first, FOUR_NODES, t + 0.01)
    assert res.wait > 0 and not res.nodes and not res.unresolvable
    assert sim.decision("ns/g") is None  # no "1 of 4 members exist" recorded
    for i in range(1, 4):
        arrive(sim, f"g-{i}", "g", t + 0.01 * (i + 1))
    res = sim.manager.filter(first, FOUR_NODES, t + 0.05, waited=0.04)
    assert res.wait == 0 and len(res.nodes) == 1
    assert sim.status("ns/g").reason == Reason.RESERVED
    sim.drain()
    assert not sim.woken  # nobody was parked, so nobody needs a wake-up patch
    assert not sim.core.parked.members([first], (), None)  # no wake-up would patch it


def test_the_wait_lasts_until_the_gap_after_the_newest_member() -> None:
    sim = four_nodes(assembly_gap_seconds=0.2)
    sim.add_group(group("g", 4))
    t = sim.now
    first = arrive(sim, "g-0", "g", t)
    assert abs(sim.manager.filter(first, FOUR_NODES, t + 0.05).wait - 0.15) < 1e-9
    arrive(sim, "g-1", "g", t + 0.1)
    assert abs(sim.manager.filter(first, FOUR_NODES, t + 0.12, waited=0.07).wait - 0.18) < 1e-9


def test_no_wait_once_the_gap_has_passed_and_the_rejection_is_as_before() -> None:
    sim = four_nodes(assembly_gap_seconds=0.2)
    sim.add_group(group("g", 4))
    first = arrive(sim, "g-0", "g", sim.now)
    res = sim.manager.filter(first, FOUR_NODES, sim.now + 0.25)
    assert res.wait == 0 and not res.nodes
    assert set(res.unresolvable.values()) == {"gang ns/g: 1 of 4 members exist"}
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_MEMBERS
    # woken when the gang completes: a wake-up would patch it
    assert [r.uid for r in sim.core.parked.members([first], (), None)] == [first.uid]


def test_a_gang_created_too_slowly_for_the_budget_is_turned_away_at_once() -> None:
    # An operator creating one member every 0.1 s: 29 more need about 2.9 s.
    sim = four_nodes(assembly_wait_seconds=0.5, assembly_gap_seconds=0.2)
    sim.add_group(group("g", 32))
    t = sim.now
    members = [arrive(sim, f"g-{i}", "g", t + 0.1 * i) for i in range(3)]
    res = sim.manager.filter(members[0], FOUR_NODES, t + 0.21)
    assert res.wait == 0 and "3 of 32 members exist" in next(iter(res.unresolvable.values()))


def test_a_gang_arriving_fast_enough_is_waited_for() -> None:
    sim = four_nodes(assembly_wait_seconds=0.5, assembly_gap_seconds=0.2)
    sim.add_group(group("g", 32))
    t = sim.now
    members = [arrive(sim, f"g-{i}", "g", t + 0.005 * i) for i in range(3)]
    assert sim.manager.filter(members[0], FOUR_NODES, t + 0.011).wait > 0  # 29 more in ~0.15 s


def test_a_wait_that_runs_out_turns_the_member_away_and_is_not_repeated_for_the_gang() -> None:
    sim = four_nodes(assembly_wait_seconds=0.5, assembly_gap_seconds=0.2)
    sim.add_group(group("g", 4))
    t = sim.now
    first = arrive(sim, "g-0", "g", t)
    arrive(sim, "g-1", "g", t + 0.4)
    res = sim.manager.filter(first, FOUR_NODES, t + 0.5, waited=0.5)
    assert res.wait == 0 and "2 of 4 members exist" in next(iter(res.unresolvable.values()))
    third = arrive(sim, "g-2", "g", t + 0.55)
    res = sim.manager.filter(third, FOUR_NODES, t + 0.56)
    assert res.wait == 0 and "3 of 4 members exist" in next(iter(res.unresolvable.values()))


def test_by_default_a_creator_pausing_0_3_s_between_members_is_still_waited_for() -> None:
    """The shipped defaults (1.5 s, gap 0.5 s): a busy operator creating a gang of 4 with
    0.3 s pauses completes it in 0.9 s, and its first member gets its slot on its first
    try. With the earlier 0.2 s gap the first pause turned it away into kube-scheduler's
    backoff (docs/performance.md, "The assembly wait")."""
    sim = four_nodes()
    sim.add_group(group("g", 4))
    t = sim.now
    first = arrive(sim, "g-0", "g", t)
    waited = 0.0
    for i in range(1, 4):
        now = t + 0.3 * i - 0.01  # just before the next member
        res = sim.manager.filter(first, FOUR_NODES, now, waited=waited)
        assert res.wait > 0, f"turned away at {now - t:.2f} s: {res.unresolvable}"
        waited = now - t
        arrive(sim, f"g-{i}", "g", t + 0.3 * i)
    res = sim.manager.filter(first, FOUR_NODES, t + 0.91, waited=0.91)
    assert res.wait == 0 and len(res.nodes) == 1


def test_wait_off_when_configured_zero() -> None:
    sim = four_nodes(assembly_wait_seconds=0.0)
    sim.add_group(group("g", 2))
    first = arrive(sim, "g-0", "g", sim.now)
    res = sim.manager.filter(first, FOUR_NODES, sim.now)
    assert res.wait == 0 and not res.nodes and res.unresolvable


def test_pods_listed_after_a_restart_are_not_arrivals() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 4))
    old = sim.now - 60  # created a minute before this extender first saw it
    first = sim.add_pod(pod("g-0", "g", creation=old))
    res = sim.manager.filter(first, FOUR_NODES, sim.now)
    assert res.wait == 0 and res.unresolvable


def test_lifting_scheduling_gates_counts_as_an_arrival() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 2))
    old = sim.now - 60
    gated = sim.add_pod(pod("g-0", "g", creation=old, gated=True))
    sim.add_pod(pod("g-1", "g", creation=old, gated=True))
    ungated = dataclasses.replace(gated, gated=False)
    sim.manager.on_pod(ungated, sim.now)
    assert sim.manager.filter(ungated, FOUR_NODES, sim.now + 0.01).wait > 0


def test_a_backing_off_gang_does_not_wait() -> None:
    sim = four_nodes(backoff=BackoffPolicy(5, 20))
    sim.add_group(group("g", 2))
    t = sim.now
    first = arrive(sim, "g-0", "g", t)
    sim.core.backoffs.timed_out(GroupRef("ns", "g", "g-g"), t)  # attempt 1: until t + 5
    res = sim.manager.filter(first, FOUR_NODES, t + 0.01)
    assert res.wait == 0 and res.unresolvable


def test_complete_gangs_members_never_wait() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 2))
    t = sim.now
    a = arrive(sim, "g-0", "g", t)
    arrive(sim, "g-1", "g", t)
    res = sim.manager.filter(a, FOUR_NODES, t)
    assert res.wait == 0 and len(res.nodes) == 1


def test_arrival_records_are_dropped_after_a_while_and_with_the_group() -> None:
    sim = four_nodes()
    for i in range(50):
        sim.add_group(group(f"g{i}", 4))
        arrive(sim, f"g{i}-0", f"g{i}", sim.now)
    assert len(sim.core.arrivals) == 50
    sim.manager.on_group_deleted("ns/g0")
    assert len(sim.core.arrivals) == 49
    sim.tick(31)
    assert len(sim.core.arrivals) == 0


def test_sim_scheduler_sees_waiting_as_no_answer_yet() -> None:
    sim = four_nodes()
    sim.add_group(group("g", 2))
    first = arrive(sim, "g-0", "g", sim.now)
    assert sim.schedule(first.uid) == "waiting"
    assert not [a for a in sim.actions + sim.manager.take_actions() if isinstance(a, WakePods)]

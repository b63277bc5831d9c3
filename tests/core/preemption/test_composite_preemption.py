"""Preemption for a CompositePodGroup (`Preemptions.composite`): the children it needs
evict lower-priority work all at once, for a plan of at least minGroupCount of them
together; their holds become reservations together, and a refused eviction gives all of
them up. Never a part of the composite placed, nor victims evicted for a part."""

from __future__ import annotations

from extender.core.model.types import CompositeInfo, composite_key
from extender.core.model.vocabulary import GangReserved, Preempting, Reason
from tests.core.preemption.preempting import cluster, evictions
from tests.core.sim import SimScheduler
from tests.core.workload import Driver, Job

PARENT = composite_key("ns", "lw")
# A CompositePodGroup ns/lw of minGroupCount 2, for the children `leader_and_workers`.
COMPOSITE = CompositeInfo("ns", "lw", 2, uid="c-lw")


def leader_and_workers(priority: int = 10) -> list[Job]:
    return [Job("leader", at=0, run=30, cpu=4000, members=1, priority=priority),
            Job("workers", at=0, run=30, cpu=4000, members=3, priority=priority)]


def held(sim: SimScheduler) -> dict[str, str | None]:
    return {r.gang: r.held for r in sim.manager.reads.reservations()}


def preempting_slowly(driver: Driver, wait: float) -> list[Job]:
    """The composite arrives over the lower-priority work `driver` runs, whose evicted
    pods terminate slowly (they stay until `driver.leave()`); returned `wait` seconds
    later, its children holding the room their victims free."""
    driver.run(0.5)
    driver.leave_now = False
    kids = leader_and_workers()
    driver.arrive_composite(COMPOSITE, kids)
    driver.run(wait)
    assert held(driver.sim) == {"ns/leader": "preemption", "ns/workers": "preemption"}
    return kids


def test_a_composite_evicts_lower_priority_work_for_all_its_children_at_once() -> None:
    """A low-priority gang fills the 4 nodes; the composite (a leader and 3 workers,
    each a whole node) at priority 10 evicts it whole, in one preemption for both
    children, and both are then bound."""
    sim = cluster()
    low = Job("low", at=0, run=1000, cpu=4000, members=4, priority=1)
    driver = Driver(sim, [low])
    driver.run(0.5)
    assert driver.gang_bound_at(low) is not None
    kids = leader_and_workers()
    driver.arrive_composite(COMPOSITE, kids)
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 5)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    (ev,) = evictions(sim)
    assert ev.gang == "ns/low" and ev.preemptor == PARENT
    assert {p.uid for p in ev.pods} == set(low.uids)
    (report,) = [a for a in sim.actions if isinstance(a, Preempting)]
    assert report.preemptor == "CompositePodGroup ns/lw" and report.priority == 10
    assert [(v.name, len(v.pods)) for v in report.victims] == [("gang ns/low", 4)]
    assert len(report.slots) == 4  # the slots of both children
    assert report.message.startswith(
        "CompositePodGroup ns/lw (priority 10) preempts 1 lower-priority unit(s): gang "
        "ns/low (priority 1, 4 pod(s))")
    reserved = [a.group.key for a in sim.actions if isinstance(a, GangReserved)]
    assert reserved[1:] == ["ns/leader", "ns/workers"]  # after ns/low's own
    assert sim.overcommits == []


def test_no_victim_is_evicted_for_a_part_of_the_composite() -> None:
    """Only one node's worth of lower-priority work runs (the others run at priority
    20): evicting it would make room for the leader alone. Nothing is evicted, and both
    children say why they wait."""
    sim = cluster()
    low = Job("low", at=0, run=1000, cpu=4000, members=1, priority=1)
    high = Job("high", at=0, run=1000, cpu=4000, members=3, priority=20)
    driver = Driver(sim, [low, high])
    driver.run(0.5)
    kids = leader_and_workers()
    driver.arrive_composite(COMPOSITE, kids)
    driver.run(3)
    assert not evictions(sim)
    assert held(sim) == {}
    assert sim.status("ns/leader").reason == Reason.INSUFFICIENT_CAPACITY


def test_the_children_s_holds_become_reservations_together() -> None:
    """The victims terminate slowly. Once the leader's node is free but not yet the
    workers', the leader's hold stays a hold: a reservation of its own would wait for
    its siblings with its deadline running. When all are gone, both are reserved and
    bound."""
    sim = cluster()
    one = Job("one", at=0, run=1000, cpu=4000, members=1, priority=1)
    three = Job("three", at=0, run=1000, cpu=4000, members=3, priority=2)
    driver = Driver(sim, [one, three])
    kids = preempting_slowly(driver, 0.5)
    leader_node = next(s.node for r in sim.manager.reads.reservations()
                       if r.gang == "ns/leader" for s in r.slots)
    for uid, p in list(sim.cache.pods.items()):
        if p.deleting and p.node_name == leader_node:
            sim.delete(uid)
    driver.run(0.5)
    assert held(sim) == {"ns/leader": "preemption", "ns/workers": "preemption"}
    driver.leave()
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 5)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    assert sim.overcommits == []


def test_a_refused_eviction_gives_up_every_child_s_hold() -> None:
    sim = cluster()
    low = Job("low", at=0, run=1000, cpu=4000, members=4, priority=1)
    driver = Driver(sim, [low])
    driver.run(0.5)
    driver.evict_refused = {low.uids[0]}
    kids = leader_and_workers()
    driver.arrive_composite(COMPOSITE, kids)
    driver.step()
    assert held(sim) == {}
    for child in ("ns/leader", "ns/workers"):
        st = sim.status(child)
        assert st.reason == Reason.INSUFFICIENT_CAPACITY
        assert "the eviction of gang ns/low was refused" in st.message
    assert all(driver.gang_bound_at(k) is None for k in kids)


def test_a_child_late_while_its_composite_preempts_says_the_composite_preempts() -> None:
    """The leader and the workers hold the room their victims free; a third child
    arrives while the victims terminate. It is not planned on its own beside them (the
    composite is not placed yet), and it is no victim: it waits for its composite's
    preemption, as a gang waits for its own, so it says Preempting, naming the composite,
    its victims and the children they make room for, not "waiting for the others' pods"
    (they exist and hold). Once the composite is placed it is placed on its own."""
    sim = cluster(5)
    low = Job("low", at=0, run=1000, cpu=4000, members=5, priority=1)
    driver = Driver(sim, [low])
    kids = preempting_slowly(driver, 0.3)
    late = Job("late", at=0, run=1000, cpu=1000, members=1, priority=10, parent=PARENT)
    driver.arrive(late)  # now, outside the driver's schedule
    driver.run(0.3)
    st = sim.status("ns/late")
    assert st is not None and st.reason == Reason.PREEMPTING, st
    assert st.message == (
        "gang ns/late: CompositePodGroup ns/lw (priority 10) preempts 1 lower-priority "
        "unit(s): gang ns/low (priority 1, 5 pod(s)); the capacity they free on node(s) "
        "n0, n1, n2, n3 is held for it until they are gone, for 2 of its groups "
        "(ns/leader, ns/workers); this one is placed on its own once they are, when it fits")
    assert held(sim) == {"ns/leader": "preemption", "ns/workers": "preemption"}
    driver.leave()
    driver.run_until(lambda: driver.gang_bound_at(late) is not None, 3)
    assert all(driver.gang_bound_at(k) is not None for k in [*kids, late])
    assert sim.overcommits == []

"""The starvation guard for a CompositePodGroup (`Starvation.guard_composite`): the
composite waits, starves and holds as one unit (its children's holds made together, on
one forward plan of at least minGroupCount of them), and a gang ahead of it that takes
over one child's hold takes over the others' too."""

from __future__ import annotations

from extender.core.model.config import Config
from extender.core.model.types import CompositeInfo
from extender.core.model.vocabulary import GangHeld, Reason
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node, pod
from tests.core.workload import Driver, Job

AFTER = 5.0
# A CompositePodGroup ns/lw whose minGroupCount is both `leader_and_workers`.
COMPOSITE = CompositeInfo("ns", "lw", 2, uid="c-lw")


def cluster() -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER, preemption=False)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    return sim


def leader_and_workers() -> list[Job]:
    return [Job("leader", at=0, run=30, cpu=4000, members=1),
            Job("workers", at=0, run=30, cpu=4000, members=3)]


def held(sim: SimScheduler) -> dict[str, str | None]:
    return {r.gang: r.held for r in sim.manager.reads.reservations()}


def starving_composite() -> tuple[SimScheduler, Driver, list[Job]]:
    """1-CPU gangs arrive every 0.6 s and run 4 s: some node is always busy, so the
    composite (a leader and 3 workers, each a whole node) never fits on free capacity;
    returned once, after --starvation-after, its children hold together."""
    sim = cluster()
    small = [Job(f"s{i:03d}", at=i * 0.6, run=4.0) for i in range(200)]
    driver = Driver(sim, small)
    driver.run(2.0)
    kids = leader_and_workers()
    driver.arrive_composite(COMPOSITE, kids)
    driver.run_until(lambda: any(isinstance(a, GangHeld) for a in sim.actions), 10)
    assert held(sim) == {"ns/leader": "starvation", "ns/workers": "starvation"}
    return sim, driver, kids


def test_a_starving_composite_holds_for_all_its_children_and_is_placed() -> None:
    """1-CPU gangs arrive every 0.6 s and run 4 s: some node is always busy, so the
    composite (a leader and 3 workers, each a whole node) never fits on free capacity.
    After --starvation-after its children's holds are made together, and both are
    bound once the small gangs on those nodes finish."""
    sim, driver, kids = starving_composite()
    holds = [a for a in sim.actions if isinstance(a, GangHeld)]
    assert sorted(a.group.key for a in holds) == ["ns/leader", "ns/workers"]
    assert all(AFTER <= a.waited <= AFTER + 0.5 for a in holds)
    st = sim.status("ns/workers")
    assert st.reason == Reason.CAPACITY_HELD
    assert st.message.startswith("gang ns/workers: waited 5s for capacity")
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 10)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    assert sim.overcommits == []


def test_a_gang_ahead_that_takes_over_one_child_s_hold_takes_over_all() -> None:
    """The fillers sit on n0: the composite holds n0 for its leader and n1-n3 for its
    workers. A single-node gang of higher priority starves in turn and takes over n1,
    one of the workers' nodes: the leader's hold goes with it, and the composite, still
    counting its wait, holds again as one unit, on the node urgent leaves for later."""
    sim = cluster()
    fillers = [Job(f"f{i}", at=0, run=20.0, cpu=1000) for i in range(4)]
    urgent = Job("urgent", at=6.0, run=5.0, cpu=4000, members=1, priority=10)
    driver = Driver(sim, [*fillers, urgent])
    driver.run(0.5)
    kids = leader_and_workers()
    driver.arrive_composite(COMPOSITE, kids)
    driver.run(6.0)
    assert held(sim) == {"ns/leader": "starvation", "ns/workers": "starvation"}
    driver.run_until(lambda: driver.gang_bound_at(urgent) is not None, 10)
    holds = [(a.group.key, a.waited) for a in sim.actions if isinstance(a, GangHeld)]
    assert [k for k, _ in holds] == ["ns/leader", "ns/workers", "ns/urgent", "ns/leader",
                                     "ns/workers"]
    assert holds[3][1] > AFTER + 4  # the composite's wait, not a new one
    assert held(sim) == {"ns/leader": "starvation", "ns/workers": "starvation"}
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 40)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    assert sim.overcommits == []


def test_a_child_late_while_its_composite_holds_says_the_composite_holds() -> None:
    """A third child complete only once its siblings hold the composite's forward plan:
    it is not planned alone (the composite is not placed yet) and does not wait for
    "the others' pods" (they exist and hold); it says its composite holds capacity, for
    which of its groups, and is planned on its own once the composite is placed."""
    sim, driver, kids = starving_composite()
    late = Job("late", at=0, run=30, cpu=1000, parent=COMPOSITE.key)
    driver.arrive(late)  # now, outside the driver's schedule
    driver.run(0.2)
    st = sim.status("ns/late")
    assert st is not None and st.reason == Reason.CAPACITY_HELD, st
    assert st.message == (
        "gang ns/late: part of CompositePodGroup ns/lw, which starved and holds capacity "
        "for 2 of its groups (ns/leader, ns/workers) as it frees up; this one is placed "
        "on its own once they are, when it fits")
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 10)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    driver.run(0.2)
    # The composite is placed, every node taken: the late child waits as a gang alone.
    st = sim.status("ns/late")
    assert st is not None and st.reason == Reason.INSUFFICIENT_CAPACITY, st
    assert "CompositePodGroup" not in st.message
    assert sim.overcommits == []


def replace_pods(sim: SimScheduler, kids: list[Job], scheduler: str) -> list[str]:
    """Every pod of the composite's children deleted and created again naming
    `scheduler`, as a user moving the workload to another scheduler (or back) does:
    a pod's schedulerName cannot change. Returns the new pods' uids; another
    scheduler's are left pending (this simulated kube-scheduler does not place them)."""
    new = []
    for job in kids:
        for uid in job.uids:
            if uid in sim.cache.pods:
                sim.delete(uid)
        job.uids = []
        for i in range(job.members):
            p = sim.add_pod(pod(f"{job.name}-{scheduler}-{i}", job.name, cpu=job.cpu,
                                memory=1 << 20, creation=sim.now, scheduler_name=scheduler))
            job.uids.append(p.uid)
            new.append(p.uid)
    if scheduler != "gang-scheduler":
        sim.held.update(new)
    return new


def test_a_composite_whose_pods_went_to_another_scheduler_starts_its_wait_afresh() -> None:
    """The composite starved and holds; then its children's pods are another scheduler's.
    Its wait ends, as a deleted composite's does, and the holds it made (no slot left in
    them: each went with its pod) go with it instead of becoming reservations of nothing
    that block its children until they time out. Ours again much later, it is
    planned at once and holds only after waiting --starvation-after anew: the time it
    was another scheduler's is not counted as waiting here."""
    sim, driver, kids = starving_composite()
    theirs = replace_pods(sim, kids, "other-scheduler")
    assert held(sim) == {}
    assert sim.manager.reads.waiting_since(COMPOSITE.key) is None
    driver.run(3 * AFTER)
    assert held(sim) == {}
    assert sim.manager.reads.waiting_since(COMPOSITE.key) is None
    for uid in theirs:
        sim.delete(uid)
    replace_pods(sim, kids, "gang-scheduler")
    back = sim.now
    before = len([a for a in sim.actions if isinstance(a, GangHeld)])
    driver.run_until(lambda: len([a for a in sim.actions if isinstance(a, GangHeld)]) > before,
                     3 * AFTER)
    holds = [a for a in sim.actions if isinstance(a, GangHeld)][before:]
    assert sorted(a.group.key for a in holds) == ["ns/leader", "ns/workers"]
    assert all(AFTER <= a.waited <= AFTER + 0.5 for a in holds), [a.waited for a in holds]
    assert sim.now - back >= AFTER
    assert sim.overcommits == []


def composite_holds(sim: SimScheduler) -> list[GangHeld]:
    """The holds made for the composite's children so far (not the small gangs')."""
    return [a for a in sim.actions
            if isinstance(a, GangHeld) and a.group.key in ("ns/leader", "ns/workers")]


def test_a_composite_placed_by_its_hold_waits_afresh_when_it_waits_again() -> None:
    """The composite starved, its holds became reservations and its children were bound:
    its wait is over, as when it is reserved without starving. Then its pods are
    replaced, the leader's first (a small gang takes its node meanwhile), then the
    workers': it waits again behind the small gangs, and its new hold comes
    --starvation-after later, not at once on the wait that ended when it was placed."""
    sim, driver, kids = starving_composite()
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 10)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    assert sim.manager.reads.waiting_since(COMPOSITE.key) is None
    for job in kids:
        for uid in job.uids:
            sim.delete(uid)
        if job.name == "leader":
            driver.run(0.3)  # the workers still run: the composite has pods all along
        job.uids = [sim.add_pod(pod(f"{job.name}-again-{i}", job.name, cpu=job.cpu,
                                    memory=1 << 20, creation=sim.now)).uid
                    for i in range(job.members)]
    again = sim.now
    before = len(composite_holds(sim))
    driver.run_until(lambda: len(composite_holds(sim)) > before, 3 * AFTER)
    holds = composite_holds(sim)[before:]
    assert sorted(a.group.key for a in holds) == ["ns/leader", "ns/workers"]
    assert all(AFTER <= a.waited <= AFTER + 0.5 for a in holds), [a.waited for a in holds]
    assert sim.now - again >= AFTER
    assert sim.overcommits == []

"""A CompositePodGroup as a preemption victim (`victims.COMPOSITE_UNIT`): every child of
a composite with a gang policy goes together, all their bound members evicted and all
their reservations released, never one child alone (a composite left with fewer than
minGroupCount children placed is the partial start gang scheduling exists to prevent);
priced as that whole in the harm order, protected whole by a budget over any of its
pods, and only below the preemptor's priority counting the composite's own. Its
spec.preemptionPolicy Never keeps it from preempting."""

from __future__ import annotations

import dataclasses

from extender.core.model.config import Config
from extender.core.model.types import BudgetInfo, CompositeInfo, LabelSelector, composite_key
from extender.core.model.vocabulary import EvictPods, GangDisrupted, Preempting, Reason
from extender.core.wiring import Core
from tests.core.preemption.preempting import cluster, evictions
from tests.core.sim import SimScheduler, node
from tests.core.workload import Driver, Job

PARENT = composite_key("ns", "lw")


def composite(priority: int | None = None, policy: str = "PreemptLowerPriority",
              mode: str = "single") -> CompositeInfo:
    """The CompositePodGroup ns/lw of minGroupCount 2 (spec.priority `priority`,
    spec.preemptionPolicy `policy`, spec.disruptionMode `mode`)."""
    return CompositeInfo("ns", "lw", 2, uid="c-lw", priority=priority,
                         preemption_policy=policy, disruption_mode=mode)


def pair(priority: int = 1) -> list[Job]:
    """A leader group of 1 pod and a worker group of 1 pod, each a whole 4-CPU node."""
    return [Job("leader", at=0, run=1000, cpu=4000, members=1, priority=priority),
            Job("workers", at=0, run=1000, cpu=4000, members=1, priority=priority)]


def running_composite(priority: int = 1, composite_priority: int | None = None,
                      ) -> tuple[Driver, list[Job]]:
    """Four 4-CPU nodes: the composite ns/lw (minGroupCount 2: its leader and workers,
    a node each) bound, the other two nodes taken at priority 20."""
    sim = cluster()
    busy = Job("busy", at=0, run=1000, cpu=4000, members=2, priority=20)
    driver = Driver(sim, [busy])
    driver.run(0.3)
    kids = pair(priority)
    driver.arrive_composite(composite(priority=composite_priority), kids)
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 3)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    return driver, kids


def arrive(driver: Driver, job: Job) -> None:
    driver.jobs.append(job)
    driver.arrive(job)
    driver.jobs.remove(job)


def test_one_child_s_room_evicts_the_whole_composite_never_one_child() -> None:
    """A priority-10 gang needs one node: evicting the leader alone (one pod) would
    be the cheapest, and would leave the composite with one child of the two it needs.
    The whole composite goes, in one eviction unit, and each child says so."""
    driver, kids = running_composite()
    sim = driver.sim
    high = Job("high", at=0, run=10, cpu=4000, members=1, priority=10)
    arrive(driver, high)
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 3)
    assert driver.gang_bound_at(high) is not None
    (ev,) = evictions(sim)
    assert ev.gang == PARENT and ev.preemptor == "ns/high"
    assert {p.uid for p in ev.pods} == {u for k in kids for u in k.uids}
    (report,) = [a for a in sim.actions if isinstance(a, Preempting)]
    assert [(v.name, v.kind, len(v.pods), v.group and v.group.key) for v in report.victims] == [
        ("gang ns/leader (of CompositePodGroup ns/lw)", "gang", 1, "ns/leader"),
        ("gang ns/workers (of CompositePodGroup ns/lw)", "gang", 1, "ns/workers")]
    assert "CompositePodGroup ns/lw (priority 1, 2 pod(s))" in report.message
    for child in ("ns/leader", "ns/workers"):
        st = sim.status(child)
        assert st.reason == Reason.PREEMPTED, st
        assert "with every group of CompositePodGroup ns/lw" in st.message
    # Neither child is placed again alone in the node left free (they need two).
    driver.run(2)
    assert not any(sim.cache.pods[u].node_name for k in kids for u in k.uids
                   if u in sim.cache.pods)


def test_the_children_s_reservations_are_released_together() -> None:
    """Both children reserved (their members not yet at the bind barrier) on the two
    nodes a priority-10 gang needs one of: both reservations go, never one."""
    sim = cluster(nodes=2)
    driver = Driver(sim, [])
    kids = pair()
    driver.arrive_composite(composite(), kids)
    sim.tick()
    assert {r.gang for r in sim.manager.reads.reservations()} == {"ns/leader", "ns/workers"}
    high = Job("high", at=0, run=10, cpu=4000, members=1, priority=10)
    arrive(driver, high)
    sim.tick(0.1)
    (report,) = [a for a in sim.actions if isinstance(a, Preempting)]
    assert [(v.name, v.kind) for v in report.victims] == [
        ("reservation of gang ns/leader (of CompositePodGroup ns/lw)", "reservation"),
        ("reservation of gang ns/workers (of CompositePodGroup ns/lw)", "reservation")]
    assert not evictions(sim)  # nothing bound: nothing to evict
    left = {r.gang for r in sim.manager.reads.reservations()}
    assert left == {"ns/high"}, left


def test_a_budget_over_one_child_protects_the_whole_composite() -> None:
    """A budget that allows no disruption covers the leader's pod only: evicting the
    composite would be refused, so neither child is a victim, not even the workers
    alone, and the preemptor says why it waits."""
    driver, kids = running_composite()
    sim = driver.sim
    for job in kids:
        for uid in job.uids:
            p = sim.cache.pods[uid]
            labels = {**p.labels, "app": job.name}
            sim.manager.on_pod(dataclasses.replace(p, phase="Running", labels=labels), sim.now)
    sim.manager.on_budget(BudgetInfo("ns", "leader-pdb", LabelSelector((("app", "leader"),)),
                                     0))
    high = Job("high", at=0, run=10, cpu=4000, members=1, priority=10)
    arrive(driver, high)
    driver.run(2)
    assert not evictions(sim) and driver.gang_bound_at(high) is None
    assert ("protected, so it waits: CompositePodGroup ns/lw: PodDisruptionBudget "
            "ns/leader-pdb allows 0") in sim.status("ns/high").message


def test_the_composite_s_priority_keeps_its_children_from_lower_preemptors() -> None:
    """The children's pods have no priority of their own; their composite's
    spec.priority is 50. A priority-10 gang is below it: nothing is evicted."""
    driver, _ = running_composite(priority=0, composite_priority=50)
    sim = driver.sim
    high = Job("high", at=0, run=10, cpu=4000, members=1, priority=10)
    arrive(driver, high)
    driver.run(2)
    assert not evictions(sim) and driver.gang_bound_at(high) is None


def test_preemption_policy_never_keeps_the_composite_from_preempting() -> None:
    """As for a gang whose member says Never: a composite whose spec.preemptionPolicy
    is Never evicts nothing, though its children's pods say PreemptLowerPriority, and
    its children say why they wait."""
    sim = cluster()
    low = Job("low", at=0, run=1000, cpu=4000, members=4, priority=1)
    driver = Driver(sim, [low])
    driver.run(0.5)
    kids = [Job("leader", at=0, run=30, cpu=4000, members=1, priority=10),
            Job("workers", at=0, run=30, cpu=4000, members=3, priority=10)]
    driver.arrive_composite(composite(policy="Never"), kids)
    driver.run(2)
    assert not evictions(sim)
    assert all(driver.gang_bound_at(k) is None for k in kids)
    assert "preemptionPolicy: Never" in sim.status("ns/leader").message


def test_a_preempted_composite_of_mode_all_is_not_also_disrupted() -> None:
    """Its children leave with the preemption's unit: their members going are not
    losses for its disruption mode all, which would evict and report it a second time.
    The pods stay terminating a while, as they do on a cluster."""
    sim = cluster()
    busy = Job("busy", at=0, run=1000, cpu=4000, members=2, priority=20)
    driver = Driver(sim, [busy])
    driver.run(0.3)
    kids = pair()
    driver.arrive_composite(composite(mode="all"), kids)
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 3)
    driver.run(1)
    driver.leave_now = False
    arrive(driver, Job("high", at=0, run=10, cpu=4000, members=1, priority=10))
    driver.run(1)
    driver.leave()
    driver.run(1)
    assert [a.gang for a in evictions(sim)] == [PARENT]
    assert not [a for a in sim.actions if isinstance(a, GangDisrupted)]
    assert not [a for a in sim.actions if isinstance(a, EvictPods) and not a.preemptor]


def test_a_child_planned_as_its_composite_is_preempted_waits_for_the_composite() -> None:
    """A child that arrives late, in the pass whose preemption takes its composite, is
    not bound beside siblings already being evicted (they still count as placed until
    they are gone, so it would be planned alone): bound after the composite's eviction
    went out, it would be left running alone, a composite below minGroupCount. It
    waits, and is planned with the composite again once the evicted members are gone
    (here, with no sibling recreated, it stays pending). With direct commits (the
    default), so no filter call sits between its reservation and its Binding."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, preemption=True,
                                        starvation_after_seconds=None)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    other = Job("other", at=0, run=1000, cpu=3000, members=1, priority=20)
    driver = Driver(sim, [other])
    driver.run(0.3)
    kids = pair(priority=0)
    driver.arrive_composite(composite(), kids)
    driver.run_until(lambda: all(driver.gang_bound_at(k) is not None for k in kids), 3)
    assert all(driver.gang_bound_at(k) is not None for k in kids)
    # The room of two whole nodes (one free, one of the composite's), and a third
    # child that fits beside `other` at once.
    high = Job("high", at=0, run=10, cpu=4000, members=2, priority=10)
    late = Job("late", at=0, run=1000, cpu=1000, members=1, priority=0, parent=PARENT)
    arrive(driver, high)
    arrive(driver, late)
    driver.step()
    (ev,) = evictions(sim)
    assert ev.gang == PARENT and {p.uid for p in ev.pods} == {u for k in kids for u in k.uids}
    assert not any(sim.cache.pods[u].node_name for u in late.uids), "bound beside leavers"
    st = sim.status("ns/late")
    assert st is not None and "CompositePodGroup ns/lw is being preempted" in st.message, st
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 3)
    assert driver.gang_bound_at(high) is not None
    driver.run(2)
    assert not any(u in driver.bound_at for u in late.uids)

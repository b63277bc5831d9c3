"""Whole-gang preemption on plain data (`core/preemption/`): the issue's priority
inversion, the least-harm rule, preemptionPolicy Never, equal priorities,
PodDisruptionBudgets and refusals, the capacity held for the preemptor, victims placed
again whole, plain pods on both sides."""

from __future__ import annotations

import dataclasses

from extender.core.model.types import BudgetInfo, LabelSelector
from extender.core.model.vocabulary import EvictPods, Preempting, Reason
from tests.core.preemption.preempting import cluster, evictions
from tests.core.sim import SimScheduler, group, node, pod
from tests.core.workload import Driver, Job


def low_then_high(nodes: int = 4, members: int = 4, run: float = 10,
                  preemption: bool = True, never: bool = False
                  ) -> tuple[SimScheduler, Driver, Job, Job]:
    """The issue's priority inversion on `nodes` whole nodes: a gang `low` (priority 1,
    `members` whole nodes, running long) at once, then a gang `high` as large (priority
    10, running `run` s, its members' preemptionPolicy Never with `never`) 1 s later."""
    sim = cluster(nodes, preemption)
    low = Job("low", at=0, run=1000, cpu=4000, members=members, priority=1)
    high = Job("high", at=1, run=run, cpu=4000, members=members, priority=10, never=never)
    return sim, Driver(sim, [low, high]), low, high


def preempting(sim: SimScheduler) -> list[Preempting]:
    return [a for a in sim.actions if isinstance(a, Preempting)]


def test_priority_inversion_is_resolved_by_evicting_the_whole_low_gang() -> None:
    sim, driver, low, high = low_then_high()
    driver.run(0.5)
    assert driver.gang_bound_at(low) is not None
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    assert driver.gang_bound_at(high) is not None
    (ev,) = evictions(sim)
    assert ev.gang == "ns/low" and ev.preemptor == "ns/high"
    assert {p.uid for p in ev.pods} == set(low.uids)  # every member, never part
    (report,) = preempting(sim)
    assert report.preemptor == "gang ns/high" and report.priority == 10
    assert [(v.name, v.kind, v.priority, len(v.pods)) for v in report.victims] == [
        ("gang ns/low", "gang", 1, 4)]
    assert "gang ns/high (priority 10) preempts 1 lower-priority unit(s): gang ns/low " \
           "(priority 1, 4 pod(s))" in report.message
    assert sim.overcommits == []


def test_without_preemption_the_high_gang_waits() -> None:
    sim, driver, _, high = low_then_high(preemption=False)
    driver.run(10)
    assert driver.gang_bound_at(high) is None and not evictions(sim)


def test_the_freed_capacity_is_held_for_the_preemptor_while_the_victims_leave() -> None:
    sim, driver, _, high = low_then_high()
    driver.leave_now = False  # victims terminate slowly
    driver.run(1.5)
    assert evictions(sim)
    st = sim.status("ns/high")
    assert st.reason == Reason.PREEMPTING, st
    assert "is held for it until they are gone" in st.message
    assert sim.status("ns/low").reason == Reason.PREEMPTED
    assert "preempted by gang ns/high (priority 10)" in sim.status("ns/low").message
    (res,) = [r for r in sim.manager.reads.reservations() if r.gang == "ns/high"]
    assert res.held == "preemption"
    # A plain pod that arrives now finds the capacity held, even once victims are gone
    # from kube-scheduler's view (it does not see the extender's hold).
    plain = Job("plain", at=driver.t, run=5, plain=True, priority=1)
    driver.arrive(plain)
    p = sim.cache.pods[plain.uids[0]]
    out = sim.manager.filter(p, ["n0", "n1", "n2", "n3"], sim.now)
    assert not out.nodes
    driver.leave()  # the victims are gone
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    assert driver.gang_bound_at(high) is not None


def test_least_harm_lowest_priority_then_fewest_pods_then_youngest() -> None:
    sim = cluster(nodes=3)
    jobs = [
        Job("mid", at=0, run=1000, cpu=4000, members=1, priority=5),  # n: one node
        Job("lowbig", at=0.1, run=1000, cpu=2000, members=2, priority=1),
        Job("lowold", at=0.2, run=1000, cpu=2000, plain=True, priority=1),
        Job("lowyoung", at=0.3, run=1000, cpu=2000, plain=True, priority=1),
        Job("high", at=1, run=10, cpu=2000, members=1, priority=10),
    ]
    driver = Driver(sim, jobs)
    driver.run(2)
    (report,) = preempting(sim)
    # Needs 2 cpu: priority 1 before 5; a plain pod (1 pod) before the 2-pod gang; the
    # youngest plain pod first.
    assert [v.name for v in report.victims] == ["pod ns/lowyoung-0"], report.victims


def test_preemption_policy_never_never_evicts_and_says_so() -> None:
    sim, driver, _, high = low_then_high(never=True)
    driver.run(5)
    assert driver.gang_bound_at(high) is None and not evictions(sim)
    assert "does not preempt lower-priority work (preemptionPolicy: Never)" in sim.status(
        "ns/high").message


def test_equal_priority_never_preempts() -> None:
    sim = cluster()
    first = Job("first", at=0, run=1000, cpu=4000, members=4, priority=5)
    second = Job("second", at=1, run=10, cpu=4000, members=4, priority=5)
    driver = Driver(sim, [first, second])
    driver.run(5)
    assert driver.gang_bound_at(second) is None and not evictions(sim)


def test_a_budget_protected_gang_is_not_a_victim_and_the_preemptor_says_why() -> None:
    sim, driver, low, high = low_then_high()
    driver.run(0.5)
    for uid in low.uids:  # Running, and labelled for the budget
        p = sim.cache.pods[uid]
        sim.manager.on_pod(dataclasses.replace(p, phase="Running",
                                               labels={**p.labels, "app": "low"}), sim.now)
    sim.manager.on_budget(BudgetInfo("ns", "low-pdb", LabelSelector((("app", "low"),)), 1))
    driver.run(3)
    assert not evictions(sim) and driver.gang_bound_at(high) is None
    msg = sim.status("ns/high").message
    assert "protected, so it waits: gang ns/low: PodDisruptionBudget ns/low-pdb allows 1" in msg
    # The budget is relaxed: now it can go.
    sim.manager.on_budget(BudgetInfo("ns", "low-pdb", LabelSelector((("app", "low"),)), 4))
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    assert driver.gang_bound_at(high) is not None


def test_a_refused_eviction_makes_it_choose_other_victims() -> None:
    """The budget moved after the victims were chosen (a race): the API refuses the
    first victim, nothing of it went, so it is given up and another is chosen."""
    sim = cluster(nodes=2)
    a = Job("a", at=0, run=1000, cpu=4000, plain=True, priority=1)
    b = Job("b", at=0.3, run=1000, cpu=4000, plain=True, priority=1)
    high = Job("high", at=1, run=10, cpu=4000, members=1, priority=10)
    driver = Driver(sim, [a, b, high])
    driver.run(0.5)
    driver.evict_refused = {b.uids[0]}  # the youngest is chosen first, and refused
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    assert driver.gang_bound_at(high) is not None
    assert [e.gang for e in evictions(sim)] == ["pod ns/b-0", "pod ns/a-0"]
    assert sim.cache.pods[b.uids[0]].node_name  # still running


def test_a_gang_half_evicted_by_a_race_is_evicted_whole() -> None:
    sim, driver, low, high = low_then_high(nodes=2, members=2)
    driver.run(0.5)
    refused = low.uids[1]
    driver.evict_refused = {refused}
    driver.run(3)
    assert refused in sim.cache.pods  # refused so far
    retries = [e for e in evictions(sim) if [p.uid for p in e.pods] == [refused]]
    assert retries and "the rest of the gang" in retries[0].reason
    driver.evict_refused = set()  # the budget lets it go now
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 40)
    assert refused not in sim.cache.pods
    assert driver.gang_bound_at(high) is not None


def test_victim_gangs_go_back_to_the_queue_and_are_placed_again_whole() -> None:
    sim, driver, _, high = low_then_high(nodes=2, members=2, run=3)
    driver.run(2)
    assert driver.gang_bound_at(high) is not None
    # Its controller recreates the evicted members.
    again = Job("low", at=driver.t, run=1000, cpu=4000, members=2, priority=1)
    for i in range(2):
        p = pod(f"low-r{i}", "low", cpu=4000, memory=1 << 20, creation=sim.now, priority=1)
        sim.add_pod(p)
        again.uids.append(p.uid)
        driver.job_of[p.uid] = again
    driver.run_until(lambda: len([u for u in again.uids if u in driver.bound_at]) == 2, 10)
    times = sorted(driver.bound_at[u] for u in again.uids)
    assert len(times) == 2 and times[0] == times[1]  # whole, in one commit


def test_a_lower_priority_reservation_is_released_not_evicted() -> None:
    sim = cluster(nodes=2)
    sim.add_group(group("res", 2))
    members = [sim.add_pod(pod(f"res-{i}", "res", cpu=4000, priority=1)) for i in range(2)]
    sim.manager.filter(members[0], ["n0", "n1"], sim.now)  # reserved, no bind yet
    high = Job("high", at=0, run=10, cpu=4000, members=2, priority=10)
    driver = Driver(sim, [high])
    driver.run_until(lambda: driver.gang_bound_at(high) is not None, 5)
    assert driver.gang_bound_at(high) is not None
    assert not evictions(sim)
    (report,) = preempting(sim)
    assert [(v.kind, v.name) for v in report.victims] == [
        ("reservation", "reservation of gang ns/res")]


def test_a_plain_pod_of_the_gang_scheduler_preempts_and_gets_the_capacity() -> None:
    sim = cluster(nodes=1)
    low = Job("low", at=0, run=1000, cpu=3000, plain=True, priority=1)
    high = Job("high", at=1, run=10, cpu=2000, plain=True, priority=10)
    driver = Driver(sim, [low, high])
    driver.run_until(lambda: high.uids and high.uids[0] in driver.bound_at, 5)
    assert high.uids[0] in driver.bound_at
    (report,) = preempting(sim)
    assert report.preemptor == "pod ns/high-0" and report.pod is not None
    assert [v.name for v in report.victims] == ["pod ns/low-0"]
    assert not sim.core.ledger.reservations  # its own reservation ended with its binding


def test_the_filter_path_never_searches_for_victims() -> None:
    sim = cluster(nodes=1)
    low = Job("low", at=0, run=1000, cpu=4000, plain=True, priority=1)
    driver = Driver(sim, [low])
    driver.run(0.5)
    sim.add_group(group("high", 1))
    p = sim.add_pod(pod("high-0", "high", cpu=4000, priority=10))
    sim.manager.filter(p, ["n0"], sim.now)
    sim.drain()
    assert not evictions(sim)  # kube-scheduler's loop ran a pass, not a search
    sim.tick()
    assert evictions(sim)  # the tick's pass did


def test_a_member_preempted_by_another_scheduler_is_replaced_alone() -> None:
    """kube-scheduler's DefaultPreemption (of the default profile) deleted one member
    of a running gang: the rest keep running (the extender evicts nothing it did not
    commit), and the replacement its controller creates is placed on its own, the gang
    whole again, as soon as one member fits (docs/preemption.md)."""
    sim = cluster(nodes=3)
    job = Job("g", at=0, run=1000, cpu=3000, members=3, priority=1)
    driver = Driver(sim, [job])
    driver.run(0.5)
    assert driver.gang_bound_at(job) is not None
    victim = job.uids[0]
    node_name = sim.cache.pods[victim].node_name
    sim.delete(victim)  # preempted by a higher-priority pod of the default scheduler
    sim.bind_foreign(pod("urgent", cpu=3000, priority=100), node_name)
    replacement = pod("g-r0", "g", cpu=3000, memory=1 << 20, priority=1)
    sim.add_pod(replacement)
    driver.run(0.5)
    assert not [a for a in sim.actions if isinstance(a, EvictPods)]
    assert all(sim.cache.pods[u].node_name for u in job.uids[1:])
    assert not sim.cache.pods[replacement.uid].node_name  # no room: 3 nodes, 3 taken
    sim.add_node(node("n-new", cpu=4000))
    driver.run(0.5)
    assert sim.cache.pods[replacement.uid].node_name == "n-new"


def test_no_member_of_a_gang_being_evicted_is_bound_meanwhile() -> None:
    """Between the choice of victims and the watch showing them terminating, the victim
    gang still counts as bound: an elastic extra that found room then would be bound and
    left running alone. It is refused until the gang is placed again."""
    sim = cluster(nodes=2)
    sim.add_group(group("low", 2))
    low = [sim.add_pod(pod(f"low-{i}", "low", cpu=4000, priority=1)) for i in range(3)]
    for p in low:
        sim.schedule(p.uid)
    assert len(sim.bound("low")) == 2
    sim.add_group(group("high", 2))
    for i in range(2):
        sim.add_pod(pod(f"high-{i}", "high", cpu=4000, priority=10))
    sim.tick()
    assert evictions(sim)  # chosen; the evictions are not carried out yet
    extra = next(p for p in low if not sim.cache.pods[p.uid].node_name)
    sim.add_node(node("n-new", cpu=4000))  # room for the extra appears
    assert sim.schedule(extra.uid) == "rejected"
    assert "is being preempted" in sim.last_filter[extra.uid]


def test_victims_still_terminating_are_not_replaced_by_more_victims() -> None:
    """After a restart the extender has forgotten whom it chose; the victims it evicted
    are still terminating. Their capacity counts as coming back: nobody else is evicted."""
    sim = cluster(nodes=2)
    low = Job("low", at=0, run=1000, cpu=4000, members=1, priority=1)
    other = Job("other", at=0, run=1000, cpu=4000, plain=True, priority=1)
    driver = Driver(sim, [low, other])
    driver.run(0.5)
    p = sim.cache.pods[low.uids[0]]
    sim.manager.on_pod(dataclasses.replace(p, deleting=True), sim.now)  # terminating
    sim.add_group(group("high", 1))
    sim.add_pod(pod("high-0", "high", cpu=4000, priority=10))
    driver.run(2)
    assert not evictions(sim)  # "other" is left alone
    sim.delete(low.uids[0])
    driver.run(1)
    assert sim.bound("high")

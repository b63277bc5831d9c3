"""Property tests of priorities, preemption and the starvation guard: random streams
of gangs and plain pods with random priorities, run times, preemptionPolicy and
refused evictions, on the plain-data scheduler.

* never a partial eviction: a preemption evicts every bound member of a victim gang
  (a refusal in a race is retried until the rest is gone), never some of them;
* never a partial composite: some streams put two or three gangs in a
  CompositePodGroup of minGroupCount 2 (at a spec.priority of its own or none, now and
  then with preemptionPolicy Never); none of its children is bound before two of them
  have their quorum bound, and a preemption that evicts any child's member evicts every
  bound member of all its children, as one unit, never one child;
* never an over-committed node: no Binding leaves a node with more requested than it
  has (held capacity is charged ahead, never bound ahead);
* never a partial bind (before a gang's quorum is first bound, none of it is);
* only strictly lower priorities are evicted, and never by a Never preemptor;
* the head's wait is bounded: a forward reservation that lasts until it turns into a
  reservation does so by the longest remaining run of the pods on its nodes when it
  was made (plus the steps of the simulation).
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.model.config import Config
from extender.core.model.types import CompositeInfo, composite_key
from extender.core.model.vocabulary import EvictPods, GangHeld, GangReserved, Preempting
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node
from tests.core.workload import Driver, Job

DT = 0.25
AFTER = 2.0
PARENT = composite_key("ns", "c")

Stream = tuple[list[int], list[Job], set[int], CompositeInfo | None]


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    nodes = draw(st.lists(st.sampled_from((2000, 4000)), min_size=2, max_size=4))
    jobs = []
    for i in range(draw(st.integers(3, 12))):
        plain = draw(st.booleans()) and draw(st.booleans())
        members = 1 if plain else draw(st.integers(1, 3))
        jobs.append(Job(
            f"j{i:02d}", at=draw(st.sampled_from((0.0, 0.5, 1.0, 2.0, 4.0, 6.0, 9.0))),
            run=draw(st.sampled_from((0.5, 1.0, 3.0, 6.0, 12.0))),
            cpu=draw(st.sampled_from((500, 1000, 2000))), members=members,
            min_member=None if plain else draw(st.integers(1, members)),
            priority=draw(st.integers(0, 2)), never=draw(st.integers(0, 5)) == 0,
            plain=plain))
    refused = draw(st.sets(st.integers(0, 40), max_size=4))
    gangs = [j for j in jobs if not j.plain]
    composite = None
    if len(gangs) >= 2 and draw(st.booleans()):
        for i in draw(st.lists(st.sampled_from(range(len(gangs))), min_size=2, max_size=3,
                               unique=True)):
            # Low and long-running now and then, so that others preempt it.
            low = draw(st.booleans())
            gangs[i] = dataclasses.replace(
                gangs[i], parent=PARENT, priority=0 if low else gangs[i].priority,
                run=12.0 if low else gangs[i].run)
        jobs = [next((g for g in gangs if g.name == j.name), j) for j in jobs]
        composite = CompositeInfo("ns", "c", 2, uid="c-c",
                                  priority=draw(st.sampled_from((None, 0, 1, 2))),
                                  preemption_policy=draw(st.sampled_from(
                                      ("PreemptLowerPriority",) * 3 + ("Never",))))
    return nodes, jobs, refused, composite


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_preemption_and_starvation_invariants(scenario: Stream) -> None:
    node_cpus, jobs, refused, composite = scenario
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=20,
                                        starvation_after_seconds=AFTER)))
    for i, cpu in enumerate(node_cpus):
        sim.add_node(node(f"n{i}", cpu=cpu))
    if composite is not None:
        sim.manager.on_group(composite, sim.now)
    children = [j for j in jobs if j.parent]
    child_keys = {f"ns/{j.name}" for j in children}
    composite_placed = False
    driver = Driver(sim, jobs, dt=DT)
    driver.refuse_once = True
    quorum_reached: set[str] = set()
    seen = 0
    holds: dict[str, tuple[float, float]] = {}  # gang -> (held at, longest remaining run)
    victims: dict[str, set[str]] = {}  # victim gang -> uids bound when it was chosen
    while driver.t < 30:
        driver.step()
        if refused and not driver.evict_refused and driver.job_of:
            all_uids = sorted(driver.job_of)
            driver.evict_refused = {all_uids[i % len(all_uids)] for i in refused}
            refused = set()
        new, seen = sim.actions[seen:], len(sim.actions)
        held_children: list[str] = []
        for a in new:
            if isinstance(a, Preempting):
                if a.preemptor == "CompositePodGroup ns/c":
                    assert composite is not None
                    assert composite.preemption_policy != "Never", a.preemptor
                    # Nor for a child with a Never member it plans (its pods pending).
                    assert not any(j.never and any(
                        u in sim.cache.pods and not sim.cache.pods[u].node_name
                        for u in j.uids) for j in children), a.preemptor
                else:
                    preemptor = next((j for j in jobs if f"ns/{j.name}" in a.preemptor
                                      or f"pod ns/{j.name}-0" == a.preemptor), None)
                    assert preemptor is not None and not preemptor.never, a.preemptor
                    if preemptor.parent:
                        assert composite is not None
                        assert composite.preemption_policy != "Never", a.preemptor
                for v in a.victims:
                    assert v.priority < a.priority, (a.preemptor, v)
            if isinstance(a, EvictPods) and a.preemptor and not a.gang.startswith("pod "):
                g = a.gang
                if "the rest of the gang" not in a.reason:
                    victims[g] = {p.uid for p in a.pods}
                    # A child of the composite is never a victim alone: all of them are.
                    owners = (children if g == PARENT
                              else [j for j in jobs if f"ns/{j.name}" == g])
                    assert all(not j.parent for j in owners) or g == PARENT, g
                    # Every member bound now is in it (none was let in since the choice).
                    bound = {u for job in owners for u in job.uids if u in sim.cache.pods
                             and sim.cache.pods[u].takes_capacity
                             and not sim.cache.pods[u].deleting}
                    assert bound <= victims[g] | {p.uid for p in a.pods}, (g, bound)
            if isinstance(a, GangHeld):
                nodes = {s.node for s in a.slots}
                left = max((at - sim.now for uid, at in driver.finish_at.items()
                            if uid in sim.cache.pods and sim.cache.pods[uid].node_name in nodes),
                           default=0.0)
                holds[a.group.key] = (driver.t, max(left, 0.0))
                if a.group.key in child_keys:
                    held_children.append(a.group.key)
            if isinstance(a, GangReserved) and a.group.key in holds:
                held_at, left = holds.pop(a.group.key)
                assert driver.t - held_at <= left + 3 * DT, (a.group.key, held_at, left)
        # A composite's children's holds are made together and become reservations
        # together: each waits for the longest run on any of their nodes.
        # A child held and reserved in the same step has no hold left to wait for.
        still_held = [k for k in held_children if k in holds]
        if still_held:
            longest = max(holds[k][1] for k in still_held)
            for k in still_held:
                holds[k] = (holds[k][0], longest)
        # Never an over-committed node.
        assert sim.overcommits == [], sim.overcommits
        # Never a partial bind.
        for key, grp in sim.cache.groups.items():
            bound_now = sum(1 for p in sim.cache.group_pods(grp.namespace, grp.name)
                            if p.node_name and not p.terminal)
            if bound_now >= grp.min_member:
                quorum_reached.add(key)
            if key not in quorum_reached:
                assert bound_now == 0, f"gang {key}: {bound_now} of {grp.min_member} bound"
        # Never a partial composite: no child bound before two of them have their quorum.
        if children and not composite_placed:
            placed = [j for j in children if driver.gang_bound_at(j) is not None]
            composite_placed = len(placed) >= 2
            started = [j.name for j in children
                       if any(u in driver.bound_at for u in j.uids)]
            assert composite_placed or not started, f"composite: only {started} bound"
        for key in list(holds):  # a hold given up (taken over, preempted): no bound
            res = sim.core.ledger.reservations.get(key)
            if res is None or res.held != "starvation":
                holds.pop(key)
                continue
            held_at, left = holds[key]
            assert driver.t - held_at <= left + 3 * DT, (
                f"{key} still held {driver.t - held_at:.2f}s after the hold, longest "
                f"remaining run on its nodes was {left:.2f}s")
    driver.evict_refused.clear()
    driver.run(35)
    # Never a partial eviction: every victim gang lost every member it was chosen with.
    for victim, uids in victims.items():
        still = [u for u in uids if u in sim.cache.pods and sim.cache.pods[u].node_name
                 and not sim.cache.pods[u].terminal]
        assert not still, f"victim gang {victim} still has {still} bound"

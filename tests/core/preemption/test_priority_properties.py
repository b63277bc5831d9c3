"""Property tests of priorities, preemption and the starvation guard: random streams
of gangs and plain pods with random priorities, run times, preemptionPolicy and
refused evictions, on the plain-data scheduler.

* never a partial eviction: a preemption evicts every bound member of a victim gang
  (a refusal in a race is retried until the rest is gone), never some of them;
* never an over-committed node: no Binding leaves a node with more requested than it
  has (held capacity is charged ahead, never bound ahead);
* never a partial bind (before a gang's quorum is first bound, none of it is);
* only strictly lower priorities are evicted, and never by a Never preemptor;
* the head's wait is bounded: a forward reservation that lasts until it turns into a
  reservation does so by the longest remaining run of the pods on its nodes when it
  was made (plus the steps of the simulation).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.model.config import Config
from extender.core.model.vocabulary import EvictPods, GangHeld, GangReserved, Preempting
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node
from tests.core.workload import Driver, Job

DT = 0.25
AFTER = 2.0


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[int], list[Job], set[int]]:
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
    return nodes, jobs, refused


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_preemption_and_starvation_invariants(
    scenario: tuple[list[int], list[Job], set[int]],
) -> None:
    node_cpus, jobs, refused = scenario
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=20,
                                        starvation_after_seconds=AFTER)))
    for i, cpu in enumerate(node_cpus):
        sim.add_node(node(f"n{i}", cpu=cpu))
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
        for a in new:
            if isinstance(a, Preempting):
                preemptor = next((j for j in jobs if f"ns/{j.name}" in a.preemptor
                                  or f"pod ns/{j.name}-0" == a.preemptor), None)
                assert preemptor is not None and not preemptor.never, a.preemptor
                for v in a.victims:
                    assert v.priority < a.priority, (a.preemptor, v)
            if isinstance(a, EvictPods) and a.preemptor and not a.gang.startswith("pod "):
                g = a.gang
                if "the rest of the gang" not in a.reason:
                    victims[g] = {p.uid for p in a.pods}
                    job = next(j for j in jobs if f"ns/{j.name}" == g)
                    # Every member bound now is in it (none was let in since the choice).
                    bound = {u for u in job.uids if u in sim.cache.pods
                             and sim.cache.pods[u].takes_capacity
                             and not sim.cache.pods[u].deleting}
                    assert bound <= victims[g] | {p.uid for p in a.pods}, (g, bound)
            if isinstance(a, GangHeld):
                nodes = {s.node for s in a.slots}
                left = max((at - sim.now for uid, at in driver.finish_at.items()
                            if uid in sim.cache.pods and sim.cache.pods[uid].node_name in nodes),
                           default=0.0)
                holds[a.group.key] = (driver.t, max(left, 0.0))
            if isinstance(a, GangReserved) and a.group.key in holds:
                held_at, left = holds.pop(a.group.key)
                assert driver.t - held_at <= left + 3 * DT, (a.group.key, held_at, left)
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

"""Property tests of the starvation guard with gangs that can never be placed and
several node pools (issue 27): random streams on the plain-data scheduler, every gang
confined to a pool by its nodeSelector, some to a pool without nodes or asking for more
than any node has.

* no gang that fits its pool emptied is ever called Unplaceable, and every one that
  does not is, and holds nothing;
* in each pool, a starving gang that can be placed is never left without a hold for
  more than a step or two while no gang ahead of it in the pool holds one: the oldest
  starving gang of each pool is guarded, whatever waits in other pools or can never
  be placed;
* each hold becomes a reservation within the longest remaining run of the pods on its
  nodes when it was made (the documented bound, plus the steps of the simulation);
* holds never share a node, and no node is ever over-committed.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.model.config import Config
from extender.core.model.vocabulary import GangHeld, GangReserved, Reason
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node
from tests.core.workload import Driver, Job

DT = 0.25
AFTER = 2.0
POOLS = ("a", "b")


@st.composite
def streams(draw: st.DrawFn) -> tuple[dict[str, list[int]], list[Job]]:
    pools = {p: draw(st.lists(st.sampled_from((2000, 4000)), min_size=1, max_size=3))
             for p in POOLS}
    jobs = []
    for i in range(draw(st.integers(3, 14))):
        pool = draw(st.sampled_from((*POOLS, *POOLS, "none")))  # "none": no such nodes
        members = draw(st.integers(1, 3))
        cpu = draw(st.sampled_from((500, 1000, 2000, 2000, 4000, 8000)))
        jobs.append(Job(f"j{i:02d}", at=draw(st.sampled_from((0.0, 0.5, 1.0, 2.0, 4.0, 6.0))),
                        run=draw(st.sampled_from((0.5, 1.0, 3.0, 6.0))), cpu=cpu,
                        members=members, selector={"pool": pool}))
    return pools, jobs


def fits_emptied(job: Job, pools: dict[str, list[int]]) -> bool:
    """One shape, no constraints but the pool: the per-node counts are exact."""
    return sum(cpu // job.cpu for cpu in pools.get(job.selector["pool"], ())) >= job.members


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_every_starving_gang_that_can_be_placed_is_guarded(
    scenario: tuple[dict[str, list[int]], list[Job]],
) -> None:
    pools, jobs = scenario
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=20,
                                        starvation_after_seconds=AFTER, preemption=False)))
    pool_of: dict[str, str] = {}
    for pool, cpus in pools.items():
        for i, cpu in enumerate(cpus):
            n = node(f"{pool}{i}", cpu=cpu)
            sim.add_node(dataclasses.replace(n, labels={**n.labels, "pool": pool}))
            pool_of[f"{pool}{i}"] = pool
    driver = Driver(sim, jobs, dt=DT)
    by_key = {f"ns/{j.name}": j for j in jobs}
    holds: dict[str, tuple[float, float]] = {}  # gang -> (held at, longest remaining run)
    unguarded: dict[str, float] = {}  # gang -> since when it starves with no hold ahead
    seen = 0
    while driver.t < 25:
        driver.step()
        for a in sim.actions[seen:]:
            if isinstance(a, GangHeld):
                job = by_key[a.group.key]
                assert fits_emptied(job, pools), (a.group.key, "holds but fits nowhere")
                nodes = {s.node for s in a.slots}
                left = max((at - sim.now for uid, at in driver.finish_at.items()
                            if uid in sim.cache.pods and sim.cache.pods[uid].node_name in nodes),
                           default=0.0)
                holds[a.group.key] = (driver.t, max(left, 0.0))
            if isinstance(a, GangReserved) and a.group.key in holds:
                held_at, left = holds.pop(a.group.key)
                assert driver.t - held_at <= left + 3 * DT, (a.group.key, held_at, left)
        seen = len(sim.actions)
        assert sim.overcommits == [], sim.overcommits
        held = [r for r in sim.core.ledger.reservations.values() if r.held == "starvation"]
        taken: dict[str, str] = {}
        for r in held:
            for s in r.slots.values():
                assert taken.setdefault(s.node, r.gang) == r.gang, (s.node, taken, r.gang)
        for key in list(holds):  # a hold given up (taken over): no bound
            res = sim.core.ledger.reservations.get(key)
            if res is None or res.held != "starvation":
                holds.pop(key)
                continue
            held_at, left = holds[key]
            assert driver.t - held_at <= left + 3 * DT, (key, driver.t - held_at, left)
        holders_ahead = {p: min(((sim.cache.groups[r.gang].creation, r.gang) for r in held
                                 if pool_of.get(next(iter(r.slots.values())).node) == p),
                                default=None) for p in POOLS}
        for key, job in by_key.items():
            if not job.uids or key not in sim.cache.groups:
                continue
            st_ = sim.decision(key)
            if not fits_emptied(job, pools):
                if st_ is not None and st_.reason not in (Reason.WAITING_FOR_MEMBERS,
                                                          Reason.QUEUED):
                    assert st_.reason == Reason.UNPLACEABLE, (key, st_)
                continue
            assert st_ is None or st_.reason != Reason.UNPLACEABLE, (key, st_)
            since = sim.manager.reads.waiting_since(key)
            pending = key not in sim.core.ledger.reservations and driver.gang_bound_at(job) is None
            ahead = holders_ahead[job.selector["pool"]]
            me = (sim.cache.groups[key].creation, key)
            if pending and since is not None and sim.now >= since + AFTER + DT and (
                    ahead is None or ahead > me):
                unguarded.setdefault(key, driver.t)
                assert driver.t - unguarded[key] <= 2 * DT, (
                    f"{key} starves unguarded since {unguarded[key]:.2f}s, now "
                    f"{driver.t:.2f}s; holders {[(r.gang, r.held) for r in held]}")
            else:
                unguarded.pop(key, None)

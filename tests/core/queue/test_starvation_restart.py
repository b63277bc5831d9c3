"""The starvation guard's clock survives a restart and a change of leader: the status
writer keeps when a gang began waiting for capacity in `status.waitingForCapacitySince`,
and a restarted extender counts from there (`Starvation.restore`). Before, every restart
or failover started the head gang's `--starvation-after` over, so its bound counted
from the last one."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from extender.core.model.config import Config
from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.phase import rfc3339
from extender.core.model.types import GroupInfo
from extender.core.model.vocabulary import GangHeld, Reason
from extender.core.planner import plan_group
from extender.core.wiring import Core
from tests.core.queue.restart import GANG, podgroup, recorded, written
from tests.core.sim import SimScheduler, group, node, pod

AFTER = 10.0


def cluster(pg: GroupInfo, now: float, plans: list[str] | None = None) -> SimScheduler:
    """Two nodes of 4 CPUs, 3 of each taken by a running pod of the gang scheduler; the
    gang `g` of two 4-CPU members fits only once those finish. `plans`: the gang of
    every plan made is appended to it."""
    def planner(group: GroupInfo, *args: Any, **kwargs: Any) -> Any:
        if plans is not None:
            plans.append(group.key)
        return plan_group(group, *args, **kwargs)

    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER, preemption=False,
                                        direct_commit=False),
                                 planner))
    sim.now = now
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
        sim.add_pod(pod(f"fill-{i}", cpu=3000, node_name=f"n{i}", phase="Running"))
    sim.add_group(pg)
    for i in range(2):
        sim.add_pod(pod(f"g-{i}", "g", cpu=4000))
    return sim


def held(sim: SimScheduler) -> bool:
    return any(isinstance(a, GangHeld) for a in sim.actions)


def test_a_restarted_extender_counts_the_wait_from_the_recorded_start() -> None:
    first = cluster(group("g", 2), 1000.4)
    first.tick()
    assert first.status(GANG).reason == Reason.INSUFFICIENT_CAPACITY
    first.tick(6)
    assert not held(first)
    pg = recorded(first)
    assert pg.waiting_since == 1000.0  # whole seconds, rounded down
    second = cluster(pg, first.now + 2)  # restarted 8 s into the wait
    second.tick()
    assert not held(second)
    second.tick(AFTER - 8 + 0.1)
    assert held(second), second.status(GANG)
    st = second.status(GANG)
    assert st.reason == Reason.CAPACITY_HELD and "waited 10s" in st.message, st.message


def test_the_status_records_the_wait_while_it_lasts() -> None:
    sim = cluster(group("g", 2), 1000.0)
    assert written(sim).to_k8s()["waitingForCapacitySince"] is None  # not tried yet
    sim.tick()
    assert written(sim).to_k8s()["waitingForCapacitySince"] == rfc3339(1000.0)
    for uid in [p.uid for p in sim.cache.pods.values() if p.name.startswith("fill")]:
        sim.finish(uid)
    sim.tick(1)
    assert GANG in sim.core.ledger.reservations
    doc = written(sim).to_k8s()
    assert "waitingForCapacitySince" in doc and doc["waitingForCapacitySince"] is None


def test_a_standby_leads_with_the_leaders_clock() -> None:
    leader = cluster(group("g", 2), 1000.0)
    leader.tick()
    standby = cluster(group("g", 2), 1000.0)  # listed before the leader's write
    standby.now = leader.now + 9
    standby.add_group(recorded(leader))  # the write arrives
    standby.tick()  # now it leads, 9 s into the wait
    assert not held(standby)
    standby.tick(1.1)
    assert held(standby)


def test_restore_takes_only_news_and_never_a_future_time() -> None:
    sim = cluster(group("g", 2), 1000.0)
    starvation = sim.core.starvation
    g0 = group("g", 2)
    rec = dataclasses.replace(g0, waiting_since=900.0)
    starvation.restore(None, rec)  # first sight: a restart
    starvation.waiting(GANG, 1000.0)
    assert starvation.since(GANG) == 900.0
    starvation.placed(GANG)
    starvation.restore(rec, rec)  # the old write comes back unchanged: not news
    starvation.waiting(GANG, 1100.0)
    assert starvation.since(GANG) == 1100.0
    starvation.placed(GANG)
    starvation.restore(None, rec)
    starvation.restore(rec, g0)  # the leader cleared it: the gang was placed
    starvation.waiting(GANG, 1200.0)
    assert starvation.since(GANG) == 1200.0
    starvation.placed(GANG)
    starvation.restore(None, dataclasses.replace(g0, waiting_since=5000.0))  # clock skew
    starvation.waiting(GANG, 1300.0)
    assert starvation.since(GANG) == 1300.0


def test_waiting_for_capacity_since_is_read_and_a_malformed_one_is_dropped() -> None:
    at = "2026-11-24T10:00:00Z"
    g = group_from_k8s(podgroup({"waitingForCapacitySince": at}))
    assert rfc3339(g.waiting_since) == at and g.waiting_since == math.floor(g.waiting_since)
    for bad in ("soon", 5, {"at": at}, None, ""):
        assert group_from_k8s(podgroup({"waitingForCapacitySince": bad})).waiting_since == 0
    assert group_from_k8s(podgroup(None)).waiting_since == 0


def test_the_status_write_coming_back_plans_nothing_again() -> None:
    """Only the status changed: no plan depends on it, so neither epoch moves and the
    waiting gang is not planned again (a capacity epoch moved by every such write had
    every waiting gang of the cluster planned again)."""
    plans: list[str] = []
    sim = cluster(group("g", 2), 1000.0, plans)
    sim.tick()
    made = len(plans)
    assert made >= 1
    cache = sim.core.cache
    epochs = (cache.capacity_epoch, cache.members_epoch.get(GANG))
    sim.add_group(recorded(sim))  # waitingForCapacitySince, written and read back
    sim.tick(1)
    assert (cache.capacity_epoch, cache.members_epoch.get(GANG)) == epochs
    assert len(plans) == made
    sim.add_group(dataclasses.replace(sim.core.cache.groups[GANG], min_member=1))
    assert cache.capacity_epoch > epochs[0]  # a change of spec still counts

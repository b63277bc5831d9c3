"""An upstream PodGroup's starvation wait survives a restart, as a scheduler-plugins
PodGroup's does: the status writer keeps when the gang began waiting for capacity in a
condition of ours (`WAITING_FOR_CAPACITY`, True, its lastTransitionTime), since the
PodGroup's status, a built-in API type's, holds only conditions and would drop a
`status.waitingForCapacitySince`; a restarted extender reads it back
(`workload_group_from_k8s`) and counts from there (`Starvation.restore`). Before, every
restart started an upstream gang's `--starvation-after` over, so an older starving gang
could be overtaken again after each one."""

from __future__ import annotations

from typing import Any

import orjson

from extender.core.model.config import Config
from extender.core.model.convert_groups import workload_group_from_k8s
from extender.core.model.phase import GroupStatus, Previous, rfc3339
from extender.core.model.types import WAITING_FOR_CAPACITY, WORKLOAD_API, GroupInfo, Membership
from extender.core.model.upstream_status import upstream_conditions
from extender.core.model.vocabulary import GangHeld
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node, pod

AFTER = 5.0
BETA = "scheduling.k8s.io/v1beta1"
KEY = f"{WORKLOAD_API}:ns/big"


def podgroup_object(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": BETA, "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": "big", "uid": "g-big"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
            "status": status or {}}


def cluster(group: GroupInfo, now: float) -> SimScheduler:
    """Four 4-CPU nodes, 3 CPUs of each taken by a running pod of the gang scheduler:
    the upstream gang ns/big (4 pods, each a whole node) fits only once those finish,
    which the starvation guard counts on."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER, preemption=False,
                                        direct_commit=False)))
    sim.now = now
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
        sim.add_pod(pod(f"fill-{i}", cpu=3000, node_name=f"n{i}", phase="Running"))
    sim.add_group(group)
    for i in range(4):
        sim.add_pod(pod(f"big-{i}", cpu=4000, membership=Membership(WORKLOAD_API, "big")))
    return sim


def held(sim: SimScheduler) -> list[str]:
    return sorted(a.group.key for a in sim.actions if isinstance(a, GangHeld))


def waiting(since: float | None) -> GroupStatus:
    return GroupStatus("Pending", 0, 0, 0, 0, 4, "", "", (), waiting_since=since)


def recorded(sim: SimScheduler) -> GroupInfo:
    """The PodGroup as a restarted extender lists it: the conditions written for what
    the first one's starvation guard says, through JSON, read back."""
    conds = upstream_conditions(waiting(sim.manager.reads.waiting_since(KEY)), None, BETA,
                                Previous(), sim.now, 1)
    status = orjson.loads(orjson.dumps({"conditions": [c.to_k8s() for c in conds]}))
    return workload_group_from_k8s(podgroup_object(status))


def test_a_restarted_extender_counts_the_upstream_gang_s_wait_from_the_recorded_start(
) -> None:
    first = cluster(workload_group_from_k8s(podgroup_object()), 1000.4)
    first.tick()
    first.tick(3)
    assert held(first) == []
    restored = recorded(first)
    assert restored.waiting_since == 1000.0  # whole seconds, rounded down
    second = cluster(restored, first.now + 1)  # restarted 4.4 s into the wait
    second.tick()
    assert held(second) == []
    second.tick(0.7)  # 5.1 s since the recorded start; 0.7 s since the restart
    assert held(second) == [KEY]


def test_the_condition_says_the_wait_and_its_end() -> None:
    """True from the wait's start (its time in the message too); False once it ends;
    nothing for a gang that never waited; a malformed record only restarts the clock."""
    start = 1000.0
    (cond,) = [c for c in upstream_conditions(waiting(start + 0.6), None, BETA, Previous(),
                                              start + 9, 3) if c.type == WAITING_FOR_CAPACITY]
    assert (cond.status, cond.reason, cond.last_transition) == (
        "True", "WaitingForCapacity", rfc3339(start))
    assert rfc3339(start) in cond.message and cond.observed_generation == 3
    previous = Previous(conditions={WAITING_FOR_CAPACITY: ("True", rfc3339(start))})
    (ended,) = [c for c in upstream_conditions(waiting(None), None, BETA, previous,
                                               start + 20) if c.type == WAITING_FOR_CAPACITY]
    assert (ended.status, ended.reason, ended.last_transition) == (
        "False", "NotWaitingForCapacity", rfc3339(start + 20))
    assert not [c for c in upstream_conditions(waiting(None), None, BETA, Previous(), start)
                if c.type == WAITING_FOR_CAPACITY]
    assert workload_group_from_k8s(podgroup_object({"conditions": [ended.to_k8s()]})
                                   ).waiting_since == 0
    for bad in ("soon", 5, None):
        obj = podgroup_object({"conditions": [
            {"type": WAITING_FOR_CAPACITY, "status": "True", "lastTransitionTime": bad}]})
        assert workload_group_from_k8s(obj).waiting_since == 0

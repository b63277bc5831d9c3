"""A CompositePodGroup's starvation wait survives a restart, as a PodGroup's does: the
status writer keeps when the composite began waiting for capacity in a condition of ours
(`WAITING_FOR_CAPACITY`, True, its lastTransitionTime; the composite's status, a
built-in API type's, holds only conditions, so a scheduler-plugins PodGroup's
`status.waitingForCapacitySince` would be dropped), and a restarted extender counts
from there (`Starvation.restore`). Before, every restart started the composite's
`--starvation-after` over."""

from __future__ import annotations

from typing import Any

import orjson

from extender.core.model.config import Config
from extender.core.model.convert_groups import composite_from_k8s
from extender.core.model.phase import Condition, Previous, rfc3339
from extender.core.model.types import WAITING_FOR_CAPACITY, CompositeInfo, composite_key
from extender.core.model.upstream_status import CompositeState, composite_conditions
from extender.core.model.vocabulary import GangHeld
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

AFTER = 5.0
PARENT = composite_key("ns", "lw")


def composite_object(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"namespace": "ns", "name": "lw", "uid": "c-lw"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}},
            "status": status or {}}


def cluster(composite: CompositeInfo, now: float) -> SimScheduler:
    """Four 4-CPU nodes, 3 CPUs of each taken by a running pod of the gang scheduler:
    the composite's leader (1 pod) and workers (3 pods), each pod a whole node, fit
    only once those finish, which the starvation guard counts on."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER, preemption=False,
                                        direct_commit=False)))
    sim.now = now
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
        sim.add_pod(pod(f"fill-{i}", cpu=3000, node_name=f"n{i}", phase="Running"))
    sim.manager.on_group(composite, now)
    for name, count in (("leader", 1), ("workers", 3)):
        sim.add_group(group(name, count, parent=PARENT))
        for i in range(count):
            sim.add_pod(pod(f"{name}-{i}", name, cpu=4000))
    return sim


def held(sim: SimScheduler) -> list[str]:
    return sorted(a.group.key for a in sim.actions if isinstance(a, GangHeld))


def recorded(sim: SimScheduler) -> CompositeInfo:
    """The composite as a restarted extender lists it: the conditions written for what
    the first one's starvation guard says, through JSON, read back."""
    state = CompositeState(waiting="its groups wait",
                           waiting_since=sim.manager.reads.waiting_since(PARENT) or 0.0)
    conds = composite_conditions(state, None, Previous(), sim.now, 1)
    status = orjson.loads(orjson.dumps({"conditions": [c.to_k8s() for c in conds]}))
    return composite_from_k8s(composite_object(status))


def test_a_restarted_extender_counts_the_composite_s_wait_from_the_recorded_start() -> None:
    first = cluster(CompositeInfo("ns", "lw", 2, uid="c-lw"), 1000.4)
    first.tick()
    first.tick(3)
    assert held(first) == []
    restored = recorded(first)
    assert restored.waiting_since == 1000.0  # whole seconds, rounded down
    second = cluster(restored, first.now + 1)  # restarted 4.4 s into the wait
    second.tick()
    assert held(second) == []
    second.tick(0.7)  # 5.1 s since the recorded start; 0.7 s since the restart
    assert held(second) == ["ns/leader", "ns/workers"]


def test_the_condition_says_the_wait_and_its_end() -> None:
    """True from the wait's start (its time in the message too, so a wait begun again
    is written); False once it ends; nothing for a composite that never waited."""
    start = 1000.0

    def ours(state: CompositeState, previous: Previous, now: float) -> list[Condition]:
        return [c for c in composite_conditions(state, None, previous, now, 3)
                if c.type == WAITING_FOR_CAPACITY]

    (cond,) = ours(CompositeState(waiting="x", waiting_since=start + 0.6), Previous(),
                   start + 9)
    assert (cond.type, cond.status, cond.reason, cond.last_transition) == (
        WAITING_FOR_CAPACITY, "True", "WaitingForCapacity", rfc3339(start))
    assert rfc3339(start) in cond.message and cond.observed_generation == 3
    previous = Previous(conditions={WAITING_FOR_CAPACITY: ("True", rfc3339(start))})
    (ended,) = ours(CompositeState(waiting="x"), previous, start + 20)
    assert (ended.status, ended.reason, ended.last_transition) == (
        "False", "NotWaitingForCapacity", rfc3339(start + 20))
    assert ours(CompositeState(waiting="x"), Previous(), start) == []
    assert composite_from_k8s(composite_object({"conditions": [ended.to_k8s()]})
                              ).waiting_since == 0


def test_a_malformed_record_only_restarts_the_clock() -> None:
    for bad in ("soon", 5, None):
        obj = composite_object({"conditions": [
            {"type": WAITING_FOR_CAPACITY, "status": "True", "lastTransitionTime": bad}]})
        assert composite_from_k8s(obj).waiting_since == 0

"""The starvation wait of a gang whose status holds only conditions survives a restart,
as a scheduler-plugins PodGroup's does (`test_starvation_restart.py`): a
CompositePodGroup and an upstream PodGroup, both built-in API types, would drop a
`status.waitingForCapacitySince`, so the status writer keeps when the wait began in a
condition of ours (`WAITING_FOR_CAPACITY`, True, its lastTransitionTime), and a
restarted extender reads it back (`composite_from_k8s`, `workload_group_from_k8s`) and
counts from there (`Starvation.restore`). Before, every restart started the composite's
or the upstream gang's `--starvation-after` over, so an older starving gang could be
overtaken again after each one. Each test runs once per kind (`KINDS`), as the two
record the same thing through two writers and two readers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from extender.core.model.config import Config
from extender.core.model.convert_groups import composite_from_k8s, workload_group_from_k8s
from extender.core.model.phase import Condition, GroupStatus, Previous, rfc3339
from extender.core.model.types import (
    WAITING_FOR_CAPACITY,
    WORKLOAD_API,
    CompositeInfo,
    GroupInfo,
    Membership,
    composite_key,
)
from extender.core.model.upstream_status import (
    CompositeState,
    composite_conditions,
    upstream_conditions,
)
from extender.core.model.vocabulary import GangHeld
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

AFTER = 5.0
BETA = "scheduling.k8s.io/v1beta1"
PARENT = composite_key("ns", "lw")
UPSTREAM_KEY = f"{WORKLOAD_API}:ns/big"


def composite_object(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"namespace": "ns", "name": "lw", "uid": "c-lw"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}},
            "status": status or {}}


def upstream_object(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": BETA, "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": "big", "uid": "g-big"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
            "status": status or {}}


def add_composite(sim: SimScheduler, composite: Any) -> None:
    """The composite's leader (1 pod) and workers (3 pods)."""
    sim.manager.on_group(composite, sim.now)
    for name, count in (("leader", 1), ("workers", 3)):
        sim.add_group(group(name, count, parent=PARENT))
        for i in range(count):
            sim.add_pod(pod(f"{name}-{i}", name, cpu=4000))


def add_upstream(sim: SimScheduler, pg: Any) -> None:
    """The upstream gang ns/big of 4 pods."""
    sim.add_group(pg)
    for i in range(4):
        sim.add_pod(pod(f"big-{i}", cpu=4000, membership=Membership(WORKLOAD_API, "big")))


def composite_waiting(since: float | None, previous: Previous, now: float, generation: int
                      ) -> tuple[Condition, ...]:
    state = CompositeState(waiting="its groups wait", waiting_since=since or 0.0)
    return composite_conditions(state, None, previous, now, generation)


def upstream_waiting(since: float | None, previous: Previous, now: float, generation: int
                     ) -> tuple[Condition, ...]:
    status = GroupStatus("Pending", 0, 0, 0, 0, 4, "", "", (), waiting_since=since)
    return upstream_conditions(status, None, BETA, previous, now, generation)


@dataclass(frozen=True)
class Kind:
    """A kind of object that keeps its wait in a condition: the key the starvation
    guard counts it under, the keys of the gangs held once it starved, its object with
    a status (read as a restarted extender lists it), the conditions the writer sets
    for a wait begun at `since` (None, 0: none), and how its members are added."""

    key: str
    held: list[str]
    read: Callable[[dict[str, Any]], GroupInfo | CompositeInfo]
    conditions: Callable[[float | None, Previous, float, int], tuple[Condition, ...]]
    add: Callable[[SimScheduler, Any], None]

    def since(self, conditions: Sequence[Condition]) -> float:
        """The wait's start a restarted extender reads from `conditions`."""
        return self.read({"conditions": [c.to_k8s() for c in conditions]}).waiting_since

    def ours(self, since: float | None, previous: Previous, now: float, generation: int = 1
             ) -> list[Condition]:
        return [c for c in self.conditions(since, previous, now, generation)
                if c.type == WAITING_FOR_CAPACITY]


COMPOSITE = Kind(PARENT, ["ns/leader", "ns/workers"],
                 lambda status: composite_from_k8s(composite_object(status)),
                 composite_waiting, add_composite)
UPSTREAM = Kind(UPSTREAM_KEY, [UPSTREAM_KEY],
                lambda status: workload_group_from_k8s(upstream_object(status)),
                upstream_waiting, add_upstream)
KINDS = [pytest.param(COMPOSITE, id="composite"), pytest.param(UPSTREAM, id="upstream")]


def cluster(kind: Kind, listed: Any, now: float) -> SimScheduler:
    """Four 4-CPU nodes, 3 CPUs of each taken by a running pod of the gang scheduler:
    the gangs of `listed`, each pod a whole node, fit only once those finish, which the
    starvation guard counts on."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=AFTER, preemption=False,
                                        direct_commit=False)))
    sim.now = now
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
        sim.add_pod(pod(f"fill-{i}", cpu=3000, node_name=f"n{i}", phase="Running"))
    kind.add(sim, listed)
    return sim


def held(sim: SimScheduler) -> list[str]:
    return sorted(a.group.key for a in sim.actions if isinstance(a, GangHeld))


def recorded(kind: Kind, sim: SimScheduler) -> GroupInfo | CompositeInfo:
    """The object as a restarted extender lists it: the conditions written for what
    the first one's starvation guard says, through JSON, read back."""
    conds = kind.conditions(sim.manager.reads.waiting_since(kind.key), Previous(), sim.now, 1)
    return kind.read(orjson.loads(orjson.dumps({"conditions": [c.to_k8s() for c in conds]})))


@pytest.mark.parametrize("kind", KINDS)
def test_a_restarted_extender_counts_the_wait_from_the_recorded_start(kind: Kind) -> None:
    first = cluster(kind, kind.read({}), 1000.4)
    first.tick()
    first.tick(3)
    assert held(first) == []
    restored = recorded(kind, first)
    assert restored.waiting_since == 1000.0  # whole seconds, rounded down
    second = cluster(kind, restored, first.now + 1)  # restarted 4.4 s into the wait
    second.tick()
    assert held(second) == []
    second.tick(0.7)  # 5.1 s since the recorded start; 0.7 s since the restart
    assert held(second) == kind.held


@pytest.mark.parametrize("kind", KINDS)
def test_the_condition_says_the_wait_and_its_end(kind: Kind) -> None:
    """True from the wait's start (its time in the message too, so a wait begun again
    is written); False once it ends; nothing for one that never waited."""
    start = 1000.0
    (cond,) = kind.ours(start + 0.6, Previous(), start + 9, 3)
    assert (cond.type, cond.status, cond.reason, cond.last_transition) == (
        WAITING_FOR_CAPACITY, "True", "WaitingForCapacity", rfc3339(start))
    assert rfc3339(start) in cond.message and cond.observed_generation == 3
    previous = Previous(conditions={WAITING_FOR_CAPACITY: ("True", rfc3339(start))})
    (ended,) = kind.ours(None, previous, start + 20)
    assert (ended.status, ended.reason, ended.last_transition) == (
        "False", "NotWaitingForCapacity", rfc3339(start + 20))
    assert kind.ours(None, Previous(), start) == []
    assert kind.since([ended]) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_malformed_record_only_restarts_the_clock(kind: Kind) -> None:
    for bad in ("soon", 5, None):
        assert kind.read({"conditions": [
            {"type": WAITING_FOR_CAPACITY, "status": "True", "lastTransitionTime": bad}]}
        ).waiting_since == 0

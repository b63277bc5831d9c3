"""Bindings that fail after the barrier opened, and evictions of a partial gang, at the
dispatcher: what is transient is tried again, what is not is answered at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.core.types import NodeInfo, PodInfo
from extender.core.vocabulary import EvictPods, PodRef
from extender.kube.client import ApiError
from extender.scheduler.dispatch import Dispatcher
from extender.scheduler.evictions import EvictionConfig, Evictions


class ScriptedKube:
    """Answers each Binding (and eviction) with the next scripted outcome: None for
    success, or the exception to raise."""

    def __init__(self, outcomes: list[BaseException | None], node_of_pod: str = "") -> None:
        self.outcomes = outcomes
        self.calls: list[tuple[str, str]] = []
        self.node_of_pod = node_of_pod

    def _next(self, call: str, name: str) -> None:
        self.calls.append((call, name))
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self._next("bind", name)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {"spec": {"nodeName": self.node_of_pod}}

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        self._next("evict", name)


def plain_pod_bind(kube: ScriptedKube) -> str | None:
    """Bind one plain pod through the dispatcher, against `kube`."""
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    pod = PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1}, scheduler_name="gang-scheduler")
    manager.on_pod(pod, 0.0)
    dispatcher = Dispatcher(manager, kube, clock=lambda: 0.0)
    return asyncio.run(dispatcher.bind("ns", "p", "u1", "n0"))


def err(status: int) -> ApiError:
    return ApiError(status, "Reason", f"status {status}")


@pytest.mark.parametrize("transient", [err(503), err(429), err(500), ConnectionResetError()])
def test_a_transient_binding_failure_is_tried_again(transient: BaseException) -> None:
    kube = ScriptedKube([transient, transient, None])
    assert plain_pod_bind(kube) is None
    assert [c for c, _ in kube.calls] == ["bind", "bind", "bind"]


def test_transient_failures_give_up_after_three_attempts() -> None:
    kube = ScriptedKube([err(503)] * 5)
    error = plain_pod_bind(kube)
    assert error is not None and "503" in error
    assert len(kube.calls) == 3


@pytest.mark.parametrize("status", [404, 422, 403])
def test_a_final_binding_failure_is_answered_at_once(status: int) -> None:
    kube = ScriptedKube([err(status)])
    error = plain_pod_bind(kube)
    assert error is not None and str(status) in error
    assert len(kube.calls) == 1


def test_a_resent_binding_that_had_taken_effect_is_a_success() -> None:
    """The first Binding reached the API server but its answer was lost: the second gets
    409, and the pod is bound where we asked, so that is success, not an error."""
    kube = ScriptedKube([ConnectionResetError(), err(409)], node_of_pod="n0")
    assert plain_pod_bind(kube) is None
    assert len(kube.calls) == 2


def evict(outcomes: list[BaseException | None]) -> tuple[list[str], ScriptedKube]:
    kube = ScriptedKube(outcomes)
    results: list[str] = []
    ev = Evictions(kube, EvictionConfig(attempts=3, first_delay=0.001), results.append)

    async def run() -> None:
        ev.add(EvictPods("ns/g", (PodRef("ns", "g-0", "u0"),), "partial"))
        await ev.idle()

    asyncio.run(run())
    return results, kube


def test_an_eviction_refused_by_a_disruption_budget_is_tried_again() -> None:
    results, kube = evict([err(429), err(429), None])
    assert results == ["evicted"] and len(kube.calls) == 3


def test_eviction_gives_up_after_its_attempts() -> None:
    results, kube = evict([err(429)] * 5)
    assert results == ["refused"] and len(kube.calls) == 3


@pytest.mark.parametrize(("status", "result"), [(404, "gone"), (409, "gone"), (403, "error")])
def test_eviction_final_answers(status: int, result: str) -> None:
    results, kube = evict([err(status)])
    assert results == [result] and len(kube.calls) == 1


# ----- a preemption's victims: one try, every answer back to the gang manager ------------


def evict_victim(outcomes: list[BaseException | None]) -> tuple[list[tuple[str, str | None]],
                                                               ScriptedKube]:
    kube = ScriptedKube(outcomes)
    answers: list[tuple[str, str | None]] = []
    ev = Evictions(kube, EvictionConfig(preemption_delay=0.001))
    ev.feedback = lambda uid, error: answers.append((uid, error))

    async def run() -> None:
        ev.add(EvictPods("ns/low", (PodRef("ns", "low-0", "u0"),), "preempted",
                         preemptor="ns/high"))
        await ev.idle()

    asyncio.run(run())
    return answers, kube


def test_a_victim_refused_by_a_budget_is_reported_at_once_not_retried() -> None:
    answers, kube = evict_victim([err(429)])
    assert len(kube.calls) == 1
    assert answers == [("u0", "429 Reason: status 429")]


def test_a_victim_evicted_or_gone_is_reported_done() -> None:
    assert evict_victim([None])[0] == [("u0", None)]
    assert evict_victim([err(404)])[0] == [("u0", None)]


def test_a_transient_error_on_a_victim_is_tried_a_few_times() -> None:
    answers, kube = evict_victim([err(503), None])
    assert answers == [("u0", None)] and len(kube.calls) == 2
    answers, kube = evict_victim([err(503)] * 5)
    assert len(kube.calls) == 3 and answers[0][1] is not None


def test_the_dispatcher_feeds_a_victims_answer_to_the_manager() -> None:
    """A refusal reaches the gang manager: its preemptor's hold is released."""
    from tests.core.sim import group, node, pod

    manager = GangManager()
    for i in range(2):
        manager.on_node(node(f"n{i}", cpu=4000))
    manager.on_group(group("low", 2), 0.0)
    low = [pod(f"low-{i}", "low", cpu=4000, priority=1) for i in range(2)]
    for i, p in enumerate(low):
        manager.on_pod(p, 0.0)
        manager.binding_finished(p.uid, f"n{i}", None, 0.0)
    manager.on_group(group("high", 2), 0.0)
    for i in range(2):
        manager.on_pod(pod(f"high-{i}", "high", cpu=4000, priority=9), 0.0)
    manager.tick(1.0)
    assert [r.held for r in manager.reservations()] == ["preemption"]
    kube = ScriptedKube([err(429), err(429)])
    evictions = Evictions(kube)
    dispatcher = Dispatcher(manager, kube, clock=lambda: 1.0, evictions=evictions)

    async def run() -> None:
        dispatcher.drain()  # the EvictPods go to the evictions adapter
        await evictions.idle()

    asyncio.run(run())
    assert [c for c in kube.calls if c[0] == "evict"]
    assert not manager.reservations()  # given up: it chooses others, or waits
    st = manager.status("ns/high")
    assert st is not None and "refused" in st.message

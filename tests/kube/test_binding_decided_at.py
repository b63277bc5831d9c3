"""Every Binding the extender posts says when it was decided (the annotation
`gang-extender.x-k8s.io/decided-at`, copied by kube-apiserver onto the pod): the moment
its try passed the gate, not when it was queued, so that an over-commit found afterwards
(the soak's checker) is judged against what the extender could see then."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from extender.core.manager import GangManager
from extender.core.model.types import NodeInfo, PodInfo
from extender.kube.client import DECIDED_AT, ApiError, decided_at_text
from extender.scheduler.binding import BindingPoster
from extender.scheduler.dispatch import Dispatcher
from tests.kube.raw_server import answer_all, created, kube_for, run, serve


class TimedKube:
    """Records each Binding's decision time; answers the first `fail` tries with 503."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.decided: list[float | None] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        self.decided.append(decided_at)
        if self.fail:
            self.fail -= 1
            raise ApiError(503, "ServiceUnavailable", "restarting")

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None


def test_the_annotation_is_rfc3339_utc_with_microseconds() -> None:
    assert decided_at_text(1796000000.25) == "2026-11-30T00:53:20.250000Z"
    assert decided_at_text(0.0) == "1970-01-01T00:00:00.000000Z"


def test_the_binding_body_carries_the_decision_time() -> None:
    async def go() -> None:
        async with serve(answer_all(created)) as (server, url):
            kube, _ = kube_for(url)
            await kube.bind("ns", "p-0", "u-0", "node-1", decided_at=1796000000.25)
            await kube.bind("ns", "p-1", "u-1", "node-1")  # no time: no annotation
            assert json.loads(server.requests[0].body)["metadata"] == {
                "name": "p-0", "namespace": "ns", "uid": "u-0",
                "annotations": {DECIDED_AT: "2026-11-30T00:53:20.250000Z"}}
            assert "annotations" not in json.loads(server.requests[1].body)["metadata"]

    run(go())


def test_each_try_is_stamped_when_the_gate_lets_it_go() -> None:
    """The clock is read after the gate said yes (a post queued long before is decided
    now), and a retry after a 503 is a new decision with its own time."""
    now = [100.0]

    def gate(uid: str, node: str) -> str | None:
        now[0] += 5.0  # time passes while the post waited for its turn
        return None

    kube = TimedKube(fail=1)
    poster = BindingPoster(kube, 1, gate, clock=lambda: now[0])
    assert asyncio.run(poster.post("ns", "p", "u", "n")) is None
    assert kube.decided == [105.0, 110.0]


def test_a_poster_without_a_clock_sends_no_time() -> None:
    kube = TimedKube()
    assert asyncio.run(BindingPoster(kube, 1).post("ns", "p", "u", "n")) is None
    assert kube.decided == [None]


def test_the_dispatchers_bindings_carry_its_clock() -> None:
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    manager.on_pod(PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1},
                           scheduler_name="gang-scheduler"), 0.0)
    kube = TimedKube()
    dispatcher = Dispatcher(manager, kube, clock=lambda: 1796000000.25)
    assert asyncio.run(dispatcher.bindings.bind("ns", "p", "u1", "n0")) is None
    assert kube.decided == [1796000000.25]

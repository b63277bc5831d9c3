"""A Binding's try that leaves the API server's state unknown shuts the gate for every
post behind it, before the slot it frees is taken (`BindingCycle._api_unsure`,
scheduler/binding.py), and asks the informer to catch the pods and nodes up
(`CatchUpRequests`, kube/catch_up.py).

Why: kube-apiserver killed under a gang's Bindings fails those in flight at once, while
the informer's watches notice tens of milliseconds later; the posts queued behind took the
freed slots in that gap, passed the gate, were held on their way and landed after pods
bound onto their nodes meanwhile (e2e/tests/faults/test_restart_races.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from extender.core.manager import GangManager
from extender.core.model.types import NodeInfo, PodInfo
from extender.kube.catch_up import CatchUpRequests
from extender.kube.client import ApiError
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Outlets


class FailsFirstAfterAMoment:
    """Answers the first Binding with `first` once the second post is queued behind it
    for the one slot; records every Binding that reaches it."""

    def __init__(self, first: BaseException) -> None:
        self.first: BaseException | None = first
        self.bindings: list[str] = []
        self.reads: list[str] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        self.bindings.append(name)
        await asyncio.sleep(0.01)
        failure, self.first = self.first, None
        if failure is not None:
            raise failure

    async def get_pod(self, namespace: str, name: str) -> dict[str, object] | None:
        self.reads.append(name)
        return {"spec": {"nodeName": ""}}  # not bound: the lost try did not take effect


def two_plain_pods() -> GangManager:
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    for name in ("p1", "p2"):
        manager.on_pod(PodInfo(f"u-{name}", "ns", name, {"cpu": 1000, "pods": 1},
                               scheduler_name="gang-scheduler"), 0.0)
    return manager


def bind_both(manager: GangManager, kube: FailsFirstAfterAMoment,
              catch_up: CatchUpRequests | None) -> list[str | None]:
    """The two pods' bind requests at once, one Binding in flight at a time: p2's post
    waits for the slot p1's first try holds."""

    async def go() -> list[str | None]:
        dispatcher = Dispatcher(manager, kube, DispatchConfig(binding_concurrency=1),
                                clock=lambda: 0.0, outlets=Outlets(catch_up=catch_up))
        cycle = dispatcher.bindings
        answers = await asyncio.gather(cycle.bind("ns", "p1", "u-p1", "n0"),
                                       cycle.bind("ns", "p2", "u-p2", "n0"))
        await dispatcher.idle()
        return list(answers)

    return asyncio.run(go())


@pytest.mark.parametrize("lost", [
    httpx.ConnectError("connecting to 127.0.0.1:6443: [Errno 111] Connection refused"),
    httpx.RemoteProtocolError("Server disconnected without sending a response."),
    httpx.ReadTimeout("timed out waiting for the response"),
    ApiError(503, "ServiceUnavailable", "the server is shutting down"),
    ApiError(500, "InternalError", "etcdserver: request timed out"),
], ids=["refused", "reset", "timeout", "503", "500"])
def test_a_lost_answer_shuts_the_gate_before_the_next_post_takes_the_slot(
        lost: BaseException) -> None:
    manager = two_plain_pods()
    kube = FailsFirstAfterAMoment(lost)
    catch_up = CatchUpRequests()
    p1, p2 = bind_both(manager, kube, catch_up)
    # p2 never reached the API server: the gate refused it when it got the slot.
    assert kube.bindings == ["p1"]
    assert p2 is not None and "not yet caught up" in p2, p2
    # p1's retry asked the gate too, was refused, and the pod was read back unbound.
    assert kube.reads == ["p1"]
    assert p1 is not None
    assert catch_up.count >= 1
    assert manager.reads.binds_in_progress() == []
    # Until the informer catches the kinds up, nothing is posted; then it is again.
    manager.on_pod(PodInfo("u-p3", "ns", "p3", {"cpu": 1000, "pods": 1},
                           scheduler_name="gang-scheduler"), 0.0)
    for kind in catch_up.kinds:
        manager.watch_listed(kind, 1.0)
    again = FailsFirstAfterAMoment(ApiError(409, "Conflict", "unused"))
    again.first = None

    async def bind_p3() -> str | None:
        dispatcher = Dispatcher(manager, again, clock=lambda: 1.0,
                                outlets=Outlets(catch_up=catch_up))
        return await dispatcher.bindings.bind("ns", "p3", "u-p3", "n0")

    assert asyncio.run(bind_p3()) is None
    assert again.bindings == ["p3"]


@pytest.mark.parametrize("answer", [
    ApiError(429, "TooManyRequests", "slow down"),
    ApiError(409, "Conflict", "pod p1 is already assigned to node n1"),
    ApiError(422, "Invalid", "no"),
], ids=["429", "409", "422"])
def test_an_answer_that_says_what_the_server_did_leaves_the_gate_open(
        answer: BaseException) -> None:
    manager = two_plain_pods()
    kube = FailsFirstAfterAMoment(answer)
    catch_up = CatchUpRequests()
    _, p2 = bind_both(manager, kube, catch_up)
    assert p2 is None and "p2" in kube.bindings
    assert catch_up.count == 0


def test_without_an_informer_to_catch_up_nothing_is_held() -> None:
    """Tests and benchmarks with no informer: a lost answer marks nothing behind, since
    nothing would ever catch it up (the retry and read-back are as before)."""
    manager = two_plain_pods()
    kube = FailsFirstAfterAMoment(httpx.ConnectError("refused"))
    _, p2 = bind_both(manager, kube, None)
    assert p2 is None and "p2" in kube.bindings

"""Bindings that fail after the barrier opened, and evictions of a partial gang, at the
dispatcher: what is transient is tried again, what is not is answered at once."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from extender.core.manager import GangManager
from extender.core.model.types import NodeInfo, PodInfo
from extender.core.model.vocabulary import (
    BindOutcome,
    EvictPods,
    PodRef,
    Report,
    StatusChanged,
)
from extender.kube.client import ApiError
from extender.scheduler.dispatch import Dispatcher, Outlets
from extender.scheduler.evictions import EvictionConfig, Evictions
from tests.scheduler.fakes import ScriptedKube


def plain_pod_bind(kube: ScriptedKube) -> str | None:
    """Bind one plain pod through the dispatcher, against `kube`; the pod is never left
    in flight, whatever the answer."""
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    pod = PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1}, scheduler_name="gang-scheduler")
    manager.on_pod(pod, 0.0)
    dispatcher = Dispatcher(manager, kube, clock=lambda: 0.0)
    error = asyncio.run(dispatcher.bindings.bind("ns", "p", "u1", "n0"))
    assert not manager.reads.bind_in_flight("u1") and manager.reads.binds_in_progress() == []
    return error


# What the extender's transport (extender/kube/transport.py) raises when the connection
# fails: httpx's exceptions, none of them an OSError.
TRANSPORT_FAILURES = [
    httpx.ConnectError("connecting to 127.0.0.1:6443: [Errno 111] Connection refused"),
    httpx.ConnectTimeout("connecting to 127.0.0.1:6443 timed out"),
    httpx.ReadError("request failed: ConnectionResetError(104, 'Connection reset by peer')"),
    httpx.RemoteProtocolError("server disconnected without sending a response (a POST is "
                              "not resent)"),
    httpx.ReadTimeout("timed out waiting for the response"),
    httpx.WriteTimeout("timed out sending the request"),
]


def err(status: int) -> ApiError:
    return ApiError(status, "Reason", f"status {status}")


@pytest.mark.parametrize("transient", [err(503), err(429), err(500), ConnectionResetError(),
                                       *TRANSPORT_FAILURES], ids=repr)
def test_a_transient_binding_failure_is_tried_again(transient: BaseException) -> None:
    kube = ScriptedKube([transient, transient, None])
    assert plain_pod_bind(kube) is None
    assert [c for c, _ in kube.calls] == ["bind", "bind", "bind"]


def test_transient_failures_give_up_after_three_attempts() -> None:
    """And then read the pod back: unbound, so none of them took effect."""
    kube = ScriptedKube([err(503)] * 5)
    error = plain_pod_bind(kube)
    assert error is not None and "503" in error
    assert [c for c, _ in kube.calls] == ["bind", "bind", "bind", "get_pod"]


def test_a_binding_whose_last_answer_was_lost_is_read_back_bound() -> None:
    """Three resets, the first of which took effect (no 409 came back to tell): the pod
    read back is bound where we asked, so it is a success."""
    kube = ScriptedKube([ConnectionResetError()] * 3, node_of_pod="n0")
    assert plain_pod_bind(kube) is None
    assert [c for c, _ in kube.calls] == ["bind", "bind", "bind", "get_pod"]


def test_a_binding_of_unknown_outcome_keeps_the_pods_capacity() -> None:
    """Three resets, and the pod cannot be read back either: it may be bound. The
    manager is told so, and keeps its capacity charged until the pod is seen."""
    kube = ScriptedKube([ConnectionResetError()] * 3,
                        get_pod_errors=[TRANSPORT_FAILURES[0]] * 2)
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    pod = PodInfo("u1", "ns", "p", {"cpu": 3000, "pods": 1}, scheduler_name="gang-scheduler")
    manager.on_pod(pod, 0.0)
    error = asyncio.run(Dispatcher(manager, kube, clock=lambda: 0.0).bindings.bind("ns", "p", "u1",
                                                                          "n0"))
    assert error is not None and "not known" in error
    assert not manager.reads.bind_in_flight("u1")
    other = PodInfo("u2", "ns", "q", {"cpu": 3000, "pods": 1}, scheduler_name="gang-scheduler")
    manager.on_pod(other, 0.0)
    assert manager.bind("ns", "q", "u2", "n0", 0.0).outcome is BindOutcome.ERROR


@pytest.mark.parametrize("status", [404, 422, 403])
def test_a_final_binding_failure_is_answered_at_once(status: int) -> None:
    kube = ScriptedKube([err(status)])
    error = plain_pod_bind(kube)
    assert error is not None and str(status) in error
    assert len(kube.calls) == 1


def test_a_request_httpx_refused_to_send_is_final() -> None:
    kube = ScriptedKube([httpx.UnsupportedProtocol("unsupported scheme 'ftp'")] * 3)
    error = plain_pod_bind(kube)
    assert error is not None and "UnsupportedProtocol" in error and len(kube.calls) == 1


@pytest.mark.parametrize("lost", [ConnectionResetError(), *TRANSPORT_FAILURES[2:4]], ids=repr)
def test_a_resent_binding_that_had_taken_effect_is_a_success(lost: BaseException) -> None:
    """The first Binding reached the API server but its answer was lost: the second gets
    409, and the pod is bound where we asked, so that is success, not an error."""
    kube = ScriptedKube([lost, err(409)], node_of_pod="n0")
    assert plain_pod_bind(kube) is None
    assert [c for c, _ in kube.calls] == ["bind", "bind", "get_pod"]


def test_a_409_bound_elsewhere_is_final() -> None:
    kube = ScriptedKube([err(409)], node_of_pod="n9")
    error = plain_pod_bind(kube)
    assert error is not None and "409" in error and len(kube.calls) == 2


@pytest.mark.parametrize("failure", [TRANSPORT_FAILURES[2], err(500), RuntimeError("bug")],
                         ids=repr)
def test_a_failed_look_at_the_pod_after_a_409_is_tried_again(failure: BaseException) -> None:
    """It was left in flight for good before (its gang's reservation with it): the
    failed look escaped the dispatcher and `binding_finished` never ran."""
    kube = ScriptedKube([err(409), err(409)], node_of_pod="n0", get_pod_errors=[failure])
    assert plain_pod_bind(kube) is None
    assert [c for c, _ in kube.calls] == ["bind", "get_pod", "bind", "get_pod"]


def test_a_look_at_the_pod_that_keeps_failing_is_answered_and_the_pod_not_left_in_flight(
) -> None:
    kube = ScriptedKube([err(409)] * 3, get_pod_errors=[TRANSPORT_FAILURES[0]] * 3)
    error = plain_pod_bind(kube)
    assert error is not None and "reading the pod: ConnectError" in error, error
    assert len(kube.calls) == 7  # and the pod read back once more after the last: unbound


def test_a_binding_cut_off_mid_request_does_not_leave_the_pod_in_flight() -> None:
    """Whatever ends a Binding (here its task is cancelled, as at shutdown), the gang
    manager hears of it."""
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    manager.on_pod(PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1},
                           scheduler_name="gang-scheduler"), 0.0)
    posted = asyncio.Event()

    class Hanging(ScriptedKube):
        async def bind(self, namespace: str, name: str, uid: str, node: str,
                       decided_at: float | None = None) -> None:
            posted.set()
            await asyncio.sleep(3600)

    dispatcher = Dispatcher(manager, Hanging([]), clock=lambda: 0.0)

    async def run() -> None:
        task = asyncio.create_task(dispatcher.bindings.bind("ns", "p", "u1", "n0"))
        await posted.wait()
        assert manager.reads.bind_in_flight("u1")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert not manager.reads.bind_in_flight("u1") and manager.reads.binds_in_progress() == []


def test_a_reset_binding_through_the_real_transport_is_tried_again() -> None:
    """The extender's own client (`make_kube`'s writer on AsyncioTransport) against a
    server that drops the first Binding's connection without an answer."""
    from extender.kube.client import Kube, _Writer
    from extender.kube.transport import AsyncioTransport
    from tests.kube.raw_server import Peer, response, serve

    async def handler(peer: Peer) -> None:
        req = await peer.request()
        if req is None:
            return
        if peer.index == 0:
            peer.reset()  # the first Binding: connection reset, no answer
            return
        await peer.send(response(b'{"kind":"Status","status":"Success"}', 201, b"Created"))

    async def run() -> tuple[str | None, int]:
        async with serve(handler) as (server, url):
            transport = AsyncioTransport()
            http = httpx.AsyncClient(base_url=url, transport=transport)
            kube = Kube(http, _Writer.for_client(http, transport, 2.0))
            manager = GangManager()
            manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
            manager.on_pod(PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1},
                                   scheduler_name="gang-scheduler"), 0.0)
            error = await Dispatcher(manager, kube, clock=lambda: 0.0).bindings.bind(
                "ns", "p", "u1", "n0")
            await http.aclose()
            return error, len(server.requests)

    error, posts = asyncio.run(run())
    assert (error, posts) == (None, 2)


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

    async def run() -> None:
        ev.add(EvictPods("ns/low", (PodRef("ns", "low-0", "u0"),), "preempted",
                         preemptor="ns/high"), lambda uid, error: answers.append((uid, error)))
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


def test_a_victim_with_no_attempt_allowed_is_refused_saying_why() -> None:
    kube = ScriptedKube([])
    answers: list[tuple[str, str | None]] = []
    ev = Evictions(kube, EvictionConfig(preemption_attempts=0))

    async def run() -> None:
        ev.add(EvictPods("ns/low", (PodRef("ns", "low-0", "u0"),), "preempted",
                         preemptor="ns/high"), lambda uid, error: answers.append((uid, error)))
        await ev.idle()

    asyncio.run(run())
    assert kube.calls == []
    assert answers == [("u0", "no attempt allowed (preemption_attempts is 0)")]


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
    assert [r.held for r in manager.reads.reservations()] == ["preemption"]
    kube = ScriptedKube([err(429), err(429)])
    evictions = Evictions(kube)
    reports: list[Report] = []  # what the status writer and Events are told
    dispatcher = Dispatcher(manager, kube, clock=lambda: 1.0,
                            outlets=Outlets(evictions=evictions, on_report=reports.append))

    async def run() -> None:
        dispatcher.drain()  # the EvictPods go to the evictions adapter
        await evictions.idle()

    asyncio.run(run())
    assert [c for c in kube.calls if c[0] == "evict"]
    assert not manager.reads.reservations()  # given up: it chooses others, or waits
    (st,) = [r.status for r in reports
             if isinstance(r, StatusChanged) and r.gang == "ns/high"][-1:]
    assert st is not None and "refused" in st.message


def test_a_retry_refused_after_a_lost_answer_reads_the_pod_back() -> None:
    """The first try's answer was lost and the retry is refused (the pod's node filled
    meanwhile, a watch broke): the first may have bound the pod, so the pod is read back
    before its capacity is given back; here it is bound where we asked, a success."""
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    manager.on_pod(PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1},
                           scheduler_name="gang-scheduler"), 0.0)

    class BrokenWatchOnFirstTry(ScriptedKube):
        async def bind(self, namespace: str, name: str, uid: str, node: str,
                       decided_at: float | None = None) -> None:
            manager.watch_broken("pods")  # the retry is refused: a watch is behind
            await super().bind(namespace, name, uid, node)

    kube = BrokenWatchOnFirstTry([ConnectionResetError()], node_of_pod="n0")
    error = asyncio.run(Dispatcher(manager, kube, clock=lambda: 0.0).bindings.bind("ns", "p", "u1",
                                                                          "n0"))
    assert error is None
    assert [c for c, _ in kube.calls] == ["bind", "get_pod"]


def test_every_action_of_the_vocabulary_has_its_route() -> None:
    """The dispatcher's routes are a table made once, in its constructor, Bindings
    included (to the binding cycle): an action kind added to the vocabulary without a
    route there would fail in `drain`, so the table is checked whole against the
    vocabulary's `Action`."""
    import typing

    from extender.core.model.vocabulary import Action, BindPod, RejectWaitingBind

    dispatcher = Dispatcher(GangManager(), None)
    routes = dispatcher._routes
    assert set(typing.get_args(Action)) == set(routes)
    assert routes[BindPod] == dispatcher.bindings.take
    assert routes[RejectWaitingBind] == dispatcher.bindings.reject

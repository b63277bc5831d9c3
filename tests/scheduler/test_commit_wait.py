"""The commit wait: a member's filter call, answered with its node, is held until the
Bindings its gang's commit made come back through the watch (so kube-scheduler's queue,
fed by its own watch, drops those members instead of running a cycle for each), and no
longer than `DispatchConfig.commit_wait`; a Binding that fails ends the wait for its pod.
The member whose call set the commit off is bound only when kube-scheduler asks (its bind
request), or a second later: bound before kube-scheduler assumed it, its cycle would fail.
A member turned away although bound (its node not among those kube-scheduler sampled) is
held the same way before its answer, so that the members after it land unseen.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.kube.client import ApiError
from extender.reporting.metrics import Metrics
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Outlets
from tests.scheduler.fakes import RecordingKube, add_gang, sampled


class RefusingKube(RecordingKube):
    """Answers every Binding at once, except the one pod it refuses."""

    def __init__(self, refuse: str = "") -> None:
        super().__init__()
        self.refuse = refuse

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        if name == self.refuse:
            raise ApiError(422, "Unprocessable", "node name is invalid")
        await super().bind(namespace, name, uid, node)


def setup(commit_wait: float, refuse: str = "") -> tuple[
        dict[str, Any], GangManager, list[dict[str, Any]], RefusingKube, Dispatcher, Metrics]:
    base, manager = sampled(Config(direct_commit=True))
    pods = add_gang(manager, base, "trio", 3)
    kube = RefusingKube(refuse)
    metrics = Metrics()
    dispatcher = Dispatcher(manager, kube, config=DispatchConfig(commit_wait=commit_wait),
                            outlets=Outlets(on_commit_wait=metrics.on_commit_wait))
    return base, manager, pods, kube, dispatcher, metrics


def waits(metrics: Metrics, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "gang_extender_commit_wait_seconds_count", {"outcome": outcome})
    return value or 0.0


def watch_delivers_bound(manager: GangManager, dispatcher: Dispatcher, pod: dict[str, Any],
                         node: str) -> None:
    """The watch event of `pod` bound to `node`, applied as the informer applies it."""
    bound = json.loads(json.dumps(pod))
    bound["spec"]["nodeName"] = node
    manager.on_pod(pod_from_k8s(bound), time.time())
    dispatcher.cache_changed()


async def bindings_returned(kube: RecordingKube, count: int) -> None:
    """Let the dispatcher run until `count` Bindings have returned (at most a second)."""
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(kube.bindings) == count:
            return


async def trio_1_bound_while_others_land(
        base: dict[str, Any], manager: GangManager, pods: list[dict[str, Any]],
        kube: RefusingKube, dispatcher: Dispatcher,
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The tick commits trio and the watch delivers trio-1 bound; then it commits a new
    gang, duo, whose Bindings return unseen by the watch, as do trio's other two.
    Returns every pod's node and duo's pods."""
    manager.tick(time.time())
    dispatcher.drain()
    await bindings_returned(kube, 3)
    nodes = {name: node for _, name, _, node in kube.bindings}
    watch_delivers_bound(manager, dispatcher, pods[1], nodes["trio-1"])
    duo = add_gang(manager, base, "duo", 2)
    manager.tick(time.time())
    dispatcher.drain()
    await bindings_returned(kube, 5)
    return {name: node for _, name, _, node in kube.bindings}, duo


def test_the_filter_answers_once_the_watch_has_delivered_every_committed_member() -> None:
    base, manager, pods, kube, dispatcher, metrics = setup(commit_wait=30)

    async def go() -> None:
        call = asyncio.create_task(dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"]))
        await bindings_returned(kube, 2)
        # The other two Bindings have returned, but the watch has not delivered them.
        assert sorted(b[1] for b in kube.bindings) == ["trio-1", "trio-2"]
        assert not call.done()
        assert [(w["pod"], w["for"]) for w in dispatcher.filter_waits()] == [
            ("default/trio-0", "commit")]
        nodes = {name: node for _, name, _, node in kube.bindings}
        watch_delivers_bound(manager, dispatcher, pods[1], nodes["trio-1"])
        await asyncio.sleep(0.02)
        assert not call.done()  # trio-2 is still unseen
        watch_delivers_bound(manager, dispatcher, pods[2], nodes["trio-2"])
        result = await asyncio.wait_for(call, 5)
        assert len(result.nodes) == 1 and dispatcher.filter_waits() == []
        # trio-0 itself is bound when kube-scheduler, having assumed it, asks.
        assert "trio-0" not in [b[1] for b in kube.bindings]
        answer = await dispatcher.bindings.bind("default", "trio-0", "uid-trio-0", result.nodes[0])
        assert answer is None and ("default", "trio-0", "uid-trio-0", result.nodes[0]) in (
            kube.bindings)

    started = time.monotonic()
    asyncio.run(go())
    assert time.monotonic() - started < 5  # ended by the watch, not by the 30 s limit
    assert (waits(metrics, "landed"), waits(metrics, "timed_out")) == (1, 0)


def test_the_wait_ends_at_its_limit_when_the_watch_does_not_deliver() -> None:
    base, _, pods, kube, dispatcher, metrics = setup(commit_wait=0.3)

    async def go() -> tuple[float, list[str]]:
        result = await dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"])
        waited = time.monotonic() - started
        assert len(kube.bindings) == 2  # trio-0's waits for kube-scheduler's bind request
        # No bind request comes (its cycle failed): bound a second later all the same.
        for _ in range(300):
            await asyncio.sleep(0.01)
            if len(kube.bindings) == 3:
                break
        await dispatcher.idle()
        return waited, result.nodes

    started = time.monotonic()
    waited, nodes = asyncio.run(go())
    assert 0.25 <= waited < 3
    assert len(nodes) == 1 and sorted(b[1] for b in kube.bindings) == [
        "trio-0", "trio-1", "trio-2"]
    assert (waits(metrics, "landed"), waits(metrics, "timed_out")) == (0, 1)


def test_a_failed_binding_ends_the_wait_for_its_pod() -> None:
    base, manager, pods, kube, dispatcher, metrics = setup(commit_wait=30, refuse="trio-2")

    async def go() -> None:
        call = asyncio.create_task(dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"]))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(kube.bindings) == 1 and not manager.reads.bind_in_flight("uid-trio-2"):
                break
        assert not call.done()
        nodes = {name: node for _, name, _, node in kube.bindings}
        # trio-1 comes back bound; the refused trio-2 never does.
        watch_delivers_bound(manager, dispatcher, pods[1], nodes["trio-1"])
        await asyncio.wait_for(call, 5)
        await dispatcher.idle()

    started = time.monotonic()
    asyncio.run(go())
    assert time.monotonic() - started < 5
    assert waits(metrics, "landed") == 1


def test_no_wait_when_turned_off() -> None:
    base, manager, pods, _, dispatcher, metrics = setup(commit_wait=0)

    async def go() -> None:
        result = await dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"])
        assert len(result.nodes) == 1
        await dispatcher.idle()

    asyncio.run(go())
    assert manager.reads.landing("default/trio")  # committed and unseen, but the wait is off
    assert (waits(metrics, "landed"), waits(metrics, "timed_out")) == (0, 0)


class GatedKube(RecordingKube):
    """Holds every Binding until `gate` is set, as an API server busy with a big
    commit's others would."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.sent: list[str] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        self.sent.append(name)
        await self.gate.wait()
        await super().bind(namespace, name, uid, node)


def test_a_member_whose_binding_is_still_queued_is_held_like_the_one_that_set_the_commit_off(
        ) -> None:
    """kube-scheduler takes a member through a cycle while the commit's Bindings queue
    for a slot (one in flight here; 128 behind a 1,000-pod gang's). Its Binding is taken
    back and posted at its bind request, and its call holds kube-scheduler's loop while
    the rest land: answered at once with its Binding still queued, the loop would take
    the next member, and a Binding landing before the cycle assumed the pod fails it."""
    base, manager = sampled(Config(direct_commit=True))
    pods = add_gang(manager, base, "trio", 3)
    kube = GatedKube()
    dispatcher = Dispatcher(manager, kube, config=DispatchConfig(
        commit_wait=30, binding_concurrency=1))

    async def go() -> None:
        manager.tick(time.time())  # the tick commits the gang: no filter call is open
        dispatcher.drain()
        await asyncio.sleep(0.05)
        first = kube.sent[0]
        assert kube.sent == [first]  # one Binding sent, two queued behind it
        queued = next(p for p in pods if p["metadata"]["name"] != first)
        sent = next(p for p in pods if p["metadata"]["name"] == first)
        call = asyncio.create_task(dispatcher.filter(pod_from_k8s(queued), base["NodeNames"]))
        await asyncio.sleep(0.05)
        assert not call.done() and dispatcher.bindings.held.held(queued["metadata"]["uid"])
        # A member whose Binding is already sent is answered at once, as before.
        answer = await asyncio.wait_for(
            dispatcher.filter(pod_from_k8s(sent), base["NodeNames"]), 1)
        assert answer.nodes
        kube.gate.set()
        await bindings_returned(kube, 2)
        nodes = {name: node for _, name, _, node in kube.bindings}
        assert queued["metadata"]["name"] not in nodes  # taken back, not sent
        for p in pods:
            if p["metadata"]["name"] in nodes:
                assert not call.done()
                watch_delivers_bound(manager, dispatcher, p, nodes[p["metadata"]["name"]])
        result = await asyncio.wait_for(call, 5)
        assert queued["metadata"]["name"] not in [b[1] for b in kube.bindings]
        assert await dispatcher.bindings.bind("default", queued["metadata"]["name"],
                                     queued["metadata"]["uid"], result.nodes[0]) is None
        assert sorted(b[1] for b in kube.bindings) == ["trio-0", "trio-1", "trio-2"]
        await dispatcher.idle()

    asyncio.run(go())


def test_the_wait_covers_the_gangs_the_tick_commits_meanwhile() -> None:
    """On a loaded control plane the tick commits the next gangs while a call waits, and
    their members come next in kube-scheduler's queue: released when only its own gang
    had landed, the loop took a cycle for each of them (all 16 members of a gang, in
    13 of 45 gangs of a 100-node run)."""
    base, manager, pods, kube, dispatcher, _ = setup(commit_wait=30)

    async def go() -> None:
        call = asyncio.create_task(dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"]))
        await bindings_returned(kube, 2)
        duo = add_gang(manager, base, "duo", 2)
        manager.tick(time.time())
        dispatcher.drain()
        await bindings_returned(kube, 4)
        nodes = {name: node for _, name, _, node in kube.bindings}
        assert sorted(nodes) == ["duo-0", "duo-1", "trio-1", "trio-2"]
        for p in pods[1:]:
            watch_delivers_bound(manager, dispatcher, p, nodes[p["metadata"]["name"]])
        await asyncio.sleep(0.05)
        assert not call.done()  # its own gang has landed; duo's members have not
        for p in duo:
            watch_delivers_bound(manager, dispatcher, p, nodes[p["metadata"]["name"]])
        result = await asyncio.wait_for(call, 5)
        assert await dispatcher.bindings.bind("default", "trio-0", "uid-trio-0",
                                              result.nodes[0]) is None
        await dispatcher.idle()

    asyncio.run(go())


def test_a_member_already_bound_is_answered_at_once_while_others_land() -> None:
    """kube-scheduler took a member through a cycle after its Binding came back and the
    watch delivered it: its informer is about to, and a held call would then fail at
    assume. So it is not held for the commits landing meanwhile."""
    base, manager, pods, kube, dispatcher, _ = setup(commit_wait=30)

    async def go() -> None:
        nodes, _ = await trio_1_bound_while_others_land(base, manager, pods, kube, dispatcher)
        assert manager.reads.landing(None)  # trio's other two and duo's are landing
        result = await asyncio.wait_for(
            dispatcher.filter(pod_from_k8s(pods[1]), base["NodeNames"]), 0.05)
        assert result.nodes == [nodes["trio-1"]]
        await dispatcher.idle()

    asyncio.run(go())


def test_a_member_whose_call_commits_its_gang_is_given_a_node_the_call_passed() -> None:
    """kube-scheduler passes a sample of the nodes. The call that sets the commit off
    holds its member's Binding for the bind request, so the commit puts that member on a
    node of the sample: elsewhere the call would turn it away, and the held Binding would
    wait for its timer (two seconds) before its gang could start."""

    async def first_answer(names: list[str] | None) -> tuple[list[str], RefusingKube]:
        base, _, pods, kube, dispatcher, _ = setup(commit_wait=0.2)
        result = await dispatcher.filter(pod_from_k8s(pods[0]), names or base["NodeNames"])
        await dispatcher.idle()
        return result.nodes, kube

    planned, _ = asyncio.run(first_answer(None))
    base, *_ = setup(commit_wait=0.2)
    passed = [n for n in base["NodeNames"] if n not in planned]
    nodes, kube = asyncio.run(first_answer(passed))
    assert len(nodes) == 1 and nodes[0] in passed
    assert "trio-0" not in [b[1] for b in kube.bindings]  # held for its bind request


def test_a_bound_member_turned_away_holds_the_loop_until_the_commits_land() -> None:
    """On a large cluster kube-scheduler passes a sample of the nodes, and pops members
    the tick's commits have bound before its informer has them. One whose node is not in
    the sample must be turned away (the cycle fails whatever the answer); answered at
    once, kube-scheduler popped the next bound member and failed it too: 35 of 1,000 pods
    at 5,000 nodes, each with a FailedScheduling Event and PodScheduled=False. Held until
    the commits under way land, its queue drops them unseen."""
    base, manager, pods, kube, dispatcher, _ = setup(commit_wait=30)

    async def go() -> None:
        nodes, duo = await trio_1_bound_while_others_land(base, manager, pods, kube,
                                                          dispatcher)
        elsewhere = [n for n in base["NodeNames"] if n != nodes["trio-1"]]
        call = asyncio.create_task(dispatcher.filter(pod_from_k8s(pods[1]), elsewhere))
        await asyncio.sleep(0.05)
        assert not call.done()  # trio's other two and duo's are landing
        for p in [pods[0], pods[2], *duo]:
            watch_delivers_bound(manager, dispatcher, p, nodes[p["metadata"]["name"]])
        result = await asyncio.wait_for(call, 5)
        assert result.nodes == []
        (why,) = set(result.unresolvable.values())
        assert "already bound to node " + nodes["trio-1"] in why
        # Nothing landing: turned away at once.
        result = await asyncio.wait_for(
            dispatcher.filter(pod_from_k8s(pods[1]), elsewhere), 0.05)
        assert result.nodes == []
        await dispatcher.idle()

    asyncio.run(go())

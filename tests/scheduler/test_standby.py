"""What a standby holds back (extender/kube/leader.py): it answers every verb with the
standby error, and carries out no tick, Binding, wake-up, status write or Event; between
a loss and the exit, Bindings already in flight are let finish.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import GroupInfo
from extender.core.model.vocabulary import (
    Action,
    DeleteRequest,
    EvictPods,
    PodRef,
    ProtectNode,
    ProvisioningAction,
    WakePods,
)
from extender.core.wiring import Core
from extender.kube.leader import Leadership
from extender.kube.recorder import EventRecorder, ObjectRef
from extender.reporting.metrics import GaugeSources, Metrics
from extender.reporting.status import StatusConfig, StatusWriter
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Gates, Outlets
from extender.scheduler.evictions import Answer, Evictions
from extender.scheduler.http import create_app, with_fast_verbs
from extender.scheduler.provisioner import Provisioner
from extender.scheduler.wakeups import Wakeups
from tests.kube.leases import lease
from tests.scheduler.fakes import (
    RecordingKube,
    ScriptedKube,
    add_gang,
    leadership,
    member,
    sampled,
    standby,
)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-verbs", "fastapi-routes"])
def test_standby_answers_every_verb_with_the_standby_error_and_changes_nothing(
        fast: bool) -> None:
    base, manager = sampled()
    pods = add_gang(manager, base, "pair", 2)
    kube = RecordingKube()
    metrics = Metrics()

    async def go() -> None:
        leader = standby()
        dispatcher = Dispatcher(manager, kube, config=DispatchConfig(bind_wait_limit=5),
                                gates=Gates(leader=leader))
        app = create_app(dispatcher, metrics,
                         gauges=GaugeSources(leader_active=lambda: leader.active))
        served = with_fast_verbs(app) if fast else app
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=served),
                                   base_url="http://t")
        error = ("gang-extender me is on standby: its kube-scheduler does not hold lease "
                 "ns/gang-scheduler (holder: other_1)")
        args = {"Pod": pods[0], "Nodes": None, "NodeNames": base["NodeNames"]}
        r = await client.post("/filter", json=args)
        assert r.status_code == 200
        assert r.json() == {"NodeNames": None, "Nodes": None, "FailedNodes": {},
                            "FailedAndUnresolvableNodes": {}, "Error": error}
        r = await client.post("/prioritize", json=args)
        assert (r.status_code, r.json()) == (200, {"Error": error})
        r = await client.post("/bind", json={"PodName": "pair-0", "PodNamespace": "default",
                                             "PodUID": "uid-pair-0",
                                             "Node": base["NodeNames"][0]})
        assert (r.status_code, r.json()) == (200, {"Error": error})
        # Even a body it cannot read gets the standby error, not a parse error.
        r = await client.post("/filter", content=b"{not json")
        assert r.json()["Error"] == error
        assert manager.reads.reservations() == () and manager.reads.binds_in_progress() == []
        assert kube.bindings == []
        assert (await client.get("/debug/gangs")).json()["leader"]["mode"] == "standby"
        text = (await client.get("/metrics")).text
        assert "gang_extender_leader 0.0" in text
        assert 'gang_extender_verb_duration_seconds_count{result="standby",verb="filter"} 2.0' \
            in text
        assert (await client.get("/readyz")).status_code == 200  # readiness is the watches

        # Its kube-scheduler takes the lease: the same calls now place the gang.
        leader.observe(lease("me_2", time.time()))
        r = await client.post("/filter", json=args)
        assert r.json()["Error"] == "" and len(r.json()["NodeNames"]) == 1
        assert len(manager.reads.reservations()) == 1
        assert "gang_extender_leader 1.0" in (await client.get("/metrics")).text
        await client.aclose()

    asyncio.run(go())


def trio() -> tuple[dict[str, Any], GangManager, list[dict[str, Any]], RecordingKube]:
    """The gang trio of 3 pods on the sampled nodes, its reservations timing out after
    0.3 s and its binds waiting at the barrier, and a kube that records what it is sent:
    the start of the test of a loss and of its control."""
    base, manager = sampled(Config(default_timeout_seconds=0.3, direct_commit=False))
    return base, manager, add_gang(manager, base, "trio", 3), RecordingKube()


def ticking_every_20ms(manager: GangManager, kube: RecordingKube, leader: Leadership
                       ) -> tuple[Wakeups, Dispatcher]:
    """Wake-ups, and a dispatcher sending them whose tick loop runs every 20 ms while
    `leader` is active."""
    wakeups = Wakeups(manager.reads, kube, time.time)
    return wakeups, Dispatcher(manager, kube, DispatchConfig(tick_interval=0.02),
                               outlets=Outlets(wakeups=wakeups), gates=Gates(leader=leader))


def test_after_losing_leadership_no_deadline_expires_no_binding_or_wakeup_goes_out() -> None:
    """Between the loss and the exit: the tick loop stops, a commit a watch event sets off
    creates no Binding (the held binds are answered with the standby error), and
    wake-ups are dropped."""
    base, manager, pods, kube = trio()

    async def go() -> None:
        leader = leadership("me_1")
        wakeups, dispatcher = ticking_every_20ms(manager, kube, leader)
        names = base["NodeNames"]
        nodes = [(await dispatcher.filter(pod_from_k8s(p), names)).nodes[0] for p in pods[:2]]
        held = [asyncio.create_task(dispatcher.bindings.bind(
            "default", f"trio-{i}", f"uid-trio-{i}", nodes[i])) for i in range(2)]
        await asyncio.sleep(0.05)
        assert len(manager.reads.binds_in_progress()) == 2 and kube.bindings == []

        leader.observe(lease("other_1", time.time()))  # lost
        assert not leader.active
        ticking = asyncio.create_task(dispatcher.tick_loop())
        await asyncio.sleep(0.6)  # twice the deadline
        assert len(manager.reads.reservations()) == 1, "a deadline expired on standby"
        # minMember lowered to 2: the gang is complete, but no Binding goes out.
        manager.on_group(GroupInfo("default", "trio", 2, uid="g1"), time.time())
        dispatcher.cache_changed()
        answers = await asyncio.gather(*held)
        assert kube.bindings == []
        assert all(a is not None and "is on standby" in a for a in answers)
        # A wake-up the core asks for is not sent.
        manager.on_group(GroupInfo("default", "woken", 1, uid="g2"), time.time())
        manager.on_pod(pod_from_k8s(member(base, "woken", 0, unschedulable=True)),
                       time.time())
        manager.tick(time.time())  # as the tick loop would, were it active
        dispatcher.drain()
        sender = asyncio.create_task(wakeups.run())
        await asyncio.sleep(0.1)
        assert kube.patches == []
        ticking.cancel()
        sender.cancel()

    asyncio.run(go())


def test_an_active_replica_does_expire_deadlines_and_wake_pods() -> None:
    """The control for the test above: the same steps while active."""
    base, manager, pods, kube = trio()

    async def go() -> None:
        leader = leadership("me_1")
        wakeups, dispatcher = ticking_every_20ms(manager, kube, leader)
        await dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"])
        assert len(manager.reads.reservations()) == 1
        ticking = asyncio.create_task(dispatcher.tick_loop())
        await asyncio.sleep(0.6)
        assert manager.reads.reservations() == ()
        manager.on_group(GroupInfo("default", "woken", 1, uid="g2"), time.time())
        manager.on_pod(pod_from_k8s(member(base, "woken", 0, unschedulable=True)),
                       time.time())
        sender = asyncio.create_task(wakeups.run())
        await asyncio.sleep(0.2)
        assert any("woken-0" in path for path, _ in kube.patches)
        ticking.cancel()
        sender.cancel()

    asyncio.run(go())


class Writes:
    def __init__(self) -> None:
        self.patches: list[str] = []
        self.events: list[dict[str, Any]] = []

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self.patches.append(path)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return {"metadata": {"name": f"e{len(self.events)}"}}


def test_standby_writes_no_status_and_posts_no_event() -> None:
    manager = GangManager(Core.wire())
    manager.on_group(GroupInfo("ns", "g", 2, uid="u1", creation=time.time() - 60),
                     time.time())
    api = Writes()
    active = [False]
    recorder = EventRecorder(api, active=lambda: active[0], instance="replica-a")
    writer = StatusWriter(manager.reads, api, config=StatusConfig(settle=0, loop_interval=0.02))
    writer.observe_group({"metadata": {"namespace": "ns", "name": "g", "uid": "u1"}})
    ref = ObjectRef("PodGroup", "scheduling.x-k8s.io/v1alpha1", "ns", "g", "u1")

    async def go() -> None:
        tasks = [asyncio.create_task(writer.run(lambda: active[0])),
                 asyncio.create_task(recorder.run())]
        recorder.record(ref, "Reserved", "on standby")
        await asyncio.sleep(0.2)
        assert api.patches == [] and api.events == []
        assert recorder.debug()["pending"] == 0  # nothing kept to be posted later
        active[0] = True
        recorder.record(ref, "Reserved", "active")
        await asyncio.sleep(0.3)
        assert api.patches == ["/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/"
                               "g/status"]
        assert [(e["message"], e["reportingInstance"]) for e in api.events] == [
            ("active", "replica-a")]
        for t in tasks:
            t.cancel()

    asyncio.run(go())


def test_bindings_in_flight_are_let_finish_before_the_exit() -> None:
    base, manager = sampled()
    release = asyncio.Event()

    class SlowKube(RecordingKube):
        async def bind(self, namespace: str, name: str, uid: str, node: str,
                       decided_at: float | None = None) -> None:
            await release.wait()
            await super().bind(namespace, name, uid, node)

    async def go() -> None:
        kube = SlowKube()
        dispatcher = Dispatcher(manager, kube)
        plain = dict(base["Pod"], metadata={**base["Pod"]["metadata"], "name": "solo",
                                            "uid": "uid-solo"})
        manager.on_pod(pod_from_k8s(plain), time.time())
        node = (await dispatcher.filter(pod_from_k8s(plain), base["NodeNames"])).nodes[0]
        bind = asyncio.create_task(dispatcher.bindings.bind("default", "solo", "uid-solo", node))
        await asyncio.sleep(0.05)
        assert await dispatcher.bindings.settled(0.1) == 1  # still in flight: gave up
        asyncio.get_running_loop().call_later(0.1, release.set)
        assert await dispatcher.bindings.settled(5) == 0
        assert await bind is None and len(kube.bindings) == 1

    asyncio.run(go())


def test_held_binds_are_answered_with_an_error_before_the_exit() -> None:
    base, manager = sampled()
    pods = add_gang(manager, base, "trio", 3)

    async def go() -> None:
        kube = RecordingKube()
        dispatcher = Dispatcher(manager, kube)
        nodes = [(await dispatcher.filter(pod_from_k8s(p), base["NodeNames"])).nodes[0]
                 for p in pods[:2]]
        held = [asyncio.create_task(dispatcher.bindings.bind(
            "default", f"trio-{i}", f"uid-trio-{i}", nodes[i])) for i in range(2)]
        await asyncio.sleep(0.05)
        assert dispatcher.bindings.answer_waiting("lost leadership") == 2
        assert await asyncio.gather(*held) == ["lost leadership", "lost leadership"]
        assert kube.bindings == [] and dispatcher.bindings.answer_waiting("x") == 0

    asyncio.run(go())


def test_a_standby_never_commits_a_gang_directly() -> None:
    """The direct commit binds without a bind request, so only the holding back of the
    tick and of every Binding keeps a standby from committing: a complete gang is never
    reserved there (no tick, no pass), and a commit a watch event sets off after the
    loss posts nothing: its Bindings are refused when the core asks for them, not handed
    to the poster (whose own gate would refuse them too, but counted as failed POSTs)."""
    base, manager = sampled(Config(direct_commit=True))
    now = time.time()
    manager.on_group(GroupInfo("default", "mixed", 3, uid="g2"), now)
    mixed = [member(base, "mixed", i) for i in range(3)]
    mixed[2]["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]
    for p in mixed:
        manager.on_pod(pod_from_k8s(p), now)
    kube = RecordingKube()

    async def go() -> None:
        leader = leadership("me_1")
        posts: list[str | None] = []  # the outcome of each Binding POST (the metric's)
        dispatcher = Dispatcher(manager, kube, config=DispatchConfig(tick_interval=0.02),
                                outlets=Outlets(on_binding=posts.append),
                                gates=Gates(leader=leader))
        # Active: a filter call reserves "mixed", which waits for its PVC member.
        await dispatcher.filter(pod_from_k8s(mixed[0]), base["NodeNames"])
        assert [r.gang for r in manager.reads.reservations()] == ["default/mixed"]
        assert kube.bindings == []
        leader.observe(lease("other_1", time.time()))  # lost
        # A complete gang arrives: with no pass on standby, it is never reserved.
        add_gang(manager, base, "idle", 2)
        ticking = asyncio.create_task(dispatcher.tick_loop())
        await asyncio.sleep(0.2)
        assert [r.gang for r in manager.reads.reservations()] == ["default/mixed"]
        # minMember lowered to 2: its two direct members are ready, and nothing is posted.
        manager.on_group(GroupInfo("default", "mixed", 2, uid="g2"), time.time())
        dispatcher.cache_changed()
        await dispatcher.idle()
        assert kube.bindings == [] and posts == []
        assert not any(b.in_flight for b in manager.reads.binds_in_progress())
        ticking.cancel()

    asyncio.run(go())


class Scripted(GangManager):
    """A gang manager whose next actions are given: which actions the core asks for is
    tested in tests/core; here, only where the dispatcher sends them."""

    def __init__(self, actions: list[Action]) -> None:
        super().__init__(Core.wire())
        self.actions = actions

    def take_actions(self) -> list[Action]:
        out, self.actions = self.actions, []
        return out


@pytest.mark.parametrize("holder", ["me_1", "other_1"], ids=["active", "standby"])
def test_a_standby_hands_no_eviction_wakeup_or_provisioning_action_to_its_writer(
        holder: str) -> None:
    """The dispatcher's routes are the gate of the writers fed by the core's actions:
    on standby (a watch event on a replica that never led, or one that lost its lease)
    nothing reaches them, so nothing is queued to be sent later. The active replica is
    the control."""
    pod = PodRef("ns", "p-0", "u0")
    actions: list[Action] = [
        EvictPods("ns/p", (pod,), "partial"), WakePods("gang complete", (pod,)),
        DeleteRequest("ns", "p-capacity", (), "gang deleted", "uid-r", "ns/p"),
        ProtectNode("n0", True, "ns/p")]
    handed: list[object] = []

    class Evicting(Evictions):
        def add(self, action: EvictPods, answer: Answer | None = None) -> None:
            handed.append(action)

    class Waking(Wakeups):
        def add(self, action: WakePods) -> None:
            handed.append(action)

    class Provisioning(Provisioner):
        def add(self, action: ProvisioningAction,
                changed: Callable[[], None] = lambda: None) -> None:
            handed.append(action)

    async def go() -> None:
        manager = Scripted(list(actions))
        outlets = Outlets(evictions=Evicting(ScriptedKube([])),
                          wakeups=Waking(manager.reads, None, time.time),
                          provisioner=Provisioning(manager, None))
        Dispatcher(manager, None, outlets=outlets,
                   gates=Gates(leader=leadership(holder))).drain()

    asyncio.run(go())
    assert handed == (actions if holder == "me_1" else [])

"""Supervised work (extender/scheduler/supervise.py): loops that survive a raising
iteration, a task whose end is fatal, /healthz that follows the tick loop, the event
loop lag monitor, and verbs that wait for the first lists."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import httpx
import pytest

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import PodRef, WakePods
from extender.core.wiring import Core
from extender.kube.leader import Leadership
from extender.reporting.metrics import Metrics
from extender.reporting.status import StatusHooks, StatusWriter
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Gates
from extender.scheduler.http import NOT_SYNCED, create_app, with_fast_verbs
from extender.scheduler.supervise import (
    EXIT_TASK_ENDED,
    LagMonitor,
    LoopErrors,
    first_to_end,
    tick_faults_from_env,
)
from extender.scheduler.wakeups import WakeConfig, Wakeups
from tests.kube.leases import REF, lease

LABEL = "scheduling.x-k8s.io/pod-group"


def member(i: int, gang: str = "trio") -> PodInfo:
    return PodInfo(f"u{i}", "ns", f"{gang}-{i}", {"cpu": 1000, "pods": 1},
                   labels={LABEL: gang}, scheduler_name="gang-scheduler")


def gang_with_a_reservation(timeout: float) -> tuple[GangManager, float]:
    """A gang of 3 with 2 members placed: a reservation that expires after `timeout`."""
    manager = GangManager(Core.wire(Config(default_timeout_seconds=timeout,
                                           direct_commit=False)))
    manager.on_node(NodeInfo("n0", {"cpu": 8000, "pods": 10}))
    now = time.time()
    manager.on_group(GroupInfo("ns", "trio", 3, uid="g"), now)
    for i in range(3):
        manager.on_pod(member(i), now)
    for i in range(2):
        assert manager.filter(member(i), ["n0"], now).nodes == ["n0"]
    assert len(manager.reads.reservations()) == 1
    return manager, now


def raising(times: int, then: Callable[[float], None]) -> Callable[[float], None]:
    left = [times]

    def tick(now: float) -> None:
        if left[0] > 0:
            left[0] -= 1
            raise RuntimeError(f"tick broke ({left[0]} left)")
        then(now)

    return tick


# ----- a loop that raises goes on -----------------------------------------------------------


def test_a_raising_tick_is_logged_counted_and_the_loop_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """Without the guard the first exception ends the tick loop, and the reservation
    never expires."""
    manager, _ = gang_with_a_reservation(timeout=0.2)
    counted: list[str] = []
    manager.tick = raising(5, manager.tick)  # type: ignore[method-assign,assignment]

    async def go() -> None:
        dispatcher = Dispatcher(manager, None, config=DispatchConfig(tick_interval=0.01),
                                gates=Gates(tick_errors=LoopErrors("tick", counted.append)))
        loop = asyncio.create_task(dispatcher.tick_loop())
        deadline = time.monotonic() + 5
        while manager.reads.reservations() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not loop.done(), loop
        loop.cancel()

    with caplog.at_level(logging.ERROR, "gang-extender"):
        asyncio.run(go())
    assert manager.reads.reservations() == (), "the reservation never expired after the errors"
    assert counted == ["tick"] * 5
    # Rate-limited: the first error with its traceback, the next four only counted.
    logged = [r for r in caplog.records if "tick loop iteration failed" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert "tick broke (4 left)" in caplog.text


def test_loop_errors_log_once_per_window_and_say_how_many_were_not_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    errors = LoopErrors("wake", every=30.0, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, "gang-extender"):
        for t in (0.0, 1.0, 2.0, 31.0):
            now[0] = t
            errors.report(ValueError(f"at {t}"))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["wake loop iteration failed; going on",
                     "wake loop iteration failed (2 more since the last one logged); "
                     "going on"]
    assert errors.count == 4 and errors.consecutive == 4 and errors.last == "ValueError: at 31.0"
    errors.ok()
    assert errors.consecutive == 0


def test_a_wake_up_that_raises_is_reported_and_the_next_pod_is_still_woken() -> None:
    manager = GangManager()
    pods = [PodRef("ns", f"p{i}", f"u{i}") for i in range(3)]
    for p in pods:
        manager.on_pod(PodInfo(p.uid, p.namespace, p.name, {"cpu": 1, "pods": 1},
                               scheduler_name="gang-scheduler"), 0.0)
    still_pending = manager.reads.still_pending

    def flaky(uid: str) -> bool:
        if uid == "u0":
            raise KeyError(uid)
        return still_pending(uid)

    manager.reads.still_pending = flaky  # type: ignore[method-assign]
    patched: list[str] = []
    counted: list[str] = []

    class Kube:
        async def merge_patch(self, path: str, patch: dict[str, object]) -> None:
            patched.append(path.rsplit("/", 1)[1])

    async def go() -> None:
        wakeups = Wakeups(manager.reads, Kube(), time.time, WakeConfig(rate=1000),
                          loop_errors=LoopErrors("wake", counted.append))
        loop = asyncio.create_task(wakeups.run())
        wakeups.add(WakePods("test", tuple(pods)))
        for _ in range(100):
            if len(patched) == 2:
                break
            await asyncio.sleep(0.01)
        assert not loop.done()
        loop.cancel()

    asyncio.run(go())
    assert patched == ["p1", "p2"] and counted == ["wake"]


def test_a_status_round_that_raises_goes_through_the_loop_errors() -> None:
    counted: list[str] = []
    writer = StatusWriter(GangManager().reads, None,
                          hooks=StatusHooks(on_loop_error=counted.append))

    async def broken(active: Callable[[], bool] = lambda: True) -> int:
        raise RuntimeError("status broke")

    writer.step = broken  # type: ignore[method-assign]
    writer.config.loop_interval = 0.01

    async def go() -> None:
        loop = asyncio.create_task(writer.run())
        await asyncio.sleep(0.1)
        assert not loop.done()
        loop.cancel()

    asyncio.run(go())
    assert len(counted) >= 3 and set(counted) == {"podgroup-status"}
    assert writer.errors.last == "RuntimeError: status broke"


# ----- a task that ends is fatal -------------------------------------------------------------


@pytest.mark.parametrize(("body", "why"), [
    ("raise", "raised RuntimeError: boom"), ("return", "returned")])
def test_the_first_task_to_end_is_logged_and_gives_the_exit_status(
        body: str, why: str, caplog: pytest.LogCaptureFixture) -> None:
    async def forever() -> None:
        await asyncio.sleep(3600)

    async def ends() -> None:
        await asyncio.sleep(0.01)
        if body == "raise":
            raise RuntimeError("boom")

    async def go() -> int:
        tasks = [asyncio.create_task(forever(), name="tick"),
                 asyncio.create_task(ends(), name="wake")]
        try:
            return await asyncio.wait_for(first_to_end(tasks), 5)
        finally:
            tasks[0].cancel()

    with caplog.at_level(logging.CRITICAL, "gang-extender"):
        assert asyncio.run(go()) == EXIT_TASK_ENDED
    record = next(r for r in caplog.records if r.levelno == logging.CRITICAL)
    assert f"task wake {why}" in record.getMessage()
    assert f"exiting (status {EXIT_TASK_ENDED})" in record.getMessage()
    assert (record.exc_info is not None) == (body == "raise")


def test_tick_fault_injection_is_off_unless_asked_for() -> None:
    assert tick_faults_from_env({}) is None
    fault = tick_faults_from_env({"GANG_EXTENDER_TEST_TICK_FAULTS": "2"})
    assert fault is not None
    for _ in range(2):
        with pytest.raises(RuntimeError, match="injected tick fault"):
            fault()
    fault()  # spent: no more
    with pytest.raises(SystemExit, match="whole number"):
        tick_faults_from_env({"GANG_EXTENDER_TEST_TICK_FAULTS": "x"})


# ----- /healthz follows the tick loop ----------------------------------------------------------


async def get(app: object, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
                                 base_url="http://t") as client:
        return await client.get(path)


def test_healthz_fails_with_a_reason_when_the_tick_loop_stops_and_not_on_standby() -> None:
    config = DispatchConfig(tick_interval=0.01, tick_stale_margin=0.1)
    assert config.tick_stale_after == pytest.approx(0.13)

    async def go() -> None:
        leader = Leadership(None, REF, "me")
        leader.observe(lease("other_1", time.time()))  # standby: no tick acts
        manager = GangManager()
        dispatcher = Dispatcher(manager, None, config=config, gates=Gates(leader=leader))
        app = create_app(dispatcher, Metrics(), health=dispatcher.tick_health)
        r = await get(app, "/healthz")
        assert (r.status_code, r.text) == (200, "ok")  # just started

        loop = asyncio.create_task(dispatcher.tick_loop())
        await asyncio.sleep(0.4)  # three times the limit: the standby's loop runs
        r = await get(app, "/healthz")
        assert (r.status_code, r.text) == (200, "ok")

        loop.cancel()  # the loop stops
        await asyncio.sleep(0.3)
        r = await get(app, "/healthz")
        assert r.status_code == 503
        assert "the tick loop has not completed an iteration for" in r.text
        assert "limit 0.13s: 3 tick intervals plus 0.1s" in r.text

        # Active, every tick raising: alive in name only, and /healthz says why.
        leader.observe(lease("me_1", time.time()))
        manager.tick = raising(10**6, manager.tick)  # type: ignore[method-assign,assignment]
        loop = asyncio.create_task(dispatcher.tick_loop())
        await asyncio.sleep(0.3)
        r = await get(app, "/healthz")
        loop.cancel()
        assert r.status_code == 503 and "iteration(s) raised, the last: RuntimeError: " \
            "tick broke" in r.text, r.text

    asyncio.run(go())


def test_healthz_without_a_health_check_is_ok() -> None:
    app = create_app(Dispatcher(GangManager(), None))
    r = asyncio.run(get(app, "/healthz"))
    assert (r.status_code, r.text) == (200, "ok")


# ----- the event loop lag --------------------------------------------------------------------


def test_lag_monitor_measures_a_blocked_loop_and_warns_once_per_window(
        caplog: pytest.LogCaptureFixture) -> None:
    seen: list[float] = []
    monitor = LagMonitor(seen.append, interval=0.01)

    async def go() -> None:
        task = asyncio.create_task(monitor.run())
        await asyncio.sleep(0.05)
        time.sleep(0.2)  # the loop is blocked: the monitor wakes ~0.2 s late
        await asyncio.sleep(0.05)
        time.sleep(0.15)  # again, inside the warning window
        await asyncio.sleep(0.05)
        task.cancel()

    with caplog.at_level(logging.WARNING, "gang-extender"):
        asyncio.run(go())
    late = [s for s in seen if s > 0.1]
    assert len(late) == 2 and max(late) >= 0.15, seen
    assert min(seen) < 0.05
    warnings = [r.getMessage() for r in caplog.records if "event loop lag" in r.getMessage()]
    assert len(warnings) == 1 and "over 100 ms 1 time(s)" in warnings[0], warnings


def test_the_lag_histogram_is_exported() -> None:
    m = Metrics()
    LagMonitor(m.event_loop_lag.observe).sample(0.3)
    m.loop_errors.labels("tick").inc()
    from prometheus_client import generate_latest

    text = generate_latest(m.registry).decode()
    assert 'gang_extender_event_loop_lag_seconds_bucket{le="0.5"} 1.0' in text
    assert 'gang_extender_event_loop_lag_seconds_bucket{le="0.25"} 0.0' in text
    assert 'gang_extender_loop_errors_total{loop="tick"} 1.0' in text


# ----- nothing before the first lists are applied -------------------------------------------


@pytest.mark.parametrize("fast", [True, False], ids=["fast-verbs", "fastapi-routes"])
def test_verbs_answer_not_synced_until_the_first_lists_are_applied(fast: bool) -> None:
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
           "spec": {"schedulerName": "gang-scheduler", "containers": [
               {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    bind = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u1", "Node": "n0"}
    args = {"Pod": pod, "NodeNames": ["n0"]}

    class Kube:
        def __init__(self) -> None:
            self.bound: list[str] = []

        async def bind(self, namespace: str, name: str, uid: str, node: str,
                       decided_at: float | None = None) -> None:
            self.bound.append(name)

        async def get_pod(self, namespace: str, name: str) -> None:
            return None

    kube = Kube()

    async def go() -> None:
        synced = asyncio.Event()
        metrics = Metrics()
        app = create_app(Dispatcher(manager, kube), metrics, ready=synced)
        served = with_fast_verbs(app) if fast else app
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=served),
                                     base_url="http://t") as client:
            r = await client.post("/filter", json=args)
            assert r.status_code == 200 and r.json() == {
                "NodeNames": None, "Nodes": None, "FailedNodes": {},
                "FailedAndUnresolvableNodes": {}, "Error": NOT_SYNCED}
            r = await client.post("/prioritize", json=args)
            assert (r.status_code, r.json()) == (200, {"Error": NOT_SYNCED})
            r = await client.post("/bind", json=bind)
            assert (r.status_code, r.json()) == (200, {"Error": NOT_SYNCED})
            assert kube.bound == [] and manager.reads.pod("u1") is None
            assert (await client.get("/readyz")).status_code == 503
            text = (await client.get("/metrics")).text
            assert ('gang_extender_verb_duration_seconds_count{result="not_synced",'
                    'verb="filter"} 1.0') in text

            synced.set()
            r = await client.post("/filter", json=args)
            assert (r.json()["Error"], r.json()["NodeNames"]) == ("", ["n0"])
            r = await client.post("/bind", json=bind)
            assert r.json() == {"Error": ""} and kube.bound == ["p"]

    asyncio.run(go())


def test_the_tick_waits_for_the_first_lists() -> None:
    manager, _ = gang_with_a_reservation(timeout=0.05)
    synced = [False]

    async def go() -> None:
        dispatcher = Dispatcher(manager, None, config=DispatchConfig(tick_interval=0.01),
                                gates=Gates(synced=lambda: synced[0]))
        loop = asyncio.create_task(dispatcher.tick_loop())
        await asyncio.sleep(0.2)
        assert len(manager.reads.reservations()) == 1, "a tick ran before the sync"
        assert dispatcher.tick_health() is None  # waiting is not dead
        synced[0] = True
        await asyncio.sleep(0.1)
        loop.cancel()

    asyncio.run(go())
    assert manager.reads.reservations() == ()

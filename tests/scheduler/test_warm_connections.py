"""Connections opened ahead of a commit: `AsyncioTransport.warm` against a raw server
(tests/kube/raw_server.py), `_Writer.warm`'s probe, and the `ConnectionWarmer` loop.

What must hold: exactly the missing connections are opened, each carries one probe and
then serves a real request without a new connect; more than the idle limit are never
kept; a failure is reported, not raised, and makes the loop wait before it tries again;
nothing is opened for a gang that is not about to commit, or on standby."""

from __future__ import annotations

import asyncio

import httpx

from extender.core.manager import GangManager
from extender.kube.client import _Writer
from extender.kube.transport import AsyncioTransport
from extender.reporting.metrics import GaugeSources, Metrics
from extender.scheduler import warm as warm_mod
from extender.scheduler.warm import ConnectionWarmer
from tests.kube.raw_server import answer_all, client_for, ok_json, response, run, serve

PROBE = b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"


def test_warm_opens_the_missing_connections_and_requests_then_reuse_them() -> None:
    async def go() -> None:
        async with serve(answer_all(ok_json)) as (server, url):
            t = AsyncioTransport(None, max_idle=8)
            key = ("http", "127.0.0.1", server.port)
            async with client_for(url, t) as client:
                await client.get("/first")  # one idle connection already
                assert t.stats.connects == 1
                opened, errors = await t.warm(key, 5, PROBE, 2.0)
                assert (opened, errors) == (4, [])
                assert t.stats.connects == 5 and t.stats.warmed == 4
                assert t.stats.on_demand == 1
                assert [r.target for r in server.requests[1:]] == [b"/version"] * 4
                assert len(t._idle[key]) == 5
                # Nothing more to open; then five requests at once use them all.
                assert await t.warm(key, 5, PROBE, 2.0) == (0, [])
                rs = await asyncio.gather(*(client.get(f"/b/{i}") for i in range(5)))
                assert sorted(r.json()["conn"] for r in rs) == list(range(5))
                assert t.stats.connects == 5
                # Never more than the idle limit.
                opened, _ = await t.warm(key, 50, PROBE, 2.0)
                assert opened == 3 and len(t._idle[key]) == 8

    run(go())


def test_a_failed_connect_is_reported_and_nothing_is_kept() -> None:
    async def go() -> None:
        async with serve(answer_all(ok_json)) as (server, _):
            port = server.port
        t = AsyncioTransport(None)  # the server is gone: connections are refused
        key = ("http", "127.0.0.1", port)
        opened, errors = await t.warm(key, 3, PROBE, 2.0)
        assert opened == 0 and len(errors) == 3
        assert all(isinstance(e, httpx.ConnectError) for e in errors)
        assert not t._idle.get(key)

    run(go())


def test_a_server_that_closes_after_each_answer_is_not_warmed() -> None:
    """Nothing could be kept open: reported as failures (so the loop backs off), not as
    connections opened, and none left in the pool."""
    async def go() -> None:
        async with serve(answer_all(lambda req: response(b"{}", headers=[
                b"Connection: close"]))) as (server, _):
            t = AsyncioTransport(None)
            key = ("http", "127.0.0.1", server.port)
            opened, errors = await t.warm(key, 3, PROBE, 2.0)
            assert opened == 0 and len(errors) == 3 and t.stats.warmed == 0
            assert all(isinstance(e, httpx.RemoteProtocolError) for e in errors)
            assert not t._idle.get(key)

    run(go())


def test_the_writers_probe_is_a_get_of_version_with_the_clients_own_headers() -> None:
    async def go() -> None:
        async with serve(answer_all(ok_json)) as (server, url):
            t = AsyncioTransport(None)
            http = httpx.AsyncClient(base_url=url + "/prefix", transport=t,
                                     headers={"Authorization": "Bearer s3cret"})
            writer = _Writer.for_client(http, t, 2.0)
            assert await writer.warm(2) == (2, [])
            assert [r.line for r in server.requests] == [
                b"GET /prefix/version HTTP/1.1"] * 2
            assert all(r.header(b"authorization") == [b"Bearer s3cret"]
                       for r in server.requests)
            await http.aclose()

    run(go())


class FakeWarm:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail

    async def __call__(self, want: int) -> tuple[int, list[BaseException]]:
        self.calls.append(want)
        if self.fail:
            return 0, [httpx.ConnectError("refused")]
        return want, []


def test_the_loop_asks_for_the_bindings_ahead_up_to_the_concurrency() -> None:
    ahead = [0]
    fake = FakeWarm()
    w = ConnectionWarmer(fake, lambda now: ahead[0], limit=64)

    async def go() -> None:
        assert await w.step() == 0 and fake.calls == []  # nothing arriving: nothing opened
        ahead[0] = 10
        assert await w.step() == 10
        ahead[0] = 1000
        assert await w.step() == 64
        assert fake.calls == [10, 64] and w.stats.opened == 74

    run(go())


def test_after_a_failure_the_loop_waits_before_trying_again() -> None:
    mono = [100.0]
    fake = FakeWarm(fail=True)
    w = ConnectionWarmer(fake, lambda now: 8, limit=64, monotonic=lambda: mono[0])

    async def go() -> None:
        await w.step()
        await w.step()  # within the wait: not tried
        assert fake.calls == [8] and w.stats.failed == 1
        mono[0] += warm_mod.RETRY_SECONDS
        await w.step()
        mono[0] += warm_mod.RETRY_SECONDS  # the wait doubled after the second failure
        await w.step()
        assert fake.calls == [8, 8]
        fake.fail = False
        mono[0] += warm_mod.RETRY_SECONDS
        await w.step()
        await w.step()  # succeeded: no wait any more
        assert fake.calls == [8, 8, 8, 8]

    run(go())


def test_nothing_is_opened_on_standby() -> None:
    fake = FakeWarm()
    w = ConnectionWarmer(fake, lambda now: 8, limit=64)
    active = [False]

    async def go() -> None:
        task = asyncio.ensure_future(w.run(lambda: active[0]))
        await asyncio.sleep(warm_mod.INTERVAL_SECONDS * 3)
        assert fake.calls == []
        active[0] = True
        while not fake.calls:
            await asyncio.sleep(0.01)
        task.cancel()

    run(go())


def test_the_metric_counts_connections_opened_ahead_and_on_demand() -> None:
    metrics = Metrics()
    opened = [(3, 0)]  # three connections so far (lists, watches), none ahead
    sources = GaugeSources(connections_opened=lambda: opened[0])
    manager = GangManager()

    def value(how: str) -> float | None:
        return metrics.registry.get_sample_value("gang_extender_api_connections_total",
                                                 {"opened": how})

    metrics.refresh(manager.reads, sources)
    assert (value("on_demand"), value("ahead")) == (3, 0)
    opened[0] = (10, 60)  # a gang's commit: 60 opened ahead, 7 more by requests
    metrics.refresh(manager.reads, sources)
    assert (value("on_demand"), value("ahead")) == (10, 60)

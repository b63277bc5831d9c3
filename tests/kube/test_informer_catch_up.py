"""The informer serves catch-up requests (`InformerOptions.catch_up`, kube/catch_up.py):
a Binding whose answer was lost says the API server's state may have moved unseen before
any watch of ours breaks, so the kinds that decide fits are behind from the request until
a watch begun after it has delivered (a bookmark, or its normal end). Against a fake API
whose watches the test feeds one step at a time."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.kube.catch_up import CatchUpRequests
from extender.kube.informer import (
    CATCH_UP_WATCH_SECONDS,
    WATCH_SECONDS,
    Informer,
    InformerOptions,
    Kind,
)

Step = tuple[str, dict[str, Any]] | BaseException | None  # None: the watch ends normally


def _obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def bookmark(rv: str) -> tuple[str, dict[str, Any]]:
    return ("BOOKMARK", {"metadata": {"resourceVersion": rv}})


@dataclasses.dataclass
class Watch:
    rv: str  # the resourceVersion it was begun from
    timeout: int  # the timeoutSeconds it asked for
    steps: asyncio.Queue[Step]
    cut: bool = False  # ended by the informer, not by the server


class LiveKube:
    """Each list shows object "a"; each watch delivers what the test puts in its queue."""

    def __init__(self) -> None:
        self.lists = 0
        self.watches: list[Watch] = []

    async def list_pages(self, path: str, limit: int = 2000, params: object = None
                         ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        self.lists += 1
        await asyncio.sleep(0)
        yield [_obj("a", f"{self.lists}0")], f"{self.lists}0"

    async def watch(self, path: str, rv: str, timeout_seconds: int = 300,
                    params: object = None, proto: object = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        watch = Watch(rv, timeout_seconds, asyncio.Queue())
        self.watches.append(watch)
        try:
            while True:
                step = await watch.steps.get()
                if step is None:
                    return
                if isinstance(step, BaseException):
                    raise step
                yield step
        except asyncio.CancelledError:
            watch.cut = True
            raise


class Told(GangManager):
    """Records what the informer tells the gang manager of the kind's watches."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[str] = []

    def watch_broken(self, kind: str) -> None:
        self.told.append(f"broken {kind}")

    def watch_listed(self, kind: str, now: float) -> None:
        self.told.append(f"listed {kind}")


async def until(what: Callable[[], bool]) -> None:
    for _ in range(500):
        if what():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("not reached")


KIND = Kind("things", "/things", lambda o: str(o["metadata"]["name"]),
            lambda m, o, now: None, lambda m, key, now: None, holds_commits=True)


def run(scenario: Callable[[Informer, LiveKube, Told, CatchUpRequests, list[float]],
                           Awaitable[None]],
        named: tuple[str, ...] = ("things",)) -> None:
    """`scenario` against an informer of KIND whose catch-up requests name `named`."""
    async def go() -> None:
        kube, manager, requests, now = LiveKube(), Told(), CatchUpRequests(named), [0.0]
        inf = Informer(kube, manager, lambda: now[0], lambda: None,  # type: ignore[arg-type]
                       kinds=(KIND,), options=InformerOptions(catch_up=requests))
        task = asyncio.create_task(inf.run())
        try:
            await until(lambda: len(kube.watches) == 1)
            await scenario(inf, kube, manager, requests, now)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())


def test_a_request_holds_the_kind_until_a_watch_begun_after_it_delivers_a_bookmark() -> None:
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        first = kube.watches[0]
        first.steps.put_nowait(("ADDED", _obj("b", "12")))
        await until(lambda: first.steps.empty())
        assert inf.behind() == {"things": 0.0}
        requests.request()
        await until(lambda: len(kube.watches) == 2)
        # Behind at once, the watch cut and begun again where the last event left off:
        # short, so its bookmark or end comes soon; no relist.
        assert manager.told == ["broken things"]
        assert first.cut and kube.lists == 1
        second = kube.watches[1]
        assert (second.rv, second.timeout) == ("12", CATCH_UP_WATCH_SECONDS)
        now[0] = 7.0
        assert inf.behind() == {"things": 7.0}
        second.steps.put_nowait(bookmark("13"))
        await until(lambda: manager.told[-1] == "listed things")
        assert manager.told == ["broken things", "listed things"]
        assert inf.behind() == {"things": 0.0} and inf.health() is None

    run(scenario)


def test_a_quiet_kind_is_caught_up_by_the_normal_end_of_the_watch_begun_after() -> None:
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        requests.request()
        await until(lambda: len(kube.watches) == 2)
        kube.watches[1].steps.put_nowait(None)  # nothing changed: the server ends it
        await until(lambda: manager.told[-1:] == ["listed things"])
        assert manager.told == ["broken things", "listed things"]
        assert [w.timeout for w in kube.watches] == [
            WATCH_SECONDS, CATCH_UP_WATCH_SECONDS, WATCH_SECONDS]

    run(scenario)


def test_what_a_watch_begun_before_the_request_delivers_does_not_catch_up() -> None:
    """A bookmark already on its way when the request is made (read by the informer
    before its task that serves requests has woken) tells nothing of what changed since:
    the kind, behind since a relist, stays behind until the watch after the request."""
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        kube.watches[0].steps.put_nowait(OSError("connection reset"))
        await until(lambda: len(kube.watches) == 2)
        catching = kube.watches[1]
        assert kube.lists == 2 and catching.timeout == CATCH_UP_WATCH_SECONDS
        catching.steps.put_nowait(bookmark("21"))  # the watch's task is woken first
        requests.request()
        await until(lambda: len(kube.watches) == 3)
        assert manager.told == ["broken things"], "caught up by a watch begun before"
        kube.watches[2].steps.put_nowait(bookmark("22"))
        await until(lambda: manager.told[-1:] == ["listed things"])
        assert manager.told == ["broken things", "listed things"]

    run(scenario)


def test_a_watch_that_breaks_after_the_request_is_caught_up_once_with_it() -> None:
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        requests.request()
        await until(lambda: len(kube.watches) == 2)
        kube.watches[1].steps.put_nowait(OSError("the API server went away"))
        await until(lambda: len(kube.watches) == 3)  # relisted after 0.5 s
        assert kube.lists == 2 and manager.told == ["broken things"]
        kube.watches[2].steps.put_nowait(bookmark("30"))
        await until(lambda: manager.told[-1:] == ["listed things"])
        assert manager.told == ["broken things", "listed things"]
        assert inf.behind() == {"things": 0.0}

    run(scenario)


def test_a_kind_the_requests_do_not_name_is_left_alone() -> None:
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        requests.request()
        for _ in range(20):
            await asyncio.sleep(0)
        assert manager.told == [] and len(kube.watches) == 1

    run(scenario, named=("pods", "nodes"))


def test_a_kind_the_requests_do_not_name_catches_up_on_its_own_watch() -> None:
    """Behind from its own break, a kind no request names is caught up by the watch after
    its relist, whatever requests for other kinds came meanwhile."""
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        kube.watches[0].steps.put_nowait(OSError("connection reset"))
        await until(lambda: len(kube.watches) == 2)
        requests.request()  # for pods and nodes, after the catch-up watch began
        kube.watches[1].steps.put_nowait(bookmark("21"))
        await until(lambda: manager.told[-1:] == ["listed things"])
        assert manager.told == ["broken things", "listed things"]

    run(scenario, named=("pods", "nodes"))


def test_requests_in_a_burst_never_stop_the_informer() -> None:
    """Every Binding in flight fails together when kube-apiserver dies: requests come
    while the watch's cut is still on its way (`Timeout.reschedule` then raises, which
    ended the informer, and the process with it)."""
    async def scenario(inf: Informer, kube: LiveKube, manager: Told,
                       requests: CatchUpRequests, now: list[float]) -> None:
        for _ in range(30):
            requests.request()
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # every request served
        assert len(kube.watches) > 1 and not kube.watches[-1].cut
        kube.watches[-1].steps.put_nowait(bookmark("40"))
        await until(lambda: manager.told[-1:] == ["listed things"])
        assert manager.told == ["broken things", "listed things"]

    run(scenario)

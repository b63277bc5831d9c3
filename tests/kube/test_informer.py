"""The informer against a scripted API (no network): a poisoned object is skipped and
counted whatever it raises, lists are applied page by page with the event loop let run
in between, and a relist still deletes what vanished."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.kube.client import ResourceExpired
from extender.kube.decode import UNDECODABLE, Undecodable
from extender.kube.informer import (
    CATCH_UP_WATCH_SECONDS,
    WATCH_SECONDS,
    Informer,
    InformerOptions,
    Kind,
)


def _obj(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"}, **extra}


class Store:
    """What the informer put in its cache, through a Kind of its own; objects with
    `poison` raise that exception from their conversion."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.applied: list[str] = []

    def kind(self) -> Kind:
        def apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
            poison = obj.get("poison")
            if poison is not None:
                raise poison
            self.objects[obj["metadata"]["name"]] = dict(obj)  # a new object, as a cache's
            self.applied.append(obj["metadata"]["name"])

        def delete(manager: GangManager, key: str, now: float) -> None:
            self.objects.pop(key, None)

        return Kind("things", "/things", lambda o: str(o["metadata"]["name"]), apply, delete)


Script = list[tuple[str, dict[str, Any]] | BaseException]
BOOKMARK = ("BOOKMARK", {"metadata": {"resourceVersion": "9"}})


class FakeKube:
    """Serves `lists` in turn (each a list of pages) and, after each, the watch script of
    the same index: events, then an exception that ends the watch (ResourceExpired
    relists). Records what was asked."""

    def __init__(self, lists: list[list[list[dict[str, Any]]]], watches: list[Script]) -> None:
        self.lists = lists
        self.watches = watches
        self.listed = 0
        self.pages_asked = 0
        self.on_page: Callable[[int], None] = lambda n: None
        self.done = asyncio.Event()
        self.watch_timeouts: list[int] = []  # the timeoutSeconds each watch asked for

    async def list_pages(self, path: str, limit: int = 2000, params: object = None
                         ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        pages = self.lists[min(self.listed, len(self.lists) - 1)]
        self.listed += 1
        for i, page in enumerate(pages):
            self.on_page(i)
            self.pages_asked += 1
            await asyncio.sleep(0)
            yield page, str(self.listed)

    async def list(self, path: str, limit: int = 2000, params: object = None
                   ) -> tuple[list[dict[str, Any]], str]:
        """As `Kube.list`: every page, then all of it."""
        items: list[dict[str, Any]] = []
        rv = ""
        async for page, page_rv in self.list_pages(path, limit, params):
            items.extend(page)
            rv = page_rv
        return items, rv

    async def watch(self, path: str, rv: str, timeout_seconds: int = 300,
                    params: object = None, proto: object = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.watch_timeouts.append(timeout_seconds)
        script = self.watches[self.listed - 1] if self.listed <= len(self.watches) else []
        for step in script:
            if isinstance(step, BaseException):
                raise step
            yield step
        self.done.set()
        await asyncio.sleep(3600)


async def _run(kube: FakeKube, store: Store, **kw: Any) -> Informer:
    inf = Informer(kube, GangManager(), lambda: 100.0, lambda: None,  # type: ignore[arg-type]
                   kinds=(store.kind(),), options=InformerOptions(**kw))
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(kube.done.wait(), 5)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return inf


@pytest.mark.parametrize("exc", [KeyError("spec"), TypeError("unhashable"),
                                 RecursionError("too deep"), ValueError("bad quantity"),
                                 ZeroDivisionError("x")])
def test_one_poisoned_object_is_skipped_and_counted_whatever_it_raises(
        exc: Exception, caplog: pytest.LogCaptureFixture) -> None:
    """Only ValueError was caught: any other exception ended the list, and the kind was
    listed again every 10 s, forever, and never synced."""
    store = Store()
    kube = FakeKube([[[_obj("a"), _obj("bad", poison=exc), _obj("b")]]],
                    [[("ADDED", _obj("bad2", poison=exc)), ("ADDED", _obj("c"))]])
    counted: list[tuple[str, str]] = []

    async def go() -> Informer:
        return await _run(kube, store, on_skip=lambda kind, why: counted.append((kind, why)))

    with caplog.at_level(logging.WARNING, "gang-extender.informer"):
        inf = asyncio.run(go())
    assert inf.synced.is_set()
    assert sorted(store.objects) == ["a", "b", "c"]
    assert kube.listed == 1, "no relist for a bad object"
    assert inf.skipped == {"things": 2} and counted == [("things", "convert")] * 2
    assert "skipping things bad: " + type(exc).__name__ in caplog.text


def test_skips_are_logged_at_most_once_per_interval_with_the_count(
        caplog: pytest.LogCaptureFixture) -> None:
    store = Store()
    bad = [_obj(f"bad{i}", poison=KeyError("x")) for i in range(50)]
    kube = FakeKube([[bad]], [[]])
    now = [100.0]
    inf = Informer(kube, GangManager(), lambda: now[0], lambda: None,  # type: ignore[arg-type]
                   kinds=(store.kind(),), options=InformerOptions(log_interval=10.0))

    async def go() -> None:
        await inf._relist(store.kind())
        now[0] += 11
        inf._apply(store.kind(), _obj("late", poison=KeyError("y")))

    with caplog.at_level(logging.WARNING, "gang-extender.informer"):
        asyncio.run(go())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("skipping things bad0: KeyError")
    assert lines[1].startswith("skipping things late: KeyError")
    assert "(49 more skipped in the last 10s)" in lines[1]
    assert inf.skipped == {"things": 51}


def test_a_list_is_applied_page_by_page_as_the_pages_come() -> None:
    """All pages were held, then applied at once: memory for the whole list, and one
    stretch of the event loop as long as the list."""
    store = Store()
    pages = [[_obj(f"p{i}-{j}") for j in range(3)] for i in range(4)]
    kube = FakeKube([pages], [[]])
    applied_before_page: list[int] = []
    kube.on_page = lambda i: applied_before_page.append(len(store.applied))

    async def go() -> None:
        await _run(kube, store)

    asyncio.run(go())
    assert applied_before_page == [0, 3, 6, 9]


def test_a_long_list_lets_the_event_loop_run_every_few_objects() -> None:
    store = Store()
    pages = [[_obj(f"p{i}-{j}") for j in range(1000)] for i in range(2)]
    kube = FakeKube([pages], [[]])
    # Objects applied between two turns of another task: the longest stretch.
    stretches: list[int] = []

    async def other() -> None:
        last = 0
        while True:
            stretches.append(len(store.applied) - last)
            last = len(store.applied)
            await asyncio.sleep(0)

    async def go() -> None:
        watcher = asyncio.create_task(other())
        await _run(kube, store, yield_every=100)
        watcher.cancel()

    asyncio.run(go())
    assert len(store.applied) == 2000
    assert max(stretches) <= 100


def test_a_relist_applied_page_by_page_still_deletes_what_vanished() -> None:
    """Known before the relist: a, b, bad (applied once, then poisoned), gone (poisoned
    and vanished). After it: b vanished and is deleted; bad stays (it exists, its last
    good version is kept); d is new; a vanished object that was poisoned at the relist
    is deleted too."""
    store = Store()
    first = [[_obj("a"), _obj("b")], [_obj("bad"), _obj("gone")]]
    second = [[_obj("a"), _obj("bad", poison=TypeError("t"))], [_obj("d")]]
    kube = FakeKube([first, second], [[ResourceExpired("/things")], []])

    async def go() -> Informer:
        return await _run(kube, store)

    inf = asyncio.run(go())
    assert kube.listed == 2
    assert sorted(store.objects) == ["a", "bad", "d"]
    assert inf.skipped == {"things": 1}
    # bad is still known: once it vanishes, the next relist deletes it.
    kube2 = FakeKube([[[_obj("a")]]], [[]])
    inf.kube = kube2  # type: ignore[assignment]

    async def again() -> None:
        await inf._relist(store.kind())

    asyncio.run(again())
    assert sorted(store.objects) == ["a"]


def test_a_delete_that_raises_is_skipped_and_the_watch_goes_on() -> None:
    store = Store()
    kind = store.kind()

    def bad_delete(manager: GangManager, key: str, now: float) -> None:
        raise AttributeError("broken")

    import dataclasses
    kind = dataclasses.replace(kind, delete=bad_delete)
    kube = FakeKube([[[_obj("a")]]], [[("DELETED", _obj("a")), ("ADDED", _obj("b"))]])

    inf = asyncio.run(_run_with(kube, GangManager(), kind))
    assert kube.listed == 1
    assert "b" in store.objects and inf.skipped == {"things": 1}


def test_what_each_page_applied_is_kept_out_of_later_full_collections() -> None:
    """A full collection walks every tracked object and runs each time they grow by a
    quarter: during a list of 20,000 PodGroups and 40,000 pods, 0.9 s of event loop,
    several times. Each page's objects are frozen once applied."""
    import gc

    store = Store()
    pages = [[_obj(f"p{i}-{j}") for j in range(3)] for i in range(3)]
    kube = FakeKube([pages], [[]])
    frozen: list[int] = []
    kube.on_page = lambda i: frozen.append(gc.get_freeze_count())

    async def go() -> None:
        await _run(kube, store)

    try:
        asyncio.run(go())
    finally:
        gc.unfreeze()
    assert frozen[0] < frozen[1] < frozen[2]


def test_a_pages_garbage_in_reference_cycles_is_freed_not_frozen() -> None:
    """An HTTP response sits in reference cycles with its body: frozen with the page,
    every page's body stayed in memory for good (a list of 20,000 PodGroups and 30,000
    pods left the extender 100 MiB larger)."""
    import gc
    import weakref

    class Body:
        def __init__(self) -> None:
            self.me = self  # a cycle, as httpx's Response has

    store = Store()
    bodies: list[weakref.ref[Body]] = []

    class CyclicKube(FakeKube):
        async def list_pages(self, path: str, limit: int = 2000, params: object = None
                             ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
            async for page, rv in super().list_pages(path, limit, params):
                body = Body()
                bodies.append(weakref.ref(body))
                del body
                yield page, rv

    kube = CyclicKube([[[_obj("a")], [_obj("b")]]], [[]])

    async def go() -> None:
        await _run(kube, store)

    try:
        asyncio.run(go())
        assert len(bodies) == 2
        assert all(ref() is None for ref in bodies)
    finally:
        gc.unfreeze()


def test_objects_that_arrive_by_watch_are_frozen_every_few_thousand_added() -> None:
    """A history created while the extender runs arrives one watch event at a time; left
    out of the frozen set, every full collection walked all of it (75 ms after 20,000
    PodGroups and 40,000 pods, growing). A freeze follows every `freeze_every` objects
    added; modifications do not count, as they do not grow the heap."""
    import gc

    store = Store()
    added: Script = [("ADDED", _obj(f"w{i}")) for i in range(7)]
    modified: Script = [("MODIFIED", _obj(f"w{i % 7}")) for i in range(20)]
    kube = FakeKube([[[_obj("a")]]], [added + modified])
    counts: list[int] = []

    class Counting(Store):
        def kind(self) -> Kind:
            kind = super().kind()
            inner = kind.apply

            def apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
                inner(manager, obj, now)
                counts.append(gc.get_freeze_count())

            import dataclasses
            return dataclasses.replace(kind, apply=apply)

    store = Counting()

    async def go() -> None:
        await _run(kube, store, freeze_every=3)

    try:
        gc.unfreeze()
        asyncio.run(go())
    finally:
        gc.unfreeze()
    # counts[0]: the list's object, before the list's own freeze; then w0..w6, then the
    # 20 modifications. The freeze count rises after w2 and w5 (3 and 6 added), and not
    # again while only modifications come.
    watch = counts[1:]
    rises = [i for i in range(1, len(watch)) if watch[i] > watch[i - 1]]
    assert rises == [3, 6], (rises, watch)


class WatchRecorder(GangManager):
    """A gang manager that records what the informer tells it of its watches, with the
    objects applied by then."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.told: list[tuple[str, str, list[str]]] = []

    def watch_broken(self, kind: str) -> None:
        self.told.append(("broken", kind, list(self.store.applied)))

    def watch_listed(self, kind: str, now: float) -> None:
        self.told.append(("listed", kind, list(self.store.applied)))


async def _run_with(kube: FakeKube, manager: GangManager, kind: Kind) -> Informer:
    """An informer of `kind` alone, run until the fake API has served every list and
    watch it was given."""
    inf = Informer(kube, manager, lambda: 0.0, lambda: None,  # type: ignore[arg-type]
                   kinds=(kind,))
    task = asyncio.create_task(inf.run())
    await asyncio.wait_for(kube.done.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return inf


@pytest.mark.parametrize("end", [OSError("connection reset"), ResourceExpired("/things")])
def test_a_broken_watch_holds_commits_until_the_kind_is_listed_again(
        end: Exception) -> None:
    """kube-apiserver restarts: the pod watch breaks, and until the relist is applied
    whole the cache misses what was bound meanwhile (a spec.nodeName pod), so the
    manager is told the watch broke at once and that it is listed again only after the
    relist's last page. A kind that does not decide fits (PodGroups) tells nothing."""
    first = [[_obj("a")]]
    second = [[_obj("a")], [_obj("intruder")]]
    store = Store()
    manager = WatchRecorder(store)
    kube = FakeKube([first, second], [[("ADDED", _obj("b")), end], [BOOKMARK]])
    asyncio.run(_run_with(kube, manager, dataclasses.replace(store.kind(),
                                                             holds_commits=True)))
    assert manager.told == [("broken", "things", ["a", "b"]),
                            ("listed", "things", ["a", "b", "a", "intruder"])]

    plain = Store()
    manager = WatchRecorder(plain)
    kube = FakeKube([first, second], [[end], []])
    asyncio.run(_run_with(kube, manager, plain.kind()))
    assert kube.listed == 2 and manager.told == []


def test_commits_resume_only_once_the_watch_after_the_relist_has_delivered() -> None:
    """A list is a snapshot: what was bound while it was read (a neighbour aimed at a
    reserved node as the API server came back) comes only by the watch that follows it.
    The kind was taken as caught up as soon as its relist returned, and every reserved
    gang committed against that snapshot. Now: no `watch_listed` while the new watch
    has delivered nothing; a bookmark, or events (all that came at once applied first),
    is what catches up."""
    def run(second_watch: Script) -> tuple[WatchRecorder, FakeKube]:
        store = Store()
        manager = WatchRecorder(store)
        kube = FakeKube([[[_obj("a")]], [[_obj("a")]]],
                        [[OSError("connection reset")], second_watch])
        asyncio.run(_run_with(kube, manager, dataclasses.replace(store.kind(),
                                                                 holds_commits=True)))
        return manager, kube

    silent, kube = run([])
    assert kube.listed == 2
    assert silent.told == [("broken", "things", ["a"])], "caught up before any delivery"

    bookmarked, _ = run([BOOKMARK])
    assert bookmarked.told == [("broken", "things", ["a"]), ("listed", "things", ["a", "a"])]

    evented, kube = run([("ADDED", _obj("neighbour")), ("ADDED", _obj("other"))])
    assert evented.told == [("broken", "things", ["a"]),
                            ("listed", "things", ["a", "a", "neighbour", "other"])]
    # The first watch after the relist is a short one, so that its bookmark comes soon.
    assert kube.watch_timeouts[1] == CATCH_UP_WATCH_SECONDS

    # Events, then a break before they were all applied: not caught up by them.
    broken_again, kube = run([("ADDED", _obj("neighbour")), OSError("reset again")])
    assert kube.listed == 3
    assert broken_again.told == [("broken", "things", ["a"])]


class QuietKube(FakeKube):
    """A kind where nothing changes: kube-apiserver sends no bookmark (its resourceVersion
    does not move past the watch's) and ends each watch when its time is up."""

    def __init__(self, *a: Any, pause: float = 0.0) -> None:
        super().__init__(*a)
        self.pause = pause

    async def watch(self, path: str, rv: str, timeout_seconds: int = 300,
                    params: object = None, proto: object = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.watch_timeouts.append(timeout_seconds)
        script = self.watches[self.listed - 1] if self.listed <= len(self.watches) else []
        for step in script:
            if isinstance(step, BaseException):
                raise step
            yield step
        if len(self.watch_timeouts) >= 6:
            self.done.set()
        await asyncio.sleep(self.pause)  # then ends, as the server does


def test_a_quiet_kind_is_caught_up_by_the_normal_end_of_its_first_watch() -> None:
    """Measured on the local control plane: a watch of a kind where nothing changed got
    no bookmark in 140 s. Its first watch after the relist is a short one; its normal end
    means all there was came, and the commits go ahead."""
    store = Store()
    manager = WatchRecorder(store)
    kube = QuietKube([[[_obj("a")]], [[_obj("a")]]], [[OSError("reset")], []])
    asyncio.run(_run_with(kube, manager, dataclasses.replace(store.kind(),
                                                             holds_commits=True)))
    assert manager.told == [("broken", "things", ["a"]), ("listed", "things", ["a", "a"])]
    assert kube.watch_timeouts[:3] == [WATCH_SECONDS, CATCH_UP_WATCH_SECONDS, WATCH_SECONDS]


def test_watches_the_server_ends_are_a_sign_of_life_not_idle() -> None:
    store = Store()
    kube = QuietKube([[[_obj("a")]]], [[]], pause=0.02)

    async def go() -> Informer:
        return await _run(kube, store, idle_timeout=0.05)

    asyncio.run(go())
    assert kube.listed == 1 and len(kube.watch_timeouts) >= 6


def test_a_watch_that_delivers_nothing_for_the_idle_timeout_is_restarted_from_a_relist(
        caplog: pytest.LogCaptureFixture) -> None:
    """A half-open connection delivers nothing and ends nothing: it was noticed only by
    the read timeout, 330 s later, with the kind's commits held all along."""
    store = Store()
    manager = WatchRecorder(store)
    kube = FakeKube([[[_obj("a")]], [[_obj("a")]]], [[], [BOOKMARK]])

    async def go() -> Informer:
        inf = Informer(kube, manager, lambda: 0.0, lambda: None,  # type: ignore[arg-type]
                       kinds=(dataclasses.replace(store.kind(), holds_commits=True),),
                       options=InformerOptions(idle_timeout=0.05))
        task = asyncio.create_task(inf.run())
        for _ in range(200):
            if manager.told[1:]:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return inf

    with caplog.at_level(logging.WARNING, "gang-extender.informer"):
        asyncio.run(go())
    assert kube.listed == 2
    assert manager.told == [("broken", "things", ["a"]), ("listed", "things", ["a", "a"])]
    assert "delivered nothing, not even a bookmark, for 0.05s" in caplog.text


def test_a_watch_that_keeps_delivering_is_not_restarted() -> None:
    store = Store()

    class Steady(FakeKube):
        async def watch(self, path: str, rv: str, timeout_seconds: int = 300,
                        params: object = None, proto: object = None
                        ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
            for _ in range(40):  # 0.4 s of bookmarks every 10 ms, with a 50 ms timeout
                await asyncio.sleep(0.01)
                yield BOOKMARK
            self.done.set()
            await asyncio.sleep(3600)

    kube = Steady([[[_obj("a")]]], [])
    asyncio.run(_run(kube, store, idle_timeout=0.05))
    assert kube.listed == 1


def test_how_long_a_kind_is_behind_is_measured_and_fails_health_past_the_limit() -> None:
    """A kind whose watch stays broken blocked every commit while /healthz said ok and no
    metric showed it."""
    store = Store()
    now = [1000.0]
    kube = FakeKube([[[_obj("a")]]], [[]])
    inf = Informer(kube, GangManager(), lambda: now[0], lambda: None,  # type: ignore[arg-type]
                   kinds=(store.kind(),), options=InformerOptions(behind_limit=180.0))
    kind = inf.kinds[0]
    assert inf.behind() == {"things": 0.0} and inf.health() is None
    inf._broke(kind)
    now[0] += 100
    inf._broke(kind)  # failing again: still behind since the first break
    assert inf.behind() == {"things": 100.0} and inf.health() is None
    now[0] += 95
    assert inf.behind() == {"things": 195.0}
    assert inf.health() == ("the things watch has been behind for 195s (limit 180s): its "
                            "list or watch keeps failing, or its new watch has delivered "
                            "nothing since its relist")
    inf._caught_up(kind)
    assert inf.behind() == {"things": 0.0} and inf.health() is None


def test_the_behind_gauge_is_read_at_scrape_time() -> None:
    from extender.reporting.metrics import GaugeSources, Metrics

    m = Metrics()
    m.refresh(GangManager().reads,
              GaugeSources(watches_behind=lambda: {"pods": 12.5, "nodes": 0.0}))
    assert m.registry.get_sample_value("gang_extender_watch_behind_seconds",
                                       {"kind": "pods"}) == 12.5
    assert m.registry.get_sample_value("gang_extender_watch_behind_seconds",
                                       {"kind": "nodes"}) == 0.0


def test_undecodable_objects_are_skipped_and_counted_as_such_and_the_rest_goes_on() -> None:
    """`Kube` hands an object it could not decode (a list item, a watch line) on as an
    `Undecodable`: skipped with reason "decode", never a relist."""
    store = Store()
    kube = FakeKube([[[_obj("a"), Undecodable("JSONDecodeError: depth limit exceeded",
                                              "v/deep"), _obj("b")]]],
                    [[(UNDECODABLE, Undecodable("JSONDecodeError: depth", "v/deep")),
                      ("ADDED", _obj("c"))]])
    counted: list[tuple[str, str]] = []

    async def go() -> Informer:
        return await _run(kube, store, on_skip=lambda kind, why: counted.append((kind, why)))

    inf = asyncio.run(go())
    assert kube.listed == 1 and inf.synced.is_set()
    assert sorted(store.objects) == ["a", "b", "c"]
    assert counted == [("things", "decode")] * 2 and inf.skipped == {"things": 2}


def _pod(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "schedulerName": "gang-scheduler"}}


def test_a_relist_deletes_a_filter_learned_pod_it_does_not_show_but_not_one_newer_than_it(
        ) -> None:
    """A pod created and deleted while the pod watch was down, which the core learned of
    from a filter call, stayed in the cache for good (the informer deleted only what it
    had applied itself). One learned after the list began may be missing from the list
    only because it is that new: it stays."""
    from extender.core.model.convert import pod_from_k8s
    from extender.core.wiring import Core
    from extender.kube.informer import PODS

    manager = GangManager(Core.wire())
    now = [1000.0]
    phantom, late = pod_from_k8s(_pod("phantom", "u-phantom")), pod_from_k8s(_pod("late", "u-late"))
    kube = FakeKube([[[_pod("a", "u-a")]], [[_pod("a", "u-a")], [_pod("b", "u-b")]]],
                    [[OSError("reset")], [BOOKMARK]])

    def on_page(i: int) -> None:
        if kube.listed == 1 and i == 0:  # the watch is down: a filter call tells of it
            now[0] += 1
            manager.filter(phantom, [], now[0])
            now[0] += 1
        elif kube.listed == 2 and i == 1:  # created while the relist is read
            now[0] += 1
            manager.filter(late, [], now[0])

    kube.on_page = on_page

    async def go() -> None:
        inf = Informer(kube, manager, lambda: now[0], lambda: None,  # type: ignore[arg-type]
                       kinds=(PODS,))
        task = asyncio.create_task(inf.run())
        await asyncio.wait_for(kube.done.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert kube.listed == 2
    assert manager.reads.pod("u-phantom") is None, "a phantom pod survived the relist"
    assert manager.reads.pod("u-late") is not None, "a pod learned during the list was deleted"
    assert manager.reads.pod("u-a") is not None and manager.reads.pod("u-b") is not None

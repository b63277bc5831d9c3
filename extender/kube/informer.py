"""List+watch loops that feed the gang manager (kube-scheduler's informers).

Each event is converted to core types once, here, so the filter path reads only plain
data. A relist (start, 410 Gone, dropped watch) replays the full list and deletes what
vanished, so the cache converges whatever was missed.

One object that cannot be decoded (`decode`: nested deeper than orjson reads) or
converted, for whatever reason, is skipped: logged (at most one line per kind every
`log_interval` seconds, with how many were skipped since), counted (`skipped`, and
`on_skip` for the metric, with the reason: "decode" or "convert"); it never makes the
kind list again, which would meet it again, every time. Its next event is tried afresh.

A kind whose watch broke (an error, a 410, or `idle_timeout` seconds without an event, a
bookmark or a watch's normal end: a half-open connection) is behind from that moment
until the watch that follows its relist has delivered: a list is a snapshot, and what
changed while it was read (a pod bound onto a reserved node) comes only by that watch.
Delivered means a bookmark (everything up to its resourceVersion has come), or events
(caught up once those that arrived together are applied: what changed during the list
comes first, at once), or the normal end of that first watch, which asks for a short
timeout: where nothing changed since the list, kube-apiserver sends no bookmark (measured
on the local control plane: none in 140 s on a quiet kind), and a watch it ended has
delivered all there was. Gang commits wait for a kind that decides fits
(`Kind.holds_commits`) until then (`GangManager.watch_listed`); `behind` is the metric,
and `health` fails /healthz once a kind has been behind for `behind_limit` seconds.

A kind is behind too from a catch-up request (`InformerOptions.catch_up`, made by a
Binding whose answer was lost, extender/kube/catch_up.py) until a watch begun after the
request has delivered: the request counts as a break, and the kind's watch in progress is
cut and started again from the last resourceVersion it delivered, in catch-up mode. No
relist: a watch from there delivers everything since, and one too old for the API server
(410) relists as any. A watch begun before the request never catches the kind up, even if
what it delivers is read after it; a kind whose watch broke meanwhile is caught up once,
by whichever watch comes after both.

A relist deletes what it did not show, of what the informer applied (`_known`) and, for
pods, of what the core learned otherwise (from filter calls) before the list began
(`Kind.reconcile`, `GangManager.pods_listed`).

A list is applied page by page as the pages come, and the informer yields to the event
loop every `yield_every` objects, so that a list of 100,000 objects neither sits whole
in memory nor holds the loop for seconds (docs/reliability.md, "History at scale").

A kind of an optional API (a CRD such as Volcano's, an alpha API such as the upstream
PodGroup) is watched only while the API server serves it: its group-version's discovery
document is asked every `discovery_interval` seconds until it lists the resource (no
list, no watch, no warning before that), and when a list or watch later answers 404 the
kind goes back to asking, its objects deleted from the cache. Not being served counts as
listed for readiness: an API that does not exist must not keep the extender unready.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.core.manager import GangManager
from extender.core.model.convert import budget_from_k8s, node_from_k8s, pod_from_k8s
from extender.core.model.convert_groups import group_from_k8s
from extender.kube.catch_up import CatchUpRequests
from extender.kube.client import PODGROUP_PATH, ApiError, Kube, ProtoDecoder, ResourceExpired
from extender.kube.decode import UNDECODABLE, Undecodable
from extender.kube.gc_freeze import FREEZE_EVERY, Freezer, keep_out_of_collections

log = logging.getLogger("gang-extender.informer")


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    path: str
    key: Callable[[dict[str, Any]], str]
    apply: Callable[[GangManager, dict[str, Any], float], None]
    delete: Callable[[GangManager, str, float], None]
    # (group-version path, resource) of an optional API, watched only while served;
    # None: always served (nodes, pods, the scheduler-plugins PodGroup CRD we ship).
    discover: tuple[str, str] | None = None
    # How to read its watch in protobuf (`Informer(protobuf=True)`); None: JSON only.
    proto: Callable[[], ProtoDecoder] | None = None
    # What others bind or change in it decides whether a node fits: while its watch is
    # broken, no gang commits (`GangManager.watch_broken`), until it is listed again and
    # the watch after that list has delivered (`GangManager.watch_listed`).
    holds_commits: bool = False
    # After a list: (manager, keys listed, when the list began, now) for what the core
    # holds of the kind without the informer having applied it (pods a filter call told
    # of); None: the core holds only what the informer applied.
    reconcile: Callable[[GangManager, set[str], float, float], None] | None = None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _apply_node(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_node(node_from_k8s(obj))


def _apply_pod(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_pod(pod_from_k8s(obj), now)


def _apply_group(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_group(group_from_k8s(obj), now)


def _apply_budget(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_budget(budget_from_k8s(obj))


def _pod_proto() -> ProtoDecoder:
    # Imported only when asked for: the protobuf runtime and the core API's descriptors
    # cost 4 MiB of memory and 25-30 ms at import.
    from extender.kube import protobuf

    return protobuf.Pod, protobuf.pod_dict


def _ns_name(obj: dict[str, Any]) -> str:
    return f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}"


NODES = Kind(
    "nodes", "/api/v1/nodes", lambda o: str(_meta(o).get("name", "")), _apply_node,
    lambda m, key, now: m.on_node_deleted(key), holds_commits=True,
)
PODS = Kind(
    "pods", "/api/v1/pods", lambda o: str(_meta(o).get("uid", "")), _apply_pod,
    lambda m, key, now: m.on_pod_deleted(key, now), proto=_pod_proto, holds_commits=True,
    reconcile=lambda m, uids, began, now: m.pods_listed(uids, began, now),
)
GROUPS = Kind(
    "podgroups", f"{PODGROUP_PATH}/podgroups", _ns_name, _apply_group,
    lambda m, key, now: m.on_group_deleted(key),
)
# What the preemption needs to know to never pick a victim the Eviction API would refuse.
BUDGETS = Kind(
    "poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", _ns_name, _apply_budget,
    lambda m, key, now: m.on_budget(key),
)


# Objects applied between two yields to the event loop during a list: converting and
# applying a pod (and telling the status writer) costs about 60 µs of CPU, so 100 of
# them about 6 ms.
YIELD_EVERY = 100
# Objects per page asked of the API server: a page is parsed in one piece, on the loop
# (250 pods: about 7 ms).
PAGE_SIZE = 250
# A watch asks kube-apiserver to end it after this long (and starts the next one). Its
# normal end is a sign of life where nothing changes: kube-apiserver sends bookmarks about
# every minute (the cacher's defaultBookmarkFrequency) and 2 s before a watch's end, but
# only once its resourceVersion has moved past the watch's, which on a quiet kind may
# take its etcd's progress notifications (every 10 minutes by default).
WATCH_SECONDS = 60
# The first watch after a relist, while the kind is behind: its bookmark (2 s before its
# end, if anything changed since the list) or its normal end catches the kind up within
# about 3 s even where nothing changes (measured on the local control plane: a quiet pod
# watch cut, relisted after 0.5 s, caught up 6.0 s after the cut with 5 s here).
CATCH_UP_WATCH_SECONDS = 3
# A watch that delivers nothing, not even a bookmark, and does not end for this long (two
# watch lengths, two bookmark intervals) is taken as broken and started over from a
# relist: a half-open connection, which the HTTP read timeout (the watch's own length
# plus 30 s) would notice later, or a server that stopped serving it.
WATCH_IDLE_SECONDS = 120.0
# /healthz fails once a kind has been behind this long: its commits have been held as
# long, and a restart (a new connection, a new list) is what is left to try.
BEHIND_UNHEALTHY_SECONDS = 180.0


class WatchIdle(Exception):
    """Nothing delivered by a kind's watch for `Informer.idle_timeout` seconds."""


@dataclass(slots=True)
class _Skips:
    """Objects of one kind that could not be decoded or converted: at most one log line
    every `interval` seconds, so a flood of bad objects cannot flood the log."""

    count: int = 0
    unlogged: int = 0
    logged_at: float = float("-inf")


@dataclass(frozen=True)
class InformerOptions:
    protobuf: bool = False  # see `Informer`
    # Set once every kind is listed; made by the wiring when others wait for it too.
    synced: asyncio.Event | None = None
    on_skip: Callable[[str, str], None] | None = None  # (kind, reason) of a skipped object
    on_served: Callable[[str, bool], None] | None = None  # an optional kind's API came or went
    discovery_interval: float = 10.0  # seconds between two looks for an optional kind
    log_interval: float = 10.0  # at most one log line about skipped objects this often
    yield_every: int = YIELD_EVERY
    page_size: int = PAGE_SIZE
    freeze_every: int = FREEZE_EVERY
    idle_timeout: float = WATCH_IDLE_SECONDS
    behind_limit: float = BEHIND_UNHEALTHY_SECONDS
    # Requests to catch the kinds it names up (a Binding's answer was lost); made by the
    # wiring and handed to the binding cycle too. None: none come.
    catch_up: CatchUpRequests | None = None


class Informer:
    """Runs one list+watch loop per kind; `synced` is set once every kind is listed.

    `protobuf`: watch the kinds that have a `proto` decoder (pods) in protobuf. Off by
    default: it saves kube-apiserver a JSON encoding of every pod event where no other
    client watches pods in JSON, and costs the extender more CPU per event than JSON
    (docs/performance.md, "CPU per pod": measured both ways).
    """

    def __init__(
        self,
        kube: Kube,
        manager: GangManager,
        clock: Callable[[], float],
        on_change: Callable[[], None],
        kinds: tuple[Kind, ...] = (NODES, PODS, GROUPS),
        options: InformerOptions | None = None,
    ) -> None:
        # Kept whole: its fields are read where they apply, never copied.
        self._options = o = options or InformerOptions()
        self.kube = kube
        self.manager = manager
        self.clock = clock
        self.on_change = on_change
        self.kinds = kinds
        self.synced = o.synced if o.synced is not None else asyncio.Event()
        self._listed: set[str] = set()
        self._known: dict[str, set[str]] = {k.name: set() for k in kinds}
        self.served: dict[str, bool] = {}  # optional kinds: served at the last look
        self._yield_every = max(1, o.yield_every)
        self._skips: dict[str, _Skips] = {k.name: _Skips() for k in kinds}
        self._freezer = Freezer(o.freeze_every)
        # Kinds behind (their watch broke, and the one after the relist has delivered
        # nothing yet): since when.
        self._broken_at: dict[str, float] = {}
        # Per kind, how many times its watch broke: a catch-up scheduled before a break
        # must not apply after it.
        self._breaks: dict[str, int] = {k.name: 0 for k in kinds}
        # Each kind's watch request in progress, by the timeout a catch-up request cuts
        # it short with (`_serve_catch_ups`).
        self._cuts: dict[str, asyncio.Timeout] = {}

    @property
    def skipped(self) -> dict[str, int]:
        """Objects skipped so far, per kind (conversion or the cache refused them)."""
        return {name: s.count for name, s in self._skips.items()}

    async def run(self) -> None:
        catch_ups = () if self._options.catch_up is None else (self._serve_catch_ups(),)
        await asyncio.gather(*(self._loop(k) for k in self.kinds), *catch_ups)

    def _epoch(self, kind: Kind) -> tuple[int, int]:
        """What a watch that would catch `kind` up must have begun after: its last break,
        and the last catch-up request (read from the request itself, so a request counts
        from the moment it is made, before `_serve_catch_ups` has woken to act on it),
        if it names `kind`: a kind it does not name is not behind by it."""
        requests = self._options.catch_up
        if requests is None or kind.name not in requests.kinds:
            return self._breaks[kind.name], 0
        return self._breaks[kind.name], requests.count

    async def _serve_catch_ups(self) -> None:
        """Each catch-up request: the kinds it names are broken from now (behind, and
        held in the gang manager), and the watch of each is cut and begun again."""
        requests = self._options.catch_up
        assert requests is not None
        loop = asyncio.get_running_loop()
        seen = 0
        while True:
            seen = await requests.next(seen)
            for kind in self.kinds:
                if kind.name not in requests.kinds:
                    continue
                if kind.name not in self._broken_at:
                    log.info("%s: a Binding's answer was lost; watching again from the last "
                             "event, gang commits wait until the new watch has delivered",
                             kind.name)
                self._broke(kind)
                cut = self._cuts.get(kind.name)
                if cut is not None and not cut.expired():  # not already being cut
                    cut.reschedule(loop.time())

    def behind(self) -> dict[str, float]:
        """Seconds each kind has been behind (0: caught up), for the metric."""
        now = self.clock()
        return {k.name: max(0.0, now - self._broken_at[k.name]) if k.name in self._broken_at
                else 0.0 for k in self.kinds}

    def health(self) -> str | None:
        """Why /healthz should fail: a kind behind for `behind_limit` seconds; else None."""
        limit = self._options.behind_limit
        late = [(age, name) for name, age in self.behind().items() if age >= limit]
        if not late:
            return None
        age, name = max(late)
        return (f"the {name} watch has been behind for {age:.0f}s (limit {limit:g}s): its "
                f"list or watch keeps failing, or its new watch has delivered nothing since "
                f"its relist")

    def _skip(self, kind: Kind, what: str, exc: Exception | str,
              reason: str = "convert") -> None:
        skips = self._skips[kind.name]
        skips.count += 1
        if self._options.on_skip is not None:
            self._options.on_skip(kind.name, reason)
        now = self.clock()
        if now - skips.logged_at < self._options.log_interval:
            skips.unlogged += 1
            return
        more = (f" ({skips.unlogged} more skipped in the last {self._options.log_interval:g}s)"
                if skips.unlogged else "")
        skips.logged_at, skips.unlogged = now, 0
        why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        log.warning("skipping %s %s: %s%s", kind.name, what, why, more)

    def _apply(self, kind: Kind, obj: dict[str, Any]) -> str | None:
        """Applies one object; returns its key (None: it has none that can be read).
        An object that fails is skipped whatever the error: a relist would meet it
        again, so raising would only stall the kind."""
        if type(obj) is Undecodable:
            self._skip(kind, obj.name or "(an object)", f"undecodable: {obj.why}", "decode")
            return None
        try:
            key = kind.key(obj)
        except Exception as exc:
            self._skip(kind, "(unreadable metadata)", exc)
            return None
        try:
            kind.apply(self.manager, obj, self.clock())
        except Exception as exc:
            # Its previous version (if any) stays, and stays known: if it vanishes, a
            # relist still deletes it.
            self._skip(kind, key, exc)
            return key
        self._known[kind.name].add(key)
        return key

    def _delete(self, kind: Kind, key: str) -> None:
        self._known[kind.name].discard(key)
        try:
            kind.delete(self.manager, key, self.clock())
        except Exception as exc:
            self._skip(kind, key, exc)

    def _clear(self, kind: Kind) -> None:
        """The kind has no objects (its API is not served): listed, empty, and not
        behind (there is nothing to watch)."""
        self._listed_all(kind, set(), self.clock())
        self._caught_up(kind)

    def _listed_all(self, kind: Kind, seen: set[str], began: float) -> None:
        """A list that began at `began` ended: what it did not show has vanished."""
        for key in self._known[kind.name] - seen:
            self._delete(kind, key)
        if kind.reconcile is not None:
            try:
                kind.reconcile(self.manager, seen, began, self.clock())
            except Exception as exc:
                self._skip(kind, "(what the list did not show)", exc)
        self._listed.add(kind.name)
        if len(self._listed) == len(self.kinds) and not self.synced.is_set():
            self.synced.set()
            self._freeze()
        self.on_change()

    async def _relist(self, kind: Kind) -> str:
        """List the kind page by page, applying each page as it comes, yielding to the
        event loop every `yield_every` objects; then delete what the list did not show.
        Returns the resourceVersion to watch from."""
        seen: set[str] = set()
        rv = ""
        began = self.clock()
        budget = self._yield_every
        async for items, page_rv in self.kube.list_pages(kind.path, self._options.page_size):
            rv = page_rv
            for obj in items:
                key = self._apply(kind, obj)
                if key is not None:
                    seen.add(key)
                budget -= 1
                if budget <= 0:
                    budget = self._yield_every
                    self.on_change()  # what the objects so far set off goes out now
                    await asyncio.sleep(0)
            self.on_change()
            self._freeze()
        self._listed_all(kind, seen, began)
        return rv

    def _freeze(self) -> None:
        self._freezer.reset()
        keep_out_of_collections()

    def _broke(self, kind: Kind) -> None:
        """Its watch (or list) failed: the cache may fall behind what others do from now
        until the kind is listed and watched again, and gangs must not commit on it
        meanwhile."""
        self._breaks[kind.name] += 1
        if kind.name not in self._broken_at:
            self._broken_at[kind.name] = self.clock()
            if kind.holds_commits:
                self.manager.watch_broken(kind.name)

    def _caught_up(self, kind: Kind, how: str = "delivered") -> None:
        """Listed again, and the new watch delivered: what changed during the list has
        come, and the commits held since the watch broke may go ahead."""
        since = self._broken_at.pop(kind.name, None)
        if since is None:
            return
        log.info("%s caught up %.1fs after its watch broke: listed again, and its new watch "
                 "%s (gang commits wait until every watch that broke has)", kind.name,
                 self.clock() - since, how)
        if kind.holds_commits:
            self.manager.watch_listed(kind.name, self.clock())
        self.on_change()

    async def _wait_until_served(self, kind: Kind) -> None:
        """Return once the optional API of `kind` is served; until then it has no
        objects (those of an API that went away are deleted) and counts as listed."""
        assert kind.discover is not None
        group_version, resource = kind.discover
        while True:
            try:
                names = await self.kube.discover(group_version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Unknown: objects already known stay, and readiness does not wait.
                log.warning("%s: discovery of %s failed (%s); asking again in %gs",
                            kind.name, group_version, exc, self._options.discovery_interval)
                if kind.name not in self._listed:
                    self._clear(kind)
                await asyncio.sleep(self._options.discovery_interval)
                continue
            served = names is not None and resource in names
            if served != self.served.get(kind.name):
                log.info("%s: %s/%s is %s", kind.name, group_version.removeprefix("/apis/"),
                         resource, "served; watching it" if served else "not served")
                self.served[kind.name] = served
                if self._options.on_served is not None:
                    self._options.on_served(kind.name, served)
            if served:
                return
            if self._known[kind.name] or kind.name not in self._listed:
                self._clear(kind)
            self._caught_up(kind)  # a 404 made it behind: nothing is served to be behind on
            await asyncio.sleep(self._options.discovery_interval)

    async def _watch(self, kind: Kind, rv: str) -> None:
        """Watch `kind` from `rv`, one watch request after another, until one fails;
        raises `WatchIdle` once `idle_timeout` seconds pass without a delivery or a
        watch's normal end."""
        loop = asyncio.get_running_loop()
        idle_timeout = self._options.idle_timeout
        deadline = loop.time() + idle_timeout
        # The deadline is moved on at most every tenth of the timeout: a timer rescheduled
        # on every event would cost a heap push each.
        slack = min(1.0, idle_timeout / 10)
        while True:
            proto = kind.proto() if self._options.protobuf and kind.proto else None
            behind = kind.name in self._broken_at
            epoch = self._epoch(kind)
            idle = asyncio.timeout_at(deadline)
            cut = asyncio.timeout(None)
            try:
                async with idle, cut:
                    self._cuts[kind.name] = cut  # entered: it may be rescheduled now
                    async for etype, obj in self.kube.watch(
                            kind.path, rv, proto=proto,
                            timeout_seconds=CATCH_UP_WATCH_SECONDS if behind else WATCH_SECONDS):
                        now = loop.time()
                        if now + idle_timeout - deadline > slack:
                            deadline = now + idle_timeout
                            idle.reschedule(deadline)
                        rv = self._event(kind, etype, obj, rv)
                        if behind:
                            behind = False
                            if etype == "BOOKMARK":  # everything up to it has come
                                self._caught_up_unless_broken(kind, epoch, "delivered a "
                                                              "bookmark")
                            else:
                                # Once the events that came with this one are applied: the
                                # loop runs its callbacks only when the stream has no more
                                # bytes at hand.
                                loop.call_soon(self._caught_up_unless_broken, kind, epoch,
                                               "delivered events")
            except TimeoutError:
                if cut.expired():
                    continue  # a catch-up request: watched again from `rv`, behind
                if idle.expired():
                    raise WatchIdle(kind.name) from None
                raise
            finally:
                if self._cuts.get(kind.name) is cut:
                    del self._cuts[kind.name]
            # Ended by the server: the connection was alive, and all it had was delivered.
            deadline = loop.time() + idle_timeout
            if behind:
                self._caught_up_unless_broken(
                    kind, epoch, "ended normally, nothing having changed since the list")

    def _caught_up_unless_broken(self, kind: Kind, epoch: tuple[int, int], how: str) -> None:
        """Caught up, unless the kind broke or a catch-up was requested after the watch
        that delivered began (`_epoch`): that watch may not have what changed since."""
        if self._epoch(kind) == epoch:
            self._caught_up(kind, how)

    def _event(self, kind: Kind, etype: str, obj: dict[str, Any], rv: str) -> str:
        """Apply one watch event; returns the resourceVersion to watch from after it."""
        meta = _meta(obj)
        if meta.get("resourceVersion"):
            rv = str(meta["resourceVersion"])
        if etype in ("ADDED", "MODIFIED"):
            self._apply(kind, obj)
            if etype == "ADDED":
                self._freezer.count()
        elif etype == "DELETED":
            try:
                key = kind.key(obj)
            except Exception as exc:
                self._skip(kind, "(unreadable metadata)", exc)
                return rv
            self._delete(kind, key)
        elif etype == UNDECODABLE:
            # Its type is unknown too: a deletion missed here is made by the next relist.
            name, why = (obj.name, obj.why) if isinstance(obj, Undecodable) else ("", "")
            self._skip(kind, name or "(a watch event)", f"undecodable: {why}", "decode")
            return rv
        else:
            return rv  # BOOKMARK
        self.on_change()
        return rv

    async def _loop(self, kind: Kind) -> None:
        delay = 0.5
        while True:
            try:
                if kind.discover is not None:
                    await self._wait_until_served(kind)
                rv = await self._relist(kind)
                delay = 0.5
                await self._watch(kind, rv)
            except WatchIdle:
                log.warning("%s watch delivered nothing, not even a bookmark, for %gs: taken "
                            "as broken; relisting", kind.name, self._options.idle_timeout)
                self._broke(kind)
            except ResourceExpired:
                log.info("%s watch expired; relisting", kind.name)
                self._broke(kind)
            except asyncio.CancelledError:
                raise
            except (ApiError, OSError, ValueError, Exception) as exc:
                self._broke(kind)
                if kind.discover is not None and isinstance(exc, ApiError) and exc.status == 404:
                    # The API went away (its CRD deleted): back to discovery, which
                    # deletes its objects once the API server says so too.
                    log.info("%s: no longer served", kind.name)
                    await asyncio.sleep(min(delay, self._options.discovery_interval))
                else:
                    log.warning("%s list/watch failed (%s); retrying in %.1fs", kind.name,
                                exc, delay)
                    await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

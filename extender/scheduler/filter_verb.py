"""The filter verb's two waits: a filter call kept open on kube-scheduler's serial loop
while its gang's members are still being created (the assembly wait), or while the
Bindings of the commits under way come back through the watch (the commit wait).

Both are woken by `changed`, which the dispatcher calls after every watch event it
applies and every Binding that returns; neither blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import FilterResult


class FilterReads(Protocol):
    """What the waits read of the core (`Reads`): whether a commit has landed."""

    def landing(self, gang: str | None, but: str | None = None) -> bool: ...

    def pod_landing(self, uid: str) -> bool: ...

    def pod_bound(self, uid: str) -> bool: ...


class FilterManager(Protocol):
    """What the waits tell and ask the gang manager (`GangManager`)."""

    @property
    def reads(self) -> FilterReads: ...

    def filter(self, pod: PodInfo, node_names: list[str], now: float,
               waited: float = 0.0) -> FilterResult: ...

    def sample(self, uid: str, node_names: list[str] | None) -> None: ...


class Holds(Protocol):
    """The Bindings held for kube-scheduler's bind request (`HeldBindings`): told which
    members a filter call is taking through a cycle, whose Bindings wait for it."""

    def call_started(self, uid: str) -> None: ...

    def call_ended(self, uid: str) -> None: ...

    def held(self, uid: str) -> bool: ...

    def take_back(self, uid: str) -> bool: ...


@dataclass(frozen=True)
class WaitListeners:
    """Told how each wait ended, for the metrics."""

    # (placed, seconds) after each call that waited for its gang's members.
    on_assembly_wait: Callable[[bool, float], None] | None = None
    # (landed, seconds) after each call that waited for its gang's commit.
    on_commit_wait: Callable[[bool, float], None] | None = None


class FilterVerb:
    def __init__(
        self,
        manager: FilterManager,
        clock: Callable[[], float],
        drain: Callable[[], object],
        bindings: Holds,
        commit_wait: float,
        listeners: WaitListeners | None = None,
    ) -> None:
        self.manager = manager
        self.reads = manager.reads
        self.clock = clock
        # Carry out what the manager asked for. A Binding of a pod whose filter call is
        # in progress here (told to `bindings`, `HeldBindings.in_call`) is held until
        # kube-scheduler's bind request for it (`bindings` says whether it is, and takes
        # one back).
        self.drain = drain
        self.bindings = bindings
        self.commit_wait = commit_wait
        listeners = listeners or WaitListeners()
        self.on_assembly_wait = listeners.on_assembly_wait
        self.on_commit_wait = listeners.on_commit_wait
        self._change_waiters: list[asyncio.Future[None]] = []
        # Calls waiting: pod uid -> (pod key, since, for what: "members" of a gang being
        # created, or its "commit" to land).
        self._waits: dict[str, tuple[str, float, str]] = {}

    def changed(self) -> None:
        """Something a waiting call may be waiting for happened: let each look again."""
        waiters, self._change_waiters = self._change_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def _next_change(self, timeout: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._change_waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            if fut in self._change_waiters:
                self._change_waiters.remove(fut)

    async def filter(self, pod: PodInfo, node_names: list[str]) -> FilterResult:
        """Answer one /filter request. A member of a gang still being created may wait
        here for the rest, woken by each watch event, because a member turned away is
        retried by kube-scheduler only after its 1-2 s pod backoff (architecture.md §6)."""
        waiting = self.commit_wait > 0 and pod.gang is not None
        if waiting:
            # A commit during the call holds this member's Binding for the call's bind
            # request, so it must put the member on one of these nodes if it can.
            self.bindings.call_started(pod.uid)
            self.manager.sample(pod.uid, node_names)
        try:
            return await self._filter(pod, node_names, waiting)
        finally:
            if waiting:
                self.bindings.call_ended(pod.uid)
                self.manager.sample(pod.uid, None)

    async def _filter(self, pod: PodInfo, node_names: list[str], waiting: bool
                      ) -> FilterResult:
        start = self.clock()
        result = self.manager.filter(pod, node_names, start)
        waited = 0.0
        if result.wait > 0:
            self._waits[pod.uid] = (pod.key, start, "members")
            try:
                while result.wait > 0:
                    await self._next_change(result.wait)
                    now = self.clock()
                    waited = max(now - start, 1e-6)
                    result = self.manager.filter(pod, node_names, now, waited)
            finally:
                self._waits.pop(pod.uid, None)
        self.drain()
        if waited and self.on_assembly_wait is not None:
            self.on_assembly_wait(bool(result.nodes), waited)
        if waiting and result.nodes and pod.gang is not None:
            if self.bindings.held(pod.uid) or self.bindings.take_back(pod.uid):
                # Its gang's commit (set off by this call, by the tick meanwhile, or
                # earlier with its Binding still queued) binds this member too, once
                # kube-scheduler asks (`HeldBindings.hold`).
                await self._commit(pod, but=pod.uid)
            elif not (self.reads.pod_landing(pod.uid) or self.reads.pod_bound(pod.uid)):
                # A member kube-scheduler binds itself, through the bind verb.
                await self._commit(pod)
            # (A member whose own Binding is already sent, or that is bound, is
            # answered at once: kube-scheduler must assume it before its informer sees
            # it bound, and a call held meanwhile would fail at assume.)
        elif waiting and not result.nodes and (
                self.reads.pod_bound(pod.uid) or self.reads.pod_landing(pod.uid)):
            # Bound, or being bound, on a node kube-scheduler did not pass (not in its
            # sample of a large cluster, or ruled out by its own stale view): this cycle
            # fails whatever the answer. Its next pops would be the other members the
            # commits under way are binding, each failing the same way on a large
            # cluster; held until those land, its queue drops them unseen.
            await self._commit(pod)
        return result

    async def _commit(self, pod: PodInfo, but: str | None = None) -> None:
        """Answer a member's filter call only once the members the commits let through
        (its gang's, and any other gang's the tick committed meanwhile) are seen bound
        by the watch, or after `commit_wait` seconds.

        Why: kube-scheduler's loop is serial and the committed members wait in its
        queue. Answered at once, the loop takes the next member while that member's
        Binding is still in flight, and spends a whole scheduling cycle (and a bind
        call) on a pod the extender is binding anyway: 550-600 of 720 pods at 100 nodes.
        Held until kube-scheduler's watch has delivered the Bindings (the extender's own
        watch stands in for it), its queue drops those members unseen. Every gang's,
        not only the caller's: on a loaded control plane the tick commits the next
        gangs while the call waits, and their members come next in kube-scheduler's
        queue (docs/performance.md, "The commit wait")."""
        if not self.reads.landing(None, but):
            return
        start = self.clock()
        deadline = start + self.commit_wait
        self._waits[pod.uid] = (pod.key, start, "commit")
        try:
            while (landing := self.reads.landing(None, but)) and (
                    left := deadline - self.clock()) > 0:
                await self._next_change(left)
        finally:
            self._waits.pop(pod.uid, None)
        if self.on_commit_wait is not None:
            self.on_commit_wait(not landing, max(self.clock() - start, 0.0))

    def waits(self) -> list[dict[str, object]]:
        now = self.clock()
        return [{"pod": key, "waitedSeconds": round(now - since, 3), "for": what}
                for key, since, what in self._waits.values()]

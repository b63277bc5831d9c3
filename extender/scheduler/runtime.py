"""Glue between the pure framework and the outside: runs the actions it asks for.

Held binds are asyncio futures keyed by pod uid, resolved when the gang's Bindings
return or the framework fails them; nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from extender.core.framework import (
    BindPod,
    FailHeld,
    FilterResult,
    GangEvent,
    GangFramework,
    WakePods,
)
from extender.core.types import PodInfo
from extender.kube.client import ApiError, Kube

log = logging.getLogger("gang-extender")

WAKE_ANNOTATION = "gang-extender.x-k8s.io/wake"
# The wake-up memo is pruned of entries older than a minute once it holds this many, so
# it stays small (it filled towards 10,000 entries in the long soak before).
_WOKEN_MEMO_PRUNE_AT = 1000


@dataclass
class RuntimeConfig:
    # Stop holding a bind after this long and let kube-scheduler retry; keep it below
    # the bind extender entry's httpTimeout so the scheduler never times out first.
    bind_hold_limit: float = 240.0
    tick_interval: float = 0.1
    # Wake-ups are patches on pods: at most this many per second, each pod at most once
    # per `wake_min_interval` seconds (field lesson: over-eager wake-ups flood).
    wake_rate: float = 50.0
    wake_min_interval: float = 1.0
    # Binding POSTs in flight at once; the rest queue in order. A gang commits all its
    # Bindings together, and unbounded, 32+ concurrent requests made the HTTP client's
    # connection pool (scans of every connection per request) and new TLS connections
    # the extender's biggest CPU cost: 3.0 ms per Binding at 64 in flight, 2.0 at 8,
    # 1.3-1.6 at 1-4, measured against a local API server (docs/performance.md).
    binding_concurrency: int = 16


@dataclass
class Stats:
    bindings: int = 0
    binding_errors: int = 0
    wakeups: int = 0
    events: list[GangEvent] = field(default_factory=list)


class Runtime:
    def __init__(
        self,
        fw: GangFramework,
        kube: Kube | None,
        config: RuntimeConfig | None = None,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[GangEvent], None] | None = None,
        on_wake: Callable[[], None] | None = None,
        on_assembly_wait: Callable[[bool, float], None] | None = None,
    ) -> None:
        self.fw = fw
        self.kube = kube
        self.config = config or RuntimeConfig()
        self.clock = clock
        self.on_event = on_event
        self.on_wake = on_wake
        # (placed, seconds) after each filter call that waited for its gang's members.
        self.on_assembly_wait = on_assembly_wait
        self._change_waiters: list[asyncio.Future[None]] = []
        # Filter calls waiting for their gang's members: pod uid -> (pod key, since).
        self.assembling: dict[str, tuple[str, float]] = {}
        self.futures: dict[str, asyncio.Future[str | None]] = {}
        self.stats = Stats()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake_queue: dict[tuple[str, str, str], str] = {}
        self._woken_at: dict[tuple[str, str, str], float] = {}
        self._wake_signal = asyncio.Event()
        self._binding_slots = asyncio.Semaphore(self.config.binding_concurrency)

    # ----- actions ---------------------------------------------------------------------

    def drain(self) -> None:
        """Carry out what the framework asked for since the last call."""
        outbox, self.fw.outbox = self.fw.outbox, []
        for action in outbox:
            if isinstance(action, BindPod):
                self._spawn(self._bind(action))
            elif isinstance(action, FailHeld):
                self._resolve(action.uid, action.message)
            elif isinstance(action, WakePods):
                for pod in action.pods:
                    self._wake_queue[pod] = action.reason
                self._wake_signal.set()
            elif isinstance(action, GangEvent):
                level = logging.WARNING if action.warning else logging.INFO
                log.log(level, "gang=%s reason=%s %s", action.gang, action.reason, action.message)
                if self.on_event is not None:
                    self.on_event(action)

    def cache_changed(self) -> None:
        """A watch event was applied: run what it set off, and let a filter call that is
        waiting for its gang's members look again."""
        self.drain()
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

    # ----- the filter verb ---------------------------------------------------------------

    async def filter(self, pod: PodInfo, node_names: list[str]) -> FilterResult:
        """Answer one /filter request. A member of a gang still being created may wait
        here for the rest, woken by each watch event, because a member turned away is
        retried by kube-scheduler only after its 1-2 s pod backoff (design 3.8)."""
        start = self.clock()
        result = self.fw.filter(pod, node_names, start)
        waited = 0.0
        if result.wait > 0:
            self.assembling[pod.uid] = (pod.key, start)
            try:
                while result.wait > 0:
                    await self._next_change(result.wait)
                    now = self.clock()
                    waited = max(now - start, 1e-6)
                    result = self.fw.filter(pod, node_names, now, waited)
            finally:
                self.assembling.pop(pod.uid, None)
        self.drain()
        if waited and self.on_assembly_wait is not None:
            self.on_assembly_wait(bool(result.nodes), waited)
        return result

    def debug(self) -> dict[str, object]:
        """The framework's view plus the filter calls waiting for their gang."""
        now = self.clock()
        view = self.fw.debug(now)
        view["filterWaits"] = [
            {"pod": key, "waitedSeconds": round(now - since, 3)}
            for key, since in self.assembling.values()
        ]
        return view

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _future(self, uid: str) -> asyncio.Future[str | None]:
        fut = self.futures.get(uid)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self.futures[uid] = fut
        return fut

    def _resolve(self, uid: str, error: str | None) -> None:
        fut = self.futures.pop(uid, None)
        if fut is not None and not fut.done():
            fut.set_result(error)

    async def _post_binding(self, namespace: str, name: str, uid: str, node: str) -> str | None:
        if self.kube is None:
            return "no Kubernetes client configured"
        try:
            async with self._binding_slots:
                await self.kube.bind(namespace, name, uid, node)
            return None
        except ApiError as exc:
            if exc.status == 409:
                # Already assigned: success only if it is assigned where we meant to.
                try:
                    pod = await self.kube.get_pod(namespace, name)
                except (ApiError, OSError) as get_exc:
                    return f"binding pod {namespace}/{name} to {node}: {exc}; {get_exc}"
                if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
                    return None
            return f"binding pod {namespace}/{name} to node {node} failed: {exc}"
        except OSError as exc:
            return f"binding pod {namespace}/{name} to node {node} failed: {exc}"
        except Exception as exc:
            return f"binding pod {namespace}/{name} to node {node} failed: {exc!r}"

    async def _bind(self, action: BindPod) -> None:
        self._future(action.uid)
        error = await self._post_binding(action.namespace, action.name, action.uid, action.node)
        self._finish_binding(action.uid, action.namespace, action.name, action.node, error,
                             action.gang)

    def _finish_binding(
        self, uid: str, namespace: str, name: str, node: str, error: str | None, gang: str | None
    ) -> None:
        if error is None:
            self.stats.bindings += 1
            log.info("bound pod=%s/%s node=%s gang=%s", namespace, name, node, gang or "-")
        else:
            self.stats.binding_errors += 1
            log.warning("bind failed pod=%s/%s node=%s gang=%s: %s", namespace, name, node,
                        gang or "-", error)
        self.fw.bind_finished(uid, node, error, self.clock())
        self._resolve(uid, error)
        self.drain()

    # ----- the bind verb ---------------------------------------------------------------

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str | None:
        """Answer one /bind request: None for success or the error text."""
        existing = self.futures.get(uid)
        if existing is not None and not existing.done():
            # A repeat of a bind that is held or in flight waits for its answer, but only
            # if it is the same request: another pod's name, or another node, must not
            # be told the outcome of a bind it did not ask for.
            pod = self.fw.cache.pods.get(uid)
            if pod is not None and (pod.namespace, pod.name) != (namespace, name):
                return f"uid {uid} belongs to pod {pod.key}, not {namespace}/{name}"
            target = self.fw.held.get(uid) or self.fw.binding.get(uid)
            if target is not None and target != node:
                return (
                    f"pod {namespace}/{name}: a bind to node {target} is already in progress; "
                    f"refusing to bind it to node {node}"
                )
            return await self._wait(uid, existing, self.clock() + self.config.bind_hold_limit)
        decision = self.fw.bind(namespace, name, uid, node, self.clock())
        if decision.kind == "bound":
            return None
        if decision.kind == "error":
            log.info("bind refused pod=%s/%s node=%s: %s", namespace, name, node, decision.message)
            return decision.message
        if decision.kind == "bind":
            self._future(uid)  # a duplicate request waits on this binding
            error = await self._post_binding(namespace, name, uid, node)
            pod = self.fw.cache.pods.get(uid)
            self._finish_binding(uid, namespace, name, node, error, pod.group if pod else None)
            return error
        fut = self._future(uid)
        self.drain()  # may start the gang's Bindings, which resolve `fut`
        return await self._wait(uid, fut, decision.deadline)

    async def _wait(self, uid: str, fut: asyncio.Future[str | None], deadline: float) -> str | None:
        # A little past the gang's deadline: the framework's own expiry answers first, with
        # the gang-level reason; this limit only guards against a missed tick.
        limit = min(max(deadline - self.clock(), 0.0) + 2.0, self.config.bind_hold_limit)
        if uid in self.fw.binding:
            limit = max(limit, 60.0)  # a Binding is in flight: its answer is the answer
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout=limit)
        except TimeoutError:
            if uid in self.fw.binding:
                return f"binding of pod uid {uid} still in flight; kube-scheduler will retry"
            self.fw.hold_expired(uid)
            self.futures.pop(uid, None)
            pod = self.fw.cache.pods.get(uid)
            gang = self.fw._gang_key(pod) if pod else None
            group = self.fw.cache.groups.get(gang) if gang else None
            have = self.fw._assembled(group) if group else 0
            need = group.min_member if group else 0
            return (
                f"gang {gang}: held the bind of pod {pod.key if pod else uid} for "
                f"{limit:.0f}s with {have} of {need} members ready; kube-scheduler will retry"
            )

    # ----- background loops --------------------------------------------------------------

    async def tick_loop(self) -> None:
        while True:
            self.fw.tick(self.clock())
            self.drain()
            await asyncio.sleep(self.config.tick_interval)

    async def wake_loop(self) -> None:
        """Merge-patch an annotation on pods the scheduler parked, so it retries them now
        instead of after its 5-minute flush (design 3.8), rate-limited."""
        interval = 1.0 / self.config.wake_rate
        while True:
            await self._wake_signal.wait()
            self._wake_signal.clear()
            while self._wake_queue:
                key, reason = next(iter(self._wake_queue.items()))
                del self._wake_queue[key]
                ns, name, uid = key
                pod = self.fw.cache.pods.get(uid)
                if pod is None or pod.node_name or uid in self.fw.held:
                    continue  # placed or gone meanwhile: nothing to wake
                now = self.clock()
                last = self._woken_at.get(key, 0.0)
                if now - last < self.config.wake_min_interval:
                    # Too soon for this pod: try again once its interval has passed.
                    self._spawn(self._requeue_wake(key, reason,
                                                   self.config.wake_min_interval - (now - last)))
                    continue
                self._woken_at[key] = now
                if len(self._woken_at) > _WOKEN_MEMO_PRUNE_AT:
                    # Only the last `wake_min_interval` matters; a minute is plenty.
                    cutoff = now - 60
                    self._woken_at = {k: v for k, v in self._woken_at.items() if v > cutoff}
                await self._wake(ns, name, reason, now)
                await asyncio.sleep(interval)

    async def _requeue_wake(
        self, pod: tuple[str, str, str], reason: str, delay: float
    ) -> None:
        await asyncio.sleep(delay)
        self._wake_queue.setdefault(pod, reason)
        self._wake_signal.set()

    async def _wake(self, namespace: str, name: str, reason: str, now: float) -> None:
        if self.kube is None:
            return
        patch = {"metadata": {"annotations": {WAKE_ANNOTATION: f"{now:.3f}"}}}
        try:
            await self.kube.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{name}", patch)
            self.stats.wakeups += 1
            if self.on_wake is not None:
                self.on_wake()
            log.info("woke pod=%s/%s reason=%s", namespace, name, reason)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("wake-up of pod %s/%s failed: %s", namespace, name, exc)
        except Exception as exc:
            log.warning("wake-up of pod %s/%s failed: %r", namespace, name, exc)

"""Wake-ups: a merge patch of an annotation on pods kube-scheduler parked, so it retries
them now instead of after its 5-minute flush (architecture.md §6), rate-limited (field lesson:
over-eager wake-ups flood the API and the logs).

Only the leader wakes pods (extender/kube/leader.py): the dispatcher queues none on
standby, and the sender asks `active` before each patch. A replica that lost its lease
runs a few seconds more before it exits; the pods still queued then (the rate limit
spreads a big gang's over seconds) are the new leader's to wake, so they are dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from extender.core.model.vocabulary import PodRef, WakePods
from extender.core.reads import Reads
from extender.kube.client import ApiError
from extender.scheduler.supervise import LoopErrors

log = logging.getLogger("gang-extender")

WAKE_ANNOTATION = "gang-extender.x-k8s.io/wake"
# The memo of when each pod was woken is pruned of entries older than a minute once it
# holds this many (it filled towards 10,000 entries in a long soak before).
_WOKEN_MEMO_PRUNE_AT = 1000


class PatchApi(Protocol):
    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None: ...


@dataclass
class WakeConfig:
    rate: float = 50.0  # patches per second at most
    min_interval: float = 1.0  # seconds between two wake-ups of one pod


class Wakeups:
    def __init__(
        self,
        reads: Reads,
        kube: PatchApi | None,
        clock: Callable[[], float],
        config: WakeConfig | None = None,
        on_wake: Callable[[], None] | None = None,
        loop_errors: LoopErrors | None = None,
    ) -> None:
        self.reads = reads  # whether a pod still waits: the wake-ups only look
        self.kube = kube
        self.clock = clock
        self.config = config or WakeConfig()
        self.on_wake = on_wake
        self._queue: dict[PodRef, str] = {}
        self._woken_at: dict[PodRef, float] = {}
        self._signal = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.errors = loop_errors or LoopErrors("wake")

    def add(self, action: WakePods) -> None:
        for pod in action.pods:
            self._queue[pod] = action.reason
        self._signal.set()

    async def run(self, active: Callable[[], bool] = lambda: True) -> None:
        """Wake the queued pods, rate-limited, while `active` (`Leadership.active`): once
        it is not, what is queued is dropped. A pod whose turn raises is reported and
        dropped (supervise.LoopErrors); the loop goes on with the next."""
        interval = 1.0 / self.config.rate
        while True:
            await self._signal.wait()
            self._signal.clear()
            while self._queue:
                if not active():
                    log.info("%d wake-up(s) dropped: this replica no longer holds the lease",
                             len(self._queue))
                    self._queue.clear()
                    break
                pod, reason = next(iter(self._queue.items()))
                del self._queue[pod]
                try:
                    woke = await self._turn(pod, reason)
                    self.errors.ok()
                except Exception as exc:
                    self.errors.report(exc)
                    woke = True  # pace the next one all the same
                if woke:
                    await asyncio.sleep(interval)

    async def _turn(self, pod: PodRef, reason: str) -> bool:
        """One queued pod: woken now (True), later, or not at all."""
        if not self.reads.still_pending(pod.uid):
            return False  # placed or gone meanwhile: nothing to wake
        now = self.clock()
        last = self._woken_at.get(pod, 0.0)
        if now - last < self.config.min_interval:
            # Too soon for this pod: try again once its interval has passed.
            self._spawn(self._later(pod, reason, self.config.min_interval - (now - last)))
            return False
        self._woken_at[pod] = now
        if len(self._woken_at) > _WOKEN_MEMO_PRUNE_AT:
            cutoff = now - 60  # only the last `min_interval` matters
            self._woken_at = {k: v for k, v in self._woken_at.items() if v > cutoff}
        await self._wake(pod, reason, now)
        return True

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _later(self, pod: PodRef, reason: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self._queue.setdefault(pod, reason)
        self._signal.set()

    async def _wake(self, pod: PodRef, reason: str, now: float) -> None:
        if self.kube is None:
            return
        patch = {"metadata": {"annotations": {WAKE_ANNOTATION: f"{now:.3f}"}}}
        try:
            await self.kube.merge_patch(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
                                        patch)
            if self.on_wake is not None:
                self.on_wake()
            log.info("woke pod=%s reason=%s", pod.key, reason)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("wake-up of pod %s failed: %s", pod.key, exc)
        except Exception as exc:
            log.warning("wake-up of pod %s failed: %r", pod.key, exc)

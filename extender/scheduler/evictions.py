"""Evictions of a partial gang's members (architecture.md §8), off the request path.

A gang that ended below its quorum after its commit must not keep part of its members
running: they would hold nodes and wait for peers that never come. They are evicted
through the Eviction API, so a PodDisruptionBudget is respected: a refusal (429) is
retried with backoff for a while, then given up with a warning. Their controller
(Job, MPIJob, JobSet) recreates them and the gang is placed again whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from extender.core.vocabulary import EvictPods, PodRef
from extender.kube.client import ApiError

log = logging.getLogger("gang-extender")


class EvictionApi(Protocol):
    async def evict(self, namespace: str, name: str, uid: str) -> None: ...


@dataclass
class EvictionConfig:
    attempts: int = 8  # per pod, while a PodDisruptionBudget or the API refuses
    first_delay: float = 1.0  # seconds; doubles after each refusal


class Evictions:
    def __init__(
        self,
        kube: EvictionApi | None,
        config: EvictionConfig | None = None,
        on_result: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.config = config or EvictionConfig()
        self.on_result = on_result  # "evicted", "gone", "refused", "error"
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, action: EvictPods) -> None:
        for pod in action.pods:
            task = asyncio.ensure_future(self._evict(pod, action.gang))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        while self._tasks:
            await asyncio.gather(*self._tasks)

    def _result(self, result: str) -> None:
        if self.on_result is not None:
            self.on_result(result)

    async def _evict(self, pod: PodRef, gang: str) -> None:
        if self.kube is None:
            return
        delay = self.config.first_delay
        for attempt in range(1, self.config.attempts + 1):
            try:
                await self.kube.evict(pod.namespace, pod.name, pod.uid)
            except ApiError as exc:
                if exc.status in (404, 409):  # gone, or replaced by a pod of the same name
                    self._result("gone")
                    return
                if exc.status != 429 and exc.status < 500:
                    self._result("error")
                    log.warning("eviction of pod %s (gang %s) failed: %s", pod.key, gang, exc)
                    return
                log.info("eviction of pod %s (gang %s) refused (attempt %d): %s", pod.key,
                         gang, attempt, exc)
            except Exception as exc:
                log.info("eviction of pod %s (gang %s) failed (attempt %d): %r", pod.key,
                         gang, attempt, exc)
            else:
                self._result("evicted")
                log.warning("evicted pod=%s gang=%s: bound by a commit whose gang never "
                            "reached its quorum", pod.key, gang)
                return
            await asyncio.sleep(delay)
            delay *= 2
        self._result("refused")
        log.warning("gave up evicting pod %s of partial gang %s after %d attempts", pod.key,
                    gang, self.config.attempts)

"""Evictions through the Eviction API, off the request path: a partial gang's members
(architecture.md §11) and the victims of a whole-gang preemption.

A gang that ended below its quorum after its commit must not keep part of its members
running: they would hold nodes and wait for peers that never come. They are evicted
through the Eviction API, so a PodDisruptionBudget is respected: a refusal (429) is
retried with backoff for a while, then given up with a warning. Their controller
(Job, MPIJob, JobSet) recreates them and the gang is placed again whole. So are the
members of a started gang of disruption mode all that lost one (`GangDisrupted`).

A preemption's victims (`EvictPods.preemptor` set) are tried once each (a connection
error or a 5xx a few times, quickly), and every answer goes straight back to the gang
manager (through the `answer` the dispatcher passes with the action): a refusal there
means choosing other victims or waiting, which only the core can decide, not retrying
here for minutes.

Only the leader evicts (extender/kube/leader.py): the dispatcher hands nothing over on
standby, and each try, a retry seconds later included, asks `active` first. A replica
that lost its lease keeps running for a few seconds before it exits; an eviction it
decided before may be wrong by then (the new leader may have placed the gang again, or
chosen other victims), so it is dropped, and a victim's is answered as refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from extender.core.model.vocabulary import EvictPods, PodRef
from extender.kube.client import ApiError

log = logging.getLogger("gang-extender")


# A preemption's answers: (pod uid, None) once it is let go (or gone), (uid, why) when
# refused.
Answer = Callable[[str, str | None], None]


def _always() -> bool:
    return True


# Why an eviction decided while leading is not sent once the lease is lost.
NOT_LEADING = "not sent: this replica no longer holds the lease"


class EvictionApi(Protocol):
    async def evict(self, namespace: str, name: str, uid: str) -> None: ...


@dataclass
class EvictionConfig:
    attempts: int = 8  # per pod, while a PodDisruptionBudget or the API refuses
    first_delay: float = 1.0  # seconds; doubles after each refusal
    # A preemption's victim: tries against a transient error (5xx, connection) only.
    preemption_attempts: int = 3
    preemption_delay: float = 0.2


class Evictions:
    def __init__(
        self,
        kube: EvictionApi,
        config: EvictionConfig | None = None,
        on_result: Callable[[str], None] | None = None,
        active: Callable[[], bool] = _always,
    ) -> None:
        self.kube = kube
        self.config = config or EvictionConfig()
        self.on_result = on_result  # "evicted", "gone", "refused", "error"
        # Whether this replica leads now (`Leadership.active`): asked before every try.
        self.active = active
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, action: EvictPods, answer: Answer | None = None) -> None:
        """Evict the action's pods. A preemption's victims are answered to `answer`
        (the dispatcher's, which tells the gang manager)."""
        for pod in action.pods:
            if action.preemptor is not None:
                coro = self._evict_victim(pod, action.gang, action.preemptor, answer)
            else:
                coro = self._evict(pod, action.gang)
            task = asyncio.ensure_future(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        while self._tasks:
            await asyncio.gather(*self._tasks)

    def _result(self, result: str) -> None:
        if self.on_result is not None:
            self.on_result(result)

    async def _evict(self, pod: PodRef, gang: str) -> None:
        delay = self.config.first_delay
        for attempt in range(1, self.config.attempts + 1):
            if not self.active():
                log.warning("eviction of pod %s (gang %s) %s", pod.key, gang, NOT_LEADING)
                return
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
                log.warning("evicted pod=%s gang=%s (partial, or disrupted whole)", pod.key,
                            gang)
                return
            await asyncio.sleep(delay)
            delay *= 2
        self._result("refused")
        log.warning("gave up evicting pod %s of gang %s after %d attempts", pod.key,
                    gang, self.config.attempts)

    async def _evict_victim(self, pod: PodRef, unit: str, preemptor: str,
                            answer: Answer | None) -> None:
        error = "no attempt allowed (preemption_attempts is 0)"
        delay = self.config.preemption_delay
        for attempt in range(1, self.config.preemption_attempts + 1):
            if not self.active():
                log.warning("eviction of pod %s (%s) for %s %s", pod.key, unit, preemptor,
                            NOT_LEADING)
                _tell(answer, pod.uid, NOT_LEADING)
                return
            try:
                await self.kube.evict(pod.namespace, pod.name, pod.uid)
            except ApiError as exc:
                if exc.status in (404, 409):  # gone already: it left
                    self._result("gone")
                    _tell(answer, pod.uid, None)
                    return
                error = str(exc)
                if exc.status < 500:  # 429 (a budget), 403, ...: the core decides
                    break
            except Exception as exc:
                error = repr(exc)
            else:
                self._result("evicted")
                log.warning("evicted pod=%s (%s) for %s", pod.key, unit, preemptor)
                _tell(answer, pod.uid, None)
                return
            if attempt < self.config.preemption_attempts:
                await asyncio.sleep(delay)
                delay *= 2
        self._result("refused")
        log.warning("eviction of pod %s (%s) for %s refused: %s", pod.key, unit, preemptor,
                    error)
        _tell(answer, pod.uid, error)


def _tell(answer: Answer | None, uid: str, error: str | None) -> None:
    if answer is not None:
        answer(uid, error)

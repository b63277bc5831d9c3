"""Kubernetes Events, posted off the request path (architecture.md §9).

`record()` only queues (never blocks, never raises); a background task posts core/v1
Events at a bounded rate. Like client-go's event correlator it folds repeats: an event
for the same object and reason within `window` seconds updates the existing Event
(count, lastTimestamp, latest message) instead of creating a new one, so a gang that
waits or times out again and again shows one line "x7 over 3m" in `kubectl describe`,
not a flood. Which transition becomes which Event is `extender.reporting.events`.
On standby (`active` false) nothing is queued, so nothing is posted later either; and
the sender asks `active` before each call, so what a replica queued while it led is
dropped once it has lost the lease (it runs a few seconds more before it exits): the
status and the Events are the new leader's from then on, and an Event sent now would
interleave with its own about the same gangs.

Events recorded as `background` (one `Scheduled` per pod the direct commit binds) wait in
a lane of their own, sent only while nothing else is queued: a 1,000-pod gang's commit
queues 1,000 of them, 50 s at the sending rate, and a warning about another gang must
not wait behind them or be dropped for them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from extender.core.model.phase import rfc3339
from extender.kube.client import ApiError

log = logging.getLogger("gang-extender.events")

COMPONENT = "gang-extender"
MAX_MESSAGE = 1024


# How long Events queued for a namespace found gone are dropped without a call: long
# enough for a big commit's queued Events (50 s for 1,000 at the sending rate) not to
# spend the rate on refusals; a namespace made again under the same name after that gets
# its Events again.
_GONE_SECONDS = 60.0


def _namespace_gone(exc: ApiError) -> bool:
    """An Event refused because its namespace is being deleted (403, "... because it is
    being terminated") or already is (404 on create)."""
    return exc.status == 404 or (exc.status == 403 and "being terminated" in exc.message)


class EventApi(Protocol):
    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str

    def to_k8s(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind,
                "namespace": self.namespace, "name": self.name, "uid": self.uid}


@dataclass(slots=True)
class _Pending:
    ref: ObjectRef
    type: str
    reason: str
    message: str
    count: int
    first: float
    last: float


@dataclass(slots=True)
class _Sent:
    name: str
    count: int
    first: float
    last: float
    message: str


@dataclass
class RecorderStats:
    created: int = 0
    updated: int = 0
    folded: int = 0  # repeats merged before they were sent
    dropped: int = 0  # queue full, or the namespace is gone
    errors: int = 0


@dataclass(frozen=True)
class RecorderLimits:
    # A repeat within this many seconds updates the Event sent rather than making one.
    window: float = 600.0
    rate: float = 20.0  # Events sent per second at most
    # Distinct Events queued in each lane; a new one beyond is dropped (repeats fold).
    max_pending: int = 2000
    max_background: int = 20000


class EventRecorder:
    def __init__(
        self,
        kube: EventApi | None,
        clock: Callable[[], float] = time.time,
        limits: RecorderLimits | None = None,
        on_result: Callable[[str], None] | None = None,
        instance: str | None = None,
        active: Callable[[], bool] | None = None,
    ) -> None:
        limits = limits or RecorderLimits()
        self.kube = kube
        self.active = active
        self.clock = clock
        self.window = limits.window
        self.rate = limits.rate
        self.max_pending = limits.max_pending
        self.max_background = limits.max_background
        self.on_result = on_result
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self.stats = RecorderStats()
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._background: dict[tuple[str, str], _Pending] = {}
        self._sent: dict[tuple[str, str], _Sent] = {}
        # Namespaces an Event was refused for because they are gone -> when: the Events
        # still queued for them are dropped without a call for `_GONE_SECONDS`.
        self._gone: dict[str, float] = {}
        self._signal = asyncio.Event()

    # ----- producer side: cheap, synchronous, never raises ---------------------------------

    def record(self, ref: ObjectRef, reason: str, message: str, warning: bool = False,
               background: bool = False) -> None:
        if not ref.uid or (self.active is not None and not self.active()):
            return
        now = self.clock()
        key = (ref.uid, reason)
        message = message[:MAX_MESSAGE]
        lane, limit = ((self._background, self.max_background) if background
                       else (self._pending, self.max_pending))
        pending = lane.get(key)
        if pending is not None:
            pending.count += 1
            pending.message = message
            pending.last = now
            pending.type = "Warning" if warning else pending.type
            self.stats.folded += 1
            return
        if len(lane) >= limit:
            self._drop()
            return
        lane[key] = _Pending(ref, "Warning" if warning else "Normal", reason, message, 1, now,
                             now)
        self._signal.set()

    def _result(self, result: str) -> None:
        if self.on_result is not None:
            self.on_result(result)

    # ----- sender --------------------------------------------------------------------------

    async def run(self) -> None:
        interval = 1.0 / self.rate
        while True:
            await self._signal.wait()
            self._signal.clear()
            while self._pending or self._background:
                await self._send_one()
                await asyncio.sleep(interval)

    def _drop(self) -> None:
        self.stats.dropped += 1
        self._result("dropped")

    async def flush(self) -> None:
        """Send everything queued now (tests, shutdown)."""
        while self._pending or self._background:
            await self._send_one()

    def _leading(self) -> bool:
        """Whether this replica may post now; when it may not, everything queued is
        dropped (counted), as nothing queued will ever be due again."""
        if self.active is None or self.active():
            return True
        queued = len(self._pending) + len(self._background)
        self._pending.clear()
        self._background.clear()
        for _ in range(queued):
            self._drop()
        if queued:
            log.info("%d queued Event(s) dropped: this replica no longer holds the lease",
                     queued)
        return False

    async def _send_one(self) -> None:
        if not self._leading():
            return
        lane = self._pending or self._background
        key = next(iter(lane))
        ev = lane.pop(key)
        gone_at = self._gone.get(ev.ref.namespace)
        if gone_at is not None:
            if self.clock() - gone_at < _GONE_SECONDS:
                self._drop()
                return
            del self._gone[ev.ref.namespace]
        try:
            await self._send(key, ev)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # events are best effort: log, count, move on
            if isinstance(exc, ApiError) and _namespace_gone(exc):
                # The pod or group's namespace was deleted while its Event waited in the
                # queue (the Scheduled Events of a big commit take a while): nothing to
                # record it on, and nothing wrong with this process.
                self._drop()
                now = self.clock()
                # Forget the namespaces marked long ago: a process that outlives many
                # deleted namespaces must not keep one entry for each.
                self._gone = {ns: at for ns, at in self._gone.items()
                              if now - at < _GONE_SECONDS}
                self._gone[ev.ref.namespace] = now
                log.info("event %s on %s %s/%s not recorded: its namespace is gone (%s); "
                         "its other queued Events are dropped too", ev.reason, ev.ref.kind,
                         ev.ref.namespace, ev.ref.name, exc)
                return
            self.stats.errors += 1
            self._result("error")
            log.warning("event %s on %s %s/%s not recorded: %s", ev.reason, ev.ref.kind,
                        ev.ref.namespace, ev.ref.name, exc)

    async def _send(self, key: tuple[str, str], ev: _Pending) -> None:
        if self.kube is None:
            return
        now = self.clock()
        self._expire(now)
        sent = self._sent.get(key)
        path = f"/api/v1/namespaces/{ev.ref.namespace}/events"
        if sent is not None:
            count = sent.count + ev.count
            patch = {"count": count, "lastTimestamp": rfc3339(ev.last), "message": ev.message,
                     "type": ev.type}
            try:
                await self.kube.merge_patch(f"{path}/{sent.name}", patch)
                sent.count, sent.last, sent.message = count, ev.last, ev.message
                self.stats.updated += 1
                self._result("updated")
                return
            except ApiError as exc:
                if exc.status != 404:
                    raise
                del self._sent[key]  # the Event expired (TTL): create a new one
                if not self._leading():  # lost while the patch was on its way
                    self._drop()
                    return
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ev.ref.name}.", "namespace": ev.ref.namespace},
            "involvedObject": ev.ref.to_k8s(),
            "reason": ev.reason,
            "message": ev.message,
            "type": ev.type,
            "count": ev.count,
            "firstTimestamp": rfc3339(ev.first),
            "lastTimestamp": rfc3339(ev.last),
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
        }
        created = await self.kube.create(path, body)
        name = str((created.get("metadata") or {}).get("name", ""))
        if name:
            self._sent[key] = _Sent(name, ev.count, ev.first, ev.last, ev.message)
        self.stats.created += 1
        self._result("created")

    def _expire(self, now: float) -> None:
        if len(self._sent) < 1000:
            stale = [k for k, s in self._sent.items() if now - s.last > self.window]
        else:
            cutoff = now - self.window
            stale = [k for k, s in self._sent.items() if s.last < cutoff]
        for k in stale:
            del self._sent[k]

    def debug(self) -> dict[str, Any]:
        return {"pending": len(self._pending), "background": len(self._background),
                "tracked": len(self._sent),
                "created": self.stats.created, "updated": self.stats.updated,
                "folded": self.stats.folded, "dropped": self.stats.dropped,
                "errors": self.stats.errors}

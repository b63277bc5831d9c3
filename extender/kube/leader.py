"""Active/standby: the extender acts only while its own kube-scheduler holds the
leader-election Lease.

Why follow kube-scheduler's lease rather than hold one of its own: kube-scheduler calls
only the extender beside it, on 127.0.0.1. An extender that led while its kube-scheduler
did not would get no verbs, and a leading kube-scheduler whose extender stood by would
have every pod refused. kube-scheduler's holderIdentity is `<hostname>_<uuid>`
(os.Hostname() and a fresh UUID per process). Both containers of a pod share the pod's
hostname, so the extender knows its own scheduler by that prefix, whatever UUID a
restarted kube-scheduler picks.

Standby means no tick (no deadline expires), no Binding, no wake-up, no status write
and no Event. The watches keep running so the cache is warm, and the verbs answer with
`standby_error()`. Becoming active needs no reset, because a standby never ran a verb or
a tick. Losing leadership while active ends the process (`on_lost`), as kube-scheduler
does (extender-protocol §4, "Leader loss"): its waiting binds die with it, and it comes
back as a standby.

A lease that does not exist at all for more than two lease durations is a
misconfiguration, not a failover: a kube-scheduler that elects with that lease creates
it at once. Most likely the kube-scheduler runs without leader election or with another
lease than `--leader-lease` names, and then no replica ever schedules a gang. The
extender says so in its log and in /debug/gangs (`leader.warning`), instead of standing
by in silence.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from extender.core.model.convert import parse_time
from extender.kube.client import ResourceExpired

log = logging.getLogger("gang-extender.leader")


@dataclass(frozen=True, slots=True)
class LeaseRef:
    namespace: str
    name: str

    @classmethod
    def parse(cls, value: str) -> LeaseRef | None:
        """`NAMESPACE/NAME`, or `off` (None: no election, always active)."""
        if value == "off":
            return None
        namespace, sep, name = value.partition("/")
        if not sep or not namespace or not name or "/" in name:
            raise ValueError(f"expected NAMESPACE/NAME or off, got {value!r}")
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    @property
    def selector(self) -> dict[str, str]:
        """Lists and watches are narrowed to the one lease by name. That is also what
        lets RBAC grant them by resourceNames: the API server authorizes a list or watch
        with a `metadata.name` field selector as a request for that name."""
        return {"fieldSelector": f"metadata.name={self.name}"}


@dataclass(frozen=True, slots=True)
class Verdict:
    active: bool
    holder: str  # the lease's holderIdentity, "" when nobody holds it
    expires: float | None  # renewTime + leaseDurationSeconds; None: no usable lease
    why: str  # in words, for the standby error and the log


def decide(lease: Mapping[str, Any] | None, identity: str, now: float) -> Verdict:
    """Active iff `lease` is held by a process of `identity` (holderIdentity
    `<identity>_<anything>`, kube-scheduler's form) and has not expired at `now`.

    Expiry is renewTime + leaseDurationSeconds as the holder wrote them. While we are the
    holder, the writer is the kube-scheduler beside us, so the clock is this node's own.
    """
    if lease is None:
        return Verdict(False, "", None, "lease not found")
    spec = lease.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    holder = str(spec.get("holderIdentity") or "")
    try:
        renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"), "renewTime")
        duration = float(spec.get("leaseDurationSeconds") or 0)
    except (TypeError, ValueError):
        renewed, duration = 0.0, 0.0
    expires = renewed + duration if renewed > 0 and duration > 0 else None
    if not holder or not holder.startswith(identity + "_"):
        return Verdict(False, holder, expires, f"holder: {holder or 'none'}")
    if expires is None:
        return Verdict(False, holder, None, f"holder: {holder}, without a renewal time")
    if now >= expires:
        return Verdict(False, holder, expires,
                       f"holder: {holder}, expired {now - expires:.1f}s ago")
    return Verdict(True, holder, expires, f"holder: {holder}")


class LeaseApi(Protocol):
    async def list(self, path: str, limit: int = 2000,
                   params: Mapping[str, str] | None = None
                   ) -> tuple[list[dict[str, Any]], str]: ...

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
              params: Mapping[str, str] | None = None
              ) -> AsyncIterator[tuple[str, dict[str, Any]]]: ...


# kube-scheduler's default leaseDuration; a lease that was never seen has no duration of
# its own to go by.
DEFAULT_LEASE_DURATION = 15.0


def missing_lease_warning(lease: LeaseRef, seconds: float) -> str:
    return (f"lease {lease} has not existed for {seconds:.0f}s (more than two lease "
            f"durations): the kube-scheduler beside this extender runs without that lease "
            f"(leader election off, or another lease), so this extender stands by for "
            f"good. Make --leader-lease name the kube-scheduler's leaderElection "
            f"resourceNamespace/resourceName, or --leader-lease=off without election")


class Leadership:
    """Whether this extender may act, from a watch of its kube-scheduler's lease.

    `active` is read on every verb, tick and write, so it is cheap: the verdict of the
    last copy of the lease seen, and the clock against that lease's expiry. The watch
    keeps it true; at the expiry a timer reads the lease once more and steps down when no
    renewal was missed. Between the expiry and that read's answer the replica does not
    act: another replica's kube-scheduler may take the lease from that moment, the read
    can take as long as the API server is slow, and a busy event loop runs the timer late
    (a big commit's Bindings, ready before it, would all be posted first). With no lease
    (`--leader-lease off`, one replica without election) it is always active.
    """

    def __init__(
        self,
        kube: LeaseApi | None,
        lease: LeaseRef | None,
        identity: str,
        clock: Callable[[], float] = time.time,
        on_lost: Callable[[str], None] | None = None,
        lease_duration: float = DEFAULT_LEASE_DURATION,
    ) -> None:
        self.kube = kube
        self.lease = lease
        self.identity = identity
        self.clock = clock
        self.on_lost = on_lost
        self.lost = False
        self._verdict = Verdict(lease is None, "", None, "lease not read yet")
        self._lease_obj: Mapping[str, Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._confirming: asyncio.Task[None] | None = None
        self._judged = False
        # Since when the lease has been seen not to exist (None: it exists, or unread),
        # and the timer that warns two lease durations later.
        self.lease_duration = lease_duration
        self._missing_since: float | None = None
        self._missing_timer: asyncio.TimerHandle | None = None
        self._missing_warned = False

    @property
    def active(self) -> bool:
        if self.lease is None:
            return True
        v = self._verdict
        return (self._leading() and v.expires is not None
                and self.clock() < v.expires)

    def _leading(self) -> bool:
        """Leading as last judged, whatever the clock says now: whether a verdict that
        is not active is a loss (`_judge`)."""
        return self._verdict.active and not self.lost

    def standby_error(self) -> str:
        return (f"gang-extender {self.identity} is on standby: its kube-scheduler does not "
                f"hold lease {self.lease} ({self._verdict.why})")

    def view(self) -> dict[str, Any]:
        """For /debug/gangs."""
        if self.lease is None:
            return {"mode": "always-active", "identity": self.identity, "lease": None}
        v = self._verdict
        mode = "lost" if self.lost else "active" if v.active else "standby"
        return {
            "mode": mode, "identity": self.identity, "lease": str(self.lease),
            "holder": v.holder,
            "expiresInSeconds": (round(v.expires - self.clock(), 3)
                                 if v.expires is not None else None),
            "why": v.why,
            **({"warning": w} if (w := self.missing_warning()) else {}),
        }

    def missing_warning(self) -> str | None:
        """The misconfiguration warning, once the lease has been missing for longer than
        two lease durations; None otherwise."""
        if self.lease is None or self._missing_since is None:
            return None
        missing = self.clock() - self._missing_since
        if missing <= 2 * self.lease_duration:
            return None
        return missing_lease_warning(self.lease, missing)

    # ----- judging ---------------------------------------------------------------------

    def observe(self, lease: Mapping[str, Any] | None) -> None:
        """A new copy of the lease, or None when it does not exist: judge again."""
        self._lease_obj = lease
        self._track_missing(lease)
        self._judge(decide(lease, self.identity, self.clock()))

    def _track_missing(self, lease: Mapping[str, Any] | None) -> None:
        if lease is not None:
            spec = lease.get("spec")
            duration = spec.get("leaseDurationSeconds") if isinstance(spec, Mapping) else None
            if isinstance(duration, int | float) and duration > 0:
                self.lease_duration = float(duration)
            if self._missing_timer is not None:
                self._missing_timer.cancel()
                self._missing_timer = None
            if self._missing_warned:
                log.info("lease %s exists now", self.lease)
            self._missing_since, self._missing_warned = None, False
            return
        if self._missing_since is not None:
            return  # still missing (a relist): the clock runs from the first sight
        self._missing_since = self.clock()
        # A little past the bound, so the check in _warn_missing is past it too.
        delay = 2 * self.lease_duration + 0.01
        self._missing_timer = asyncio.get_running_loop().call_later(delay, self._warn_missing)

    def _warn_missing(self) -> None:
        self._missing_timer = None
        warning = self.missing_warning()
        if warning is not None and not self._missing_warned:
            self._missing_warned = True
            log.warning("%s", warning)

    def _judge(self, verdict: Verdict) -> None:
        was = self.lease is None or self._leading()
        first = not self._judged
        self._verdict, self._judged = verdict, True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.lost:
            return
        if verdict.active and verdict.expires is not None:
            delay = max(verdict.expires - self.clock(), 0.0)
            self._timer = asyncio.get_running_loop().call_later(delay, self._expired)
        if verdict.active and not was:
            log.info("active: kube-scheduler %s holds lease %s", verdict.holder, self.lease)
        elif was and not verdict.active:
            self._lose(verdict.why)
        elif first:
            log.info("standby: kube-scheduler of %s does not hold lease %s (%s)",
                     self.identity, self.lease, verdict.why)

    def _lose(self, why: str) -> None:
        self.lost = True
        log.error("lost leadership of lease %s (%s)", self.lease, why)
        if self.on_lost is not None:
            self.on_lost(why)

    def _expired(self) -> None:
        """The lease ran out with no renewal seen. Read it once more before stepping down:
        the renewals may have been missed by a stalled watch, not by kube-scheduler."""
        self._timer = None
        if self._confirming is None or self._confirming.done():
            self._confirming = asyncio.ensure_future(self._confirm())

    async def _confirm(self) -> None:
        lease = self._lease_obj
        if self.kube is not None and self.lease is not None:
            try:
                items, _ = await self.kube.list(self.lease.path, params=self.lease.selector)
                lease = items[0] if items else None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # unconfirmed: judged on what was seen last
                log.warning("lease %s could not be read again: %s", self.lease, exc)
        self.observe(lease)

    # ----- the watch ---------------------------------------------------------------------

    async def run(self) -> None:
        if self.lease is None or self.kube is None:
            return
        delay = 0.5
        while True:
            try:
                items, rv = await self.kube.list(self.lease.path, params=self.lease.selector)
                self.observe(items[0] if items else None)
                delay = 0.5
                async for etype, obj in self.kube.watch(self.lease.path, rv,
                                                        params=self.lease.selector):
                    if etype in ("ADDED", "MODIFIED"):
                        self.observe(obj)
                    elif etype == "DELETED":
                        self.observe(None)
            except ResourceExpired:
                log.info("lease %s watch expired; relisting", self.lease)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not self._judged:  # never read: say why in the standby error
                    self._verdict = Verdict(False, "", None, f"lease not readable: {exc}")
                log.warning("lease %s list/watch failed (%s); retrying in %.1fs", self.lease,
                            exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

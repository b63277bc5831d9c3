"""The invariants the soak's checker judges (the checker's module docstring says which
and why): over-commit attribution, quorum bursts, partial gangs and partial evictions,
and the records of violations and notes. Apart from the watch because these rules are
the point of the checker and change on their own; the watch only feeds them events in
the API server's order."""

from __future__ import annotations

import logging
import threading
import time

from .records import GangRec, NodeRec, PodRec, Violation

log = logging.getLogger("soak.checker")

NOTES_KEPT = 50
"""Informational records kept in full (all are counted): a long run with many
neighbour over-commits must not grow without bound."""


class Invariants:
    """The rules, on the state `Checker` sets up; every method runs under `lock`."""

    partial_window: float
    race_window: float
    partial_grace_factor: float
    t0: float
    wall0: float  # time.time() at t0: the extender's decided-at times onto our clock
    decided_seen: int  # gang members bound whose Binding said when it was decided
    decided_missing: int  # ... and those whose Binding did not
    # The longest from a decision to the watch showing its Binding: the POST plus this
    # watch's lag, which also delays when neighbours are seen bound (the race window
    # must cover it).
    decided_lag_max: float
    lock: threading.RLock
    pods: dict[str, PodRec]
    gangs: dict[str, GangRec]
    nodes: dict[str, NodeRec]
    violations: list[Violation]
    notes: list[Violation]
    note_counts: dict[str, int]
    max_burst: float
    max_partial: float
    _relisting: bool

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _charge(self, rec: PodRec, sign: int) -> None:
        rec.charged = sign > 0
        n = self.nodes.get(rec.node)
        if n is None:
            return
        before = n.exceeded()
        n.used_cpu += sign * rec.cpu
        n.used_mem += sign * rec.mem
        n.used_pods += sign
        if sign < 0 or not n.exceeded():
            return
        if not before:
            self._overcommitted(rec, n)
        elif rec.kind == "gang":
            self._note("gang-onto-overcommitted", rec.node,
                       f"{n.usage()} after gang member {rec.ns}/{rec.name} was bound to a "
                       f"node already over-committed; {self._occupants(rec.node)}")

    def _overcommitted(self, rec: PodRec, n: NodeRec) -> None:
        """`rec`'s binding took the node from fitting to exceeding: whose fault."""
        how = " (relist)" if self._relisting else ""
        detail = (f"{n.usage()} after {rec.kind} pod {rec.ns}/{rec.name} "
                  f"({rec.cpu}m) was bound{how}; {self._occupants(rec.node)}")
        if rec.kind != "gang":
            self._note(f"overcommit-by-{rec.kind}", rec.node, detail)
        elif self._relisting or self._fits_without_racers(rec, n) is None:
            self._violate("overcommit", rec.node, detail)
        else:
            start = self._commit_start(rec)
            what = ("its Binding was decided" if rec.decided_at is not None
                    else "the commit began")
            self._note("overcommit-race", rec.node,
                       f"{detail}; fits without the neighbours bound after or within "
                       f"{self.race_window:g}s before {what} ({self.now() - start:.2f}s ago)")

    def _commit_start(self, rec: PodRec) -> float:
        """When the extender decided to bind `rec`: the time its Binding carries (the
        extender decides each Binding right before it sends it, against the node as it
        sees it then), else, for a Binding that says nothing (another scheduler's), as
        the watch can tell: the gang's first Binding while its quorum is still being
        bound, or (an elastic extra, a plain pod) this Binding."""
        if rec.decided_at is not None:
            return rec.decided_at
        g = self.gangs.get(f"{rec.ns}/{rec.gang}") if rec.gang else None
        if g is not None and g.quorum_at is None and g.first_bound_at is not None:
            return g.first_bound_at
        return rec.bound_at if rec.bound_at is not None else self.now()

    def _fits_without_racers(self, rec: PodRec, n: NodeRec) -> list[PodRec] | None:
        """The neighbours bound after, or less than `race_window` before, the moment
        `rec`'s Binding was decided, if the node fits without them (the over-commit is
        their race with the decision); None if it would exceed anyway (the extender saw
        enough to know better)."""
        if self.race_window <= 0:
            return None
        since = self._commit_start(rec) - self.race_window
        racers = [p for p in self.pods.values()
                  if p.node == rec.node and p.charged and p.kind != "gang"
                  and p.bound_at is not None and p.bound_at > since]
        if not racers:
            return None
        cpu = n.used_cpu - sum(p.cpu for p in racers)
        mem = n.used_mem - sum(p.mem for p in racers)
        pods = n.used_pods - len(racers)
        return racers if cpu <= n.cpu and mem <= n.mem and pods <= n.pods else None

    def _occupants(self, node: str) -> str:
        """Evidence: what holds the node's cpu, the neighbours by name with how long
        before now they were bound (a neighbour bound just before the gang's Binding is
        a race no bind-time check can close; one bound seconds before is not)."""
        now = self.now()
        gang_cpu = 0
        gangs: set[str] = set()
        others = []
        for p in self.pods.values():
            if p.node != node or not p.charged:
                continue
            if p.kind == "gang":
                gang_cpu += p.cpu
                gangs.add(f"{p.ns}/{p.gang}")
            else:
                age = f"{now - p.bound_at:.2f}s ago" if p.bound_at is not None else "?"
                others.append(f"{p.kind} {p.name} {p.cpu}m bound {age}")
        return (f"gang pods {gang_cpu}m of {sorted(gangs)}; neighbours: "
                f"{', '.join(others) or 'none'}")

    def _bound(self, rec: PodRec) -> None:
        key = f"{rec.ns}/{rec.gang}"
        g = self.gangs.get(key)
        if g is None:
            return  # not a soak gang
        g.bound.add(rec.uid)
        g.live.add(rec.uid)
        t = rec.bound_at if rec.bound_at is not None else self.now()
        if g.first_bound_at is None:
            g.first_bound_at = t
        if g.quorum_at is None and len(g.bound) >= g.min_member:
            g.quorum_at = t
            self.max_burst = max(self.max_burst, t - g.first_bound_at)
        self._partial_update(g, t)

    def _partial_update(self, g: GangRec, t: float) -> None:
        if g.deleted:
            return
        if 0 < len(g.live) < g.min_member:
            if g.partial_since is None:
                g.partial_since, g.partial_reported = t, False
        else:
            self._partial_ends(g, t)

    def _partial_ends(self, g: GangRec, t: float) -> None:
        if g.partial_since is not None:
            self.max_partial = max(self.max_partial, t - g.partial_since)
            g.partial_since = None

    def grace(self, g: GangRec) -> float:
        return self.partial_grace_factor * g.timeout

    def check_windows(self, t: float | None = None) -> None:
        """Record gangs short of their quorum for longer than the burst window, and
        gangs partially bound for longer than their recovery grace."""
        t = self.now() if t is None else t
        with self.lock:
            for g in self.gangs.values():
                if (g.quorum_at is None and g.first_bound_at is not None
                        and not g.reported and t - g.first_bound_at > self.partial_window):
                    self._violate("partial", g.key,
                                  f"{len(g.bound)} of {g.min_member} members bound for "
                                  f"{t - g.first_bound_at:.1f}s without reaching quorum")
                    g.reported = True
                if g.partial_since is None or g.deleted:
                    continue
                self.max_partial = max(self.max_partial, t - g.partial_since)
                if not g.partial_reported and t - g.partial_since > self.grace(g):
                    self._violate("partial-gang", g.key,
                                  f"{len(g.live)} of {g.min_member} members bound for "
                                  f"{t - g.partial_since:.1f}s (grace {self.grace(g):.0f}s = "
                                  f"{self.partial_grace_factor:g} x timeout {g.timeout:g}s)")
                    g.partial_reported = True

            for g in self.gangs.values():
                for at, others in list(g.evictions):
                    if t - at <= self.partial_window:
                        continue
                    g.evictions.remove((at, others))
                    left = sorted(self.pods[u].name for u in others
                                  if u in self.pods and self.pods[u].charged)
                    if left:
                        self._violate("partial-eviction", g.key,
                                      f"a running member was deleted {t - at:.1f}s ago and "
                                      f"{', '.join(left)} still run")

    def _violate(self, kind: str, subject: str, detail: str) -> None:
        v = Violation(kind, subject, detail, self.now())
        self.violations.append(v)
        log.error("VIOLATION %s", v)

    def _note(self, kind: str, subject: str, detail: str) -> None:
        self.note_counts[kind] = self.note_counts.get(kind, 0) + 1
        v = Violation(kind, subject, detail, self.now())
        if len(self.notes) < NOTES_KEPT:
            self.notes.append(v)
        log.info("note %s", v)

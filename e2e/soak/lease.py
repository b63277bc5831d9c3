"""The soak's replicas and which one leads, from the Lease `gang-scheduler` (replicas=2):
the chaos must kill the leader, not the standby, the stall probe and the neighbours ask
the active extender, and the report gives each failover's time. Apart from the chaos
because following the Lease is a watch of its own, on its own thread."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from e2e.harness.process import ManagedProcess

from .results import SoakReport

log = logging.getLogger("soak")

LEASE = "gang-scheduler"
"""The replicas' leader-election Lease (in the run's `-nb` namespace, so that a run
never waits for the lease of an earlier one to expire)."""


@dataclass
class Replica:
    """One (extender + kube-scheduler) pair; `hostname` is its kube-scheduler's
    hostname, hence the prefix of its Lease holder identity, and the extender's
    `--leader-identity`."""

    index: int
    hostname: str
    port: int
    extender: ManagedProcess
    scheduler: ManagedProcess


class LeaseWatch:
    """Who holds the Lease among `replicas` (the stack's, once started), as the watch
    last read it; the kills of a leader and the holder changes, for the failover times.

    `coordination` is a CoordinationV1Api of the cluster; `lease_duration` how long a
    killed holder may still be named by the Lease."""

    def __init__(self, replicas: list[Replica], coordination: Any, namespace: str,
                 report: SoakReport, lease_duration: float) -> None:
        self._replicas = replicas
        self._coordination = coordination
        self._namespace = namespace
        self._report = report
        self._lease_duration = lease_duration
        self._leader: int | None = None  # index of the replica holding the Lease
        self._holder = ""
        self._dead_holders: set[str] = set()  # holder identities of killed schedulers
        self._changes: list[tuple[float, str]] = []  # (monotonic, holder)
        self._kills: list[tuple[float, str]] = []  # (monotonic, holder killed)

    def leader(self) -> Replica:
        """The replica whose kube-scheduler holds the Lease (the only one with one
        replica; the first while no holder is known)."""
        i = self._leader
        return self._replicas[i if i is not None else 0]

    def mark_dead(self, r: Replica) -> None:
        """`r`'s kube-scheduler is gone: if it held the Lease, that holder identity
        leads no more, though the Lease names it until it expires."""
        if self._leader == r.index and self._holder:
            self._dead_holders.add(self._holder)

    def live_leader(self, stop: threading.Event) -> Replica | None:
        """The leader replica, waiting (up to two lease durations) while the Lease still
        names a kube-scheduler the soak killed: killing that replica again would hit
        the restarted standby, not the leader."""
        deadline = time.monotonic() + 2 * self._lease_duration + 5
        while True:
            if self._leader is not None and self._holder not in self._dead_holders:
                return self._replicas[self._leader]
            if time.monotonic() > deadline or stop.wait(0.5):
                return None

    def killing(self, r: Replica) -> str:
        """The leader pair `r` is about to be killed: recorded for its failover time;
        returns the holder identity killed."""
        self.mark_dead(r)
        self._kills.append((time.monotonic(), self._holder))
        return self._holder

    def watch(self, stop: threading.Event) -> None:
        """Follow the Lease's holder (a worker thread, replicas=2) until `stop`: who
        leads, and when the holder changed (failover times)."""
        while not stop.wait(0.5):
            try:
                obj = json.loads(self._coordination.read_namespaced_lease(
                    LEASE, self._namespace, _preload_content=False, _request_timeout=3).data)
            except Exception:
                continue
            holder = str((obj.get("spec") or {}).get("holderIdentity") or "")
            host = holder.rsplit("_", 1)[0]
            self._leader = next((r.index for r in self._replicas if r.hostname == host), None)
            if holder and holder != self._holder:
                if self._holder:
                    self._report.leader_changes += 1
                log.info("lease %s: holder %s", LEASE, holder)
                self._changes.append((time.monotonic(), holder))
                self._holder = holder

    def failovers(self) -> list[float]:
        """Per leader kill: seconds until another holder took the Lease."""
        out = []
        for at, killed in self._kills:
            nxt = next((t for t, h in self._changes if t > at and h != killed), None)
            if nxt is not None:
                out.append(round(nxt - at, 1))
        return out

"""Which replica leads, from the Lease `gang-scheduler` (replicas=2): the chaos must kill
the leader, not the standby, and the report gives each failover's time. Apart from the
chaos because following the Lease is a watch of its own, on its own thread."""

from __future__ import annotations

import json
import logging
import time

from .state import LEASE, Replica, SoakState

log = logging.getLogger("soak")


class LeaseMixin(SoakState):
    def _mark_dead(self, r: Replica) -> None:
        """`r`'s kube-scheduler is gone: if it held the Lease, that holder identity
        leads no more, though the Lease names it until it expires."""
        if self._leader == r.index and self._holder:
            self._dead_holders.add(self._holder)

    def _live_leader(self) -> Replica | None:
        """The leader replica, waiting (up to two lease durations) while the Lease still
        names a kube-scheduler the soak killed: killing that replica again would hit
        the restarted standby, not the leader."""
        deadline = time.monotonic() + 2 * self.cfg.lease_duration + 5
        while True:
            if self._leader is not None and self._holder not in self._dead_holders:
                return self.replicas[self._leader]
            if time.monotonic() > deadline or self._chaos_stop.wait(0.5):
                return None

    def watch_lease(self) -> None:
        """Follow the Lease's holder (a worker thread, replicas=2): who leads, and when
        the holder changed (failover times)."""
        while not self._rss_stop.wait(0.5):
            try:
                obj = json.loads(self.coordination.read_namespaced_lease(
                    LEASE, self.aux_ns, _preload_content=False, _request_timeout=3).data)
            except Exception:
                continue
            holder = str((obj.get("spec") or {}).get("holderIdentity") or "")
            host = holder.rsplit("_", 1)[0]
            self._leader = next((r.index for r in self.replicas if r.hostname == host), None)
            if holder and holder != self._holder:
                if self._holder:
                    self.report.leader_changes += 1
                log.info("lease %s: holder %s", LEASE, holder)
                self._lease_changes.append((time.monotonic(), holder))
                self._holder = holder

    def _failovers(self) -> list[float]:
        """Per leader kill: seconds until another holder took the Lease."""
        out = []
        for at, killed in self._leader_kills:
            nxt = next((t for t, h in self._lease_changes if t > at and h != killed), None)
            if nxt is not None:
                out.append(round(nxt - at, 1))
        return out

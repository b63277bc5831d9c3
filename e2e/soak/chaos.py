"""The soak's chaos: a kill timeline drawn from the seed and its execution (SIGKILL of
the extender, the kube-scheduler, the leader pair, kube-apiserver, each restarted after
an outage), and the supervision that restarts what exited by itself. Apart because
killing the stack is the one job that must run on the main thread (processes die with
it) while the load and neighbours run on theirs."""

from __future__ import annotations

import logging
import random
import time

from e2e.harness.process import ManagedProcess

from .config import SoakConfig
from .lease import LeaseMixin

log = logging.getLogger("soak")


def chaos_timeline(rng: random.Random, cfg: SoakConfig, seconds: float) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    kinds = [("extender", cfg.extender_kill_every), ("scheduler", cfg.scheduler_kill_every)]
    if cfg.replicas > 1:  # drawn last: a one-replica timeline stays what it was
        kinds.append(("leader", cfg.leader_kill_every))
    for kind, every in kinds:
        if every <= 0:
            continue
        t = rng.expovariate(1.0 / every)
        while t < seconds:
            events.append((t, kind))
            t += rng.expovariate(1.0 / every)
    for i in range(cfg.apiserver_restarts):
        lo = (i + 0.3) / cfg.apiserver_restarts
        hi = (i + 0.7) / cfg.apiserver_restarts
        events.append((seconds * rng.uniform(lo, hi), "apiserver"))
    if cfg.watch_cut_every > 0:  # drawn last: the other kinds stay where they were
        t = rng.expovariate(1.0 / cfg.watch_cut_every)
        while t < seconds:
            events.append((t, "watchcut"))
            t += rng.expovariate(1.0 / cfg.watch_cut_every)
    events.sort()
    return events


class ChaosMixin(LeaseMixin):
    def _outage(self, procs: list[ManagedProcess], wait_ready: float) -> None:
        for p in procs:
            p.kill()
        time.sleep(self.chaos_rng.uniform(0.0, self.cfg.max_outage))
        for p in reversed(procs):
            p.ready_timeout = wait_ready
            p.start()

    def _kill(self, kind: str) -> None:
        r = self.leader()
        if kind == "extender":
            log.info("chaos: kill extender %d", r.index)
            self._outage([r.extender], 90)
            self.report.extender_kills += 1
        elif kind == "scheduler":
            log.info("chaos: kill kube-scheduler %d", r.index)
            self._mark_dead(r)
            self._outage([r.scheduler], 90)
            self.report.scheduler_kills += 1
        elif kind == "leader":
            live = self._live_leader()
            if live is None:
                log.info("chaos: no live leader, no leader kill")
                return
            r = live
            log.info("chaos: kill leader pair %d (%s)", r.index, self._holder)
            self._mark_dead(r)
            pair = [r.scheduler, r.extender]
            self.chaos_rng.shuffle(pair)  # either may die first
            self._leader_kills.append((time.monotonic(), self._holder))
            self._outage(pair, 90)
            self.report.leader_kills += 1
        elif kind == "watchcut":
            if self.api_cut is None:
                return
            outage = self.chaos_rng.uniform(0.0, self.cfg.max_outage)
            n = self.api_cut.cut(outage)
            log.info("chaos: cut the extenders' %d connections to kube-apiserver, "
                     "refusing new ones for %.1fs", n, outage)
            self.report.watch_cuts += 1
            self.report.watch_cut_connections += n
        elif kind == "apiserver":
            log.info("chaos: kill and restart kube-apiserver")
            self._outage([self.cluster.processes["kube-apiserver"]], 120)
            self.report.apiserver_restarts += 1

    def chaos(self, timeline: list[tuple[float, str]], t0: float) -> None:
        """Kill on the timeline until the load ends; meanwhile restart anything that
        exited by itself (a kube-scheduler that lost its Lease exits, by design)."""
        for at, kind in timeline:
            while (left := t0 + at - time.monotonic()) > 0:
                if self._chaos_stop.wait(min(left, 1.0)):
                    return
                self.supervise()
            if self._chaos_stop.is_set():
                return
            with self._chaos_lock:
                try:
                    self._kill(kind)
                except Exception as e:
                    self.report.errors.append(f"chaos {kind}: {e!r}"[:2000])
                    log.exception("chaos %s failed", kind)
        while not self._chaos_stop.wait(1.0):
            self.supervise()

    def supervise(self) -> None:
        """Restart the soak's components that exited without being killed by chaos
        (recorded in `self_exits`; with one replica such an exit is also an error)."""
        with self._chaos_lock:
            for p in self.processes():
                if p.popen is None or p.running():
                    continue
                for r in self.replicas:
                    if p is r.scheduler:
                        self._mark_dead(r)
                what = f"{p.name} (exit code {p.returncode()})"
                log.warning("%s exited by itself; restarting it", what)
                self.report.self_exits.append(what)
                if self.cfg.replicas == 1:
                    self.report.errors.append(f"{what} exited by itself")
                try:
                    p.ready_timeout = 90
                    p.start()
                except Exception as e:
                    self.report.errors.append(f"restart {p.name}: {e!r}"[:2000])

    def ensure_up(self) -> None:
        with self._chaos_lock:
            api = self.cluster.processes["kube-apiserver"]
            for p, wait in ((api, 120), *((q, 90) for q in self.processes())):
                if not p.running():
                    p.ready_timeout = wait
                    p.start()

"""The soak's chaos: a kill timeline drawn from the seed and its execution (SIGKILL of
the extender, the kube-scheduler, the leader pair, kube-apiserver, each restarted after
an outage), and the supervision that restarts what exited by itself. Apart because
killing the stack is the one job that must run on the main thread (processes die with
it) while the load and neighbours run on theirs."""

from __future__ import annotations

import logging
import random
import threading
import time

from e2e.harness.cluster import ControlPlane
from e2e.harness.process import ManagedProcess

from .config import SoakConfig
from .lease import LeaseWatch
from .results import SoakReport
from .stack import Stack

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


class Chaos:
    """Kills on a timeline and restarts, on `stack`'s processes and `cluster`'s
    kube-apiserver; `leadership` says which replica leads. Its outages are drawn from
    the seed (`cfg.seed`), apart from the gangs' draws, so that neither moves the other.
    One lock keeps a kill and a supervision restart from meeting on one process."""

    def __init__(self, cfg: SoakConfig, cluster: ControlPlane, stack: Stack,
                 leadership: LeaseWatch, report: SoakReport) -> None:
        self._cfg = cfg
        self._cluster = cluster
        self._stack = stack
        self._leadership = leadership
        self._report = report
        self._rng = random.Random(cfg.seed * 7919 + 2)  # outages (chaos only)
        self._lock = threading.Lock()

    def _outage(self, procs: list[ManagedProcess], wait_ready: float) -> None:
        for p in procs:
            p.kill()
        time.sleep(self._rng.uniform(0.0, self._cfg.max_outage))
        for p in reversed(procs):
            p.ready_timeout = wait_ready
            p.start()

    def _kill(self, kind: str, stop: threading.Event) -> None:
        report, leadership = self._report, self._leadership
        r = leadership.leader()
        if kind == "extender":
            log.info("chaos: kill extender %d", r.index)
            self._outage([r.extender], 90)
            report.extender_kills += 1
        elif kind == "scheduler":
            log.info("chaos: kill kube-scheduler %d", r.index)
            leadership.mark_dead(r)
            self._outage([r.scheduler], 90)
            report.scheduler_kills += 1
        elif kind == "leader":
            live = leadership.live_leader(stop)
            if live is None:
                log.info("chaos: no live leader, no leader kill")
                return
            r = live
            holder = leadership.killing(r)
            log.info("chaos: kill leader pair %d (%s)", r.index, holder)
            pair = [r.scheduler, r.extender]
            self._rng.shuffle(pair)  # either may die first
            self._outage(pair, 90)
            report.leader_kills += 1
        elif kind == "watchcut":
            cut = self._stack.api_cut
            if cut is None:
                return
            outage = self._rng.uniform(0.0, self._cfg.max_outage)
            n = cut.cut(outage)
            log.info("chaos: cut the extenders' %d connections to kube-apiserver, "
                     "refusing new ones for %.1fs", n, outage)
            report.watch_cuts += 1
            report.watch_cut_connections += n
        elif kind == "apiserver":
            log.info("chaos: kill and restart kube-apiserver")
            self._outage([self._cluster.processes["kube-apiserver"]], 120)
            report.apiserver_restarts += 1

    def run(self, timeline: list[tuple[float, str]], t0: float, stop: threading.Event) -> None:
        """Kill on the timeline until `stop` (the load's end); meanwhile restart
        anything that exited by itself (a kube-scheduler that lost its Lease exits, by
        design)."""
        for at, kind in timeline:
            while (left := t0 + at - time.monotonic()) > 0:
                if stop.wait(min(left, 1.0)):
                    return
                self.supervise()
            if stop.is_set():
                return
            with self._lock:
                try:
                    self._kill(kind, stop)
                except Exception as e:
                    self._report.errors.append(f"chaos {kind}: {e!r}"[:2000])
                    log.exception("chaos %s failed", kind)
        while not stop.wait(1.0):
            self.supervise()

    def supervise(self) -> None:
        """Restart the soak's components that exited without being killed by chaos
        (recorded in `self_exits`; with one replica such an exit is also an error)."""
        report = self._report
        with self._lock:
            for p in self._stack.processes():
                if p.popen is None or p.running():
                    continue
                for r in self._stack.replicas:
                    if p is r.scheduler:
                        self._leadership.mark_dead(r)
                what = f"{p.name} (exit code {p.returncode()})"
                log.warning("%s exited by itself; restarting it", what)
                report.self_exits.append(what)
                if self._cfg.replicas == 1:
                    report.errors.append(f"{what} exited by itself")
                try:
                    p.ready_timeout = 90
                    p.start()
                except Exception as e:
                    report.errors.append(f"restart {p.name}: {e!r}"[:2000])

    def ensure_up(self) -> None:
        with self._lock:
            api = self._cluster.processes["kube-apiserver"]
            for p, wait in ((api, 120), *((q, 90) for q in self._stack.processes())):
                if not p.running():
                    p.ready_timeout = wait
                    p.start()

"""What the soak measures beside its invariants: the extender's resident memory per
incarnation, the stall probe's figures and the gang-start quantiles (to the checker's
watch and to kube-scheduler's Scheduled Events). Apart because these are measures put
in the report, checked against limits, not part of driving the run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from e2e.harness.target import kube

from .check.checker import Checker
from .config import SoakConfig
from .hostile import HostileStream, StallProbe, percentile
from .lease import Replica
from .load import GangRun
from .results import SoakReport
from .starts import list_scheduled, quorum_time


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Measures:
    """The measures of one run, put in `report`: the resident memory of `replicas`'
    extenders (the stack's), `probe`'s stalls, and the gang starts of `namespaces`."""

    def __init__(self, cfg: SoakConfig, report: SoakReport, replicas: list[Replica],
                 namespaces: Iterable[str], probe: StallProbe) -> None:
        self._cfg = cfg
        self._report = report
        self._replicas = replicas
        self._namespaces = list(namespaces)
        self._probe = probe
        self._rss: list[tuple[int, float, float]] = []  # (pid, t, MiB)

    # ----- memory ---------------------------------------------------------------------------

    def sample_rss(self, stop: threading.Event) -> None:
        """Every extender's RSS every 2 s until `stop` (a worker thread)."""
        t0 = time.monotonic()
        while not stop.wait(2.0):
            for r in self._replicas:
                pid = r.extender.pid
                mb = rss_mb(pid)
                if pid is not None and mb is not None:
                    self._rss.append((pid, time.monotonic() - t0, mb))

    def rss_summary(self) -> None:
        """Peak, per incarnation (warm and last) and the longest one's series; an error
        past `cfg.max_rss_mb`."""
        report = self._report
        by_pid: dict[int, list[tuple[float, float]]] = {}
        for pid, t, mb in self._rss:
            by_pid.setdefault(pid, []).append((t, mb))
        report.rss_mb_peak = round(max((mb for _, _, mb in self._rss), default=0.0), 1)
        incarnations = []
        longest: list[tuple[float, float]] = []
        for samples in by_pid.values():
            secs = samples[-1][0] - samples[0][0]
            # First sample after a 20 s warm-up (imports, initial LIST) vs the last.
            warm = next((mb for t, mb in samples if t - samples[0][0] >= 20), samples[0][1])
            incarnations.append((round(secs, 1), round(warm, 1), round(samples[-1][1], 1)))
            if len(samples) > len(longest):
                longest = samples
        report.rss_mb_by_incarnation = sorted(incarnations, reverse=True)
        series: list[tuple[float, float]] = []
        for t, mb in longest:
            age = t - longest[0][0]
            if not series or age - series[-1][0] >= 60:
                series.append((round(age), round(mb, 1)))
        report.rss_mb_longest_series = series
        if report.rss_mb_peak > self._cfg.max_rss_mb:
            report.errors.append(f"extender RSS peaked at {report.rss_mb_peak:.0f} MiB "
                                 f"(limit {self._cfg.max_rss_mb:.0f})")

    def finish(self, gangs: Iterable[GangRun], checker: Checker,
               hostile: HostileStream | None) -> None:
        """The stall probe's figures, the gang-start quantiles of completed `gangs` (to
        `checker`'s watch and to kube-scheduler's events) and the hostile summary."""
        probe, cfg, r = self._probe, self._cfg, self._report
        probe.stop()
        r.stall_longest_s = round(probe.longest, 3)
        r.stall_over_250ms = probe.over_250ms
        r.stall_longest_cpu_s = round(probe.longest_cpu, 3)
        r.stall_cpu_over_250ms = probe.cpu_over_250ms
        r.stall_slow = probe.slow
        r.healthz_answered = probe.answered
        if cfg.max_stall_s and probe.longest_cpu > cfg.max_stall_s:
            r.errors.append(f"the extender used {probe.longest_cpu * 1000:.0f} ms of "
                            f"CPU while one /healthz answer was awaited (limit "
                            f"{cfg.max_stall_s * 1000:.0f})")
        if cfg.max_stall_wall_s and probe.longest > cfg.max_stall_wall_s:
            r.errors.append(f"/healthz took {probe.longest * 1000:.0f} ms "
                            f"(limit {cfg.max_stall_wall_s * 1000:.0f})")
        runs = list(gangs)
        starts: list[float] = []
        for run in runs:
            g = checker.gangs.get(run.spec.key)
            if (run.done_at is None or run.complete_at is None or g is None
                    or g.quorum_at is None):
                continue
            starts.append(max(0.0, checker.t0 + g.quorum_at - run.complete_at))
        r.gang_start_p50_s = round(percentile(starts, 0.5), 3)
        r.gang_start_p95_s = round(percentile(starts, 0.95), 3)
        r.gang_starts_s = sorted(round(s, 3) for s in starts)
        by_sched = self._starts_by_scheduler(runs)
        r.gang_start_sched_p50_s = round(percentile(by_sched, 0.5), 3)
        r.gang_start_sched_p95_s = round(percentile(by_sched, 0.95), 3)
        r.gang_starts_sched_s = sorted(round(s, 3) for s in by_sched)
        if hostile is not None:
            r.hostile = hostile.summary()

    def _starts_by_scheduler(self, runs: list[GangRun]) -> list[float]:
        """Gang starts of completed gangs, to kube-scheduler's Scheduled Events."""
        try:
            scheduled = list_scheduled(kube().events, self._namespaces)
        except Exception as e:  # a measure, not a check: say so and go on
            self._report.errors.append(f"listing Scheduled events: {e!r}"[:500])
            return []
        out: list[float] = []
        for run in runs:
            if run.done_at is None or run.complete_wall is None:
                continue
            pods = [f"{run.spec.name}-{i}" for i in range(run.created_pods)]
            t = quorum_time(scheduled, run.spec.ns, pods, run.spec.min_member)
            if t is not None:
                out.append(max(0.0, t - run.complete_wall))
        return out

"""What the soak measures beside its invariants: the extender's resident memory per
incarnation, the stall probe's figures and the gang-start quantiles (to the checker's
watch and to kube-scheduler's Scheduled Events). Apart because these are measures put
in the report, checked against limits, not part of driving the run."""

from __future__ import annotations

import time

from e2e.harness.target import kube

from .hostile import percentile
from .starts import list_scheduled, quorum_time
from .state import SoakState


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


class MeasuresMixin(SoakState):
    # ----- memory ---------------------------------------------------------------------------

    def sample_rss(self) -> None:
        t0 = time.monotonic()
        while not self._rss_stop.wait(2.0):
            for r in self.replicas:
                pid = r.extender.pid
                mb = rss_mb(pid)
                if pid is not None and mb is not None:
                    self._rss.append((pid, time.monotonic() - t0, mb))

    def _rss_summary(self) -> None:
        by_pid: dict[int, list[tuple[float, float]]] = {}
        for pid, t, mb in self._rss:
            by_pid.setdefault(pid, []).append((t, mb))
        self.report.rss_mb_peak = round(max((mb for _, _, mb in self._rss), default=0.0), 1)
        incarnations = []
        longest: list[tuple[float, float]] = []
        for samples in by_pid.values():
            secs = samples[-1][0] - samples[0][0]
            # First sample after a 20 s warm-up (imports, initial LIST) vs the last.
            warm = next((mb for t, mb in samples if t - samples[0][0] >= 20), samples[0][1])
            incarnations.append((round(secs, 1), round(warm, 1), round(samples[-1][1], 1)))
            if len(samples) > len(longest):
                longest = samples
        self.report.rss_mb_by_incarnation = sorted(incarnations, reverse=True)
        series: list[tuple[float, float]] = []
        for t, mb in longest:
            age = t - longest[0][0]
            if not series or age - series[-1][0] >= 60:
                series.append((round(age), round(mb, 1)))
        self.report.rss_mb_longest_series = series

    def _measures(self) -> None:
        """The stall probe's figures and the gang-start quantiles of completed gangs."""
        self.probe.stop()
        r = self.report
        r.stall_longest_s = round(self.probe.longest, 3)
        r.stall_over_250ms = self.probe.over_250ms
        r.stall_longest_cpu_s = round(self.probe.longest_cpu, 3)
        r.stall_cpu_over_250ms = self.probe.cpu_over_250ms
        r.stall_slow = self.probe.slow
        r.healthz_answered = self.probe.answered
        if self.cfg.max_stall_s and self.probe.longest_cpu > self.cfg.max_stall_s:
            r.errors.append(f"the extender used {self.probe.longest_cpu * 1000:.0f} ms of "
                            f"CPU while one /healthz answer was awaited (limit "
                            f"{self.cfg.max_stall_s * 1000:.0f})")
        if self.cfg.max_stall_wall_s and self.probe.longest > self.cfg.max_stall_wall_s:
            r.errors.append(f"/healthz took {self.probe.longest * 1000:.0f} ms "
                            f"(limit {self.cfg.max_stall_wall_s * 1000:.0f})")
        starts: list[float] = []
        if self.checker is not None:
            for run in self.gangs.values():
                g = self.checker.gangs.get(run.spec.key)
                if (run.done_at is None or run.complete_at is None or g is None
                        or g.quorum_at is None):
                    continue
                starts.append(max(0.0, self.checker.t0 + g.quorum_at - run.complete_at))
        r.gang_start_p50_s = round(percentile(starts, 0.5), 3)
        r.gang_start_p95_s = round(percentile(starts, 0.95), 3)
        r.gang_starts_s = sorted(round(s, 3) for s in starts)
        by_sched = self._starts_by_scheduler()
        r.gang_start_sched_p50_s = round(percentile(by_sched, 0.5), 3)
        r.gang_start_sched_p95_s = round(percentile(by_sched, 0.95), 3)
        r.gang_starts_sched_s = sorted(round(s, 3) for s in by_sched)
        if self.hostile is not None:
            r.hostile = self.hostile.summary()

    def _starts_by_scheduler(self) -> list[float]:
        """Gang starts of completed gangs, to kube-scheduler's Scheduled Events."""
        try:
            scheduled = list_scheduled(kube().events, self.namespaces)
        except Exception as e:  # a measure, not a check: say so and go on
            self.report.errors.append(f"listing Scheduled events: {e!r}"[:500])
            return []
        out: list[float] = []
        for run in self.gangs.values():
            if run.done_at is None or run.complete_wall is None:
                continue
            pods = [f"{run.spec.name}-{i}" for i in range(run.created_pods)]
            t = quorum_time(scheduled, run.spec.ns, pods, run.spec.min_member)
            if t is not None:
                out.append(max(0.0, t - run.complete_wall))
        return out

"""What one soak run reports, apart from the run because its fields are the `--json`
file that later tools (`e2e.soak.pool`) read and its summary is the text people read:
both must stay stable whatever the run's machinery does."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


def _neighbour_counts() -> dict[str, int]:
    return {"direct": 0, "direct_at_held": 0, "direct_skipped_full": 0, "scheduled": 0,
            "scheduled_bound": 0, "scheduled_expired": 0}


@dataclass
class SoakReport:
    seed: int
    minutes: float
    replicas: int = 1
    race_window: float = 0.5
    extender_args: list[str] = field(default_factory=list)  # e.g. --direct-commit off
    duration_s: float = 0.0
    gangs_created: int = 0
    gangs_completed: int = 0
    gangs_impossible: int = 0
    pods_created: int = 0
    members_replaced: int = 0
    neighbours: dict[str, int] = field(default_factory=_neighbour_counts)
    extender_kills: int = 0
    scheduler_kills: int = 0
    leader_kills: int = 0
    leader_changes: int = 0  # Lease holder changes seen (replicas=2)
    failover_seconds: list[float] = field(default_factory=list)  # per leader kill
    apiserver_restarts: int = 0
    watch_cuts: int = 0  # cuts of the extenders' connections to kube-apiserver
    watch_cut_connections: int = 0  # connections those cuts reset
    self_exits: list[str] = field(default_factory=list)  # exits nobody caused
    checker_events: int = 0
    checker_relists: int = 0
    # Gang members bound whose pod carried the extender's decided-at annotation (the
    # checker's anchor for races), and those without it (anchored the old way).
    decided_at_seen: int = 0
    decided_at_missing: int = 0
    decided_lag_max_s: float = 0.0  # the longest from a decision to its Binding seen
    max_burst_seconds: float = 0.0
    max_partial_seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    violation_counts: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)  # neighbour over-commits etc.
    note_samples: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    debug_leftover: dict[str, Any] = field(default_factory=dict)
    rss_mb_peak: float = 0.0
    rss_mb_by_incarnation: list[tuple[float, float, float]] = field(default_factory=list)
    # The longest incarnation's RSS once a minute: [seconds since it started, MiB].
    rss_mb_longest_series: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The longest /healthz answer of the active extender, and how many took > 250 ms.
    stall_longest_s: float = 0.0
    stall_over_250ms: int = 0
    # The most CPU the active extender used while one /healthz answer was awaited (its
    # own part of that wait), and how many answers saw it use more than 250 ms.
    stall_longest_cpu_s: float = 0.0
    stall_cpu_over_250ms: int = 0
    # (t, seconds, extender CPU seconds meanwhile or -1)
    stall_slow: list[tuple[float, float, float]] = field(default_factory=list)
    healthz_answered: int = 0
    # Gang start: from minMember members existing to the quorum bound, completed gangs.
    gang_start_p50_s: float = 0.0
    gang_start_p95_s: float = 0.0
    gang_starts_s: list[float] = field(default_factory=list)  # each, to pool runs
    # The same gangs timed to kube-scheduler's Scheduled Events instead (starts.py).
    gang_start_sched_p50_s: float = 0.0
    gang_start_sched_p95_s: float = 0.0
    gang_starts_sched_s: list[float] = field(default_factory=list)
    hostile: str = ""  # HostileStream.summary(), in hostile mode

    @property
    def ok(self) -> bool:
        return (not self.violations and not self.unfinished and not self.debug_leftover
                and not self.errors and self.rss_mb_peak > 0)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "ok": self.ok}, indent=2)

    def summary(self) -> str:
        nb, vc, notes = self.neighbours, self.violation_counts, self.notes
        failover = (f", failover {min(self.failover_seconds):.1f}-"
                    f"{max(self.failover_seconds):.1f}s" if self.failover_seconds else "")
        lines = [
            f"soak seed={self.seed}: {self.duration_s / 60:.1f} min, "
            f"{self.gangs_created} gangs ({self.pods_created} pods; "
            f"{self.gangs_completed} completed, {self.gangs_impossible} impossible; "
            f"{self.members_replaced} members replaced)",
            f"neighbours: {nb['direct']} with spec.nodeName ({nb['direct_at_held']} aimed at "
            f"nodes a gang held; {nb['direct_skipped_full']} skipped, node full), "
            f"{nb['scheduled']} through default-scheduler ({nb['scheduled_bound']} bound, "
            f"{nb['scheduled_expired']} deleted unbound)",
            f"kills: extender {self.extender_kills}, kube-scheduler {self.scheduler_kills}, "
            f"leader pair {self.leader_kills} (replicas {self.replicas}, "
            f"{self.leader_changes} leader changes{failover}), "
            f"kube-apiserver restarts {self.apiserver_restarts}, watch cuts "
            f"{self.watch_cuts} ({self.watch_cut_connections} connections reset)",
            f"violations: {len(self.violations)} (over-committed by a gang commit "
            f"{vc.get('overcommit', 0)}, partial gangs {vc.get('partial-gang', 0)}, "
            f"partial binds {vc.get('partial', 0) + vc.get('partial-at-end', 0)}, "
            f"re-bound pods {vc.get('rebound', 0)}); unfinished gangs: "
            f"{len(self.unfinished)}; debug view left: {self.debug_leftover or 'empty'}",
            f"information: nodes over-committed by neighbours: spec.nodeName "
            f"{notes.get('overcommit-by-direct', 0)}, default-scheduler "
            f"{notes.get('overcommit-by-scheduled', 0)}, other "
            f"{notes.get('overcommit-by-other', 0)}; by a gang commit racing a neighbour "
            f"(< {self.race_window:g}s) {notes.get('overcommit-race', 0)}; gang members "
            f"bound onto a node already over-committed "
            f"{notes.get('gang-onto-overcommitted', 0)}",
            f"extender RSS peak {self.rss_mb_peak:.0f} MiB; longest incarnation "
            f"{self._longest()}; max quorum burst {self.max_burst_seconds:.2f}s; longest "
            f"partial gang {self.max_partial_seconds:.2f}s; checker saw "
            f"{self.checker_events} pod events, relisted {self.checker_relists}x; gang "
            f"members bound with decided-at {self.decided_at_seen}, without "
            f"{self.decided_at_missing} (seen at most {self.decided_lag_max_s:.2f}s after "
            "the decision)",
            f"longest /healthz answer {self.stall_longest_s * 1000:.0f} ms "
            f"({self.stall_over_250ms} of {self.healthz_answered} over 250 ms), the "
            f"extender's CPU during one at most {self.stall_longest_cpu_s * 1000:.0f} ms "
            f"({self.stall_cpu_over_250ms} over 250 ms); gang start "
            f"p50 {self.gang_start_p50_s:.2f}s, p95 {self.gang_start_p95_s:.2f}s (to "
            f"kube-scheduler's Scheduled Events: p50 {self.gang_start_sched_p50_s:.2f}s, "
            f"p95 {self.gang_start_sched_p95_s:.2f}s)",
        ]
        if self.stall_slow:
            lines.append("  /healthz over 250 ms at (s since start, took, extender CPU): "
                         + ", ".join(f"{t:g}: {d:.2f} ({c:.2f})"
                                     for t, d, c in self.stall_slow[:10]))
        if self.hostile:
            lines.append(self.hostile)
        lines += [f"  {v}" for v in self.violations[:20]]
        lines += [f"  note {v}" for v in self.note_samples
                  if " overcommit-race " in v or " gang-onto-overcommitted " in v][:10]
        lines += [f"  unfinished {u}" for u in self.unfinished[:20]]
        lines += [f"  exited by itself: {e}" for e in self.self_exits[:10]]
        lines += [f"  error {e}" for e in self.errors[:10]]
        lines.append("RESULT: " + ("OK" if self.ok else "FAILED"))
        return "\n".join(lines)

    def _longest(self) -> str:
        if not self.rss_mb_by_incarnation:
            return "-"
        secs, first, last = max(self.rss_mb_by_incarnation)
        return f"{secs:.0f}s, {first:.0f} -> {last:.0f} MiB"

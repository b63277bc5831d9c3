"""What happened in one run, as data: per-pod times, per-Job summaries, readable events,
and ``timeline.json``.

Why apart from the cluster code: everything here is a pure function of the recorded pod
times, so ``--replot`` can rebuild the chart from a saved file without a cluster, and the
story told on stdout is derived from the same numbers the chart shows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from demo.jobs import QUICK_JOB, Workload

BURST_GAP = 1.0
"""Binds of one Job closer than this (seconds) are reported as one step of the timeline."""


@dataclass
class PodTimes:
    """One pod's life, in seconds since the run's submission (None: did not happen)."""

    job: str
    node: str = ""
    created: float | None = None
    bound: float | None = None
    running: float | None = None
    finished: float | None = None
    phase: str = "Pending"


@dataclass
class JobSummary:
    """Where one Job stands at the end of a run (times in seconds since submission)."""

    pods: int
    bound: int
    running: int
    succeeded: int
    first_bound: float | None
    all_bound: float | None
    complete_at: float | None


@dataclass
class RunResult:
    """One run (stock or gang) as recorded and judged."""

    name: str
    scheduler: str
    namespace: str
    window: float
    """Seconds observed after submission."""
    pods: dict[str, PodTimes]
    jobs: dict[str, JobSummary]
    events: list[tuple[float, str]]
    verdict: str
    ok: bool
    """True when the run showed what it should: a deadlock for stock, a clean gang run."""
    problems: list[str] = field(default_factory=list)
    attempt: int = 1
    """Which attempt this is (the stock run is retried when the race avoids the deadlock)."""


def fmt(t: float | None) -> str:
    """A time for the table and the verdicts: one decimal, ``-`` when it did not happen."""
    return "-" if t is None else f"{t:.1f}"


def quorum_present_at(pods: dict[str, PodTimes], job: str, size: int) -> float | None:
    """When the Job's ``size``-th pod was first seen (all members exist)."""
    created = sorted(p.created for p in pods.values() if p.job == job and p.created is not None)
    return created[size - 1] if len(created) >= size else None


def summarize(pods: dict[str, PodTimes], sizes: dict[str, int]) -> dict[str, JobSummary]:
    """Per Job: how many pods were bound, are running, succeeded, and when."""
    out = {}
    for job, size in sizes.items():
        mine = [p for p in pods.values() if p.job == job]
        bound = sorted(p.bound for p in mine if p.bound is not None)
        done = sorted(p.finished for p in mine if p.finished is not None
                      and p.phase == "Succeeded")
        out[job] = JobSummary(
            pods=size, bound=len(bound),
            running=sum(1 for p in mine if p.phase == "Running"),
            succeeded=len(done),
            first_bound=bound[0] if bound else None,
            all_bound=bound[size - 1] if len(bound) >= size else None,
            complete_at=done[size - 1] if len(done) >= size else None)
    return out


def timeline(pods: dict[str, PodTimes], jobs: dict[str, JobSummary], window: float,
             stuck_note: bool) -> list[tuple[float, str]]:
    """Readable events: bind bursts per big Job, all running, completion; first and last of
    the quick Job; at the end of a window with stuck Jobs, where they stand."""
    events: list[tuple[float, str]] = []
    for job, s in jobs.items():
        mine = [p for p in pods.values() if p.job == job]
        binds = sorted(p.bound for p in mine if p.bound is not None)
        if job == QUICK_JOB:
            if binds:
                events.append((binds[0], f"{job}: first pod bound"))
        else:
            present = quorum_present_at(pods, job, s.pods)
            if present is not None:
                events.append((present, f"{job}: all {s.pods} pods created"))
            burst_start = 0
            for i, t in enumerate(binds):
                count = i + 1
                if count == len(binds) or binds[i + 1] - t > BURST_GAP:
                    whole = " (whole Job)" if count == s.pods and burst_start == 0 else ""
                    burst_start = count
                    events.append((t, f"{job}: {count}/{s.pods} bound{whole}"))
            running = sorted(p.running for p in mine if p.running is not None)
            if len(running) >= s.pods:
                events.append((running[s.pods - 1], f"{job}: {s.pods}/{s.pods} running"))
        if s.complete_at is not None:
            events.append((s.complete_at, f"{job} complete ({s.pods}/{s.pods} succeeded)"))
    if stuck_note:
        for job, s in jobs.items():
            if s.complete_at is None and job != QUICK_JOB:
                events.append((window, f"{job}: {s.bound}/{s.pods} bound, {s.running} running, "
                                       f"{s.succeeded} done (stuck)"))
    events.sort(key=lambda e: e[0])
    return events


def write_json(path: Path, wl: Workload, runs: Sequence[RunResult]) -> None:
    """``timeline.json``: the workload and every run, per pod, for ``--replot`` and tests."""
    doc = {
        "workload": {**asdict(wl), "pod_memory_mi": wl.pod_memory_mi, "slots": wl.slots},
        "runs": {r.name: {
            "scheduler": r.scheduler, "namespace": r.namespace, "window": r.window,
            "ok": r.ok, "verdict": r.verdict, "problems": r.problems, "attempt": r.attempt,
            "jobs": {j: asdict(s) for j, s in r.jobs.items()},
            "events": [{"t": t, "event": e} for t, e in r.events],
            "pods": {n: asdict(p) for n, p in sorted(r.pods.items())},
        } for r in runs},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


def read_json(path: Path) -> tuple[Workload, list[RunResult]]:
    """The inverse of :func:`write_json` (for ``--replot``)."""
    doc = json.loads(path.read_text())
    w = doc["workload"]
    wl = Workload(**{k: v for k, v in w.items() if k in Workload.__dataclass_fields__})
    runs = [RunResult(
        name, r["scheduler"], r["namespace"], r["window"],
        {n: PodTimes(**p) for n, p in r["pods"].items()},
        {j: JobSummary(**s) for j, s in r["jobs"].items()},
        [(e["t"], e["event"]) for e in r["events"]], r["verdict"], r["ok"], r["problems"],
        r.get("attempt", 1),
    ) for name, r in doc["runs"].items()]
    return wl, runs

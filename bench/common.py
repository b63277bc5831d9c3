"""Shared by both benchmarks: percentiles, process memory/CPU, and writing results."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from e2e.harness.process import cpu_seconds as process_cpu_seconds

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values; NaN when empty."""
    if not values:
        return math.nan
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


def nan_median(values: Sequence[float]) -> float:
    """Median of the values that are not NaN (a run that could not measure one), rounded
    to 3 places; NaN when none is left."""
    vals = [x for x in values if not math.isnan(x)]
    return round(statistics.median(vals), 3) if vals else math.nan


def median_ci(values: Sequence[float], confidence: float = 0.95, resamples: int = 4000,
              seed: int = 0) -> tuple[float, float]:
    """Bootstrap percentile interval of the median; (NaN, NaN) for fewer than 2 values.

    The end-to-end runs share two cores with the whole control plane, so one A-B pair
    can come out anywhere between 0.65 and 1.0: a median alone does not say whether a
    target is met. Seeded, so a report recomputed from the same runs says the same.
    """
    if len(values) < 2:
        return math.nan, math.nan
    rng = random.Random(seed)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    lo = medians[int(tail * (resamples - 1))]
    hi = medians[int((1 - tail) * (resamples - 1))]
    return lo, hi


def print_min_median(title: str, reps: int, rows: dict[str, list[float]],
                     width: int = 22) -> None:
    """An in-process A/B table: the minimum (least disturbed by other work on the
    machine) and the median of each row's repetitions, under a title that names the
    load the numbers were taken at."""
    print(f"{title}, min / median of {reps}, load {os.getloadavg()[0]:.2f}")
    for name, v in rows.items():
        print(f"  {name:{width}s} {min(v):6.1f} / {statistics.median(v):6.1f}")


def summary_ms(seconds: Sequence[float]) -> dict[str, float | int]:
    """count, p50, p90, p99, max and mean of durations given in seconds, as milliseconds."""
    if not seconds:
        return {"count": 0}
    ms = [s * 1000 for s in seconds]
    return {
        "count": len(ms),
        "p50": round(percentile(ms, 50), 3),
        "p90": round(percentile(ms, 90), 3),
        "p99": round(percentile(ms, 99), 3),
        "max": round(max(ms), 3),
        "mean": round(sum(ms) / len(ms), 3),
    }


def rss_mib(pid: int | None = None) -> float:
    """Resident set size now, from /proc (Linux)."""
    path = f"/proc/{pid or 'self'}/status"
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return math.nan


def peak_rss_mib() -> float:
    """Peak resident set size of this process (ru_maxrss is in KiB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (NaN when unreadable, so that a
    difference with it is NaN too)."""
    used = process_cpu_seconds(pid)
    return math.nan if used is None else used


def machine() -> dict[str, Any]:
    """Where the numbers were taken: ratios travel between machines, absolutes do not."""
    commit = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
            text=True, check=False, timeout=10,
        ).stdout.strip()
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        # Other work on the machine skews absolute numbers: recorded with each result.
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def write_results(out_dir: Path, stem: str, data: dict[str, Any], markdown: str) -> list[Path]:
    """`<stem>.json` and `<stem>.md` in out_dir; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / f"{stem}.json"
    md = out_dir / f"{stem}.md"
    js.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    md.write_text(markdown if markdown.endswith("\n") else markdown + "\n")
    return [js, md]


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return "-"
            return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)

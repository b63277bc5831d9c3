"""The story on stdout: each run's timeline as it ends, then a table of both runs.

Why plain text first: the chart needs a file viewer, while the timeline is read in the
terminal ``make demo`` ran in, and is what the demo's e2e test checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from demo.jobs import QUICK_JOB
from demo.timeline import RunResult, fmt


def attempt_note(res: RunResult) -> str:
    """Why a stock run is not the first attempt (empty for a first attempt)."""
    if res.attempt == 1:
        return ""
    return (f" [attempt {res.attempt}: in the earlier one(s) one Job won the race "
            "for room and no deadlock formed]")


def print_run(res: RunResult) -> None:
    """A run's readable events and its verdict."""
    print(f"\n--- timeline, {res.name} run (schedulerName {res.scheduler}) ---")
    for t, text in res.events:
        print(f"  t={t:6.1f}s  {text}")
    print(f"  => {res.verdict}{attempt_note(res)}")


def print_summary(runs: Sequence[RunResult]) -> None:
    """Both runs side by side, one row per Job, then each run's verdict."""
    print("\n--- summary (times in seconds since submission) ---")
    head = ("run", "job", "pods", "bound", "running", "done", "first bind", "all bound",
            "complete")
    rows = [head]
    for r in runs:
        for j, s in r.jobs.items():
            complete = fmt(s.complete_at) if s.complete_at is not None else (
                "never (hung)" if j != QUICK_JOB else "no")
            rows.append((r.name, j, str(s.pods), str(s.bound), str(s.running),
                         str(s.succeeded), fmt(s.first_bound), fmt(s.all_bound), complete))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for i, row in enumerate(rows):
        print("  " + "  ".join(c.ljust(w) if k < 2 else c.rjust(w)
                               for k, (c, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
    for r in runs:
        print(f"  {r.name}: {r.verdict}{attempt_note(r)}")

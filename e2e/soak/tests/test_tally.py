"""`python -m e2e.soak.tally`: soak reports counted per mode, and a failed run named."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from e2e.soak.config import SoakConfig
from e2e.soak.results import SoakReport
from e2e.soak.tally import mode, seed_ranges, tally


def report(seed: int, extra: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    r = SoakReport(seed, 2.0, extender_args=[*SoakConfig().extender_args, *extra],
                   rss_mb_peak=70.0, **kw)
    return {**json.loads(json.dumps(asdict(r))), "ok": r.ok}


def test_runs_are_counted_per_mode_and_a_failed_run_is_named() -> None:
    reports = [
        report(1, watch_cuts=5, notes={"overcommit-race": 2, "overcommit-by-direct": 1},
               decided_at_seen=300),
        report(2, watch_cuts=6, decided_at_seen=200, decided_at_missing=1),
        report(1, ("--direct-commit", "off"), violations=["[ 1.0s] overcommit n1: ..."],
               violation_counts={"overcommit": 1}),
    ]
    assert mode(reports[0]) == "(defaults)" and mode(reports[2]) == "--direct-commit off"
    lines = tally(reports)
    off = next(line for line in lines if line.startswith("| --direct-commit off"))
    on = next(line for line in lines if line.startswith("| (defaults)"))
    assert "| 1 (1) |" in off and "**1** (overcommit 1)" in off and off.endswith("| 1 |")
    assert "| 2 (1-2) |" in on and "| 11 (0) |" in on and "| 0 | 2 | 0 | 1 |" in on
    assert "| 500 / 1 |" in on and on.endswith("| 0 |")
    assert "* --direct-commit off, seed 1: 1 violations" in lines


def test_seed_ranges() -> None:
    assert seed_ranges([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"

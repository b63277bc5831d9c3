"""Ratios of `bench.e2e` taken within a repetition: B's throughput over each peer's, B's
gang-start p95 over each peer's, and every system's time from the last pod created to the
last bound over the floor's (system F).

A repetition runs every system once, back to back, so it is a *pair* for each ratio: on a
2-core machine shared with other work, absolute numbers move by tens of percent between
minutes, and only ratios of runs taken next to each other travel. Each ratio is reported
as the median of its pairs, a bootstrap interval, and how many pairs met the issue's
target (at or above it for a throughput, at or below for a time). Pure functions of the
run records, unit-tested in tests/bench/test_bench_e2e_report.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bench.common import md_table, median_ci, percentile
from bench.e2e.run_result import RunResult

# Issue 30: a 1,000-pod gang bound within 1.5x the floor after its last member (B only:
# the others are shown against the floor without a target).
FLOOR_TARGETS: dict[str, float] = {"B": 1.5}
# Issue 20 and 30: B's gang-start p95 at most a third of upstream's (C).
P95_TARGETS: dict[str, float] = {"B/C": 1 / 3}


def ratio_spread(ratios: Sequence[float], target: float,
                 lower_is_better: bool = False) -> dict[str, Any]:
    """Median of per-pair ratios, its bootstrap 95 % interval, and how many pairs met
    `target` (`at_or_above_target`, or `at_or_below_target` when lower is better): on a
    machine whose run-to-run spread is wider than the margin, a median alone cannot say
    whether a target is met."""
    lo, hi = median_ci(list(ratios))
    met = (sum(1 for x in ratios if x <= target) if lower_is_better
           else sum(1 for x in ratios if x >= target))
    return {
        "pairs": len(ratios),
        "median": round(statistics.median(ratios), 3) if ratios else math.nan,
        "ci95": [round(lo, 3), round(hi, 3)],
        "target": target,
        "at_or_below_target" if lower_is_better else "at_or_above_target": met,
    }


def with_pairs(per: Sequence[float], target: float,
               lower_is_better: bool = False) -> dict[str, Any]:
    """`ratio_spread` with the per-pair ratios themselves (`per_pair`), as the results
    file keeps every ratio."""
    return {"per_pair": [round(x, 3) for x in per],
            **ratio_spread(per, target, lower_is_better)}


def _pods_per_second(r: RunResult) -> float:
    return r.pods_per_second


def run_p95(r: RunResult) -> float:
    """The 95th percentile of one run's gang starts (its completed gangs)."""
    return percentile([x for x in r.gang_start if not math.isnan(x)], 95)


def tail(r: RunResult) -> float:
    """Last pod created to last pod bound: for a point of one gang, that gang's start."""
    return r.tail_seconds


def pair_ratios(runs: Iterable[RunResult], num: str, den: str,
                value: Callable[[RunResult], float] = _pods_per_second) -> list[float]:
    """`value` of `num` over `den` (default pods/s), one per repetition both completed."""
    by = {(r.system, r.rep): r for r in runs
          if not r.error and value(r) > 0 and not math.isnan(value(r))}
    return [value(by[(num, rep)]) / value(by[(den, rep)])
            for (s, rep) in sorted(by) if s == num and (den, rep) in by]


def floor_ratios(runs: Sequence[RunResult]) -> dict[str, dict[str, Any]]:
    """Per system, its last-created-to-last-bound time over the floor's, per pair (empty
    when the floor did not run)."""
    if not any(r.system == "F" for r in runs):
        return {}
    out = {}
    for s in sorted({r.system for r in runs} - {"F"}):
        per = pair_ratios(runs, s, "F", tail)
        out[s] = with_pairs(per, FLOOR_TARGETS.get(s, math.nan), lower_is_better=True)
    return out


def p95_ratios(runs: Sequence[RunResult],
               systems: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """B's gang-start p95 over each peer's: per pair, and over the pooled gangs of the
    point (`pooled`, the p95s of `system_summary`)."""
    out = {}
    for other in ("A", "C", "D"):
        if "B" not in systems or other not in systems:
            continue
        per = pair_ratios(runs, "B", other, run_p95)
        b, o = (systems[k]["gang_start_seconds"]["p95"] for k in ("B", other))
        pooled = round(b / o, 3) if o and not math.isnan(b) and not math.isnan(o) else math.nan
        out[f"B/{other}"] = {"pooled": pooled,
                             **with_pairs(per, P95_TARGETS.get(f"B/{other}", math.nan),
                                          lower_is_better=True)}
    return out


# ----- markdown ----------------------------------------------------------------------------


def ci(r: Mapping[str, Any]) -> str:
    if not r["pairs"]:
        return "-"
    lo, hi = r["ci95"]
    inner = "" if any(math.isnan(x) for x in (lo, hi)) else f" ({lo:.2f}-{hi:.2f})"
    return f"{r['median']:.2f}{inner}"


def with_target(r: Mapping[str, Any] | None) -> str:
    """"median (interval) [pairs that met the target/pairs >= target]"; no bracket when
    the ratio has no target."""
    if not r or not r["pairs"]:
        return "-"
    if math.isnan(r["target"]):
        return ci(r)
    below = "at_or_below_target" in r
    met = r["at_or_below_target"] if below else r["at_or_above_target"]
    return ci(r) + f" [{met}/{r['pairs']} {'<=' if below else '>='} {r['target']:.3g}]"


def _point_name(p: Mapping[str, Any]) -> str:
    return f"{p['nodes']} nodes, {p['pods']} pods, gangs of {p['gangs']}"


def floor_table(points: Sequence[Mapping[str, Any]]) -> str:
    """Per point the floor ran at: each system's last-created-to-last-bound time (median
    of its runs) and its ratio to the floor's in the same repetition."""
    rows: list[list[object]] = []
    for p in points:
        if "F" not in p["systems"]:
            continue
        floor = p["systems"]["F"]["tail_seconds"]
        rate = round(p["pods"] / floor) if floor and not math.isnan(floor) else math.nan
        rows.append([_point_name(p), p["client"], "F: floor", floor,
                     f"{rate:.0f} Bindings/s" if not math.isnan(rate) else "-"])
        for key, r in p.get("floor", {}).items():
            rows.append([_point_name(p), p["client"], key,
                         p["systems"][key]["tail_seconds"], with_target(r)])
    return md_table(["workload", "client", "system", "last bound after last created s",
                     "over the floor's"], rows)


def p95_table(points: Sequence[Mapping[str, Any]]) -> str:
    """B's gang-start p95 over each peer's: median of the pairs (interval) [pairs at or
    below the target], then the ratio of the p95s of all the point's gangs pooled."""
    rows: list[list[object]] = []
    for p in points:
        r = p.get("p95", {})
        if not r:
            continue
        rows.append([_point_name(p), p["client"],
                     *[with_target(r.get(name)) + (f"; pooled {r[name]['pooled']:.2f}"
                                                   if name in r and not math.isnan(
                                                       r[name]["pooled"]) else "")
                       for name in ("B/A", "B/C", "B/D")]])
    return md_table(["workload", "client", "B/A", "B/C", "B/D"], rows)

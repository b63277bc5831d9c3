"""The CPU of B's whole run against each peer's in the same repetition, and which
components make the difference.

Why: on two cores every component of the run shares the same CPU, the control plane and
the benchmark's own pod creator included. While they saturate it, throughput is set by
the CPU the whole pipeline spends per pod, not by the scheduler's speed alone. A system
whose scheduler is cheaper but makes the API server work harder is no faster. CPU per
pod moves by tens of percent between minutes on this machine, so only the pairs of one
repetition are compared. Pure functions of the run records, tested in
tests/test_bench_e2e_report.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bench.common import md_table
from bench.e2e.ratios import pair_ratios, ratio_spread, with_target

if TYPE_CHECKING:
    from bench.e2e.report import RunResult


def _total(r: RunResult) -> float:
    return sum(r.cpu.values())


def cpu_pairs(runs: Sequence[RunResult], peers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per peer, B's total CPU over the peer's per repetition (`ratio_spread`, no
    target), and per component the median over repetitions of (B's CPU - the peer's)
    as a share of the peer's total: the shares add up to the ratio minus one."""
    by = {(r.system, r.rep): r for r in runs if not r.error and _total(r) > 0}
    out: dict[str, dict[str, Any]] = {}
    for other in peers:
        per = pair_ratios(runs, "B", other, _total)
        if not per:
            continue
        shares: dict[str, list[float]] = {}
        for (system, rep), b in sorted(by.items()):
            o = by.get((other, rep))
            if system != "B" or o is None:
                continue
            for k in sorted(set(b.cpu) | set(o.cpu)):
                shares.setdefault(k, []).append(
                    (b.cpu.get(k, 0.0) - o.cpu.get(k, 0.0)) / _total(o))
        out[f"B/{other}"] = {
            "per_pair": [round(x, 3) for x in per], **ratio_spread(per, math.nan),
            "share_of_difference": {k: round(statistics.median(v), 3)
                                    for k, v in shares.items()}}
    return out


def cpu_pair_table(points: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """One row per point and peer: the total ratio, then each component's difference in
    percent of the peer's total (+: B's run spent more there)."""
    rows: list[list[object]] = []
    for p in points:
        for name, r in p.get("cpu_pairs", {}).items():
            diff = r["share_of_difference"]
            rest = sum(v for k, v in diff.items() if k not in columns)
            rows.append([f"{p['nodes']} nodes, {p['pods']} pods, gangs of {p['gangs']}",
                         p["client"], name, with_target(r) + f" [{r['pairs']} pairs]",
                         *[_percent(diff.get(k, math.nan)) for k in columns],
                         _percent(rest)])
    return md_table(["workload", "client", "CPU of the run", *columns, "rest"], rows)


def _percent(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:+.1f} %"

"""The CPU of B's whole run against each peer's in the same repetition, and which
components make the difference.

Why: on two cores every component of the run shares the same CPU, the control plane and
the benchmark's own pod creator included. While they saturate it, throughput is set by
the CPU the whole pipeline spends per pod, not by the scheduler's speed alone. A system
whose scheduler is cheaper but makes the API server work harder is no faster. CPU per
pod moves by tens of percent between minutes on this machine, so only the pairs of one
repetition are compared. Pure functions of the run records, tested in
tests/bench/test_bench_e2e_report.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.common import md_table, nan_median
from bench.e2e.ratios import pair_ratios, with_pairs, with_target
from bench.e2e.run_result import RunResult


def _total(r: RunResult) -> float:
    return sum(r.cpu.values())


def _created(r: RunResult) -> float:
    """CPU of the whole pipeline while the pods were being created (NaN: not recorded,
    a run from before it was)."""
    return sum(r.cpu_created.values()) if r.cpu_created else math.nan


def _left(r: RunResult) -> float:
    """The share of the run's CPU spent after the last create was answered."""
    return 1 - _created(r) / _total(r)


def _create_seconds(r: RunResult) -> float:
    return r.create_seconds


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
            **with_pairs(per, math.nan),
            "share_of_difference": {k: round(statistics.median(v), 3)
                                    for k, v in shares.items()},
            "creation": _creation(runs, other)}
    return out


def _creation(runs: Sequence[RunResult], other: str) -> dict[str, Any]:
    """B against `other` while the pods were being created: the phase's length and its
    CPU (pairs), each system's share of its run's CPU left until after the phase, and
    the machine's idle share during it (medians of the runs)."""
    ok = [r for r in runs if not r.error and _total(r) > 0 and r.cpu_created]
    mine = {s: [r for r in ok if r.system == s] for s in ("B", other)}
    return {
        "seconds": with_pairs(pair_ratios(ok, "B", other, _create_seconds), math.nan),
        "cpu": with_pairs(pair_ratios(ok, "B", other, _created), math.nan),
        "left_after": {s: nan_median([_left(r) for r in rs]) for s, rs in mine.items()},
        "idle": {s: nan_median([r.idle_created for r in rs]) for s, rs in mine.items()},
    }


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


def creation_table(points: Sequence[Mapping[str, Any]]) -> str:
    """One row per point and peer that recorded the creation phase: B's phase and its CPU
    over the peer's, what each left until after it, and how idle the machine was."""
    rows: list[list[object]] = []
    for p in points:
        for name, r in p.get("cpu_pairs", {}).items():
            c = r.get("creation")
            if not c or not c["cpu"]["pairs"]:
                continue
            other = name.split("/")[1]
            rows.append([f"{p['nodes']} nodes, {p['pods']} pods, gangs of {p['gangs']}",
                         p["client"], name, with_target(c["seconds"]),
                         with_target(c["cpu"]),
                         f"{_share(c['left_after']['B'])} / {_share(c['left_after'][other])}",
                         f"{_share(c['idle']['B'])} / {_share(c['idle'][other])}"])
    return md_table(["workload", "client", "pair", "creation phase", "its CPU",
                     "CPU left after it, B / other", "machine idle in it, B / other"], rows)


def _share(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:.0f} %"

"""`bench.e2e`'s numbers from its runs: per point and system the throughput, gang start and
CPU per pod, B's ratios to the other systems and every system's to the floor with bootstrap
intervals (bench/e2e/ratios.py); then markdown.

A *point* is one workload (nodes, pods, gang sizes) under one kube-scheduler client
setting. Within a point every system runs once per repetition, back to back, so a
repetition is a *pair* for each ratio B/X: on a 2-core machine shared with other work,
absolute numbers move by tens of percent between minutes, and only ratios of runs taken
next to each other travel. Pure functions of the run records, unit-tested in
tests/bench/test_bench_e2e_report.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from bench.common import md_table, nan_median, percentile
from bench.e2e.cpu_pairs import cpu_pair_table, cpu_pairs, creation_table
from bench.e2e.meter import BENCH_CLIENT
from bench.e2e.ratios import (
    ci,
    floor_ratios,
    floor_table,
    p95_ratios,
    p95_table,
    pair_ratios,
    ratio_spread,
    with_pairs,
)
from bench.e2e.run_result import RunResult
from bench.e2e.systems import SYSTEMS

__all__ = ["RunResult", "markdown", "pair_ratios", "ratio_spread", "summarize"]

# Issue 6's throughput target for B/A; issue 20's for B/C (unthrottled / default client)
# and B/D (ahead on every measure).
TARGETS: dict[str, dict[str, float]] = {
    "B/A": {"default": 0.8, "unthrottled": 0.8},
    "B/C": {"default": 3.0, "unthrottled": 1.5},
    "B/D": {"default": 1.0, "unthrottled": 1.0},
}
# CPU columns of the summary, in this order; other components are summed in "rest".
CPU_COLUMNS = ("kube-scheduler", "extender", "kube-apiserver", "etcd", "fake-kubelet",
               BENCH_CLIENT)


def _dist(values: Sequence[float]) -> dict[str, Any]:
    vals = [v for v in values if not math.isnan(v)]
    return {
        "gangs": len(vals),
        "p50": round(percentile(vals, 50), 3) if vals else math.nan,
        "p95": round(percentile(vals, 95), 3) if vals else math.nan,
        "max": round(max(vals), 3) if vals else math.nan,
    }


def system_summary(runs: Sequence[RunResult]) -> dict[str, Any]:
    """One system at one point: medians over its completed runs, gang starts pooled."""
    ok = [r for r in runs if not r.error]
    pods = runs[0].pods if runs else 0
    starts = [s for r in ok for s in r.gang_start]
    by_size: dict[int, list[float]] = {}
    for r in ok:
        for size, s in zip(r.gang_size, r.gang_start, strict=False):
            by_size.setdefault(size, []).append(s)
    comps = sorted({c for r in ok for c in r.cpu})
    cpu_ms = {c: nan_median([r.cpu.get(c, math.nan) * 1000 / pods for r in ok]) for c in comps}
    total = [sum(v for v in r.cpu.values() if not math.isnan(v)) * 1000 / pods for r in ok]
    pairs = [(x, t) for r in ok for x, t in zip(r.gang_start, r.gang_turned_away,
                                                strict=False)]
    return {
        "runs": len(runs),
        "failed": [r.error for r in runs if r.error],
        # Gangs none of whose members kube-scheduler marked unschedulable before the
        # gang was complete, and the others, which waited out a backoff (1-2 s).
        "gang_start_not_turned_away": _dist([x for x, t in pairs if not t]),
        "gang_start_turned_away": _dist([x for x, t in pairs if t]),
        "pods_per_second": nan_median([r.pods_per_second for r in ok]),
        "tail_seconds": nan_median([r.tail_seconds for r in ok]),
        "gang_start_seconds": _dist(starts),
        "gang_start_by_size": {str(k): _dist(v) for k, v in sorted(by_size.items())},
        "turned_away_gangs": sum(sum(r.gang_turned_away) for r in ok),
        "cpu_ms_per_pod": cpu_ms,
        "cpu_ms_per_pod_total": nan_median(total),
        "load1": [r.load1 for r in runs],
    }


def summarize(runs: Sequence[RunResult]) -> list[dict[str, Any]]:
    """Points in sweep order (nodes, pods, gangs), default client before unthrottled."""
    order = {"default": 0, "unthrottled": 1}
    keys = sorted({(r.nodes, r.pods, r.gangs, r.client) for r in runs},
                  key=lambda k: (k[0], k[1], k[2], order.get(k[3], 9)))
    points = []
    for nodes, pods, gangs, client in keys:
        rs = [r for r in runs if (r.nodes, r.pods, r.gangs, r.client) == (nodes, pods, gangs,
                                                                          client)]
        systems = {s: system_summary([r for r in rs if r.system == s])
                   for s in sorted({r.system for r in rs})}
        ratios = {}
        for other in ("A", "C", "D"):
            if "B" in systems and other in systems:
                per = pair_ratios(rs, "B", other)
                target = TARGETS[f"B/{other}"].get(client, math.nan)
                ratios[f"B/{other}"] = with_pairs(per, target)
        peers = [o for o in ("A", "C", "D") if "B" in systems and o in systems]
        points.append({"nodes": nodes, "pods": pods, "gangs": gangs, "client": client,
                       "systems": systems, "ratios": ratios, "floor": floor_ratios(rs),
                       "p95": p95_ratios(rs, systems), "cpu_pairs": cpu_pairs(rs, peers)})
    return points


def pooled(points: Sequence[Mapping[str, Any]], name: str, client: str) -> dict[str, Any]:
    """`ratio_spread` of one ratio over every point of one client setting."""
    per = [x for p in points if p["client"] == client
           for x in p["ratios"].get(name, {}).get("per_pair", [])]
    return ratio_spread(per, TARGETS[name][client])


# ----- markdown ----------------------------------------------------------------------------


def _point_name(p: Mapping[str, Any]) -> str:
    return f"{p['nodes']} nodes, {p['pods']} pods, gangs of {p['gangs']}"


def side_by_side(points: Sequence[Mapping[str, Any]]) -> str:
    """The headline: one row per point and system."""
    rows = []
    for p in points:
        for key, s in p["systems"].items():
            gs = s["gang_start_seconds"]
            failed = len(s["failed"])
            rows.append([
                _point_name(p), p["client"], f"{key}: {SYSTEMS[key].label}",
                s["pods_per_second"], gs["p50"], gs["p95"], gs["max"],
                s["cpu_ms_per_pod_total"],
                f"{s['runs'] - failed} of {s['runs']}" + (" (rest failed)" if failed else ""),
            ])
    return md_table(["workload", "client", "system", "pods/s", "gang start p50 s", "p95 s",
                     "max s", "CPU ms/pod (all)", "runs complete"], rows)


def compact_table(points: Sequence[Mapping[str, Any]]) -> str:
    """The issue's layout: per workload and system, each client setting's pods/s and gang
    start p50 / p95 / max in one cell (for the README)."""
    clients = [c for c in ("default", "unthrottled") if any(p["client"] == c for p in points)]
    rows = []
    for workload in dict.fromkeys(_point_name(p) for p in points):
        mine = {p["client"]: p for p in points if _point_name(p) == workload}
        keys = sorted({k for p in mine.values() for k in p["systems"]})
        for key in keys:
            cells: list[object] = [workload, f"{key}: {SYSTEMS[key].label}"]
            for c in clients:
                s = mine.get(c, {}).get("systems", {}).get(key)
                if not s or math.isnan(s["pods_per_second"]):
                    cells.append("did not complete" if s else "-")
                    continue
                g = s["gang_start_seconds"]
                cells.append(f"{s['pods_per_second']:.0f} pods/s; {g['p50']:.2f} / "
                             f"{g['p95']:.2f} / {g['max']:.2f} s")
            rows.append(cells)
    return md_table(["workload", "system",
                     *[f"client {c}: throughput; gang start p50 / p95 / max" for c in clients]],
                    rows)


def ratio_table(points: Sequence[Mapping[str, Any]]) -> str:
    """B's throughput over each peer's: median of the pairs (95 % bootstrap interval)."""
    rows = []
    for p in points:
        cells: list[object] = [_point_name(p), p["client"]]
        for name in ("B/A", "B/C", "B/D"):
            r = p["ratios"].get(name)
            cells.append(ci(r) + f" [{r['at_or_above_target']}/{r['pairs']} >= "
                         f"{r['target']:g}]" if r and r["pairs"] else "-")
        rows.append(cells)
    for client in ("default", "unthrottled"):
        if any(p["client"] == client for p in points):
            cells = ["all points", client]
            for name in ("B/A", "B/C", "B/D"):
                r = pooled(points, name, client)
                cells.append(ci(r) + f" [{r['at_or_above_target']}/{r['pairs']} >= "
                             f"{r['target']:g}]" if r["pairs"] else "-")
            rows.append(cells)
    return md_table(["workload", "client", "B/A", "B/C", "B/D"], rows)


def cpu_table(points: Sequence[Mapping[str, Any]]) -> str:
    """CPU milliseconds per pod by component (medians over runs)."""
    rows = []
    for p in points:
        for key, s in p["systems"].items():
            c = s["cpu_ms_per_pod"]
            rest = sum(v for k, v in c.items() if k not in CPU_COLUMNS and not math.isnan(v))
            rows.append([_point_name(p), p["client"], key,
                         *[c.get(k, math.nan) for k in CPU_COLUMNS], round(rest, 3),
                         s["cpu_ms_per_pod_total"]])
    return md_table(["workload", "client", "system", *CPU_COLUMNS, "rest", "all"], rows)


def size_table(points: Sequence[Mapping[str, Any]]) -> str:
    """Gang start per gang size (p50 / p95 / max seconds, gangs measured)."""
    rows = []
    for p in points:
        for key, s in p["systems"].items():
            for size, d in s["gang_start_by_size"].items():
                rows.append([p["nodes"], p["client"], key, size, d["gangs"], d["p50"],
                             d["p95"], d["max"]])
    return md_table(["nodes", "client", "system", "gang size", "gangs complete", "p50 s",
                     "p95 s", "max s"], rows)


def turned_away_table(points: Sequence[Mapping[str, Any]]) -> str:
    """Gang start split by whether kube-scheduler turned a member away first."""
    rows = []
    for p in points:
        for key, s in p["systems"].items():
            c, t = s["gang_start_not_turned_away"], s["gang_start_turned_away"]
            rows.append([_point_name(p), p["client"], key, c["gangs"], c["p50"], c["p95"],
                         t["gangs"], t["p50"], t["p95"]])
    return md_table(["workload", "client", "system", "gangs never turned away", "p50 s",
                     "p95 s", "gangs with a member turned away", "p50 s", "p95 s"], rows)


def runs_table(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in runs:
        rows.append([r["nodes"], r["pods"], r["gangs"], r["client"], r["system"], r["rep"],
                     r["load1"], r["pods_per_second"], r["create_seconds"],
                     r["cpu"].get("kube-scheduler", "-"), r["cpu"].get("extender", "-"),
                     r["cpu"].get("kube-apiserver", "-"), r["scheduler"].get("attempts", "-"),
                     r["scheduler"].get("unschedulable_attempts", "-"), _commit_waits(r),
                     r["error"][:120] or "ok"])
    return md_table(["nodes", "pods", "gangs", "client", "system", "rep", "load 1m",
                     "pods/s", "create s", "scheduler CPU s", "extender CPU s",
                     "apiserver CPU s", "attempts", "of them failed",
                     "commit waits (timed out)", "status"], rows)


def _commit_waits(r: Mapping[str, Any]) -> str:
    """B's held filter calls, from runs recorded since they are counted."""
    sched = r["scheduler"]
    if "commit_waits" not in sched:
        return "-"
    return f"{sched['commit_waits']} ({sched['commit_waits_timed_out']})"


def markdown(data: Mapping[str, Any]) -> str:
    m = data["machine"]
    loads = [r["load1"] for r in data["runs"] if not math.isnan(r["load1"])]
    load = (f"load average (1 min) {min(loads):.1f}-{max(loads):.1f} over the runs"
            if loads else f"load {m['loadavg_1m']} at the start")
    lines = [
        f"# End-to-end benchmark against the peers ({data['mode']})", "",
        f"One local control plane (Kubernetes {data['kubernetes']}), fake nodes of 8 CPU / "
        f"32Gi, pods of 100m / 64Mi, created by {data['create_threads']} client threads. "
        f"{m['cpus']} CPUs, {load}, commit {m['commit']}, {m['date']}. "
        f"{data['repetitions']} repetition(s) per point, the systems' order rotated "
        "between them" + (f"; {len(data['warmup'])} warm-up run(s) left out"
                          if data.get("warmup") else "") + ".", "",
        "Systems: " + "; ".join(f"**{k}** {SYSTEMS[k].label}" for k in data["systems"]) + ".",
        "Client: kube-scheduler's `clientConnection`, *default* (QPS 50, burst 100) or "
        "*unthrottled* (no client-side rate limit).", "",
        "Throughput: first creation request to last binding. Gang start: a gang's last "
        "member created to its last member bound (A: the same groups of pods, not gangs).",
        "",
        "## Summary", "", compact_table(data["points"]), "",
        "## Side by side", "", side_by_side(data["points"]), "",
        "## B's throughput against each system", "",
        "Median of the per-repetition ratios (95 % bootstrap interval) [repetitions at or "
        "above the target / repetitions]. A target is met with confidence only where the "
        "whole interval is at or above it.", "", ratio_table(data["points"]), "",
        "## B's gang-start p95 against each system", "",
        "B's p95 over the other's in the same repetition: median of the repetitions "
        "(interval) [repetitions at or below the target / repetitions]; then the ratio of "
        "the p95s of all the point's gangs pooled.", "", p95_table(data["points"]), "",
        *([
            "## Against the floor", "",
            "F, the floor: the same pods, no scheduler; once the last exists a bare client "
            f"posts one Binding per pod, {data.get('floor_threads', '?')} in flight. Each "
            "system's time from its last pod created to its last pod bound (for a point of "
            "one gang, its gang start), the median of its runs, and its ratio to the floor's "
            "in the same repetition [repetitions at or below the target / repetitions].",
            "", floor_table(data["points"]), ""]
          if any("F" in p["systems"] for p in data["points"]) else []),
        "## Gang start by gang size", "", size_table(data["points"]), "",
        "## Gang start and turned-away members", "",
        "A member kube-scheduler tries before its gang is complete is held (C; B while the "
        "rest arrive fast enough: the assembly wait) or turned away (B otherwise, D), and "
        "a turned-away member is retried after kube-scheduler's pod backoff.", "",
        turned_away_table(data["points"]), "",
        "## CPU per pod, by component (ms)", "",
        "Each component's CPU from the first creation to every pod Running, over the "
        "pods of the run (medians over runs).", "", cpu_table(data["points"]), "",
        "## The whole run's CPU, B over each system in the same repetition", "",
        "Every component measured, the benchmark's pod creator included: on two shared "
        "cores, what the whole pipeline spends per pod sets the throughput. Median of the "
        "pairs (interval); then each component's difference, B's minus the other's, in "
        "percent of the other's total (medians over the pairs).", "",
        cpu_pair_table(data["points"], CPU_COLUMNS), "",
        *([
            "## While the pods were being created", "",
            "From the first create to the last answered: B's time and the whole "
            "pipeline's CPU over the other's in the same repetition (median, interval); "
            "the share of each system's run CPU left until after the phase, and how idle "
            "the machine was in it (medians). On saturated cores the phase lasts as long "
            "as its CPU takes, so work a system leaves until after the last create "
            "shortens it (bench/e2e/meter.py).", "", creation_table(data["points"]), ""]
          if any(r.get("cpu_created") for r in data["runs"]) else []),
        "## Every run", "", runs_table(data["runs"]), "",
    ]
    if data.get("plot"):
        lines[lines.index("## Summary"):lines.index("## Summary")] = [
            f"![gang start distributions]({data['plot']})", ""]
    if data.get("shared_scoring"):
        lines += ["A, C and D ran with B's `percentageOfNodesToScore` (`--shared-scoring`, "
                  "a what-if: the layout before issue 30).", ""]
    if data.get("own_scoring"):
        lines += ["A, C and D ran with kube-scheduler's adaptive `percentageOfNodesToScore` "
                  "(`--own-scoring`, a what-if); B with 100 as shipped.", ""]
    if data.get("notes"):
        lines += ["## Notes", "", *data["notes"], ""]
    return "\n".join(lines)

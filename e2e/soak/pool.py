"""``python -m e2e.soak.pool REPORT.json ...``: soak reports (``--json``) pooled by mode,
clean against hostile: one row per run, then every gang start of a mode in one sample
(p50, p95) and the hostile/clean ratios, the longest `/healthz` answer and the most CPU
the extender used during one.

Why pooled: a run of a few minutes completes a few dozen gangs, so its p95 is its second
or third slowest gang, and two runs of the same mode differ by more than the 1.2× the
hostile mode is held to. Runs of several seeds, in the same stretch of time on the same
machine, pooled per mode, are a sample large enough to compare."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from .hostile import percentile


def _mode(report: dict[str, Any]) -> str:
    return "hostile" if report.get("hostile") else "clean"


def bootstrap_ratio(clean: list[float], hostile: list[float], q: float,
                    resamples: int = 2000, seed: int = 1) -> tuple[float, float]:
    """The 5th and 95th percentiles of the `q`-quantile ratio hostile/clean over
    `resamples` resamplings of each sample's gangs (a fixed seed, so a report reprints
    the same); (0, 0) when a sample is empty or its quantile is 0."""
    if not clean or not hostile:
        return 0.0, 0.0
    rng = random.Random(seed)
    ratios: list[float] = []
    for _ in range(resamples):
        c = percentile([rng.choice(clean) for _ in clean], q)
        h = percentile([rng.choice(hostile) for _ in hostile], q)
        if c <= 0:
            return 0.0, 0.0
        ratios.append(h / c)
    ratios.sort()
    return ratios[int(0.05 * resamples)], ratios[int(0.95 * resamples)]


def _q(values: list[float], q: float) -> str:
    return f"{percentile(values, q):.3f}" if values else "-"


def pool(reports: list[dict[str, Any]]) -> list[str]:
    lines = ["| seed | mode | gangs started | p50 s | p95 s | to Scheduled Events: p50 s | "
             "p95 s | longest /healthz ms | extender CPU in one, ms | ok |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    starts: dict[str, list[float]] = {"clean": [], "hostile": []}
    sched: dict[str, list[float]] = {"clean": [], "hostile": []}
    longest: dict[str, float] = {"clean": 0.0, "hostile": 0.0}
    cpu: dict[str, float] = {"clean": -1.0, "hostile": -1.0}
    for r in sorted(reports, key=lambda r: (r["seed"], _mode(r))):
        mode = _mode(r)
        mine = list(r.get("gang_starts_s", []))
        starts[mode] += mine
        theirs = list(r.get("gang_starts_sched_s", []))
        sched[mode] += theirs
        longest[mode] = max(longest[mode], r["stall_longest_s"])
        own = r.get("stall_longest_cpu_s")
        if own is not None:
            cpu[mode] = max(cpu[mode], own)
        lines.append(
            f"| {r['seed']} | {mode} | {len(mine)} | {percentile(mine, 0.5):.3f} | "
            f"{percentile(mine, 0.95):.3f} | {_q(theirs, 0.5)} | {_q(theirs, 0.95)} | "
            f"{r['stall_longest_s'] * 1000:.0f} | "
            f"{'-' if own is None else f'{own * 1000:.0f}'} | {'yes' if r['ok'] else 'NO'} |")
    lines.append("")
    for label, sample in (("gang start", starts),
                          ("gang start to Scheduled Events", sched)):
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            c, h = percentile(sample["clean"], q), percentile(sample["hostile"], q)
            ratio = f"{h / c:.2f}" if c > 0 else "-"
            lines.append(f"pooled {label} {name}: clean {c:.3f} s "
                         f"({len(sample['clean'])} gangs), hostile {h:.3f} s "
                         f"({len(sample['hostile'])}), hostile/clean {ratio}")
    low, high = bootstrap_ratio(starts["clean"], starts["hostile"], 0.95)
    if low > 0:
        lines.append(f"gang start p95 hostile/clean, 90 % bootstrap interval over the gangs: "
                     f"{low:.2f} to {high:.2f}")
    for mode in ("clean", "hostile"):
        own = "-" if cpu[mode] < 0 else f"{cpu[mode] * 1000:.0f} ms"
        lines.append(f"{mode}: longest /healthz {longest[mode] * 1000:.0f} ms, the most "
                     f"extender CPU during one {own}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path)
    args = ap.parse_args(argv)
    print("\n".join(pool([json.loads(p.read_text()) for p in args.reports])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The picture of `bench.e2e`'s results: gang start (last member created -> last member
bound) per system, one panel per workload and client setting, every gang of every
repetition as a point over a box of its quartiles. Distributions rather than one
percentile, because the systems differ most in their tails (a member turned away waits
out a backoff of seconds). Log scale: starts range from tens of milliseconds to tens of
seconds. matplotlib (a dev dependency) with the non-interactive Agg backend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COLOURS = {"A": "#888888", "B": "#1f77b4", "C": "#d62728", "D": "#2ca02c"}


def starts_by_panel(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str,
                                                                                 list[float]]]:
    """{(workload, client): {system: gang starts}}, gangs that completed only; a big-gang
    workload (one size) is labelled by that size."""
    panels: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in runs:
        if r["rep"] < 0:
            continue
        workload = f"{r['nodes']} nodes, gangs of {r['gangs']}"
        # A gang can be seen bound before its last create call has returned (the watch
        # beats the response): drawn at 10 ms on the log scale.
        vals = [max(s, 0.01) for s in r["gang_start"] if not math.isnan(s)]
        panels.setdefault((workload, r["client"]), {}).setdefault(r["system"], []).extend(vals)
    return panels


def plot_gang_starts(data: Mapping[str, Any], path: Path) -> Path:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = starts_by_panel(data["runs"])
    n = max(1, len(panels))
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, ((workload, client), by_system) in zip(axes.flat, sorted(panels.items()),
                                                   strict=False):
        keys = [k for k in sorted(by_system) if by_system[k]]
        vals = [by_system[k] for k in keys]
        if vals:
            ax.boxplot(vals, whis=(5, 95), showfliers=False, widths=0.55,
                       medianprops={"color": "black"})
        for i, (k, v) in enumerate(zip(keys, vals, strict=True), start=1):
            jitter = [i + 0.18 * ((j * 0.618) % 1 - 0.5) for j in range(len(v))]
            ax.scatter(jitter, v, s=6, alpha=0.5, color=COLOURS.get(k, "black"), zorder=3)
        missing = sorted(set(by_system) - set(keys))
        ax.set_xticks(range(1, len(keys) + 1), keys)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_title(f"{workload}\nclient {client}" + (
            f" (no gang complete: {', '.join(missing)})" if missing else ""), fontsize=9)
        ax.set_ylabel("gang start, s")
        ax.grid(axis="y", which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle("Gang start (last member created -> last bound); box 25-75 %, whiskers "
                 "5-95 %\nA stock (no gangs), B gang-extender, C upstream 1.36, D "
                 "Coscheduling", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

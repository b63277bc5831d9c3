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


def _gang_order(gangs: str) -> tuple[int, ...]:
    return tuple(int(x) for x in gangs.split("/"))


def starts_by_panel(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str, str], dict[
        str, list[float]]]:
    """{(nodes, gangs, client): {system: gang starts}}, gangs that completed only, in
    plotting order (nodes, then gang sizes, then the default client first)."""
    panels: dict[tuple[int, str, str], dict[str, list[float]]] = {}
    for r in runs:
        if r["rep"] < 0:
            continue
        # A gang can be seen bound before its last create call has returned (the watch
        # beats the response): drawn at 10 ms on the log scale.
        vals = [max(s, 0.01) for s in r["gang_start"] if not math.isnan(s)]
        key = (r["nodes"], r["gangs"], r["client"])
        panels.setdefault(key, {}).setdefault(r["system"], []).extend(vals)
    order = {"default": 0, "unthrottled": 1}
    return dict(sorted(panels.items(), key=lambda kv: (kv[0][0], _gang_order(kv[0][1]),
                                                       order.get(kv[0][2], 9))))


def plot_gang_starts(data: Mapping[str, Any], path: Path) -> Path:
    """One row per workload, one column per client setting."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = starts_by_panel(data["runs"])
    workloads = list(dict.fromkeys((n, g) for n, g, _ in panels))
    clients = list(dict.fromkeys(c for _, _, c in panels))
    rows, cols = max(1, len(workloads)), max(1, len(clients))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for (nodes, gangs, client), by_system in panels.items():
        ax = axes[workloads.index((nodes, gangs))][clients.index(client)]
        ax.axis("on")
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
        # Labels at 1, 2 and 5 of each decade only: labelling every minor tick of a log
        # axis spanning three decades printed them on top of each other.
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{nodes} nodes, gangs of {gangs}, client {client}" + (
            f"\nno gang complete: {', '.join(missing)}" if missing else ""), fontsize=9)
        ax.set_ylabel("gang start, s")
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.suptitle("Gang start (last member created -> last bound); box 25-75 %, whiskers "
                 "5-95 %\nA stock (no gangs), B gang-extender, C upstream 1.36, D "
                 "Coscheduling", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

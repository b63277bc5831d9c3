"""The Gantt chart ``demo.png``: one panel per run, one row per pod, on a shared time axis.

Why a picture besides the timeline: "17 of 20 placed, hung" next to "placed whole at 0.6 s"
is a comparison the eye makes at once when both runs share the time axis. matplotlib is
imported inside :func:`plot` because only the end of a run (or ``--replot``) needs it, and it
takes a second to import.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

from demo.jobs import BIG_JOBS, QUICK_JOB, Workload
from demo.timeline import RunResult

COLORS = {"job-a": "#1f77b4", "job-b": "#e8710a", QUICK_JOB: "#2ca02c"}


def plot(path: Path, wl: Workload, runs: Sequence[RunResult]) -> None:
    """Gantt chart, one panel per run side by side, one row per pod grouped by Job."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    order = [*BIG_JOBS, QUICK_JOB]
    sizes = wl.job_sizes()
    gap = 2
    offsets, y = {}, 0
    for j in order:
        offsets[j] = y
        y += sizes[j] + gap
    total_rows = y - gap
    height = min(14.0, max(6.0, 2.0 + total_rows * 0.085))
    # Same time axis for both panels: the gang run is over before the stock one is
    # even given up on, and a shared scale shows that at a glance.
    fig, axes = plt.subplots(1, len(runs), figsize=(8 * len(runs), height), sharey=True,
                             sharex=True, squeeze=False)
    xmax = max(r.window for r in runs)
    for ax, res in zip(axes[0], runs, strict=True):
        end = res.window
        for j in order:
            mine = [p for p in res.pods.values() if p.job == j]
            mine.sort(key=lambda p: (p.bound if p.bound is not None else math.inf,
                                     p.created or 0.0))
            color = COLORS[j]
            for i, p in enumerate(mine[:sizes[j]]):
                row = offsets[j] + i
                start = p.created if p.created is not None else 0.0
                wait_end = p.bound if p.bound is not None else end
                ax.hlines(row, start, wait_end, colors="#b0b0b0", linewidth=1.0,
                          linestyles="solid" if p.bound is not None else (0, (2, 2)))
                if p.bound is None:
                    continue
                if p.finished is not None:
                    ax.barh(row, p.finished - p.bound, left=p.bound, height=0.8,
                            color=color, edgecolor="none")
                else:
                    ax.barh(row, end - p.bound, left=p.bound, height=0.8, color=color,
                            alpha=0.45, hatch="////", edgecolor=color, linewidth=0)
            s = res.jobs[j]
            mid = offsets[j] + sizes[j] / 2
            x = end
            if s.complete_at is not None:
                ax.vlines(s.complete_at, offsets[j] - 1, offsets[j] + sizes[j], colors=color,
                          linestyles=":", linewidth=1.2)
                label, x = f"done {s.complete_at:.1f} s", s.complete_at
                if j != QUICK_JOB and (s.first_bound or 0) > 2:
                    label = (f"pending {s.first_bound:.1f} s, until all\n{s.pods} fit at once "
                             f"(never partial);\n{label}")
            elif j != QUICK_JOB:
                label = f"HUNG\n{s.bound}/{s.pods} placed\n{s.pods - s.bound} pending"
            else:
                label = f"{s.succeeded}/{s.pods} done"
            ax.text(x + xmax * 0.01, mid, label, va="center", ha="left", fontsize=9,
                    color=color, fontweight="bold" if label.startswith("HUNG") else "normal",
                    clip_on=False, bbox={"facecolor": "white", "edgecolor": "none",
                                         "alpha": 0.85, "pad": 1})
        for j in order[1:]:
            ax.axhline(offsets[j] - gap / 2 - 0.5, color="#dddddd", linewidth=0.8)
        ax.axvline(end, color="#555555", linewidth=0.8, linestyle="--")
        ax.text(end, total_rows, "watching stopped " if res.name == "stock"
                else " all Jobs Complete", fontsize=8, color="#555555", va="bottom",
                ha="right" if res.name == "stock" else "left")
        ax.set_xlim(0, xmax * 1.01)
        ax.set_xlabel("seconds since all three Jobs were submitted")
        ax.grid(axis="x", color="#eeeeee")
        ax.set_axisbelow(True)
        if res.name == "stock":
            title = ("Stock kube-scheduler: deadlock\n" if res.ok else
                     "Stock kube-scheduler\n") + res.verdict.split(":", 1)[-1].strip()
        else:
            title = ("Gang scheduler: whole Jobs, one after the other\n" if res.ok else
                     "Gang scheduler: FAILED\n") + res.verdict.split("FAILED:")[-1].strip()
        ax.set_title(_wrap(title, 80), fontsize=11, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    ax0 = axes[0][0]
    ax0.set_ylim(total_rows + 0.5, -1.5)
    ax0.set_yticks([offsets[j] + (sizes[j] - 1) / 2 for j in order])
    ax0.set_yticklabels([f"{j}\n{sizes[j]} pods" for j in order], fontsize=10)
    ax0.set_ylabel("one row per pod")
    handles: list[Artist] = [Patch(color=COLORS[j], label=f"{j}: bound → finished")
                             for j in order]
    handles += [
        Patch(facecolor="#999999", alpha=0.45, hatch="////", edgecolor="#666666",
              label="bound, never finishes (hung)"),
        Line2D([], [], color="#b0b0b0", label="pending (created, not bound)"),
        Line2D([], [], color="#b0b0b0", linestyle=(0, (2, 2)), label="never bound"),
        Line2D([], [], color="#555555", linestyle=":", label="Job complete"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9,
               frameon=False)
    fig.suptitle(f"Gang deadlock demo, same workload twice\n{wl.describe()}", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 0.97, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _wrap(text: str, width: int) -> str:
    """Wrap each line of a title on its own (the verdicts are long)."""
    return "\n".join(textwrap.fill(line, width) for line in text.splitlines())

"""Question: where does a big gang's start go beyond the floor's: to the plan, to the
commit's first Bindings, to the rest of the commit, or after the last Binding? Answer:
lab/history/performance-history.md, "Issue 30: the commit's first connections and its last second".

One gang of `--gang` on `--nodes` nodes, run by B and by F (the floor) in turn, each
repetition, on one control plane. Seconds from the last member's create returning:

* `reserved`: the extender logs the gang's reservation (planned; the commit starts);
* `first_round`: the Binding concurrency's first round (the 64th Binding) answered;
* `last_binding`: the extender's last Binding answered;
* `seen`: the run's timing watch sees the last member bound (B's gang start; F's time);
* `forced_closes`: watches the API server closed as unresponsive ("Forcing ... watcher
  close due to unresponsiveness", its cacher giving up on a watcher that fell behind)
  from the last create to the last member seen bound.

Read from the extender's log (its INFO lines) and kube-apiserver's (klog) after each run.

    .venv/bin/python -m lab.experiments.commit_phases --reps 3
    .venv/bin/python -m lab.experiments.commit_phases --reps 3 \\
        --extender-args '--warm-connections off' --extender-args '--warm-connections on'
"""

from __future__ import annotations

import argparse
import datetime
import math
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.common import machine
from bench.e2e.report import RunResult
from bench.e2e.run import Bench
from e2e.harness.process import ManagedProcess
from lab.experiments.plane import add_gang_args, in_turns, plane_with_nodes, write_runs

FIRST_ROUND = 64  # the default Binding concurrency
_KLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)")


class Logged(Bench):
    """A Bench that remembers where each run's extender log is and where the API
    server's log stood when the run began."""

    extender_log: Path | None = None
    api_log_from = 0

    def _measure(self, res: RunResult, ns: str, sizes: list[int],
                 procs: dict[str, ManagedProcess]) -> None:
        ext = procs.get("extender")
        self.extender_log = ext.log_path if ext is not None else None
        api = self.cp.log_dir / "kube-apiserver.log"
        self.api_log_from = api.stat().st_size if api.exists() else 0
        super()._measure(res, ns, sizes, procs)


def log_time(line: str) -> float:
    """A Python logging line's time (its default format, the local clock)."""
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def klog_time(line: str, year: int) -> float | None:
    m = _KLOG.match(line)
    if m is None:
        return None
    month, day, hh, mm, ss, frac = m.groups()
    return datetime.datetime(year, int(month), int(day), int(hh), int(mm), int(ss),
                             int(frac[:6].ljust(6, "0"))).timestamp()


def extender_phases(lines: list[str], created: float) -> dict[str, float]:
    reserved = [log_time(x) for x in lines if "reason=Reserved" in x]
    bound = [log_time(x) for x in lines if " bound pod=" in x]

    def after(t: float) -> float:
        return round(t - created, 3)

    return {"reserved": after(reserved[0]) if reserved else math.nan,
            "first_round": (after(bound[FIRST_ROUND - 1]) if len(bound) >= FIRST_ROUND
                            else math.nan),
            "last_binding": after(bound[-1]) if bound else math.nan}


def forced_closes(lines: list[str], start: float, end: float) -> int:
    year = datetime.date.today().year
    times = (klog_time(x, year) for x in lines if "watcher close due to unresponsiveness" in x)
    return sum(1 for t in times if t is not None and start <= t <= end)


def one_run(bench: Logged, system: str, nodes: int, gang: int, run: int) -> dict[str, Any]:
    r = bench.run(system, "unthrottled", nodes, [gang], str(gang), run)
    created = bench.last_created_wall
    seen = r.gang_start[0] if r.gang_start else math.nan
    row: dict[str, Any] = {"system": system, "load1": r.load1, "seen": seen,
                           "error": r.error[:200]}
    if system == "B" and bench.extender_log is not None:
        row.update(extender_phases(bench.extender_log.read_text().splitlines(), created))
    with (bench.cp.log_dir / "kube-apiserver.log").open() as f:
        f.seek(bench.api_log_from)
        api = f.read().splitlines()
    row["forced_closes"] = forced_closes(api, created,
                                         created + (60.0 if math.isnan(seen) else seen))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_gang_args(ap, reps=2)
    ap.add_argument("--stem", default="commit-phases", help="results file name")
    args = ap.parse_args(argv)
    info = machine()
    rows: list[dict[str, Any]] = []
    with plane_with_nodes(args.nodes) as cp:
        bench = Logged(cp, 180.0, [], None)
        for run, (rep, variant) in enumerate(in_turns(args.extender_args or [""], args.reps)):
            bench.extender_args = shlex.split(variant)
            for system in "BF":
                row = {"rep": rep, "extender_args": variant if system == "B" else "",
                       **one_run(bench, system, args.nodes, args.gang, 2 * run + (system == "F"))}
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    cols = ["rep", "system", "extender_args", "load1", "reserved", "first_round",
            "last_binding", "seen", "forced_closes", "error"]
    text = write_runs(
        args.out, args.stem,
        f"Where a gang of {args.gang} on {args.nodes} nodes starts: B against the floor",
        "Seconds from the last member's create returning; forced_closes: watches the API "
        "server closed as unresponsive in that time.", cols, rows, info,
        nodes=args.nodes, gang=args.gang)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

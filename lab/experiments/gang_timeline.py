"""Question: where does a big gang's start go in B: kube-scheduler's cycles over the
members, or the extender's Bindings? Answer: lab/history/performance-history.md, "Where a
big gang's start goes".

Where a big gang's start goes, for B: one gang on many nodes, with the extender's and
kube-scheduler's counters sampled every 0.1 s during the run.

    .venv/bin/python -m lab.experiments.gang_timeline   # one gang of 1,000 on 1,000 nodes
    .venv/bin/python -m lab.experiments.gang_timeline --nodes 1000 --gang 256 --reps 2
    .venv/bin/python -m lab.experiments.gang_timeline --reps 2 --stem gang-timeline-bindings \
        --extender-args '--binding-concurrency 16' --extender-args '--binding-concurrency 64'

Gang start (last member created -> last bound) splits into: kube-scheduler taking every
member through its cycle (each member's filter and then its bind call, held by the extender
until the whole gang has one: `gang_extender_waiting_binds`), and the extender's Bindings
(`gang_extender_bindings_total`). The samples say how long each took after the last member
was created, how many members were turned away first and woken (`wakeups`), and how many
scheduling attempts kube-scheduler made. Printed, and written to
lab/results/gang-timeline.{json,md}.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
import time
from typing import Any

from bench.common import machine
from bench.e2e.report import RunResult
from bench.e2e.run import Bench
from bench.e2e.watch import hist_sum_count, scrape
from e2e.harness.process import ManagedProcess
from lab.experiments.plane import add_gang_args, in_turns, plane_with_nodes, write_runs


class Sampled(Bench):
    """A Bench whose runs of B are sampled: [(t, filter calls, held binds, bindings,
    wake-ups, scheduler attempts, API connections opened on demand, opened ahead)], t
    from just before the first pod is created."""

    samples: list[tuple[float, int, int, int, int, int, int, int]]

    def _measure(self, res: RunResult, ns: str, sizes: list[int],
                 procs: dict[str, ManagedProcess]) -> None:
        self.samples = []
        stop = threading.Event()
        ext, sched = procs["extender"], procs["kube-scheduler"]
        t0 = time.monotonic()

        def sample() -> None:
            while not stop.is_set():
                em = scrape(f"http://127.0.0.1:{ext.port}/metrics")
                sm = scrape(f"https://127.0.0.1:{sched.port}/metrics")
                self.samples.append((
                    round(time.monotonic() - t0, 2),
                    hist_sum_count(em, "gang_extender_verb_duration_seconds",
                                   'verb="filter"')[1],
                    int(em.get("gang_extender_waiting_binds", 0)),
                    int(sum(v for k, v in em.items()
                            if k.startswith("gang_extender_bindings_total"))),
                    int(em.get("gang_extender_wakeups_total", 0)),
                    int(sum(v for k, v in sm.items()
                            if k.startswith("scheduler_schedule_attempts_total"))),
                    _connections(em, "on_demand"), _connections(em, "ahead")))
                stop.wait(0.1)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            super()._measure(res, ns, sizes, procs)
        finally:
            stop.set()
            thread.join(5)


def _connections(metrics: dict[str, float], opened: str) -> int:
    return int(sum(v for k, v in metrics.items()
                   if k.startswith("gang_extender_api_connections_total")
                   and f'opened="{opened}"' in k))


def phases(samples: list[tuple[float, int, int, int, int, int, int, int]], created: float,
           gang: int) -> dict[str, Any]:
    """Seconds after the last member was created (`created`, from the samples' clock)
    until every member's bind call was held and until every Binding was made, and the
    connections the extender opened from then on (on demand: on the commit's path) and
    ahead of it in all."""
    def first(pred: Any) -> float:
        return next((round(s[0] - created, 2) for s in samples if pred(s)), float("nan"))

    at_created = max((s for s in samples if s[0] <= created), default=samples[0])
    return {
        "filter_calls_when_last_created": at_created[1],
        "held_binds_when_last_created": at_created[2],
        "all_binds_held_s": first(lambda s: s[2] >= gang or s[3] > 0),
        "first_binding_s": first(lambda s: s[3] > 0),
        "all_bindings_s": first(lambda s: s[3] >= gang),
        "filter_calls": samples[-1][1],
        "wakeups": samples[-1][4],
        "scheduler_attempts": samples[-1][5],
        "connections_on_demand_from_last_created": samples[-1][6] - at_created[6],
        "connections_ahead": samples[-1][7],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_gang_args(ap, reps=1)
    ap.add_argument("--client", default="unthrottled")
    ap.add_argument("--stem", default="gang-timeline", help="results file name")
    args = ap.parse_args(argv)
    info = machine()
    rows: list[dict[str, Any]] = []
    with plane_with_nodes(args.nodes) as cp:
        bench = Sampled(cp, 180.0, [], None)
        # `run`: each run its own namespace.
        for run, (rep, variant) in enumerate(in_turns(args.extender_args or [""], args.reps)):
            bench.extender_args = shlex.split(variant)
            r = bench.run("B", args.client, args.nodes, [args.gang], str(args.gang), run)
            row = {"rep": rep, "extender_args": variant, "load1": r.load1,
                   "gang_start_s": r.gang_start[0],
                   "create_s": r.create_seconds, "error": r.error[:200],
                   **phases(bench.samples, r.create_seconds, args.gang)}
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    cols = list(rows[0]) if rows else []
    text = write_runs(
        args.out, args.stem,
        f"One gang of {args.gang} on {args.nodes} nodes, system B, client {args.client}",
        "Seconds are counted from the last member's creation (the end of the creating "
        "client's batch).", cols, rows, info, nodes=args.nodes, gang=args.gang)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Question: how many Bindings in flight let a bare client commit 1,000 pending pods fastest
on the local control plane, the floor `bench.e2e` compares the schedulers with? Answer:
lab/history/performance-history.md, "Issue 30: the floor and the done-means commands".

    .venv/bin/python -m lab.experiments.floor_threads                 # 4, 8, 16, 32, 64
    .venv/bin/python -m lab.experiments.floor_threads --threads 16,64 --reps 3

One control plane with the fake kubelet and `--nodes` fake nodes, as `bench.e2e` builds
it; then `bench.e2e`'s floor run (system F, bench/e2e/floor.py: the pods created as every
system's are, then one Binding per pod) once per concurrency and repetition, the
concurrencies' order rotated between repetitions, after one warm-up run left out. Per
concurrency: the time from the last pod created to the last pod seen bound (median and
range over the repetitions) and the Bindings per second it makes. The fastest is
`bench.e2e`'s default (`bench.e2e.floor.FLOOR_THREADS`). Written to
lab/results/floor-threads.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from bench.common import machine, md_table, write_results
from bench.e2e.run import Bench
from lab.common import RESULTS
from lab.experiments.plane import plane_with_nodes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--threads", default="4,8,16,32,64", help="Bindings in flight, listed")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--stem", default="floor-threads")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.threads.split(",")]
    if any(c < 1 for c in counts) or args.nodes < 1 or args.pods < 1:
        ap.error("threads, nodes and pods must be at least 1")
    info = machine()
    rows: list[dict[str, Any]] = []
    with plane_with_nodes(args.nodes) as cp:
        bench = Bench(cp, 180.0, [], None)
        for rep in range(-1, args.reps):
            order = counts[rep % len(counts):] + counts[:rep % len(counts)]
            for n in order if rep >= 0 else counts[:1]:
                bench.floor_threads = n
                # One namespace per run: the run's key carries the concurrency.
                key = rep * 1000 + n if rep >= 0 else rep
                r = bench.run("F", "unthrottled", args.nodes, [args.pods], str(args.pods), key)
                rows.append({"threads": n, "rep": rep, "load1": r.load1,
                             "tail_seconds": r.tail_seconds, "error": r.error})
                print(f"{n} in flight, rep {rep}, load {r.load1}: last bound "
                      f"{r.tail_seconds} s after the last created {r.error}",
                      file=sys.stderr, flush=True)
    measured = [r for r in rows if r["rep"] >= 0 and not r["error"]]
    table = []
    for n in counts:
        tails = [r["tail_seconds"] for r in measured if r["threads"] == n]
        if tails:
            med = statistics.median(tails)
            table.append([n, len(tails), round(med, 2), f"{min(tails):.2f}-{max(tails):.2f}",
                          round(args.pods / med)])
    loads = [r["load1"] for r in rows]
    text = "\n".join([
        "# The floor's Bindings in flight", "",
        f"{args.pods} pending pods on {args.nodes} fake nodes, one Binding each from a bare "
        f"client; {info['cpus']} CPUs, load {min(loads):.1f}-{max(loads):.1f}, commit "
        f"{info['commit']}, {info['date']}; {args.reps} repetition(s), order rotated, "
        "one warm-up run left out.", "",
        md_table(["in flight", "runs", "last bound after last created s (median)", "range s",
                  "Bindings/s"], table), ""])
    data = {"benchmark": "floor-threads", "machine": info, "args": vars(args),
            "runs": rows, "kubernetes": cp.bin_dir.name}
    paths = write_results(RESULTS, args.stem, data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    t = time.monotonic()
    code = main()
    print(f"{time.monotonic() - t:.0f} s", file=sys.stderr)
    sys.exit(code)

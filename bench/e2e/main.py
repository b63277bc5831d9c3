"""End-to-end benchmark on the local control plane: gang-extender against the stock
kube-scheduler and the other gang schedulers, on the same pods and nodes, in one run.

    .venv/bin/python -m bench.e2e --quick   # 50 nodes, 40 gangs of 8, one repetition
    .venv/bin/python -m bench.e2e --full    # 50 nodes x 40 gangs of 8, 100 x 45 of 16
    .venv/bin/python -m bench.e2e --big     # 1,000 nodes, gangs of 64, 256 and 1,000, floor
    .venv/bin/python -m bench.e2e --scale   # 2,000 and 5,000 nodes

Results: bench/results/e2e[-quick|-big|-scale].{json,md,png}; docs/performance.md explains
them. The systems (A stock, B gang-extender, C upstream gang scheduling, D
scheduler-plugins Coscheduling, and F, the floor: a bare client's Bindings, no scheduler,
bench/e2e/floor.py) are defined in bench/e2e/systems.py, the report in
bench/e2e/report.py, the plot in bench/e2e/plot.py.

One control plane (etcd, kube-apiserver serving the upstream Workload API with the gates C
needs, kube-controller-manager, fake kubelet) for the whole run. For each point and
repetition every system runs once, back to back, in an order rotated between repetitions:
only one scheduler (and, for B, the extender) runs at a time, in a fresh namespace, after
the previous run's pods are deleted. Pods are created by a pool of client threads, gang by
gang, in the same order for every system, group objects first. A raw watch records when
each pod is first seen bound; every component's CPU is taken until every pod runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import RESULTS, machine, percentile, write_results
from bench.e2e.floor import FLOOR_THREADS
from bench.e2e.report import RunResult, markdown, summarize
from bench.e2e.run import (
    CREATE_THREADS,
    Bench,
    bench_control_plane,
    find_scheduler_plugins,
    node_name,
)
from bench.e2e.systems import CLIENT_SETTINGS, SYSTEMS
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.target import use_cluster

MIXED = (8, 16, 32)
QUICK = ("50x320:8",)
FULL = ("50x320:8", "100x720:16")
BIG = ("1000x256:64", "1000x512:256", "1000x1000:1000")
SCALE = ("2000x1000", "5000x1000")


def parse_point(spec: str) -> tuple[int, int, tuple[int, ...]]:
    """"NODESxPODS" (gangs of 8, 16, 32, cycled) or "NODESxPODS:SIZE" (gangs of SIZE)."""
    shape, _, size = spec.partition(":")
    nodes, pods = (int(x) for x in shape.split("x"))
    return nodes, pods, (int(size),) if size else MIXED


def gang_sizes(pods: int, pattern: tuple[int, ...] = MIXED) -> list[int]:
    """Gangs cycling through `pattern` adding up to `pods` (the last one may be smaller)."""
    sizes: list[int] = []
    i = 0
    while sum(sizes) < pods:
        sizes.append(min(pattern[i % len(pattern)], pods - sum(sizes)))
        i += 1
    return sizes


def add_nodes(fk: FakeKubelet, have: int, want: int) -> float:
    """Fake nodes node-<have>..node-<want-1>; returns the seconds it took."""
    t = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: fk.add_node(node_name(i)), range(have, want)))
    return round(time.monotonic() - t, 1)


def report_only(paths: list[Path], plot: bool) -> int:
    """The summary recomputed from results files' run records (the report's code may be
    newer than the run). Several files: their repetitions are pooled, numbered apart; a
    repetition stays a pair of back-to-back runs, so pooling adds pairs, never mixes them."""
    files = [json.loads(p.read_text()) for p in paths]
    data = files[0]
    runs = [RunResult(**{**r, "rep": r["rep"] + 100 * i if r["rep"] >= 0 else r["rep"]})
            for i, f in enumerate(files) for r in f["runs"]]
    data["runs"] = [r.__dict__ for r in runs]
    data["points"] = summarize(runs)
    if len(files) > 1:
        data["mode"] = " + ".join(f["mode"] for f in files) + " (pooled)"
        data["repetitions"] = " + ".join(str(f["repetitions"]) for f in files)
        data.pop("plot", None)
    if plot:
        from bench.e2e.plot import plot_gang_starts

        data["plot"] = plot_gang_starts(data, paths[0].with_suffix(".png")).name
    print(markdown(data))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    preset = ap.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help=f"{QUICK}, one repetition")
    preset.add_argument("--full", action="store_true", help=f"{FULL}, 4 repetitions")
    preset.add_argument("--big", action="store_true", help=f"big gangs: {BIG}")
    preset.add_argument("--scale", action="store_true", help=f"many nodes: {SCALE}")
    preset.add_argument("--sweep", default=None,
                        help="NODESxPODS[:GANGSIZE],... e.g. 100x480,1000x1000:1000")
    ap.add_argument("--systems", default=None,
                    help="which of ABCDF (default: ABCD; --big ABCDF; --scale AB)")
    ap.add_argument("--clients", default=None,
                    help="default,unthrottled (default: both; --big and --scale unthrottled)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per point")
    ap.add_argument("--warmup", type=int, default=1, metavar="N",
                    help="rounds of every system run first and left out (default 1): a "
                         "fresh control plane's first runs were 25 %% slower")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per run to bind all")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--stem", default=None, metavar="NAME",
                    help="results file names, NAME.{json,md,png} (default e2e[-MODE])")
    ap.add_argument("--extender-args", default="", metavar="ARGS",
                    help="what-if: extra `gang-extender serve` flags for B")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    ap.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                    help="print the markdown (and redraw the plot) of a results file "
                         "without running anything, e.g. bench/results/e2e.json; "
                         "several files: their repetitions pooled (no plot)")
    ap.add_argument("--no-prioritize", action="store_true",
                    help="what-if: B's scheduler configuration without the prioritize verb")
    ap.add_argument("--profile-extender", type=Path, metavar="DIR",
                    help="run the extender under cProfile, one .prof per run in DIR")
    ap.add_argument("--shared-scoring", action="store_true",
                    help="what-if (the layout before issue 30): A, C and D with B's "
                         "percentageOfNodesToScore instead of kube-scheduler's default")
    # The default since issue 30; accepted so that earlier commands still run.
    ap.add_argument("--own-scoring", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--floor-threads", type=int, default=FLOOR_THREADS, metavar="N",
                    help=f"F's Bindings in flight (default {FLOOR_THREADS})")
    ap.add_argument("--profile-apiserver", type=Path, metavar="DIR",
                    help="kube-apiserver's CPU profile of each measured run in DIR "
                         "(`go tool pprof -top -cum DIR/B-*.pb.gz`)")
    ap.add_argument("--kubelet-nice", type=int, default=0, metavar="N",
                    help="nice value of the fake kubelet process")
    args = ap.parse_args(argv)
    if args.report:
        return report_only(args.report, not args.no_plot and len(args.report) == 1)
    name = ("quick" if args.quick else "big" if args.big else "scale" if args.scale
            else "custom" if args.sweep else "full")
    specs = {"quick": QUICK, "full": FULL, "big": BIG, "scale": SCALE}.get(
        name, tuple((args.sweep or "").split(",")))
    points = [parse_point(s) for s in specs]
    systems = list(args.systems or ("AB" if args.scale else "ABCDF" if args.big else "ABCD"))
    clients = (args.clients.split(",") if args.clients else
               ["unthrottled"] if name in ("big", "scale") else list(CLIENT_SETTINGS))
    reps = args.reps or {"quick": 1, "full": 4}.get(name, 2)
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s}")
    if args.stem is not None and (not args.stem or "/" in args.stem):
        ap.error(f"--stem is a file name without a directory, got {args.stem!r}")
    if args.floor_threads < 1:
        ap.error(f"--floor-threads must be at least 1, got {args.floor_threads}")
    if args.shared_scoring and args.own_scoring:
        ap.error("--own-scoring (the default) and --shared-scoring contradict each other")

    t_start = time.monotonic()
    info = machine()
    plugins_dir = find_scheduler_plugins() if "D" in systems else None
    cp = bench_control_plane(["--profiling=true"] if args.profile_apiserver else ()).start()
    runs: list[RunResult] = []
    warmup: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        use_cluster(cp)
        fk = FakeKubelet(cp).start()
        kubelet = cp.processes.get("fake-kubelet")
        if args.kubelet_nice and kubelet is not None and kubelet.pid is not None:
            os.setpriority(os.PRIO_PROCESS, kubelet.pid, args.kubelet_nice)
        bench = Bench(cp, args.timeout, shlex.split(args.extender_args), plugins_dir,
                      args.profile_extender, args.no_prioritize, args.shared_scoring,
                      args.profile_apiserver, args.floor_threads)
        have = 0
        for nodes, pods, pattern in points:
            if nodes > have:
                secs = add_nodes(fk, have, nodes)
                notes.append(f"* {nodes - have} fake nodes added in {secs} s.")
                print(f"{nodes} nodes ready ({secs} s)", file=sys.stderr, flush=True)
                have = nodes
            sizes, gangs = gang_sizes(pods, pattern), "/".join(map(str, pattern))
            for w in range(args.warmup if not runs else 0):
                for s in systems:
                    r = bench.run(s, clients[-1], nodes, sizes, gangs, -1 - w)
                    warmup.append({"system": s, "pods_per_second": r.pods_per_second,
                                   "error": r.error})
                    print(f"warm-up {s}: {r.pods_per_second} pods/s {r.error}",
                          file=sys.stderr, flush=True)
            for client in clients:
                for rep in range(reps):
                    # Rotated, so drift in machine load does not favour one system.
                    order = systems[rep % len(systems):] + systems[:rep % len(systems)]
                    for s in order:
                        r = bench.run(s, client, nodes, sizes, gangs, rep)
                        runs.append(r)
                        starts = [x for x in r.gang_start if x == x]
                        p95 = f", gang start p95 {percentile(starts, 95):.2f} s" if starts else ""
                        print(f"{s} {client} {nodes}x{pods}:{r.gangs} rep {rep} load "
                              f"{r.load1}: {r.pods_per_second} pods/s{p95}, last bound "
                              f"{r.tail_seconds} s after the last created"
                              + (f" ERROR {r.error}" if r.error else ""),
                              file=sys.stderr, flush=True)
    finally:
        cp.stop()
    stem = args.stem or ("e2e" if name == "full" else f"e2e-{name}")
    data: dict[str, Any] = {
        "benchmark": "e2e", "mode": name, "machine": info, "repetitions": reps,
        "systems": systems, "clients": clients, "extender_args": args.extender_args,
        "no_prioritize": args.no_prioritize, "shared_scoring": args.shared_scoring,
        "floor_threads": args.floor_threads,
        "kubernetes": cp.bin_dir.name, "client_settings": CLIENT_SETTINGS,
        "create_threads": CREATE_THREADS, "seconds": round(time.monotonic() - t_start, 1),
        "warmup": warmup, "notes": notes,
        "points": summarize(runs), "runs": [r.__dict__ for r in runs],
    }
    if not args.no_plot:
        from bench.e2e.plot import plot_gang_starts

        png = plot_gang_starts(data, args.out / f"{stem}.png")
        data["plot"] = png.name
    text = markdown(data)
    paths = write_results(args.out, stem, data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    print(json.dumps({"seconds": data["seconds"]}))
    return 1 if any(r.error for r in runs) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

"""The demo: the classic gang deadlock, replayed with the stock scheduler and then with ours.

    .venv/bin/python -m demo [--out demo-out] [--stock-wait 40]

One local control plane (etcd, kube-apiserver, kube-controller-manager, the stock
kube-scheduler) with 4 fake nodes. The same workload is submitted twice, all at once:

* job-a and job-b: two Jobs of 20 rendezvous pods (a pod finishes only once all 20 pods of
  its Job have run for the run time, like an MPI or all-reduce job), each sized to need
  75 % of the cluster's memory, so one fits but not both;
* quick: a 50-pod Job of small independent pods that run 2 s each.

Run A ("stock") uses ``schedulerName: default-scheduler``: the stock scheduler places pods
one by one, both big Jobs end up partially placed and neither can ever finish. The demo
observes that for ``--stock-wait`` seconds, reports it and cleans up.

Run B ("gang") starts the gang stack (our extender plus a kube-scheduler with the single
profile ``gang-scheduler``) and submits the same workload with ``schedulerName:
gang-scheduler``: each big Job gets a PodGroup with ``minMember`` 20 and the PodGroup label
in its pod template. The quick Job stays plain pods of the gang scheduler (no PodGroup):
its pods are independent, so all-or-nothing would buy nothing, and it shows that ordinary
pods still flow around the capacity held for gangs. Expected: job-a placed whole, job-b
placed whole only once job-a finished, everything completes.

Output: a timeline and a summary table on stdout, ``<out>/timeline.json`` (per-pod times)
and ``<out>/demo.png`` (Gantt chart, stock vs gang); ``--replot <out>/timeline.json`` only
redraws the chart. The whole demo is bounded by ``--timeout``; if something hangs it fails
with the components' log tails, and the logs are copied to ``<out>/logs``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from demo.gantt import plot
from demo.jobs import Workload
from demo.scenario import Demo
from demo.story import print_run, print_summary
from demo.timeline import RunResult, read_json, write_json
from e2e.harness.cluster import ControlPlane
from e2e.harness.target import kube


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options; the workload's defaults come from :class:`Workload`."""
    ap = argparse.ArgumentParser(prog="python -m demo",
                                 description=(__doc__ or "").split("\n\n")[0])
    d = Workload()
    ap.add_argument("--out", type=Path, default=Path("demo-out"),
                    help="directory for timeline.json and demo.png (default demo-out)")
    ap.add_argument("--stock-wait", type=float, default=40.0,
                    help="seconds to watch the stock run hang (default 40)")
    ap.add_argument("--stock-attempts", type=int, default=3,
                    help="repeat the stock run up to this many times while the race goes "
                         "one Job's way and no deadlock forms (default 3)")
    ap.add_argument("--timeout", type=float, default=180.0,
                    help="bound of the whole demo in seconds (default 180)")
    ap.add_argument("--nodes", type=int, default=d.nodes)
    ap.add_argument("--big-pods", type=int, default=d.big_pods,
                    help=f"pods per big Job (default {d.big_pods})")
    ap.add_argument("--quick-pods", type=int, default=d.quick_pods,
                    help=f"pods of the quick Job (default {d.quick_pods})")
    ap.add_argument("--run-seconds", type=float, default=d.run_seconds,
                    help="run time of a big Job once all its pods are up (default 5)")
    ap.add_argument("--share", type=float, default=d.share,
                    help="share of the cluster's memory each big Job needs (default 0.75)")
    ap.add_argument("--replot", type=Path, metavar="TIMELINE_JSON",
                    help="only redraw <out>/demo.png from a timeline.json of an earlier run")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run A, then run B, then the summary and the files; 0 when the gang run showed what
    it should, 1 when it did not, 2 when the demo failed, 3 (from the watchdog) on a hang."""
    args = parse_args(argv)
    wl = Workload(nodes=args.nodes, big_pods=args.big_pods, quick_pods=args.quick_pods,
                  run_seconds=args.run_seconds, share=args.share)
    wl.check()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        wl, saved = read_json(args.replot)
        plot(out / "demo.png", wl, saved)
        print(f"wrote {out / 'demo.png'}")
        return 0
    demo = Demo(wl, args.stock_wait, args.timeout, args.stock_attempts)
    print(f"gang deadlock demo: {wl.describe()}", flush=True)

    # SIGTERM should stop the components like Ctrl-C does (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Last resort if a call blocks past the bound: report, stop everything, exit.
    def watchdog() -> None:
        print(f"\nDEMO HUNG: still running {args.timeout + 30:.0f} s after start",
              file=sys.stderr, flush=True)
        if demo.cp is not None:
            print(demo.cp.log_tails(40), file=sys.stderr, flush=True)
            save_logs(demo.cp, out)
            demo.cp.stop()
        os._exit(3)

    timer = threading.Timer(args.timeout + 30, watchdog)
    timer.daemon = True
    timer.start()
    t_start = time.monotonic()
    runs: list[RunResult] = []
    failed = True
    try:
        demo.start_cluster()
        t = time.monotonic()
        stock = demo.run("stock", gang=False)
        runs.append(stock)
        print_run(stock)
        demo.delete_namespace(stock.namespace)
        t_stock = time.monotonic() - t
        t = time.monotonic()
        demo.start_gang_stack()
        gang = demo.run("gang", gang=True)
        runs.append(gang)
        print_run(gang)
        t_gang = time.monotonic() - t
        print_summary(runs)
        write_json(out / "timeline.json", wl, runs)
        plot(out / "demo.png", wl, runs)
        print(f"\nwrote {out / 'timeline.json'} and {out / 'demo.png'}")
        print(f"took {time.monotonic() - t_start:.0f} s: stock part {t_stock:.0f} s "
              f"(incl. cleanup), gang part {t_gang:.0f} s (incl. starting the gang stack)")
        if not stock.ok:
            print(f"WARNING: the stock run did not show the deadlock: {stock.verdict}")
        failed = not gang.ok
        return 0 if gang.ok else 1
    except Exception as e:
        print(f"\nDEMO FAILED: {e}", file=sys.stderr, flush=True)
        if runs:
            with contextlib.suppress(Exception):
                write_json(out / "timeline.json", wl, runs)
        return 2
    finally:
        timer.cancel()
        if demo.cp is not None:
            if failed:
                save_logs(demo.cp, out)
            with contextlib.suppress(Exception):
                kube().api.close()
            demo.cp.stop()


def save_logs(cp: ControlPlane, out: Path) -> None:
    """Copy the components' logs next to the output: the control plane's own directory
    is removed when it stops."""
    with contextlib.suppress(OSError):
        dest = out / "logs"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(cp.log_dir, dest)
        print(f"component logs copied to {dest}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

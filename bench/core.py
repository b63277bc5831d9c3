"""In-process benchmark of the extender's core: the verbs through the ASGI app, no network.

    .venv/bin/python -m bench.core --quick     # 500 nodes x 1,000 pods, seconds
    .venv/bin/python -m bench.core --full      # {500, 5,000} nodes x {1,000, 10,000} pods
                                               # x {burst, stream}; about 1 minute
    .venv/bin/python -m bench.core --profile   # cProfile of 5,000 nodes x 10,000 pods, stream

Results: bench/results/core.{json,md} (--full) or core-quick.*; docs/performance.md
explains them.

Each case runs in its own process, so memory figures do not mix: bench/workload.py builds
the cluster and the gangs, bench/run.py plays kube-scheduler against the extender
(with kube-scheduler's own fit check from bench/simulator.py, the extender wired and
timed by bench/inprocess.py), bench/report.py writes the tables.

Filter and prioritize are what matter for speed: they run on kube-scheduler's serial loop.
Bind latency is reported for binds answered at once (plain pods); a gang member's bind is
held for the rest of its gang by design, so for all binds the manager's decision alone is
timed. Clock: simulated, 1 ms per scheduling cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import RESULTS, machine, write_results
from bench.report import markdown
from bench.run import run_case

SIZES = ((500, 1000), (500, 10_000), (5000, 1000), (5000, 10_000))
FULL_CASES = tuple((n, p, a) for a in ("burst", "stream") for n, p in SIZES)
QUICK_CASES = ((500, 1000, "burst"), (500, 1000, "stream"))


def _run_in_subprocess(nodes: int, pods: int, arrival: str, passes: int,
                       gc_freeze: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.core", "--case", f"{nodes}x{pods}:{arrival}",
         "--passes", str(passes), *(["--gc-freeze"] if gc_freeze else [])],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1],
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def profile_case(nodes: int, pods: int, arrival: str, out: Path) -> str:
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(run_case(nodes, pods, trace_memory=False, arrival=arrival))
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
    text = buf.getvalue()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def _size(text: str) -> tuple[int, int, str]:
    """"NODESxPODS[:burst|:stream]"."""
    size, _, arrival = text.lower().partition(":")
    nodes, pods = size.split("x")
    if arrival not in ("", "burst", "stream"):
        raise SystemExit(f"unknown arrival {arrival!r}: burst or stream")
    return int(nodes), int(pods), arrival or "burst"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="500 nodes x 1,000 pods")
    mode.add_argument("--full", action="store_true", help="{500, 5000} x {1000, 10000}")
    mode.add_argument("--cases", help="NODESxPODS[:stream],... instead of a preset")
    mode.add_argument("--case", help="NODESxPODS[:stream], one case in this process, "
                      "JSON on stdout")
    mode.add_argument("--profile", nargs="?", const="5000x10000:stream",
                      metavar="NODESxPODS[:stream]",
                      help="cProfile one case (default 5000x10000:stream)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after the initial feed (what-if for the extender)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = ap.parse_args(argv)

    if args.case:
        n, p, a = _size(args.case)
        print(json.dumps(asyncio.run(
            run_case(n, p, args.passes, gc_freeze=args.gc_freeze, arrival=a))))
        return 0
    if args.profile:
        n, p, a = _size(args.profile)
        text = profile_case(n, p, a, args.out / "core-profile.txt")
        print(text[:6000])
        print(f"written: {args.out / 'core-profile.txt'}")
        return 0

    if args.cases:
        cases = tuple(_size(c) for c in args.cases.split(","))
        mode_name = "custom"
    else:
        cases = FULL_CASES if args.full else QUICK_CASES
        mode_name = "full" if args.full else "quick"
    results = []
    for n, p, a in cases:
        print(f"case {n} nodes x {p} pods, {a} ...", file=sys.stderr, flush=True)
        results.append(_run_in_subprocess(n, p, a, args.passes, args.gc_freeze))
    data = {"benchmark": "core", "mode": mode_name, "machine": machine(), "cases": results}
    text = markdown(data)
    stem = "core" if args.full else f"core-{mode_name}"
    paths = write_results(args.out, stem, data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""In-process benchmark of the extender's core: the verbs through the ASGI app, no network.

    .venv/bin/python -m bench.core --quick     # 500 nodes x 1,000 pods, seconds
    .venv/bin/python -m bench.core --full      # {500, 5,000} nodes x {1,000, 10,000} pods
                                               # x {burst, stream}; about 1 minute
    .venv/bin/python -m bench.core --topology  # 5,000 x 10,000, {burst, stream}, without
                                               # and with racks and blocks (issue 18)
    .venv/bin/python -m bench.core --cases 5000x10000:stream:topology
    .venv/bin/python -m bench.core --profile   # cProfile of 5,000 nodes x 10,000 pods, stream
    .venv/bin/python -m bench.core --full --commit barrier   # the other commit mode

Results: bench/results/core.{json,md} (--full), core-topology.* or core-quick.*;
docs/performance.md and docs/topology.md explain them.

Each case runs in its own process, so memory figures do not mix: bench/core/workload.py builds
the cluster and the gangs, bench/core/case.py plays kube-scheduler against the extender
(with kube-scheduler's own fit check from bench/core/simulator.py, the extender wired and
timed by bench/core/inprocess.py), bench/core/tables.py writes the tables.

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
from bench.core.case import run_case
from bench.core.tables import markdown
from extender.core.model.config import Config

SIZES = ((500, 1000), (500, 10_000), (5000, 1000), (5000, 10_000))
# (nodes, pods, arrival, topology): with topology, racks and blocks on the nodes and gangs
# that ask for them (issue 18). The topology preset runs the same case without them in
# the same session, so the two are compared on one machine under one load.
FULL_CASES = tuple((n, p, a, False) for a in ("burst", "stream") for n, p in SIZES)
TOPOLOGY_CASES = tuple((5000, 10_000, a, t) for t in (False, True) for a in ("burst", "stream"))
QUICK_CASES = ((500, 1000, "burst", False), (500, 1000, "stream", False))


def _run_in_subprocess(nodes: int, pods: int, arrival: str, topology: bool, passes: int,
                       gc_freeze: bool, commit: str) -> dict[str, Any]:
    case = f"{nodes}x{pods}:{arrival}" + (":topology" if topology else "")
    out = subprocess.run(
        [sys.executable, "-m", "bench.core", "--case", case, "--commit", commit,
         "--passes", str(passes), *(["--gc-freeze"] if gc_freeze else [])],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2],
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def profile_case(nodes: int, pods: int, arrival: str, topology: bool, out: Path,
                 direct_commit: bool | None = None) -> str:
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(run_case(nodes, pods, trace_memory=False, arrival=arrival, topology=topology,
                         direct_commit=direct_commit))
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
    text = buf.getvalue()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def _size(text: str) -> tuple[int, int, str, bool]:
    """"NODESxPODS[:burst|:stream][:topology]"."""
    size, *rest = text.lower().split(":")
    nodes, pods = size.split("x")
    topology = "topology" in rest
    arrivals = [r for r in rest if r != "topology"]
    if len(arrivals) > 1 or (arrivals and arrivals[0] not in ("burst", "stream")):
        raise SystemExit(f"unknown case {text!r}: NODESxPODS[:burst|:stream][:topology]")
    return int(nodes), int(pods), arrivals[0] if arrivals else "burst", topology


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="500 nodes x 1,000 pods")
    mode.add_argument("--full", action="store_true", help="{500, 5000} x {1000, 10000}")
    mode.add_argument("--topology", action="store_true",
                      help="5000 x 10000 without and with a rack/block topology")
    mode.add_argument("--cases", help="NODESxPODS[:stream][:topology],... instead of a preset")
    mode.add_argument("--case", help="NODESxPODS[:stream][:topology], one case in this "
                      "process, JSON on stdout")
    mode.add_argument("--profile", nargs="?", const="5000x10000:stream",
                      metavar="NODESxPODS[:stream][:topology]",
                      help="cProfile one case (default 5000x10000:stream)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after the initial feed (what-if for the extender)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    ap.add_argument("--commit", choices=("direct", "barrier"),
                    default="direct" if Config().direct_commit else "barrier",
                    help="commit mode (default: the one shipped); compare a tree that "
                    "predates the option in its own default mode")
    args = ap.parse_args(argv)
    direct = args.commit == "direct"

    if args.case:
        n, p, a, t = _size(args.case)
        print(json.dumps(asyncio.run(
            run_case(n, p, args.passes, gc_freeze=args.gc_freeze, arrival=a, topology=t,
                     direct_commit=direct))))
        return 0
    if args.profile:
        n, p, a, t = _size(args.profile)
        text = profile_case(n, p, a, t, args.out / "core-profile.txt", direct)
        print(text[:6000])
        print(f"written: {args.out / 'core-profile.txt'}")
        return 0

    if args.cases:
        cases = tuple(_size(c) for c in args.cases.split(","))
        mode_name = "custom"
    elif args.topology:
        cases, mode_name = TOPOLOGY_CASES, "topology"
    else:
        cases = FULL_CASES if args.full else QUICK_CASES
        mode_name = "full" if args.full else "quick"
    results = []
    for n, p, a, t in cases:
        print(f"case {n} nodes x {p} pods, {a}{', topology' if t else ''} ...",
              file=sys.stderr, flush=True)
        results.append(_run_in_subprocess(n, p, a, t, args.passes, args.gc_freeze, args.commit))
    data = {"benchmark": "core", "mode": mode_name, "commit": args.commit, "machine": machine(),
            "cases": results}
    text = markdown(data)
    stem = "core" if args.full else f"core-{mode_name}"
    paths = write_results(args.out, stem, data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())

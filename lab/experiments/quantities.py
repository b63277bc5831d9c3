"""Question: does one hostile quantity (issue 27: `minResources: {cpu: "1e30000000"}` froze
the event loop for 33 s) still cost more than microseconds to parse? Answer:
docs/configuration.md, "Untrusted input".

CPU to parse hostile Kubernetes quantities, now and as of a git revision.

    .venv/bin/python -m lab.experiments.quantities                    # this checkout
    .venv/bin/python -m lab.experiments.quantities --against 8b1fb27  # and resources.py then
    .venv/bin/python -m lab.experiments.quantities --against 8b1fb27 --cap 60

Why: issue 27 found one PodGroup (`minResources: {cpu: "1e30000000"}`) freezing the
extender's event loop for 33 s, the parser raising 10 to the exponent exactly. Each
row is one quantity; the column is CPU seconds (`time.process_time`) for one parse,
the best of `--reps` runs on distinct texts of the same shape (so no memo answers).
With `--against`, `parse_quantity` of that revision's `resources.py`
is timed too, once per row, in a child process killed after `--cap` seconds (then the
cell reads "> cap"): the old parser can take minutes, or forever, on some of these.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import REPO
from extender.core.model.resources import parse_quantity
from lab.common import source_at

# name -> the text, given a small varying digit k (distinct texts defeat memos).
CASES: dict[str, Callable[[int], str]] = {
    "ordinary 500m": lambda k: f"{k}500m",
    "1e30000000 (the issue's)": lambda k: f"1e3000000{k}",
    "1e-30000000": lambda k: f"1e-3000000{k}",
    "1e2147483640": lambda k: f"1e214748364{k}",
    "1 + 10 MB of zeros": lambda k: f"{k}" + "0" * 10_000_000,
    "0.<10 MB of zeros>1": lambda k: "0." + "0" * 10_000_000 + f"{k}",
    "0.<1 MB of 3s>Ki": lambda k: f"{k}." + "3" * 1_000_000 + "Ki",
    "20,000 digits then x": lambda k: f"{k}" * 20_000 + "x",
}

_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from _old_resources import parse_quantity
text = sys.stdin.read()
t = time.process_time()
try:
    parse_quantity(text)
except (ValueError, OverflowError, MemoryError):
    pass
print(time.process_time() - t)
"""


def cpu_now(make: Callable[[int], str], reps: int) -> float:
    best = float("inf")
    for k in range(1, reps + 1):
        text = make(k)
        t = time.process_time()
        with contextlib.suppress(ValueError):
            parse_quantity(text)
        best = min(best, time.process_time() - t)
    return best




def old_module(rev: str) -> Path:
    """`resources.py` of `rev` (in the model or, before it, the core's root) as
    `_old_resources` in a temporary dir."""
    tmp = Path(tempfile.mkdtemp(prefix="quantities-"))
    src = source_at(rev, "resources")
    (tmp / "_old_resources.py").write_text(src)
    return tmp


def cpu_old(where: Path, text: str, cap: float) -> str:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, str(where)], input=text,
                             capture_output=True, text=True, timeout=cap, env=env, check=True)
    except subprocess.TimeoutExpired:
        return f"> {cap:g}"
    return f"{float(out.stdout):.6f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--against", metavar="REV", help="also time resources.py of REV")
    ap.add_argument("--cap", type=float, default=120.0,
                    help="seconds before an old parse is given up (default 120)")
    args = ap.parse_args()
    where = old_module(args.against) if args.against else None
    print(f"CPU seconds per parse (best of {args.reps}), load {os.getloadavg()[0]:.2f}")
    head = f"  {'quantity':28s} {'now':>10s}"
    print(head + (f" {args.against:>12s}" if where else ""))
    for name, make in CASES.items():
        row = f"  {name:28s} {cpu_now(make, args.reps):10.6f}"
        if where is not None:
            row += f" {cpu_old(where, make(1), args.cap):>12s}"
        print(row, flush=True)


if __name__ == "__main__":
    main()

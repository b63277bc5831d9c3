"""What the experiments (lab/experiments) that run whole systems share: bench.e2e's
control plane with its fake nodes, what-if variants taken in turns, and their tables."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.common import md_table, write_results
from bench.e2e.main import add_nodes
from bench.e2e.run import bench_control_plane
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.target import use_cluster
from lab.common import RESULTS


@contextlib.contextmanager
def plane_with_nodes(nodes: int) -> Iterator[ControlPlane]:
    """bench.e2e's control plane (the upstream Workload API served), the fake kubelet
    running `nodes` nodes; stopped on the way out, whatever happened."""
    cp = bench_control_plane().start()
    try:
        use_cluster(cp)
        fk = FakeKubelet(cp).start()
        secs = add_nodes(fk, 0, nodes)
        print(f"{nodes} nodes ready ({secs} s)", file=sys.stderr, flush=True)
        yield cp
    finally:
        cp.stop()


def in_turns(variants: Sequence[str], reps: int) -> Iterator[tuple[int, str]]:
    """(repetition, variant), the variants alternating run by run, their order reversed
    every repetition, so that drift in the machine's load favours none of them."""
    for rep in range(reps):
        for variant in variants if rep % 2 == 0 else variants[::-1]:
            yield rep, variant


def add_gang_args(ap: argparse.ArgumentParser, reps: int) -> None:
    """The arguments of an experiment on one gang: `--nodes`, `--gang`, `--reps`,
    `--out`, and `--extender-args`, repeatable: B's extender flags for a what-if."""
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gang", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--extender-args", action="append", default=[], metavar="ARGS",
                    help="B's extender flags for a what-if, e.g. '--binding-concurrency 64'; "
                         "given more than once, the variants alternate run by run, in an "
                         "order reversed every repetition")


def write_runs(out: Path, stem: str, title: str, note: str, cols: Sequence[str],
               rows: list[dict[str, Any]], info: dict[str, Any], **data: Any) -> str:
    """The runs as a markdown table under a title and the machine's line, written with
    the rows and `data` as `<stem>.{json,md}`; returns the markdown."""
    text = "\n".join([
        f"# {title}", "", f"{info['cpus']} CPUs, load {info['loadavg_1m']} at the start, "
        f"commit {info['commit']}, {info['date']}. {note}", "",
        md_table(cols, [[row.get(c, "") for c in cols] for row in rows]), ""])
    write_results(out, stem, {"machine": info, **data, "runs": rows}, text)
    return text

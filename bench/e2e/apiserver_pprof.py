"""kube-apiserver's own CPU profile (/debug/pprof, with `--profiling=true`), taken over a
window of a benchmark and read back with `go tool pprof`. The API server is most of the
CPU per pod in every system on this machine, and its CPU time alone cannot say what a
system made it do; its profile can (lab/history/performance-history.md, "3. CPU per pod")."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from e2e.harness.rawapi import RawApi


def profile(api: RawApi, seconds: int, out: Path) -> threading.Thread:
    """The profile of the next `seconds`, written to `out` by a thread (join it); read it
    with `go tool pprof -top`."""
    def run() -> None:
        out.write_bytes(api.request("GET", "/debug/pprof/profile", {"seconds": seconds}))
    t = threading.Thread(target=run)
    t.start()
    return t


def cum_seconds(files: list[Path], function: str, focus: str | None = None) -> float:
    """Cumulative CPU seconds of `function` in the merged profiles (`go tool pprof`)."""
    cmd = ["go", "tool", "pprof", "-top", "-cum", *(["-focus", focus] if focus else []),
           *map(str, files)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[5] == function:
            value = cols[3]
            return float(value[:-2]) / 1000 if value.endswith("ms") else float(value[:-1])
    return 0.0

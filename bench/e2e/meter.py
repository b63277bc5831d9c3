"""CPU readings of one run's processes and of the machine, taken at a moment.

A run is read three times: before the first create, when the last create is answered,
and once every pod runs. The middle reading is why this is a part of its own. It splits
each component's CPU into what it spent while the pods were being created and what it
left for later. While the two cores are saturated (the machine's idle share says whether
they were), the creation phase lasts as long as the CPU spent in it takes. So a system
that does its work while the pods arrive makes that phase longer by what it spends, and
one that leaves work until after the last create makes it shorter, with the same total
(lab/history/performance-history.md, "Issue 30: the 100-node row is decided while the pods are
created").
"""

from __future__ import annotations

import resource
from collections.abc import Mapping
from dataclasses import dataclass

from bench.common import cpu_seconds

BENCH_CLIENT = "bench client (creates + watch)"


@dataclass(frozen=True)
class Reading:
    cpu: dict[str, float]  # component -> CPU seconds so far, this process as BENCH_CLIENT
    idle_ticks: int  # the machine's idle and iowait time so far (/proc/stat)
    all_ticks: int


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _machine_ticks() -> tuple[int, int]:
    """(idle + iowait, all) of the first line of /proc/stat; (0, 0) where unreadable."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[3] + fields[4], sum(fields)) if len(fields) >= 5 else (0, 0)


def read(pids: Mapping[str, int]) -> Reading:
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    cpu[BENCH_CLIENT] = _self_cpu()
    idle, total = _machine_ticks()
    return Reading(cpu, idle, total)


def spent(start: Reading, end: Reading) -> dict[str, float]:
    """CPU seconds each component spent between two readings (NaN: unreadable)."""
    return {k: round(end.cpu[k] - v, 2) for k, v in start.cpu.items() if k in end.cpu}


def idle_share(start: Reading, end: Reading) -> float:
    """The share of the machine's CPU time left idle between two readings (NaN when
    /proc/stat could not be read or no tick passed)."""
    ticks = end.all_ticks - start.all_ticks
    if ticks <= 0:
        return float("nan")
    return round((end.idle_ticks - start.idle_ticks) / ticks, 3)

"""One run of one system in `bench.e2e`, as the run records it and the report reads it:
apart from both, so that the report's parts (`ratios.py`, `cpu_pairs.py`) and the run
import it from one place and none of them imports another back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class RunResult:
    system: str  # "A".."D" (bench.e2e.systems.SYSTEMS)
    client: str  # "default" | "unthrottled" (bench.e2e.systems.CLIENT_SETTINGS)
    nodes: int
    pods: int
    gangs: str  # the workload's gang sizes: "8/16/32" (cycled) or one size, e.g. "1000"
    rep: int
    load1: float = math.nan  # 1-minute load average when the run started
    bound: int = 0
    seconds: float = 0.0
    pods_per_second: float = 0.0
    create_seconds: float = 0.0
    # Per gang, in creation order: its size, and last member created -> last member bound
    # (NaN when the gang never completed). A's pods form the same groups, unscheduled as
    # gangs: its "gang start" is the same measure over the same pods.
    gang_size: list[int] = field(default_factory=list)
    gang_start: list[float] = field(default_factory=list)
    gang_turned_away: list[bool] = field(default_factory=list)
    # Last pod created -> last pod bound, over all the run's pods (NaN unless all bound):
    # for a point of one gang, its gang start; what the floor (F) is compared on.
    tail_seconds: float = math.nan
    bound_to_running_p95: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # component -> CPU seconds
    # The same, from the first create to the last create answered, and the machine's idle
    # share then: what each system did while the pods arrived (bench/e2e/meter.py).
    cpu_created: dict[str, float] = field(default_factory=dict)
    idle_created: float = math.nan
    scheduler: dict[str, float] = field(default_factory=dict)
    api_requests: dict[str, int] = field(default_factory=dict)
    extender_peak_rss_mib: float = math.nan
    error: str = ""

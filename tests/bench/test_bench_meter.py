"""bench.e2e's readings of a run's CPU: what a component spent between two readings, and
the machine's idle share, which says whether the cores were saturated (bench/e2e/meter.py)."""

from __future__ import annotations

import math
import os

from bench.e2e import meter
from bench.e2e.meter import BENCH_CLIENT, Reading


def test_spent_is_per_component_and_counts_this_process_as_the_bench_client() -> None:
    start = meter.read({"etcd": os.getpid()})
    sum(i * i for i in range(300_000))  # some CPU of this process between the readings
    end = meter.read({"etcd": os.getpid()})
    used = meter.spent(start, end)
    assert set(used) == {"etcd", BENCH_CLIENT}
    assert used["etcd"] >= 0 and used[BENCH_CLIENT] >= 0
    assert start.all_ticks > 0 and end.all_ticks >= start.all_ticks  # /proc/stat read


def test_a_component_gone_or_unreadable_is_nan_not_a_crash() -> None:
    start = Reading({"extender": 1.0, "kube-scheduler": 2.0}, 0, 0)
    end = Reading({"extender": math.nan, "kube-scheduler": 2.5}, 0, 0)
    used = meter.spent(start, end)
    assert math.isnan(used["extender"]) and used["kube-scheduler"] == 0.5


def test_idle_share_between_two_readings() -> None:
    assert meter.idle_share(Reading({}, 100, 1000), Reading({}, 130, 2000)) == 0.03
    assert math.isnan(meter.idle_share(Reading({}, 0, 0), Reading({}, 0, 0)))

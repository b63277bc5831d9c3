"""Gang start to kube-scheduler's Scheduled Events (e2e/soak/starts.py) and the pooling
of soak reports (e2e/soak/pool.py)."""

from __future__ import annotations

from typing import Any

from e2e.soak.pool import pool
from e2e.soak.starts import quorum_time, scheduled_times


def _ev(ns: str, pod: str, when: str | None, reason: str = "Scheduled") -> dict[str, Any]:
    return {"reason": reason, "eventTime": when,
            "regarding": {"kind": "Pod", "namespace": ns, "name": pod}}


def test_the_earliest_scheduled_event_of_each_pod_counts() -> None:
    got = scheduled_times([
        _ev("a", "g-0", "2026-11-26T23:00:01.250000Z"),
        _ev("a", "g-0", "2026-11-26T23:00:00.500000Z"),  # scheduled again later: first wins
        _ev("a", "g-1", "2026-11-26T23:00:02.000000Z", reason="FailedScheduling"),
        _ev("a", "g-2", None),
        _ev("a", "g-3", "not a time"),
        {"reason": "Scheduled"},
    ])
    assert list(got) == [("a", "g-0")]
    assert got[("a", "g-0")] % 60 == 0.5


def test_the_quorum_is_the_min_member_th_scheduled_pod() -> None:
    t = {("a", "g-0"): 10.0, ("a", "g-1"): 12.0, ("a", "g-2"): 11.0, ("b", "g-3"): 1.0}
    pods = ["g-0", "g-1", "g-2", "g-3"]
    assert quorum_time(t, "a", pods, 2) == 11.0
    assert quorum_time(t, "a", pods, 3) == 12.0
    assert quorum_time(t, "a", pods, 4) is None  # g-3 is in another namespace
    assert quorum_time(t, "a", pods, 0) is None


def _report(seed: int, hostile: bool, starts: list[float], sched: list[float]
            ) -> dict[str, Any]:
    return {"seed": seed, "hostile": "hostile objects: ..." if hostile else "",
            "gang_starts_s": starts, "gang_starts_sched_s": sched, "stall_longest_s": 0.2,
            "stall_longest_cpu_s": 0.03, "ok": True}


def test_pooling_puts_every_gang_of_a_mode_in_one_sample() -> None:
    lines = pool([_report(1, False, [1.0, 2.0], [0.5]), _report(2, False, [3.0], [0.5]),
                  _report(1, True, [2.0, 4.0, 6.0], [1.0])])
    text = "\n".join(lines)
    assert "pooled gang start p50: clean 2.000 s (3 gangs), hostile 4.000 s (3), " \
           "hostile/clean 2.00" in text
    assert "pooled gang start to Scheduled Events p50: clean 0.500 s (2 gangs), " \
           "hostile 1.000 s (1), hostile/clean 2.00" in text
    assert "clean: longest /healthz 200 ms, the most extender CPU during one 30 ms" in text


def test_the_bootstrap_interval_holds_the_ratio_it_resamples() -> None:
    from e2e.soak.pool import bootstrap_ratio

    clean = [0.01 * i for i in range(1, 101)]
    low, high = bootstrap_ratio(clean, [2 * v for v in clean], 0.95, resamples=300)
    assert 1.7 < low <= 2.0 <= high < 2.3
    low, high = bootstrap_ratio(clean, clean, 0.95, resamples=300)
    assert low < 1.0 < high
    assert bootstrap_ratio([], clean, 0.95) == (0.0, 0.0)

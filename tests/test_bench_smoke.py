"""The benchmarks keep working: bench.core at a tiny size writes its JSON and markdown, and
bench.e2e's report is built from run records. No timing is asserted, ever: speed is
measured by `python -m bench.core --full` / `python -m bench.e2e --full`, not by CI."""

from __future__ import annotations

import json
from pathlib import Path

from bench import core, e2e


def test_core_benchmark_writes_json_and_markdown(tmp_path: Path) -> None:
    argv = ["--cases", "12x40,12x40:stream,40x60:stream:topology", "--passes", "2", "--out",
            str(tmp_path)]
    assert core.main(argv) == 0
    data = json.loads((tmp_path / "core-custom.json").read_text())
    assert [(c["nodes"], c["pods"], c["arrival"], c["topology"]) for c in data["cases"]] == [
        (12, 40, "burst", False), (12, 40, "stream", False), (40, 60, "stream", True)]
    for case in data["cases"]:
        for verb in ("filter", "prioritize", "bind: manager decision", "tick", "watch: pod"):
            assert case["verbs"][verb]["count"] > 0, verb
            assert {"p50", "p99", "max"} <= set(case["verbs"][verb]), verb
        assert case["planning"]["count"] > 0
        assert case["counts"]["bound_or_finished"] > 0
        assert case["memory"]["peak_rss_mib"] > 0
    md = (tmp_path / "core-custom.md").read_text()
    assert "| nodes | pending pods | arrival | filter p50 |" in md and "stream" in md
    assert "| 40 | 60 | stream+topology |" in md


def test_e2e_report_from_run_records() -> None:
    assert e2e.gang_sizes(60) == [8, 16, 32, 4]
    runs = [
        e2e.RunResult("A", 10, 60, 0, bound=60, seconds=1.0, pods_per_second=60.0,
                      cpu={"kube-scheduler": 0.5}),
        e2e.RunResult("B", 10, 60, 0, bound=60, seconds=1.5, pods_per_second=40.0,
                      gang_start=[0.5, 0.7, 0.9, 1.1], cpu={"extender": 0.3},
                      scheduler={"attempts": 61}, api_requests={"POST pods/binding": 60}),
    ]
    (point,) = e2e.summarize(runs)
    assert point["ratio_b_over_a"] == round(40.0 / 60.0, 3)
    assert point["gang_start_seconds"]["gangs"] == 4
    data = {"mode": "test", "machine": {"cpus": 2, "loadavg_1m": 0.0, "commit": "x",
                                        "date": "now"},
            "repetitions": 1, "kubernetes": "v0", "points": [point],
            "runs": [r.__dict__ for r in runs]}
    md = e2e.markdown(data)
    assert "| 10 | 60 |" in md and "POST pods/binding" in md
    assert "warm-up" not in md and "what-if" not in md

    data["warmup"] = [{"mode": "A", "pods_per_second": 50.0},
                      {"mode": "B", "pods_per_second": 30.0}]
    data["extender_args"] = "--events off"
    md = e2e.markdown(data)
    assert "First 1 warm-up pair(s) left out (pods/s: A 50.0, B 30.0)" in md
    assert "`--events off` (a what-if)" in md


def test_ratio_spread_says_whether_the_target_is_met_with_confidence() -> None:
    def pair(rep: int, a: float, b: float) -> list[e2e.RunResult]:
        return [e2e.RunResult("A", 10, 60, rep, bound=60, seconds=60 / a, pods_per_second=a),
                e2e.RunResult("B", 10, 60, rep, bound=60, seconds=60 / b, pods_per_second=b)]

    # Pairs at 0.70, 0.75, 0.80, 0.85, 0.90: the median is on the target, and five
    # pairs cannot put the interval above it.
    runs = [r for i, b in enumerate((70, 75, 80, 85, 90)) for r in pair(i, 100, b)]
    (point,) = e2e.summarize(runs)
    spread = point["ratio_pairs"]
    assert spread["pairs"] == 5 and spread["median"] == 0.8
    lo, hi = spread["ci95"]
    assert lo < 0.8 < hi
    assert spread["at_or_above_target"] == 3
    # The same interval again from the same pairs: reports are reproducible.
    assert e2e.ratio_spread(point["ratio_per_pair"]) == spread

    # Twenty pairs all between 0.86 and 0.9: the whole interval is above the target.
    high = [r for i in range(20) for r in pair(i, 100, 86 + i % 5)]
    (hpoint,) = e2e.summarize(high)
    assert hpoint["ratio_pairs"]["ci95"][0] > e2e.TARGET_RATIO

    pooled = e2e.pooled_ratios([point, hpoint])
    assert pooled["pairs"] == 25 and pooled["at_or_above_target"] == 23
    data = {"mode": "test", "machine": {"cpus": 2, "loadavg_1m": 0.0, "commit": "x",
                                        "date": "now"},
            "repetitions": 5, "kubernetes": "v0", "points": [point, hpoint],
            "runs": [r.__dict__ for r in runs + high]}
    md = e2e.markdown(data)
    assert f"| 10 / 60 | 5 | 0.8 | {lo} - {hi} | 3 of 5 |" in md
    assert "| all points | 25 |" in md and "23 of 25" in md


def test_median_interval_needs_two_values() -> None:
    from bench.common import median_ci

    assert all(x != x for x in median_ci([0.8]))  # NaN: one pair says nothing of spread
    lo, hi = median_ci([0.8, 0.8, 0.8])
    assert lo == hi == 0.8


def test_nominate_report_from_trials() -> None:
    """bench.nominate's tables from trial records (the run itself needs a control plane)."""
    from bench import nominate

    pending = "0/1 nodes are available: 1 Insufficient cpu."
    gang = {"nominate": True, "d": "bound", "gang_bound": True, "start_seconds": 0.05,
            "b_first_call_nodes": 1, "b_nnn_after_failed_retry": "n", "b_nnn_was": "n",
            "b_nnn_after_bind": "", "b_moved": True}
    data = {"kubernetes": "v0", "machine": {"date": "now", "commit": "x"}, "cases": {
        "foreign P=D": [{"d": "bound", "detail": "n", "p_still_nominated": True}] * 2,
        "own P=D": [{"d": "pending", "detail": pending, "p_still_nominated": True}] * 2,
        "node-name": [{"e_on_node": True, "e_running": True}],
        "binding": [{"bound": True, "nnn_after_binding": ""}],
        "gang on": [gang],
    }}
    md = nominate.report(data)
    assert "| foreign P=D | 2 | 2 | 0 | 2 | - |" in md
    assert f"| own P=D | 2 | 0 | 2 | 2 | {pending} |" in md
    assert "Running in 1 of 1 tries" in md and "still set in 0 of 1 tries" in md
    assert "| gang on | 1 | 1 | 1 | 0.05 | 0.05 | [1] | ['kept'] | ['cleared'] | 1 |" in md
    assert nominate._slug("foreign P<D") == "foreign-p-lt-d"

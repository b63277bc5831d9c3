"""The benchmarks keep working: bench.core at a tiny size writes its JSON and markdown
(bench.e2e's report: tests/test_bench_e2e_report.py). No timing is asserted, ever: speed is
measured by `python -m bench.core --full` / `python -m bench.e2e --full`, not by CI."""

from __future__ import annotations

import json
from pathlib import Path

from bench.core.main import main as core_main


def test_core_benchmark_writes_json_and_markdown(tmp_path: Path) -> None:
    argv = ["--cases", "12x40,12x40:stream,40x60:stream:topology", "--passes", "2", "--out",
            str(tmp_path)]
    assert core_main(argv) == 0
    data = json.loads((tmp_path / "core-custom.json").read_text())
    assert [(c["nodes"], c["pods"], c["arrival"], c["topology"]) for c in data["cases"]] == [
        (12, 40, "burst", False), (12, 40, "stream", False), (40, 60, "stream", True)]
    for case in data["cases"]:
        for verb in ("filter", "prioritize", "bind: manager decision", "tick", "watch: pod"):
            assert case["verbs"][verb]["count"] > 0, verb
            assert {"p50", "p99", "max"} <= set(case["verbs"][verb]), verb
        # No call waits out the commit wait's 1 s limit (in-process, no watch would end
        # it): the filter's figures are the extender's work, not that limit.
        assert case["verbs"]["filter"]["max"] < 500, case["verbs"]["filter"]
        assert case["planning"]["count"] > 0
        assert case["counts"]["bound_or_finished"] > 0
        assert case["memory"]["peak_rss_mib"] > 0
    md = (tmp_path / "core-custom.md").read_text()
    assert "| nodes | pending pods | arrival | filter p50 |" in md and "stream" in md
    assert "| 40 | 60 | stream+topology |" in md


def test_median_interval_needs_two_values() -> None:
    from bench.common import median_ci

    assert all(x != x for x in median_ci([0.8]))  # NaN: one pair says nothing of spread
    lo, hi = median_ci([0.8, 0.8, 0.8])
    assert lo == hi == 0.8


def test_nominate_report_from_trials() -> None:
    """bench.experiments.nominate's tables from trial records (the run itself needs a control
    plane)."""
    from bench.experiments import nominate

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


def test_bind_walk_starts_at_bind_and_counts_returns() -> None:
    """bench.experiments.bind_walk (docs/architecture.md, the walk of a bind call): its walk is the
    committing bind's, and a file entered again after another counts once per visit."""
    from bench.experiments.bind_walk import count, walk

    stops = walk()
    assert stops[0] == ("core/bind.py", "Bind.bind")
    assert any(q == "Ledger.commit" for _, q in stops)
    assert count([("a", "f"), ("a", "g"), ("b", "h"), ("a", "i"), ("c", "j"), ("b", "k")]) == (
        6, 3, 2)

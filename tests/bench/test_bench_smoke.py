"""The benchmarks keep working: bench.core at a tiny size writes its JSON and markdown
(bench.e2e's report: tests/bench/test_bench_e2e_report.py). No timing is asserted, ever: speed is
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

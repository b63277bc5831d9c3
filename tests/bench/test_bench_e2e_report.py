"""bench.e2e's report from run records: B's ratios to each peer from back-to-back
repetitions with bootstrap intervals, per-system summaries and the tables. No timing is
asserted: speed is measured by `python -m bench.e2e`, not by CI."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.e2e import main as e2e_bench
from bench.e2e import report as e2e_report
from bench.e2e.report import RunResult


def run(system: str, pps: float, rep: int = 0, client: str = "unthrottled",
        starts: tuple[float, ...] = (0.5, 0.7, 0.9), sizes: tuple[int, ...] = (8, 16, 32),
        **kw: Any) -> RunResult:
    return RunResult(system, client, 10, 56, "8/16/32", rep, load1=1.0, bound=56,
                     seconds=56 / pps, pods_per_second=pps, gang_size=list(sizes),
                     gang_start=list(starts), gang_turned_away=[False] * len(starts), **kw)


def data_for(runs: list[RunResult]) -> dict[str, Any]:
    return {"mode": "test", "machine": {"cpus": 2, "loadavg_1m": 0.0, "commit": "x",
                                        "date": "now"},
            "repetitions": 1, "kubernetes": "v0", "create_threads": 16,
            "systems": sorted({r.system for r in runs}),
            "points": e2e_report.summarize(runs), "runs": [r.__dict__ for r in runs]}


def test_workload_shapes() -> None:
    assert e2e_bench.gang_sizes(60) == [8, 16, 32, 4]
    assert e2e_bench.gang_sizes(512, (256,)) == [256, 256]
    assert e2e_bench.parse_point("100x480") == (100, 480, (8, 16, 32))
    assert e2e_bench.parse_point("1000x1000:1000") == (1000, 1000, (1000,))


def test_pair_ratios_match_repetitions_and_skip_failed_runs() -> None:
    runs = [run("A", 100, 0), run("B", 80, 0), run("A", 200, 1), run("B", 150, 1),
            run("C", 40, 0), run("C", 50, 1, error="only 3 of 56 pods bound")]
    assert e2e_report.pair_ratios(runs, "B", "A") == [0.8, 0.75]
    assert e2e_report.pair_ratios(runs, "B", "C") == [2.0]  # rep 1 of C failed
    assert e2e_report.pair_ratios(runs, "B", "D") == []


def test_ratio_spread_says_whether_the_target_is_met_with_confidence() -> None:
    # Pairs at 0.70 .. 0.90 around the target: the median is on it, the interval
    # straddles it.
    spread = e2e_report.ratio_spread([0.7, 0.75, 0.8, 0.85, 0.9], 0.8)
    assert spread["pairs"] == 5 and spread["median"] == 0.8
    lo, hi = spread["ci95"]
    assert lo < 0.8 < hi
    assert spread["at_or_above_target"] == 3
    # Reproducible: the bootstrap is seeded.
    assert e2e_report.ratio_spread([0.7, 0.75, 0.8, 0.85, 0.9], 0.8) == spread
    # Twenty pairs between 1.6 and 2.0 against a target of 1.5: the interval clears it.
    high = e2e_report.ratio_spread([1.6 + 0.1 * (i % 5) for i in range(20)], 1.5)
    assert high["ci95"][0] > 1.5 and high["at_or_above_target"] == 20
    one = e2e_report.ratio_spread([1.2], 1.0)
    assert one["median"] == 1.2 and all(math.isnan(x) for x in one["ci95"])


def test_summary_per_point_and_system() -> None:
    runs = [run("A", 100, 0, cpu={"kube-scheduler": 0.56, "kube-apiserver": 1.12}),
            run("B", 80, 0, starts=(0.2, math.nan, 0.4),
                cpu={"kube-scheduler": 0.28, "extender": 0.56}),
            run("A", 120, 0, client="default"), run("B", 180, 0, client="default"),
            run("C", 30, 0, client="default"), run("D", 60, 0, client="default")]
    default, unthrottled = e2e_report.summarize(runs)
    assert (default["client"], unthrottled["client"]) == ("default", "unthrottled")
    b = unthrottled["systems"]["B"]
    assert b["gang_start_seconds"] == {"gangs": 2, "p50": 0.2, "p95": 0.4, "max": 0.4}
    assert b["gang_start_by_size"]["16"]["gangs"] == 0  # the gang that never completed
    assert b["gang_start_turned_away"]["gangs"] == 0
    assert b["gang_start_not_turned_away"]["gangs"] == 2
    assert b["cpu_ms_per_pod"] == {"extender": 10.0, "kube-scheduler": 5.0}
    assert b["cpu_ms_per_pod_total"] == 15.0
    assert unthrottled["systems"]["A"]["cpu_ms_per_pod_total"] == 30.0
    assert set(unthrottled["ratios"]) == {"B/A"}
    assert unthrottled["ratios"]["B/A"]["per_pair"] == [0.8]
    assert default["ratios"]["B/C"]["per_pair"] == [6.0]
    assert default["ratios"]["B/C"]["target"] == 3.0  # issue 20: 3x C at the default QPS
    assert unthrottled["ratios"]["B/A"]["target"] == 0.8
    assert default["ratios"]["B/D"]["per_pair"] == [3.0]


def test_markdown_tables(tmp_path: Path) -> None:
    runs = [r for rep in range(3) for r in (
        run("A", 100 + rep, rep), run("B", 80, rep), run("C", 50, rep),
        run("D", 90, rep, error="only 40 of 56 pods bound" if rep == 2 else ""))]
    md = e2e_report.markdown(data_for(runs))
    assert "| 10 nodes, 56 pods, gangs of 8/16/32 | unthrottled | B: gang-extender | 80 |" in md
    # B/C = 1.6 in every pair: median 1.60, interval 1.60-1.60, 3 of 3 at or above 1.5.
    assert "1.60 (1.60-1.60) [3/3 >= 1.5]" in md
    assert "2 of 3 (rest failed)" in md  # D's failed run is reported, not hidden
    assert "| all points | unthrottled |" in md
    assert "| 10 | unthrottled | C | 32 | 3 | 0.9 | 0.9 | 0.9 |" in md
    assert "load average (1 min) 1.0-1.0" in md
    away = run("D", 90, 7, starts=(2.0, 0.5, 0.6))
    away.gang_turned_away = [True, False, False]
    split = e2e_report.summarize([away])[0]["systems"]["D"]
    assert split["gang_start_turned_away"] == {"gangs": 1, "p50": 2.0, "p95": 2.0, "max": 2.0}
    assert split["gang_start_not_turned_away"]["p95"] == 0.6
    assert "| gangs never turned away |" in md


def test_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from bench.e2e import plot as e2e_plot

    runs = [run("A", 100), run("B", 80, starts=(-0.01, 0.3, math.nan)), run("C", 50)]
    panels = e2e_plot.starts_by_panel([r.__dict__ for r in runs])
    assert panels[(10, "8/16/32", "unthrottled")]["B"] == [0.01, 0.3]
    mixed = e2e_plot.starts_by_panel([
        {**r.__dict__, "nodes": n, "gangs": g, "client": c}
        for r in runs for n, g, c in ((100, "16", "default"), (50, "8", "unthrottled"),
                                      (1000, "1000", "unthrottled"), (1000, "64", "default"),
                                      (50, "8", "default"))])
    assert list(mixed) == [(50, "8", "default"), (50, "8", "unthrottled"),
                           (100, "16", "default"), (1000, "64", "default"),
                           (1000, "1000", "unthrottled")]
    path = e2e_plot.plot_gang_starts(data_for(runs), tmp_path / "g.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compact_table_and_report_from_a_results_file(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    runs = [run("A", 100, client="default"), run("B", 180, client="default"),
            run("A", 120), run("B", 90, error="only 3 of 56 pods bound")]
    table = e2e_report.compact_table(e2e_report.summarize(runs))
    assert ("| 10 nodes, 56 pods, gangs of 8/16/32 | B: gang-extender | 180 pods/s; "
            "0.70 / 0.90 / 0.90 s | did not complete |") in table
    path = tmp_path / "e2e-x.json"
    path.write_text(json.dumps(data_for(runs)))
    assert e2e_bench.main(["--report", str(path), "--no-plot"]) == 0
    assert table in capsys.readouterr().out


def test_report_pools_the_repetitions_of_several_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = [run("B", 80, 0), run("D", 100, 0)]
    two = [run("B", 120, 0), run("D", 100, 0), run("B", 90, 1), run("D", 100, 1)]
    paths = []
    for i, runs in enumerate((one, two)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(data_for(runs)))
    assert e2e_bench.main(["--report", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    # Pairs 0.8 (first file), 1.2 and 0.9 (second): rep 0 of each file stays its own pair.
    assert "0.90 (0.80-1.20) [1/3 >= 1]" in out
    assert "test + test (pooled)" in out and not (tmp_path / "r0.png").exists()


def test_each_system_against_the_floor_in_the_same_repetition() -> None:
    """Issue 30: "bound within 1.5x the floor after its last member" is a number: each
    system's last-created-to-last-bound time over F's in the same repetition."""
    runs = [run("F", 200, 0, tail_seconds=4.0), run("B", 80, 0, tail_seconds=5.0),
            run("D", 90, 0, tail_seconds=8.0),
            run("F", 200, 1, tail_seconds=5.0), run("B", 80, 1, tail_seconds=7.0),
            run("D", 90, 1, tail_seconds=10.0),
            # A failed floor run drops its pair: nothing to compare with.
            run("F", 200, 2, error="only 3 of 56 pods bound"), run("B", 80, 2, tail_seconds=1.0)]
    point = e2e_report.summarize(runs)[0]
    floor = point["floor"]
    assert floor["B"]["per_pair"] == [1.25, 1.4]
    assert floor["B"]["median"] == 1.325
    assert floor["B"]["target"] == 1.5 and floor["B"]["at_or_below_target"] == 2
    assert floor["D"]["per_pair"] == [2.0, 2.0] and math.isnan(floor["D"]["target"])
    assert set(floor) == {"B", "D"}  # not F over itself
    assert point["systems"]["F"]["tail_seconds"] == 4.5  # median of its completed runs
    md = e2e_report.markdown({**data_for(runs), "floor_threads": 16})
    assert "## Against the floor" in md and "16 in flight" in md
    # 56 pods in 4.5 s: the floor's pace, 12 Bindings per second.
    assert "| unthrottled | F: floor | 4.5 | 12 Bindings/s |" in md
    assert "| unthrottled | B | 5 | 1.32 (1.25-1.40) [2/2 <= 1.5] |" in md  # median of 5, 7, 1
    assert "| unthrottled | D | 9 | 2.00 (2.00-2.00) |" in md
    # Without a floor run the section is left out, and an old run record (no tail) loads.
    plain = [run("A", 100), run("B", 80)]
    assert e2e_report.summarize(plain)[0]["floor"] == {}
    assert "Against the floor" not in e2e_report.markdown(data_for(plain))
    old = {k: v for k, v in run("B", 80).__dict__.items() if k != "tail_seconds"}
    assert math.isnan(RunResult(**old).tail_seconds)


def test_gang_start_p95_of_b_over_each_peer() -> None:
    """Issue 30: "gang-start p95 <= 1/3 of upstream's": per repetition and pooled."""
    runs = [run("B", 80, 0, starts=(0.5, 0.7, 0.9)), run("C", 50, 0, starts=(2.0, 2.7, 3.0)),
            run("B", 80, 1, starts=(0.5, 0.7, 1.8)), run("C", 50, 1, starts=(2.0, 2.7, 3.0)),
            run("D", 90, 0, starts=(0.3, 0.4, 0.45))]
    p95 = e2e_report.summarize(runs)[0]["p95"]
    assert p95["B/C"]["per_pair"] == [0.3, 0.6]
    assert p95["B/C"]["target"] == pytest.approx(1 / 3)
    assert p95["B/C"]["at_or_below_target"] == 1
    # Pooled: B's p95 over all six gangs (1.8) over C's (3.0).
    assert p95["B/C"]["pooled"] == 0.6
    assert p95["B/D"]["per_pair"] == [2.0] and math.isnan(p95["B/D"]["target"])
    assert "B/A" not in p95
    md = e2e_report.markdown(data_for(runs))
    assert "## B's gang-start p95 against each system" in md
    assert "| - | 0.45 (0.30-0.60) [1/2 <= 0.333]; pooled 0.60 | 2.00; pooled 4.00 |" in md


def test_the_whole_runs_cpu_of_b_over_each_peer_and_where_it_differs() -> None:
    """B's scheduler side spends more, the peer's less elsewhere: the ratio of the whole
    run says which wins, the shares say where (and add up to the ratio minus one)."""
    runs = [run("B", 80, 0, cpu={"kube-scheduler": 1.0, "extender": 2.0,
                                 "kube-apiserver": 7.0}),
            run("D", 80, 0, cpu={"kube-scheduler": 3.0, "kube-apiserver": 7.0}),
            run("B", 80, 1, cpu={"kube-scheduler": 1.0, "extender": 2.0,
                                 "kube-apiserver": 8.0}),
            run("D", 80, 1, cpu={"kube-scheduler": 3.0, "kube-apiserver": 7.0}),
            run("B", 80, 2, cpu={"extender": 99.0}, error="only 3 of 56 pods bound"),
            run("D", 80, 2, cpu={"kube-scheduler": 3.0})]
    pairs = e2e_report.summarize(runs)[0]["cpu_pairs"]
    assert list(pairs) == ["B/D"]
    r = pairs["B/D"]
    assert r["per_pair"] == [1.0, 1.1] and r["pairs"] == 2  # the failed repetition left out
    assert r["share_of_difference"] == {"extender": 0.2, "kube-apiserver": 0.05,
                                        "kube-scheduler": -0.2}
    text = e2e_report.markdown(data_for(runs))
    assert "## The whole run's CPU" in text
    assert "| B/D | 1.05 (1.00-1.10) [2 pairs] | -20.0 % | +20.0 % | +5.0 % |" in text


def test_the_creation_phase_of_b_over_each_peer_and_what_each_leaves_for_later() -> None:
    """The same total CPU, spent while the pods arrive or after the last one: the phase's
    length follows its CPU, and the table says which system left how much for later."""
    def timed(system: str, rep: int, created: float, after: float, seconds: float,
              idle: float) -> RunResult:
        return run(system, 80, rep, cpu={"kube-apiserver": created + after},
                   cpu_created={"kube-apiserver": created}, create_seconds=seconds,
                   idle_created=idle)

    runs = [timed("B", 0, 9.0, 1.0, 9.0, 0.01), timed("D", 0, 6.0, 4.0, 6.0, 0.03),
            timed("B", 1, 8.0, 2.0, 8.0, 0.01), timed("D", 1, 8.0, 2.0, 8.0, 0.01),
            run("A", 80, 0, cpu={"kube-apiserver": 10.0})]  # recorded before the phase was
    creation = e2e_report.summarize(runs)[0]["cpu_pairs"]["B/D"]["creation"]
    assert creation["seconds"]["per_pair"] == creation["cpu"]["per_pair"] == [1.5, 1.0]
    assert creation["left_after"] == {"B": 0.15, "D": 0.3}
    assert creation["idle"] == {"B": 0.01, "D": 0.02}
    assert e2e_report.summarize(runs)[0]["cpu_pairs"]["B/A"]["creation"]["cpu"]["pairs"] == 0
    text = e2e_report.markdown(data_for(runs))
    assert "## While the pods were being created" in text
    assert ("| B/D | 1.25 (1.00-1.50) | 1.25 (1.00-1.50) | 15 % / 30 % | 1 % / 2 % |"
            in text)
    assert "| B/A |" not in text.split("## While the pods were being created")[1]


def test_no_creation_table_for_runs_recorded_before_it() -> None:
    runs = [run("B", 80, 0, cpu={"extender": 1.0}), run("D", 80, 0, cpu={"extender": 1.0})]
    assert "## While the pods were being created" not in e2e_report.markdown(data_for(runs))

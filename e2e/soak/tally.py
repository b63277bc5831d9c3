"""``python -m e2e.soak.tally REPORT.json ...``: soak reports (``--json``) counted by mode
(the extender arguments a run added, e.g. ``--direct-commit off``): runs and seeds, load,
chaos, violations by invariant, over-commit races and the other notes, and which runs
failed and why. The question a multi-seed run answers is "did any seed break an
invariant", so the table sums what `e2e.soak.pool` (gang start times) does not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .config import SoakConfig

_DEFAULT_ARGS = list(SoakConfig().extender_args)


def mode(report: dict[str, Any]) -> str:
    """The arguments the run added to the soak's own extender arguments."""
    args = list(report.get("extender_args") or _DEFAULT_ARGS)
    extra = args[len(_DEFAULT_ARGS):] if args[:len(_DEFAULT_ARGS)] == _DEFAULT_ARGS else args
    return " ".join(extra) or "(defaults)"


_SUMS = ("gangs_created", "pods_created", "extender_kills", "scheduler_kills",
         "leader_kills", "apiserver_restarts", "watch_cuts", "watch_cut_connections",
         "decided_at_seen", "decided_at_missing", "checker_events")


def tally(reports: list[dict[str, Any]]) -> list[str]:
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        by_mode.setdefault(mode(r), []).append(r)
    lines = ["| mode | runs (seeds) | gangs (pods) | kills ext / sched / apiserver | watch cuts "
             "(connections reset) | violations | races | gang onto over-committed | "
             "over-committed by neighbours | gang members with decided-at / without | "
             "runs not ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    failures: list[str] = []
    for m, runs in sorted(by_mode.items()):
        s = {k: sum(int(r.get(k) or 0) for r in runs) for k in _SUMS}
        violations: dict[str, int] = {}
        notes: dict[str, int] = {}
        for r in runs:
            for k, n in (r.get("violation_counts") or {}).items():
                violations[k] = violations.get(k, 0) + n
            for k, n in (r.get("notes") or {}).items():
                notes[k] = notes.get(k, 0) + n
            if not r.get("ok"):
                why = ([f"{len(r.get('violations') or [])} violations"] * bool(r.get("violations"))
                       + [f"unfinished {len(r['unfinished'])}"] * bool(r.get("unfinished"))
                       + [f"leftover {sorted(r['debug_leftover'])}"] * bool(r.get("debug_leftover"))
                       + [f"error {e[:200]}" for e in r.get("errors") or []])
                failures.append(f"{m}, seed {r['seed']}: {'; '.join(why) or 'RSS not sampled'}")
        seeds = sorted({int(r["seed"]) for r in runs})
        n_viol = sum(violations.values())
        viol = (f"**{n_viol}** ({', '.join(f'{k} {n}' for k, n in sorted(violations.items()))})"
                if n_viol else "0")
        neighbours = sum(n for k, n in notes.items() if k.startswith("overcommit-by-"))
        lines.append(
            f"| {m} | {len(runs)} ({seed_ranges(seeds)}) | {s['gangs_created']} "
            f"({s['pods_created']}) | {s['extender_kills']} / {s['scheduler_kills']} / "
            f"{s['apiserver_restarts']} | {s['watch_cuts']} ({s['watch_cut_connections']}) | "
            f"{viol} | {notes.get('overcommit-race', 0)} | "
            f"{notes.get('gang-onto-overcommitted', 0)} | {neighbours} | "
            f"{s['decided_at_seen']} / {s['decided_at_missing']} | "
            f"{sum(1 for r in runs if not r.get('ok'))} |")
    return lines + [""] + [f"* {f}" for f in failures]


def seed_ranges(seeds: list[int]) -> str:
    """1-5, 7, 9-10."""
    out: list[str] = []
    for s in seeds:
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == s - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{s}"
        elif out and out[-1].isdigit() and int(out[-1]) == s - 1:
            out[-1] = f"{out[-1]}-{s}"
        else:
            out.append(str(s))
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.soak.tally", description=__doc__)
    ap.add_argument("reports", nargs="+", type=Path)
    args = ap.parse_args(argv)
    reports = [json.loads(p.read_text()) for p in args.reports]
    print("\n".join(tally(reports)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The core benchmark's report: its results as markdown tables (the JSON is the results
themselves, written next to it by bench.common.write_results)."""

from __future__ import annotations

from typing import Any

from bench.common import md_table

# The "Every call" rows, besides planning: verbs through the ASGI app, the manager's bind
# decision and tick, and watch events.
CALLS = ("filter", "prioritize", "bind: manager decision", "bind (plain pod)", "tick",
         "watch: pod")


def _arrival(case: dict[str, Any]) -> str:
    return str(case["arrival"]) + ("+topology" if case.get("topology") else "")


def markdown(data: dict[str, Any]) -> str:
    cases = data["cases"]
    m = data["machine"]
    commit = data.get("commit")  # absent from results written before the option
    lines = [f"# Core benchmark ({data['mode']}" + (f", {commit} commit" if commit else "") + ")",
             "",
             f"In-process: kube-scheduler's calls through the ASGI app, no network. "
             f"{m['cpus']} CPUs, load {m['loadavg_1m']} at the start, Python {m['python']}, "
             f"commit {m['commit']}, {m['date']}. Milliseconds per call. *burst*: every pod "
             f"pending before scheduling starts; *stream*: each gang arrives just before "
             f"kube-scheduler reaches it; *+topology*: racks of 32 nodes in blocks of 16 "
             f"racks, and gangs that require or prefer one (bench/core/workload.py).", ""]
    rows = []
    for c in cases:
        f = c["verbs"].get("filter", {})
        p = c["planning"]
        rows.append([c["nodes"], c["pods"], _arrival(c), f.get("p50", "-"), f.get("p99", "-"),
                     c["verbs"].get("prioritize", {}).get("p99", "-"), p.get("p50", "-"),
                     p.get("p99", "-"), c["memory"]["peak_rss_mib"]])
    lines += ["## Headline", "",
              md_table(["nodes", "pending pods", "arrival", "filter p50", "filter p99",
                        "prioritize p99", "plan p50", "plan p99", "peak RSS MiB"], rows), ""]
    rows = []
    for c in cases:
        for verb in CALLS:
            st = c["verbs"].get(verb, {})
            rows.append([c["nodes"], c["pods"], _arrival(c), verb, st.get("count", 0),
                         st.get("p50", "-"), st.get("p99", "-"), st.get("max", "-")])
        st = c["planning"]
        rows.append([c["nodes"], c["pods"], _arrival(c), "planning call (plan_group)",
                     st.get("count", 0), st.get("p50", "-"), st.get("p99", "-"),
                     st.get("max", "-")])
    lines += ["## Every call", "",
              md_table(["nodes", "pending pods", "arrival", "call", "count", "p50 ms",
                        "p99 ms", "max ms"], rows), ""]
    rows = []
    for c in cases:
        for kind, st in c["filter_by_kind"].items():
            rows.append([c["nodes"], c["pods"], _arrival(c), kind, st["count"], st["p50"],
                         st["p99"], st["max"]])
    lines += ["## Filter by path", "",
              md_table(["nodes", "pending pods", "arrival", "filter path", "count", "p50 ms",
                        "p99 ms", "max ms"], rows), ""]
    rows = []
    for c in cases:
        mem, k, gcp = c["memory"], c["counts"], c["gc_pauses"]["gen2"]
        rows.append([c["nodes"], c["pods"], _arrival(c), c["gangs"], mem["state_mib"],
                     mem["rss_loaded_mib"], mem["peak_rss_mib"], gcp.get("count", 0),
                     gcp.get("max", "-"), k["bound_or_finished"], k["filter_rejected"],
                     c["planning"]["plans"], c["planning"]["shortfalls"], c["seconds"]["run"]])
    lines += ["## Memory, garbage collection and outcome", "",
              "State MiB: what the informers' feed allocated (tracemalloc; burst only). "
              "GC: full (generation 2) collections during the run and the longest one, ms.",
              "",
              md_table(["nodes", "pending pods", "arrival", "gangs", "state MiB",
                        "RSS loaded MiB", "peak RSS MiB", "gen2 GCs", "gen2 max ms",
                        "pods bound", "rejections", "plans", "shortfalls", "run s"], rows), ""]
    return "\n".join(lines)


"""End-to-end benchmark on the local control plane: stock kube-scheduler vs gang scheduler.

    .venv/bin/python -m bench.e2e --quick   # 50 nodes, 120 pods; about 30 s
    .venv/bin/python -m bench.e2e --full    # 100/200/400 nodes, 250/500/1,000 pods; 2.5 min

Results: bench/results/e2e.{json,md} (--full) or e2e-quick.*; docs/performance.md explains
them.

One control plane (etcd, kube-apiserver, kube-controller-manager, fake kubelet), and for each
cluster size, in the same run and with the same settings:

* **A, stock**: a kube-scheduler with one profile and no extender; the pods carry no gang
  labels and no PodGroups exist.
* **B, gang**: the same kube-scheduler configuration plus our extender (design 1: filter +
  prioritize entry, held bind entry); the same pods as gangs of 8, 16 and 32, PodGroups
  created first.

Both schedulers use the same client QPS/burst, pod backoff and `percentageOfNodesToScore`;
only one scheduler (and, for B, the extender) runs at a time, in a fresh namespace, after the
previous run's pods are deleted. Pods are created by a pool of client threads, gang by gang,
in the same order in A and B. A raw watch records when each pod is first seen bound.

Reported: pods per second from the first creation request to the last binding (A and B, and
B/A), for B each gang's "last member created -> whole gang bound", the extender's CPU time and
memory, and every component's CPU time (where the machine's time goes). On a 2-core machine
absolute numbers move with load; A and B are measured back to back, alternating order between
repetitions, and the ratio is what matters.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import ssl
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    RESULTS,
    cpu_seconds,
    machine,
    md_table,
    median_ci,
    percentile,
    rss_mib,
    write_results,
)
from e2e.gang import scheduler_config, start_extender
from e2e.harness.cluster import ControlPlane, http_ok
from e2e.harness.fakekubelet import FakeKubelet, _iter_lines
from e2e.harness.fixtures import (
    GANG_SCHEDULER,
    create_pod,
    create_podgroup,
    kube,
    list_pods,
    use_cluster,
    wait_for,
)
from e2e.harness.k8s import ApiException
from e2e.harness.process import ManagedProcess, free_port

STOCK_SCHEDULER = "bench-stock"
GANG_SIZES = (8, 16, 32)
# The same for A and B. kube-scheduler's default (50 QPS, burst 100) would throttle A's
# Bindings but not B's (the extender binds with its own client): both get room to spare.
CLIENT_CONNECTION = {"qps": 500, "burst": 1000}
CREATE_THREADS = 16
FULL_SWEEP = ((100, 250), (200, 500), (400, 1000))
# Issue 6's throughput target: B (gang) pods/s at least this fraction of A (stock).
TARGET_RATIO = 0.8
QUICK_SWEEP = ((50, 120),)


def gang_sizes(pods: int) -> list[int]:
    """Gangs of 8, 16, 32, 8, ... adding up to `pods` (the last one may be smaller)."""
    sizes: list[int] = []
    i = 0
    while sum(sizes) < pods:
        sizes.append(min(GANG_SIZES[i % len(GANG_SIZES)], pods - sum(sizes)))
        i += 1
    return sizes


# ----- observing bindings -----------------------------------------------------------------


class BindWatch:
    """A raw watch on one namespace's pods: monotonic time each pod is first seen bound
    and Running. Raw JSON (no client models) keeps the observer's own CPU use small."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.bound: dict[str, float] = {}
        self.running: dict[str, float] = {}
        # Pods kube-scheduler marked PodScheduled=False at least once: turned away (by the
        # extender, in B: "N of M members exist"), so they wait out kube-scheduler's backoff.
        self.turned_away: set[str] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BindWatch:
        self.thread.start()
        if not self.ready.wait(15):
            raise RuntimeError("watch did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()

    def _observe(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        name = obj["metadata"]["name"]
        with self.lock:
            if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                self.bound[name] = now
            if (obj.get("status") or {}).get("phase") == "Running" and name not in self.running:
                self.running[name] = now
            for cond in (obj.get("status") or {}).get("conditions") or ():
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    self.turned_away.add(name)

    def _run(self) -> None:
        core = kube().core
        rv = json.loads(core.list_namespaced_pod(self.ns, _preload_content=False).data)[
            "metadata"]["resourceVersion"]
        self.ready.set()
        while not self.stop.is_set():
            try:
                resp = core.list_namespaced_pod(
                    self.ns, watch=True, resource_version=rv, timeout_seconds=5,
                    allow_watch_bookmarks=True, _preload_content=False)
                for line in _iter_lines(resp):
                    ev = json.loads(line)
                    if ev.get("type") == "ERROR":
                        raise RuntimeError(str(ev))
                    obj = ev["object"]
                    rv = obj["metadata"]["resourceVersion"]
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self._observe(obj)
                    if self.stop.is_set():
                        break
            except Exception:
                if self.stop.is_set():
                    return
                listed = json.loads(core.list_namespaced_pod(self.ns,
                                                             _preload_content=False).data)
                for obj in listed["items"]:
                    self._observe(obj)
                rv = listed["metadata"]["resourceVersion"]

    def count(self) -> int:
        with self.lock:
            return len(self.bound)


# ----- one run --------------------------------------------------------------------------------


@dataclass
class RunResult:
    mode: str  # "A" stock, "B" gang
    nodes: int
    pods: int
    rep: int
    bound: int = 0
    seconds: float = 0.0
    pods_per_second: float = 0.0
    create_seconds: float = 0.0
    gang_start: list[float] = field(default_factory=list)  # B: last created -> all bound
    # B: for each gang of gang_start, whether kube-scheduler turned a member away first
    gang_turned_away: list[bool] = field(default_factory=list)
    # B, per gang, seconds from the first creation request: first and last member
    # created, first and last member seen bound.
    gang_timeline: list[tuple[float, float, float, float]] = field(default_factory=list)
    bound_to_running_p95: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # component -> CPU seconds
    # kube-scheduler's own view: mean scheduling algorithm time per attempt (filter and
    # score, extender calls included), attempts; for B the extender's handler times.
    scheduler: dict[str, float] = field(default_factory=dict)
    api_requests: dict[str, int] = field(default_factory=dict)  # during the run, no WATCH
    extender_rss_mib: float = 0.0
    extender_peak_rss_mib: float = 0.0
    error: str = ""


def _ns_ready(ns: str) -> None:
    k = kube()
    k.core.create_namespace({"metadata": {"name": ns}}, _preload_content=False)

    def sa_ready() -> bool:
        k.core.read_namespaced_service_account("default", ns, _preload_content=False)
        return True

    wait_for(sa_ready, 30, f"service account default in {ns}")


def _empty(ns: str) -> None:
    k = kube()
    with contextlib.suppress(ApiException):
        k.custom.delete_collection_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", _preload_content=False)

    def gone() -> bool:
        with contextlib.suppress(ApiException):
            k.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0,
                                                    _preload_content=False)
        return not list_pods(ns)

    wait_for(gone, 120, f"pods of {ns} deleted", interval=0.5)
    # A run leaves 1,000-1,200 Events per 1,000 pods; kept, they made the API server's
    # CPU per run creep up by a fifth over a sweep, more than the A/B difference.
    with contextlib.suppress(ApiException):
        k.core.delete_collection_namespaced_event(ns, _preload_content=False)
    # The namespace stays: deleting it would set the namespace controller to work during
    # the next run.


def _vm_hwm_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def scrape(url: str) -> dict[str, float]:
    """Prometheus text format to {"name{labels}": value} (HTTPS without verification:
    the local control plane's components use self-signed serving certificates)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    out: dict[str, float] = {}
    try:
        with urllib.request.urlopen(url, timeout=10, context=ctx) as resp:
            text = resp.read().decode()
    except OSError:
        return out
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[key] = float(value)
    return out


def hist_sum_count(metrics: dict[str, float], name: str, match: str = "") -> tuple[float, int]:
    """Sum (seconds) and count of a histogram, added up over the series whose labels
    contain `match`."""
    total = count = 0.0
    for key, v in metrics.items():
        if key.startswith(name + "_sum") and match in key:
            total += v
        elif key.startswith(name + "_count") and match in key:
            count += v
    return total, int(count)


def hist_mean_ms(metrics: dict[str, float], name: str, match: str = "") -> tuple[float, int]:
    """Mean (ms) and count of a histogram (see `hist_sum_count`)."""
    total, count = hist_sum_count(metrics, name, match)
    return (round(total / count * 1000, 3) if count else float("nan")), count


def apiserver_requests() -> dict[str, float]:
    """kube-apiserver's request counters, {"VERB resource[/subresource]": count}."""
    api = kube().api
    try:
        method, url, headers, _body, _post = api.param_serialize(
            "GET", "/metrics", auth_settings=["BearerToken"])
        resp = api.call_api(method, url, header_params=headers)
        resp.read()
        text = resp.data.decode()
    except Exception:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(",")
            if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("verb") == "WATCH":
            continue
        res = labels.get("resource", "")
        if labels.get("subresource"):
            res += "/" + labels["subresource"]
        key = f"{labels.get('verb', '')} {res}"
        out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Bench:
    def __init__(self, cp: ControlPlane, timeout: float, profile_dir: Path | None = None,
                 no_prioritize: bool = False, extender_args: list[str] | None = None) -> None:
        self.cp = cp
        self.extender_args = list(extender_args or [])
        self.timeout = timeout
        self.profile_dir = profile_dir
        self.no_prioritize = no_prioritize
        self.runs = 0

    def _components(self, extra: dict[str, ManagedProcess]) -> dict[str, int]:
        pids = {}
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "fake-kubelet"):
            p = self.cp.processes.get(name)
            if p is not None and p.pid is not None:
                pids[name] = p.pid
        for name, p in extra.items():
            if p.pid is not None:
                pids[name] = p.pid
        return pids

    @contextlib.contextmanager
    def stack(self, mode: str) -> Iterator[dict[str, ManagedProcess]]:
        """The scheduler for this run (and the extender for B), stopped afterwards."""
        self.runs += 1
        procs: dict[str, ManagedProcess] = {}
        try:
            if mode == "A":
                cfg = scheduler_config(0)
                cfg["profiles"][0]["schedulerName"] = STOCK_SCHEDULER
                del cfg["extenders"]
            else:
                port = free_port()
                procs["extender"] = self._start_extender(port)
                cfg = scheduler_config(port)
                if self.no_prioritize:
                    # What-if: a member's filter answer is its one reserved node, so the
                    # prioritize call cannot change the outcome.
                    del cfg["extenders"][0]["prioritizeVerb"]
                    del cfg["extenders"][0]["weight"]
            cfg["clientConnection"] = dict(CLIENT_CONNECTION)
            procs["kube-scheduler"] = self.cp.start_scheduler(
                cfg, f"bench-scheduler-{mode}-{self.runs}")
            yield procs
        finally:
            for p in procs.values():
                with contextlib.suppress(Exception):
                    p.stop()

    def _start_extender(self, port: int) -> ManagedProcess:
        name = f"bench-extender-{self.runs}"
        if self.profile_dir is None:
            proc = start_extender(self.cp, port, self.extender_args, name)
            proc.port = port
            return proc
        # Under cProfile with a CPU clock; the profile is written when it is stopped.
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        out = self.profile_dir / f"{name}.prof"
        argv = [sys.executable, "-m", "bench.cpu_profile", str(out), "extender.cli",
                "serve", "--kubeconfig", str(self.cp.kubeconfig), "--listen",
                f"127.0.0.1:{port}", "--leader-lease", "off", *self.extender_args]
        env = {"PYTHONPATH": os.environ.get("BENCH_PROFILER_PATH", "")}
        proc = self.cp.start_process(argv, name, cwd=REPO, env=env,
                                     ready=http_ok(f"http://127.0.0.1:{port}/readyz"),
                                     ready_timeout=30)
        proc.port = port
        return proc

    def run(self, mode: str, nodes: int, pods: int, rep: int) -> RunResult:
        ns = f"bench-{mode.lower()}-{nodes}-{pods}-{rep}"
        res = RunResult(mode, nodes, pods, rep)
        sizes = gang_sizes(pods)
        _ns_ready(ns)
        try:
            with self.stack(mode) as procs:
                if mode == "B":
                    for g, size in enumerate(sizes):
                        create_podgroup(ns, f"job-{g}", size)
                self._measure(res, ns, sizes, procs)
        except Exception as exc:  # a failed run is reported, never hidden
            res.error = f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            _empty(ns)
        return res

    def _measure(self, res: RunResult, ns: str, sizes: list[int],
                 procs: dict[str, ManagedProcess]) -> None:
        gang = res.mode == "B"
        scheduler = GANG_SCHEDULER if gang else STOCK_SCHEDULER
        names: list[tuple[str, int]] = []  # (pod, gang index)
        for g, size in enumerate(sizes):
            names += [(f"job-{g}-{i}", g) for i in range(size)]
        created: dict[str, float] = {}
        pids = self._components(procs)
        with BindWatch(ns) as watch:
            req0 = apiserver_requests()
            cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
            self_cpu0 = _self_cpu()
            t0 = time.monotonic()

            def create(name: str, g: int) -> None:
                create_pod(ns, name, scheduler_name=scheduler,
                           pod_group=f"job-{g}" if gang else None,
                           labels={"app": f"job-{g}"})
                created[name] = time.monotonic()

            with ThreadPoolExecutor(CREATE_THREADS) as pool:
                futures = [pool.submit(create, n, g) for n, g in names]
                for f in futures:
                    f.result()
            res.create_seconds = round(time.monotonic() - t0, 2)
            deadline = t0 + self.timeout
            while watch.count() < len(names) and time.monotonic() < deadline:
                time.sleep(0.05)
            # CPU and API requests are counted until the pipeline settles (every pod
            # Running), so A and B are charged for the same work whichever binds faster.
            settle = time.monotonic() + 60
            while len(watch.running) < watch.count() and time.monotonic() < settle:
                time.sleep(0.05)
            time.sleep(0.5)
            cpu1 = {k: cpu_seconds(pid) for k, pid in pids.items()}
            self_cpu1 = _self_cpu()
            req1 = apiserver_requests()
            with watch.lock:
                bound = dict(watch.bound)
                running = dict(watch.running)
                turned_away = set(watch.turned_away)
        res.bound = len(bound)
        if bound:
            res.seconds = round(max(bound.values()) - t0, 3)
            res.pods_per_second = round(len(bound) / res.seconds, 1)
        if len(bound) < len(names):
            res.error = f"only {len(bound)} of {len(names)} pods bound in {self.timeout:.0f} s"
        lags = [running[n] - bound[n] for n in running if n in bound]
        res.bound_to_running_p95 = round(percentile(lags, 95), 3) if lags else float("nan")
        if gang:
            for g in range(len(sizes)):
                members = [n for n, gi in names if gi == g]
                if all(m in bound for m in members):
                    res.gang_start.append(round(
                        max(bound[m] for m in members) - max(created[m] for m in members), 3))
                    res.gang_turned_away.append(any(m in turned_away for m in members))
                    c0, c1 = (min(created[m] for m in members), max(created[m] for m in members))
                    b0, b1 = (min(bound[m] for m in members), max(bound[m] for m in members))
                    res.gang_timeline.append((round(c0 - t0, 3), round(c1 - t0, 3),
                                              round(b0 - t0, 3), round(b1 - t0, 3)))
        res.cpu = {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0}
        res.api_requests = {k: int(v - req0.get(k, 0.0)) for k, v in sorted(req1.items())
                            if v - req0.get(k, 0.0) >= 1}
        res.cpu["bench client (creates + watch)"] = round(self_cpu1 - self_cpu0, 2)
        sched = procs["kube-scheduler"]
        sm = scrape(f"https://127.0.0.1:{sched.port}/metrics")
        mean, attempts = hist_mean_ms(sm, "scheduler_scheduling_algorithm_duration_seconds")
        res.scheduler["algorithm_mean_ms"] = mean
        res.scheduler["attempts"] = attempts
        res.scheduler["unschedulable_attempts"] = int(sum(
            v for k, v in sm.items()
            if k.startswith("scheduler_schedule_attempts_total") and "unschedulable" in k))
        ext = procs.get("extender")
        if ext is not None and ext.port is not None:
            em = scrape(f"http://127.0.0.1:{ext.port}/metrics")
            # A filter call's time includes its assembly wait, if any (kube-scheduler's
            # loop waited with it): the handler's own time is reported without it.
            waited, waits = hist_sum_count(em, "gang_extender_assembly_wait_seconds")
            for verb in ("filter", "prioritize"):
                total, n = hist_sum_count(em, "gang_extender_verb_duration_seconds",
                                          f'verb="{verb}"')
                if verb == "filter":
                    total -= waited
                res.scheduler[f"extender_{verb}_handler_mean_ms"] = (
                    round(total / n * 1000, 3) if n else float("nan"))
                res.scheduler[f"extender_{verb}_calls"] = n
            res.scheduler["assembly_waits"] = waits
            res.scheduler["assembly_waits_turned_away"] = hist_sum_count(
                em, "gang_extender_assembly_wait_seconds", 'outcome="turned_away"')[1]
            res.scheduler["assembly_wait_mean_ms"] = (
                round(waited / waits * 1000, 1) if waits else float("nan"))
            res.scheduler["wakeups"] = int(em.get("gang_extender_wakeups_total", 0))
        if ext is not None and ext.pid is not None:
            res.extender_rss_mib = rss_mib(ext.pid)
            res.extender_peak_rss_mib = _vm_hwm_mib(ext.pid)


# ----- report ---------------------------------------------------------------------------------


def summarize(runs: list[RunResult]) -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = []
    for nodes, pods in sorted({(r.nodes, r.pods) for r in runs}):
        a = [r for r in runs if (r.nodes, r.pods, r.mode) == (nodes, pods, "A") and not r.error]
        b = [r for r in runs if (r.nodes, r.pods, r.mode) == (nodes, pods, "B") and not r.error]

        def median(xs: list[float]) -> float:
            return statistics.median(xs) if xs else float("nan")

        a_pps = median([r.pods_per_second for r in a])
        b_pps = median([r.pods_per_second for r in b])
        starts = [s for r in b for s in r.gang_start]
        pairs = [(s, t) for r in b for s, t in zip(r.gang_start, r.gang_turned_away,
                                                    strict=False)]
        clean = [s for s, t in pairs if not t]
        away = [s for s, t in pairs if t]
        ratios = [rb.pods_per_second / ra.pods_per_second for ra in a for rb in b
                  if ra.rep == rb.rep and ra.pods_per_second]
        ext_cpu = median([r.cpu.get("extender", float("nan")) for r in b])
        points.append({
            "nodes": nodes, "pods": pods,
            "runs": {"A": len(a), "B": len(b)},
            "stock_pods_per_second": a_pps,
            "gang_pods_per_second": b_pps,
            "ratio_b_over_a": round(b_pps / a_pps, 3) if a and b else float("nan"),
            "ratio_per_pair": [round(x, 3) for x in ratios],
            "ratio_pairs": ratio_spread(ratios),
            "gang_start_seconds": {
                "gangs": len(starts),
                "p50": round(percentile(starts, 50), 3) if starts else float("nan"),
                "p95": round(percentile(starts, 95), 3) if starts else float("nan"),
                "max": round(max(starts), 3) if starts else float("nan"),
            },
            # Gangs none of whose members kube-scheduler tried before the gang was
            # complete, and gangs with a member turned away ("N of M members exist"),
            # which waits out kube-scheduler's backoff (1-2 s) before its retry.
            "gang_start_not_turned_away": {
                "gangs": len(clean),
                "p50": round(percentile(clean, 50), 3) if clean else float("nan"),
                "p95": round(percentile(clean, 95), 3) if clean else float("nan"),
            },
            "gang_start_turned_away": {
                "gangs": len(away),
                "p50": round(percentile(away, 50), 3) if away else float("nan"),
                "p95": round(percentile(away, 95), 3) if away else float("nan"),
            },
            "extender_cpu_seconds": ext_cpu,
            "extender_cpu_ms_per_pod": round(ext_cpu * 1000 / pods, 2) if b else float("nan"),
            "extender_peak_rss_mib": median([r.extender_peak_rss_mib for r in b]),
            "scheduler_cpu_seconds": {
                "A": median([r.cpu.get("kube-scheduler", float("nan")) for r in a]),
                "B": median([r.cpu.get("kube-scheduler", float("nan")) for r in b]),
            },
        })
    return points


def ratio_spread(ratios: list[float]) -> dict[str, Any]:
    """Median of per-pair B/A ratios, its bootstrap 95 % interval, and how many pairs
    reached the target: what it takes to say whether the target is met on a machine
    whose run-to-run spread is wider than the margin."""
    lo, hi = median_ci(ratios)
    return {
        "pairs": len(ratios),
        "median": round(statistics.median(ratios), 3) if ratios else float("nan"),
        "ci95": [round(lo, 3), round(hi, 3)],
        "at_or_above_target": sum(1 for x in ratios if x >= TARGET_RATIO),
    }


def pooled_ratios(points: list[dict[str, Any]]) -> dict[str, Any]:
    """`ratio_spread` over the pairs of every point together."""
    return ratio_spread([x for p in points for x in p["ratio_per_pair"]])


def _ratio_section(data: dict[str, Any]) -> list[str]:
    rows = []
    for p in data["points"]:
        rp = p["ratio_pairs"]
        rows.append([f"{p['nodes']} / {p['pods']}", rp["pairs"], rp["median"],
                     f"{rp['ci95'][0]} - {rp['ci95'][1]}",
                     f"{rp['at_or_above_target']} of {rp['pairs']}"])
    pool = pooled_ratios(data["points"])
    rows.append(["all points", pool["pairs"], pool["median"],
                 f"{pool['ci95'][0]} - {pool['ci95'][1]}",
                 f"{pool['at_or_above_target']} of {pool['pairs']}"])
    return ["## B/A against the target", "",
            md_table(["nodes / pods", "A-B pairs", "median of pair ratios",
                      "95 % interval of that median (bootstrap)",
                      f"pairs with B/A >= {TARGET_RATIO}"], rows), "",
            f"The target is B/A >= {TARGET_RATIO}. It is met with confidence only where the "
            "whole interval is at or above it; where the interval straddles it, this "
            "machine cannot tell.", ""]


def _warmup_note(warmup: list[dict[str, Any]]) -> str:
    if not warmup:
        return ""
    got = ", ".join(f"{w['mode']} {w['pods_per_second']}" for w in warmup)
    return f" First {len(warmup) // 2} warm-up pair(s) left out (pods/s: {got})."


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    lines = [f"# End-to-end benchmark ({data['mode']})", "",
             f"Local control plane (kube-scheduler {data['kubernetes']}), fake nodes of 8 CPU / "
             f"32Gi, pods of 100m / 64Mi; gangs of {', '.join(map(str, GANG_SIZES))}. "
             f"{m['cpus']} CPUs, load {m['loadavg_1m']} at the start, commit {m['commit']}, "
             f"{m['date']}. Median of {data['repetitions']} run(s) per point."
             + _warmup_note(data.get("warmup") or []), ""]
    if data.get("extender_args"):
        lines += [f"B's extender ran with `{data['extender_args']}` (a what-if).", ""]
    rows = []
    for p in data["points"]:
        gs = p["gang_start_seconds"]
        rows.append([p["nodes"], p["pods"], p["stock_pods_per_second"],
                     p["gang_pods_per_second"], p["ratio_b_over_a"], gs["p50"], gs["p95"],
                     gs["max"], p["extender_cpu_seconds"], p["extender_cpu_ms_per_pod"],
                     p["extender_peak_rss_mib"]])
    lines += [md_table(["nodes", "pods", "A stock pods/s", "B gang pods/s", "B/A",
                        "gang start p50 s", "gang start p95 s", "max s", "extender CPU s",
                        "extender CPU ms/pod", "extender peak RSS MiB"], rows), ""]
    lines += ["Gang start: last member created -> whole gang bound. Throughput: first creation "
              "request -> last binding.", ""]
    lines += _ratio_section(data)
    rows = []
    for p in data["points"]:
        c, t = p["gang_start_not_turned_away"], p["gang_start_turned_away"]
        rows.append([p["nodes"], p["pods"], " / ".join(str(x) for x in p["ratio_per_pair"]),
                     c["gangs"], c["p50"], c["p95"], t["gangs"], t["p50"], t["p95"]])
    lines += ["## Spread, and what gang start is made of", "",
              md_table(["nodes", "pods", "B/A per A-B pair", "gangs never turned away",
                        "their start p50 s", "p95 s", "gangs with a member turned away",
                        "their start p50 s", "p95 s"], rows), "",
              "A member that kube-scheduler tries before its gang is complete waits in filter "
              "for the rest (the assembly wait) while they arrive fast enough; otherwise it "
              "is turned away (\"N of M members exist\") and retried only after "
              "kube-scheduler's pod backoff (1 s, counted in whole-second windows: 1-2 s), "
              "and its gang's held binds wait for it.", "",
              "## CPU seconds per component, per run", ""]
    comps = sorted({c for r in data["runs"] for c in r["cpu"]})
    rows = []
    for r in data["runs"]:
        rows.append([r["nodes"], r["pods"], r["mode"], r["rep"], r["pods_per_second"],
                     r["create_seconds"], r["bound_to_running_p95"],
                     *[r["cpu"].get(c, "-") for c in comps], r["error"] or "ok"])
    lines += [md_table(["nodes", "pods", "run", "rep", "pods/s", "create s",
                        "bound->Running p95 s", *comps, "status"], rows), ""]
    lines += ["## kube-scheduler's view, per run", "",
              "Algorithm: kube-scheduler's mean time per scheduling attempt (its filters and "
              "scores, plus the extender's filter and prioritize calls over HTTP, assembly "
              "waits included). Handler: the extender's own time inside the verb, without "
              "queueing on its event loop and without assembly waits. Assembly waits: filter "
              "calls held for the rest of a gang being created (how many, of those how many "
              "still turned away, mean length).",
              ""]
    rows = []
    for r in data["runs"]:
        s = r["scheduler"]
        rows.append([r["nodes"], r["pods"], r["mode"], r["rep"], s.get("attempts", "-"),
                     s.get("unschedulable_attempts", "-"), s.get("algorithm_mean_ms", "-"),
                     s.get("extender_filter_handler_mean_ms", "-"),
                     s.get("extender_prioritize_calls", "-"),
                     s.get("wakeups", "-"),
                     f"{s['assembly_waits']} / {s['assembly_waits_turned_away']}"
                     if "assembly_waits" in s else "-",
                     s.get("assembly_wait_mean_ms", "-")])
    lines += [md_table(["nodes", "pods", "run", "rep", "attempts", "unschedulable",
                        "algorithm mean ms", "extender filter handler ms",
                        "prioritize calls", "wake-ups", "assembly waits / turned away",
                        "mean wait ms"], rows), "",
              "A member's filter answers one node, and kube-scheduler skips scoring (and "
              "so the prioritize call) when a single node is feasible.", ""]
    lines += ["## API requests during the run (kube-apiserver's counters, watches excluded)",
              ""]
    kinds = sorted({k for r in data["runs"] for k in r["api_requests"]})
    rows = [[k, *[r["api_requests"].get(k, 0) for r in data["runs"]]] for k in kinds
            if max(r["api_requests"].get(k, 0) for r in data["runs"]) >= 5]
    lines += [md_table(["request", *[f"{r['mode']} {r['nodes']}x{r['pods']} #{r['rep']}"
                                     for r in data["runs"]]], rows), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="50 nodes, 120 pods, one A/B pair")
    mode.add_argument("--full", action="store_true",
                      help="sweep 100/200/400 nodes with 250/500/1,000 pods")
    ap.add_argument("--reps", type=int, default=None,
                    help="A/B pairs per point (default: 1 quick, 2 full)")
    ap.add_argument("--sweep", default=None,
                    help="NODESxPODS,... instead of the preset, e.g. 200x500")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per run to bind all")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-prioritize", action="store_true",
                    help="what-if: B's scheduler configuration without the prioritize verb")
    ap.add_argument("--profile-extender", type=Path, metavar="DIR",
                    help="run the extender under cProfile, one .prof per run in DIR")
    ap.add_argument("--extender-args", default="", metavar="ARGS",
                    help="what-if: extra `gang-extender serve` flags for B, e.g. "
                         "'--event-loop asyncio'")
    ap.add_argument("--warmup", type=int, default=1, metavar="N",
                    help="A/B pairs run first at the first point and left out of the "
                         "results (default 1): a fresh control plane's first run was "
                         "25 %% slower than the next ones, which favoured whichever mode "
                         "went second")
    ap.add_argument("--kubelet-nice", type=int, default=0, metavar="N",
                    help="nice value of the fake kubelet process")
    args = ap.parse_args(argv)
    if args.sweep:
        sweep = tuple(tuple(int(x) for x in s.split("x")) for s in args.sweep.split(","))
    else:
        sweep = FULL_SWEEP if args.full else QUICK_SWEEP
    reps = args.reps or (2 if args.full else 1)
    mode_name = "full" if args.full else ("custom" if args.sweep else "quick")

    t_start = time.monotonic()
    info = machine()
    cp = ControlPlane().start()
    runs: list[RunResult] = []
    warmup: list[dict[str, object]] = []
    try:
        use_cluster(cp)
        fk = FakeKubelet(cp).start()
        kubelet = cp.processes.get("fake-kubelet")
        if args.kubelet_nice and kubelet is not None and kubelet.pid is not None:
            os.setpriority(os.PRIO_PROCESS, kubelet.pid, args.kubelet_nice)
        bench = Bench(cp, args.timeout, args.profile_extender, args.no_prioritize,
                      shlex.split(args.extender_args))
        have = 0
        for nodes, pods in sweep:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: fk.add_node(f"node-{i:04d}"), range(have, nodes)))
            have = max(have, nodes)
            for w in range(args.warmup if not runs else 0):  # before the first point only
                for m in ("A", "B"):
                    r = bench.run(m, nodes, pods, -1 - w)
                    warmup.append({"mode": m, "nodes": nodes, "pods": pods,
                                   "pods_per_second": r.pods_per_second, "error": r.error})
                    print(f"warm-up {m} {nodes} nodes {pods} pods: {r.pods_per_second} "
                          "pods/s (not counted)", file=sys.stderr, flush=True)
            for rep in range(reps):
                # Alternate which goes first, so drift in machine load does not favour one.
                for m in ("A", "B") if rep % 2 == 0 else ("B", "A"):
                    r = bench.run(m, nodes, pods, rep)
                    runs.append(r)
                    extra = (f", gang start p95 {percentile(r.gang_start, 95):.2f} s"
                             if r.gang_start else "")
                    print(f"{m} {nodes} nodes {pods} pods rep {rep}: "
                          f"{r.pods_per_second} pods/s{extra}"
                          + (f" ERROR {r.error}" if r.error else ""), file=sys.stderr,
                          flush=True)
    finally:
        cp.stop()
    data = {
        "benchmark": "e2e", "mode": mode_name, "machine": info, "repetitions": reps,
        "no_prioritize": args.no_prioritize, "extender_args": args.extender_args,
        "kubernetes": cp.bin_dir.name, "client_connection": CLIENT_CONNECTION,
        "create_threads": CREATE_THREADS, "seconds": round(time.monotonic() - t_start, 1),
        "warmup": warmup,
        "points": summarize(runs), "runs": [r.__dict__ for r in runs],
    }
    data["pooled"] = pooled_ratios(data["points"])
    text = markdown(data)
    stem = "e2e" if args.full else f"e2e-{mode_name}"
    paths = write_results(args.out, stem, data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    return 1 if any(r.error for r in runs) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

"""One run of one system in `bench.e2e`: start its scheduler (and B's extender), create the
group objects and the pods, watch them bind, and charge every component's CPU until every
pod runs; then empty the namespace for the next run."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, percentile
from bench.e2e import meter
from bench.e2e.apiserver_pprof import profile
from bench.e2e.floor import FLOOR_THREADS, FloorBinder, assign
from bench.e2e.report import RunResult
from bench.e2e.systems import SCHEDULED, group_manifest, pod_manifest, scheduler_config
from bench.e2e.watch import (
    BindWatch,
    apiserver_requests,
    hist_mean_ms,
    hist_sum_count,
    scrape,
    vm_hwm_mib,
)
from e2e.gang import scheduler_config as shipped_config
from e2e.gang import start_extender
from e2e.harness.binaries import find_k8s_bin
from e2e.harness.cluster import ControlPlane
from e2e.harness.crds import DEFAULT_CRD_DIRS, install_crds
from e2e.harness.k8s import ApiException
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.queries import list_pods
from e2e.harness.rawapi import RawApi
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube
from e2e.harness.versions import k8s_minor, upstream_gang_gates, workload_api_version
from e2e.harness.waiting import wait_for

CREATE_THREADS = 16


def node_name(i: int) -> str:
    """The fake nodes' names, node-00000 on (the floor binds to them by name)."""
    return f"node-{i:05d}"


def system_config(system: str, client: str, port: int,
                  coscheduling: Mapping[str, Any] | None, shared_scoring: bool = False,
                  no_prioritize: bool = False) -> dict[str, Any]:
    """`system`'s KubeSchedulerConfiguration for one run, from deploy/ as it is on disk
    now (read at every run: what the systems share follows deploy/, never a copy)."""
    cfg = scheduler_config(system, client, shipped_config(port), coscheduling,
                           shared_scoring)
    if system == "B" and no_prioritize:
        # What-if: a member's filter answer is its one reserved node, so the prioritize
        # call cannot change the outcome.
        del cfg["extenders"][0]["prioritizeVerb"]
        del cfg["extenders"][0]["weight"]
    return cfg


def find_scheduler_plugins() -> Path:
    """scheduler-plugins' build cache (binary, CRD, Coscheduling configuration), built by
    e2e/build-operator.sh on first use (minutes, once per machine)."""
    from e2e.integrations.operators import find_operator  # imports pytest: only when D runs

    return find_operator("scheduler-plugins")


def bench_control_plane(extra_apiserver_args: Sequence[str] = ()) -> ControlPlane:
    """The one control plane every system's runs share (not started): the upstream
    Workload API served, and the API server given system C's gates, which differ between
    releases (versions.py), so they are read off the binaries about to run."""
    bin_dir = find_k8s_bin()
    return ControlPlane(bin_dir=bin_dir, workload_api=True,
                        apiserver_feature_gates=upstream_gang_gates(k8s_minor(bin_dir)),
                        extra_apiserver_args=extra_apiserver_args)


class Bench:
    def __init__(self, cp: ControlPlane, timeout: float, extender_args: list[str],
                 plugins_dir: Path | None, profile_dir: Path | None = None,
                 no_prioritize: bool = False, shared_scoring: bool = False,
                 apiserver_profile_dir: Path | None = None,
                 floor_threads: int = FLOOR_THREADS) -> None:
        self.cp = cp
        self.apiserver_profile_dir = apiserver_profile_dir
        self.shared_scoring = shared_scoring
        self.floor_threads = floor_threads
        self.profile_dir = profile_dir
        self.no_prioritize = no_prioritize
        self.timeout = timeout
        self.extender_args = extender_args
        self.plugins_dir = plugins_dir
        self.coscheduling = (yaml.safe_load((plugins_dir / "coscheduling-config.yaml")
                                            .read_text()) if plugins_dir else None)
        self.crds = "ours"
        self.runs = 0
        # When the last run's last create returned, by the wall clock: for experiments that
        # line a run up with the components' logs (lab.experiments.commit_phases).
        self.last_created_wall = math.nan

    def _crds(self, which: str) -> None:
        """D runs against scheduler-plugins' own PodGroup CRD; the others against ours (a
        superset: the same spec, plus the status fields B writes). Swapped between runs,
        outside the measured window."""
        if which == self.crds:
            return
        assert self.plugins_dir is not None
        api = self.cp.api_client()
        try:
            install_crds(api, [self.plugins_dir] if which == "theirs" else DEFAULT_CRD_DIRS)
        finally:
            api.close()
        time.sleep(1.0)  # the API server rebuilds the resource's handler
        self.crds = which

    @contextlib.contextmanager
    def stack(self, system: str, client: str) -> Iterator[dict[str, ManagedProcess]]:
        """The scheduler for this run (and the extender for B), stopped afterwards; none
        for the floor."""
        self.runs += 1
        procs: dict[str, ManagedProcess] = {}
        if system not in SCHEDULED:
            yield procs
            return
        try:
            port = 0
            if system == "B":
                port = free_port()
                procs["extender"] = self._start_extender(port)
            cfg = system_config(system, client, port, self.coscheduling,
                                self.shared_scoring, self.no_prioritize)
            binary = (self.plugins_dir / "scheduler-plugins"
                      if system == "D" and self.plugins_dir else None)
            procs["kube-scheduler"] = self.cp.start_scheduler(
                cfg, f"bench-scheduler-{system}-{self.runs}", binary=binary,
                feature_gates=upstream_gang_gates(self.cp.minor) if system == "C" else "")
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

    def run(self, system: str, client: str, nodes: int, sizes: list[int], gangs: str,
            rep: int) -> RunResult:
        """One run of `system`: gangs of `sizes` (described by `gangs`, e.g. "8/16/32")."""
        pods = sum(sizes)
        ns = f"bench-{system.lower()}-{client[:3]}-{nodes}-{pods}-{gangs.replace('/', '-')}-{rep}"
        ns = ns.replace("--", "-w")  # warm-up repetitions are negative
        res = RunResult(system, client, nodes, pods, gangs, rep,
                        load1=round(os.getloadavg()[0], 2))
        _ns_ready(ns)
        try:
            self._crds("theirs" if system == "D" else "ours")
            with self.stack(system, client) as procs:
                k = kube()
                for g, size in enumerate(sizes):
                    obj = group_manifest(system, ns, f"job-{g}", size,
                                         workload_api_version(self.cp.minor))
                    if obj is not None:
                        (grp, ver, plural), body = obj
                        k.custom.create_namespaced_custom_object(grp, ver, ns, plural, body,
                                                                 _preload_content=False)
                prof = self._profile_apiserver(res)
                try:
                    self._measure(res, ns, sizes, procs)
                finally:
                    if prof is not None:
                        prof.join()
        except Exception as exc:  # a failed run is reported, never hidden
            text = f"{type(exc).__name__}: {exc}"
            # A failed start's message ends with the log tail, which says why.
            res.error = text if len(text) <= 2000 else text[:300] + " ... " + text[-1700:]
        finally:
            _empty(ns)
        return res

    def _profile_apiserver(self, res: RunResult) -> threading.Thread | None:
        """kube-apiserver's CPU profile over the first max(5, pods / 40) seconds of a
        measured run (long enough for every system here to bind all), one file a run."""
        out = self.apiserver_profile_dir
        if out is None or res.rep < 0:
            return None
        out.mkdir(parents=True, exist_ok=True)
        name = f"{res.system}-{res.client}-{res.nodes}x{res.pods}-{res.rep}.pb.gz"
        return profile(RawApi(self.cp.api_client()), max(5, math.ceil(res.pods / 40)),
                       out / name)

    def _measure(self, res: RunResult, ns: str, sizes: list[int],
                 procs: dict[str, ManagedProcess]) -> None:
        names: list[tuple[str, int]] = []  # (pod, gang index)
        for g, size in enumerate(sizes):
            names += [(f"job-{g}-{i}", g) for i in range(size)]
        bodies = [pod_manifest(res.system, ns, n, f"job-{g}") for n, g in names]
        created: dict[str, float] = {}
        pids = {name: p.pid for name, p in [*self.cp.processes.items(), *procs.items()]
                if name in ("etcd", "kube-apiserver", "kube-controller-manager",
                            "fake-kubelet", "kube-scheduler", "extender")
                and p.pid is not None and p.running()}
        core = kube().core
        floor = (FloorBinder(RawApi(self.cp.api_client()), ns, self.floor_threads)
                 if res.system not in SCHEDULED else None)
        with BindWatch(ns) as watch:
            req0 = apiserver_requests()
            start = meter.read(pids)
            t0 = time.monotonic()

            def create(body: dict[str, Any]) -> None:
                core.create_namespaced_pod(ns, body, _preload_content=False)
                created[body["metadata"]["name"]] = time.monotonic()

            with ThreadPoolExecutor(CREATE_THREADS) as pool:
                for f in [pool.submit(create, b) for b in bodies]:
                    f.result()
            res.create_seconds = round(time.monotonic() - t0, 2)
            created_all = meter.read(pids)
            self.last_created_wall = time.time()
            if floor is not None:
                try:
                    floor.bind(assign([n for n, _ in names],
                                      [node_name(i) for i in range(res.nodes)]))
                finally:
                    floor.api.close()
            deadline = t0 + self.timeout
            while watch.count() < len(names) and time.monotonic() < deadline:
                time.sleep(0.05)
            # CPU is counted until the pipeline settles (every pod Running), so each
            # system is charged for the same work whichever binds faster.
            settle = time.monotonic() + 60
            while len(watch.running) < watch.count() and time.monotonic() < settle:
                time.sleep(0.05)
            time.sleep(0.5)
            end = meter.read(pids)
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
        else:
            res.tail_seconds = round(max(bound.values()) - max(created.values()), 3)
        lags = [running[n] - bound[n] for n in running if n in bound]
        res.bound_to_running_p95 = round(percentile(lags, 95), 3) if lags else float("nan")
        members: dict[int, list[str]] = {}
        for n, g in names:
            members.setdefault(g, []).append(n)
        for g, size in enumerate(sizes):
            ms = members[g]
            res.gang_size.append(size)
            done = all(m in bound for m in ms)
            res.gang_start.append(round(max(bound[m] for m in ms) - max(created[m] for m in ms),
                                        3) if done else float("nan"))
            res.gang_turned_away.append(any(m in turned_away for m in ms))
        res.cpu = meter.spent(start, end)
        res.cpu_created = meter.spent(start, created_all)
        res.idle_created = meter.idle_share(start, created_all)
        res.api_requests = {k: int(v - req0.get(k, 0.0)) for k, v in sorted(req1.items())
                            if v - req0.get(k, 0.0) >= 1}
        self._scheduler_view(res, procs)

    @staticmethod
    def _scheduler_view(res: RunResult, procs: dict[str, ManagedProcess]) -> None:
        sched = procs.get("kube-scheduler")
        if sched is None:  # the floor
            return
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
            waited, waits = hist_sum_count(em, "gang_extender_assembly_wait_seconds")
            res.scheduler["assembly_waits"] = waits
            res.scheduler["assembly_wait_mean_ms"] = (
                round(waited / waits * 1000, 1) if waits else float("nan"))
            # The commit wait: filter calls held while commits land, and how many of
            # them reached the limit before the watch had every Binding back.
            held, commits = hist_sum_count(em, "gang_extender_commit_wait_seconds")
            res.scheduler["commit_waits"] = commits
            res.scheduler["commit_waits_timed_out"] = hist_sum_count(
                em, "gang_extender_commit_wait_seconds", "timed_out")[1]
            res.scheduler["commit_wait_mean_ms"] = (
                round(held / commits * 1000, 1) if commits else float("nan"))
        if ext is not None and ext.pid is not None:
            res.extender_peak_rss_mib = vm_hwm_mib(ext.pid)


def _ns_ready(ns: str) -> None:
    k = kube()
    k.core.create_namespace({"metadata": {"name": ns}}, _preload_content=False)

    def sa_ready() -> bool:
        k.core.read_namespaced_service_account("default", ns, _preload_content=False)
        return True

    wait_for(sa_ready, 30, f"service account default in {ns}")


def _empty(ns: str) -> None:
    k = kube()
    for grp, ver in (("scheduling.x-k8s.io", "v1alpha1"), ("scheduling.k8s.io", "v1alpha2")):
        with contextlib.suppress(ApiException):
            k.custom.delete_collection_namespaced_custom_object(
                grp, ver, ns, "podgroups", _preload_content=False)

    def gone() -> bool:
        with contextlib.suppress(ApiException):
            k.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0,
                                                    _preload_content=False)
        return not list_pods(ns)

    wait_for(gone, 300, f"pods of {ns} deleted", interval=0.5)
    # Kept, a run's Events made the API server's CPU per run creep up by a fifth over a
    # sweep. The namespace stays: deleting it would set the namespace controller to work
    # during the next run.
    with contextlib.suppress(ApiException):
        k.core.delete_collection_namespaced_event(ns, _preload_content=False)

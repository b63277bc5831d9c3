"""The soak's own stack on the given control plane: namespaces, tainted fake nodes,
PriorityClasses, the checker, one or two (extender + kube-scheduler) replicas, a
default scheduler if needed; and their teardown. Apart because bringing a stack up
and down is a job of its own, done once per run, beside the load and the chaos; what
it started (nodes, replicas, processes) is what the other parts are given."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from e2e.gang import REPO, scheduler_config
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakenodes import FakeNodes
from e2e.harness.k8s import ApiException, client
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube

from .check.checker import Checker
from .config import SoakConfig
from .cut import ApiCut
from .lease import LEASE, Replica
from .load import priority_classes
from .names import RunNames
from .retry import retry


def _flag(args: tuple[str, ...], name: str, default: float) -> float:
    """The value of `name` in an argv tuple (the extender's --default-timeout, which the
    checker needs for PodGroups without scheduleTimeoutSeconds)."""
    for i, a in enumerate(args[:-1]):
        if a == name:
            return float(args[i + 1])
    return default


def check_unshare() -> None:
    """replicas=2 gives each kube-scheduler a host name of its own (the harness's
    `start_scheduler(hostname=...)`, through `unshare --uts`): fail early and clearly
    where that is not allowed."""
    res = subprocess.run(["unshare", "--uts", "--", "sh", "-c",
                          'hostname soak-probe && hostname'], capture_output=True,
                         text=True, check=False, timeout=30)
    if res.returncode != 0 or res.stdout.strip() != "soak-probe":
        raise RuntimeError("replicas=2 needs `unshare --uts` (root or CAP_SYS_ADMIN): "
                           f"exit {res.returncode}: {res.stderr.strip()[:500]}")


def extender_has_leader_flags() -> bool:
    res = subprocess.run([sys.executable, "-m", "extender.cli", "serve", "--help"],
                         cwd=REPO, capture_output=True, text=True, check=False, timeout=60)
    return "--leader-lease" in res.stdout and "--leader-identity" in res.stdout


class Stack:
    """The run's stack on `cluster`: `setup` brings it up and returns its checker,
    `teardown` takes down all it made (also after a failed setup). `nodes` and
    `replicas` are filled by `setup`; the other parts of the run are given them."""

    def __init__(self, cluster: ControlPlane, cfg: SoakConfig, names: RunNames) -> None:
        self.cluster = cluster
        self.cfg = cfg
        self.names = names
        self.node_api = FakeNodes(cluster.api_client())
        self.nodes: list[str] = []
        self.replicas: list[Replica] = []
        self.default_scheduler: ManagedProcess | None = None  # only if the soak started it
        self.api_cut: ApiCut | None = None  # the extenders' way to the API (watch cuts)
        self.checker: Checker | None = None

    def setup(self) -> Checker:
        cfg, names = self.cfg, self.names
        if cfg.replicas > 1:
            check_unshare()
            if cfg.leader_flags and not extender_has_leader_flags():
                raise RuntimeError(
                    "replicas=2 needs the extender's active/standby mode (serve "
                    "--leader-lease NAMESPACE/NAME --leader-identity NAME), which this "
                    "tree does not have yet")
        k = kube()
        for ns in names.all_namespaces:
            k.core.create_namespace({"metadata": {"name": ns, "labels": names.node_label}},
                                    _preload_content=False)
        taint = {"key": "soak", "value": names.run_id, "effect": "NoSchedule"}
        for i in range(cfg.nodes):
            self.nodes.append(self.node_api.add_node(
                f"{names.run_id}-n{i}", cpu=str(cfg.node_cpu),
                memory=f"{cfg.node_memory_gi}Gi", labels=names.node_label, taints=[taint]))
        for ns in names.all_namespaces:  # pods are refused until the SA exists
            deadline = time.monotonic() + 60
            while True:
                try:
                    k.core.read_namespaced_service_account("default", ns,
                                                           _preload_content=False)
                    break
                except ApiException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        self.create_priority_classes()
        checker = self.checker = Checker(
            self.cluster.api_client(), cfg.partial_window,
            node_selector=f"soak={names.run_id}",
            partial_grace_factor=cfg.partial_grace_factor,
            default_timeout=_flag(cfg.extender_args, "--default-timeout", 60.0),
            gang_scheduler=names.scheduler_name, race_window=cfg.race_window).start()
        if cfg.watch_cut_every > 0:
            self.api_cut = ApiCut(self.cluster.apiserver_port).start()
        for i in range(cfg.replicas):
            self.replicas.append(self._start_replica(i))
        if cfg.neighbour_every > 0 and cfg.direct_fraction < 1:
            mine = self.cluster.processes.get("kube-scheduler")  # the session's, in pytest
            if mine is None or not mine.running():
                self.default_scheduler = self.cluster.start_default_scheduler(
                    f"{names.run_id}-default-scheduler")
        return checker

    def processes(self) -> list[ManagedProcess]:
        """The soak's own processes, the ones its chaos kills and its supervision
        restarts."""
        out: list[ManagedProcess] = []
        for r in self.replicas:
            out += [r.scheduler, r.extender]
        if self.default_scheduler is not None:
            out.append(self.default_scheduler)
        return out

    def _start_replica(self, i: int) -> Replica:
        cfg, names = self.cfg, self.names
        two = cfg.replicas > 1
        suffix = f"-{i}" if two else ""
        hostname = f"{names.run_id}-r{i}"
        port = free_port()
        args = [*cfg.extender_args, "--scheduler-name", names.scheduler_name]
        if two and cfg.leader_flags:
            args += ["--leader-lease", f"{names.aux_ns}/{LEASE}", "--leader-identity", hostname]
        else:
            # No lease to follow: the shipped default lease does not exist here, and an
            # extender following it would wait as a standby forever.
            args += ["--leader-lease", "off"]
        argv = [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig",
                str(self._extender_kubeconfig()), "--listen", f"127.0.0.1:{port}", *args]
        extender = self.cluster.start_process(
            argv, f"{names.run_id}-extender{suffix}", cwd=REPO,
            ready=http_ok(f"http://127.0.0.1:{port}{cfg.extender_ready_path}"),
            ready_timeout=60)
        config = scheduler_config(port)
        config["profiles"][0]["schedulerName"] = names.scheduler_name
        uts_hostname: str | None = None
        if two:
            d = cfg.lease_duration
            config["leaderElection"] = {
                "leaderElect": True, "resourceLock": "leases", "resourceName": LEASE,
                "resourceNamespace": names.aux_ns, "leaseDuration": f"{d:g}s",
                "renewDeadline": f"{round(d * 0.7, 1):g}s", "retryPeriod": "1s"}
            uts_hostname = hostname
        scheduler = self.cluster.start_scheduler(
            config, f"{names.run_id}-kube-scheduler{suffix}", hostname=uts_hostname)
        return Replica(i, hostname, port, extender, scheduler)

    def _extender_kubeconfig(self) -> Path:
        """The cluster's kubeconfig, or with watch cuts a copy that points at the cut's
        proxy (the extenders alone go through it)."""
        if self.api_cut is None:
            return Path(self.cluster.kubeconfig)
        path = Path(self.cluster.kubeconfig).with_name(
            f"{self.names.run_id}-via-cut.kubeconfig")
        if not path.exists():
            cfg = yaml.safe_load(Path(self.cluster.kubeconfig).read_text())
            for c in cfg["clusters"]:
                c["cluster"]["server"] = f"https://127.0.0.1:{self.api_cut.port}"
            path.write_text(yaml.safe_dump(cfg))
        return path

    def create_priority_classes(self) -> None:
        sched = client.SchedulingV1Api(kube().api)
        for i, name in enumerate(priority_classes(self.cfg, self.names.run_id)):
            never = name.endswith("-never")
            body: dict[str, Any] = {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name, "labels": self.names.node_label},
                "value": 100 * (self.cfg.priorities if never else i + 1)}
            if never:
                body["preemptionPolicy"] = "Never"
            retry(lambda b=body: sched.create_priority_class(  # type: ignore[misc]
                b, _preload_content=False), f"create PriorityClass {name}")

    # ----- the extenders' own view ------------------------------------------------------------

    def debug(self, replica: Replica, path: str = "/debug/gangs") -> dict[str, Any]:
        """A debug view of `replica`'s extender."""
        url = f"http://127.0.0.1:{replica.port}{path}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    def leftover(self) -> dict[str, Any]:
        """What the extenders still hold about this run: queue, reservations, held binds,
        Bindings in flight, backoffs, and PodGroups of the run's namespaces (keys
        prefixed `r<i>:` with two replicas)."""
        out: dict[str, Any] = {}
        for r in self.replicas:
            pre = f"r{r.index}:" if len(self.replicas) > 1 else ""
            try:
                d = self.debug(r)
                groups = self.debug(r, "/debug/podgroups").get("podGroups") or []
            except Exception as e:
                out[pre + "error"] = repr(e)
                continue
            for k, v in d.items():
                if v and k in ("queue", "reservations", "waitingBinds", "bindingsInFlight",
                               "backoff"):
                    out[pre + k] = v
            mine = [g["gang"] for g in groups
                    if str(g.get("gang", "")).startswith(self.names.run_id)]
            if mine:
                out[pre + "podGroups"] = mine
        return out

    def teardown(self) -> None:
        for p in self.processes():
            with contextlib.suppress(Exception):
                p.stop()
        if self.api_cut is not None:
            self.api_cut.stop()
        k = kube()
        for ns in self.names.all_namespaces:
            with contextlib.suppress(Exception):
                k.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0,
                                                        _preload_content=False)
            with contextlib.suppress(Exception):
                k.core.delete_namespace(ns, _preload_content=False)
        for n in self.nodes:
            with contextlib.suppress(Exception):
                self.node_api.delete_node(n)
        sched = client.SchedulingV1Api(k.api)
        for name in priority_classes(self.cfg, self.names.run_id):
            with contextlib.suppress(Exception):
                sched.delete_priority_class(name, _preload_content=False)

"""The gang scheduler as users run it, on the local control plane: our extender process
plus a stock kube-scheduler with the single profile `gang-scheduler` (design 1), and a
watch-based recorder of every binding and phase change for invariant checks.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest
import yaml

from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.k8s import watch
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.queries import pod_nodes
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from extender.core.model.sources import membership

REPO = Path(__file__).resolve().parents[1]
GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def scheduler_config(port: int) -> dict[str, Any]:
    """The KubeSchedulerConfiguration `deploy/` ships, read from it, with the extender
    entries pointed at `port`: tests and benchmarks run the scheduler as shipped.

    Its `leaderElection` (a lease in the install's namespace) is dropped: one local
    scheduler needs none (the harness then sets leaderElect: false); tests of failover
    set their own.
    """
    cfg: dict[str, Any] = yaml.safe_load((REPO / "deploy" / "scheduler-config.yaml").read_text())
    cfg.pop("leaderElection", None)
    for entry in cfg["extenders"]:
        entry["urlPrefix"] = f"http://127.0.0.1:{port}"
    return cfg


@dataclass
class GangStack:
    cluster: ControlPlane
    port: int
    extender: ManagedProcess
    scheduler: ManagedProcess
    extra_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:
            body = resp.read()
        return json.loads(body) if path.startswith("/debug") else body.decode()

    def post(self, path: str, body: bytes) -> tuple[int, Any]:
        req = urllib.request.Request(self.url + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def debug(self) -> dict[str, Any]:
        out: dict[str, Any] = self.get("/debug/gangs")
        return out

    def logs(self) -> list[ManagedProcess]:
        return [self.extender, self.scheduler]


def start_extender(cluster: Cluster, port: int, args: list[str], name: str) -> ManagedProcess:
    """The extender for a kube-scheduler started with :func:`scheduler_config`, which has
    no leader election: so ``--leader-lease off`` unless ``args`` name a lease."""
    lease = [] if any(a.startswith("--leader-lease") for a in args) else ["--leader-lease",
                                                                          "off"]
    argv = [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig",
            str(cluster.kubeconfig), "--listen", f"127.0.0.1:{port}", *lease, *args]
    return cluster.start_process(argv, name, cwd=REPO,
                                 ready=http_ok(f"http://127.0.0.1:{port}/readyz"),
                                 ready_timeout=30)


# Test-friendly defaults: short backoff so backoff behaviour is observable in seconds.
DEFAULT_ARGS = ["--default-timeout", "30", "--backoff-base", "2", "--backoff-cap", "8"]


@pytest.fixture(scope="session")
def gang_stack(control_plane: Cluster) -> Iterator[GangStack]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("the gang stack is deployed by deploy/ on external clusters")
    port = free_port()
    ext = start_extender(control_plane, port, DEFAULT_ARGS, "gang-extender")
    sched = control_plane.start_scheduler(scheduler_config(port), "gang-kube-scheduler")
    stack = GangStack(control_plane, port, ext, sched, list(DEFAULT_ARGS))
    yield stack
    for p in (sched, ext):
        with contextlib.suppress(Exception):
            p.stop()


@pytest.fixture
def gang(gang_stack: GangStack) -> Iterator[GangStack]:
    """The session's gang stack, made sure to be up (a test may have killed a part)."""
    if not gang_stack.extender.running():
        gang_stack.extender.restart()
        gang_stack.extender.wait_ready(30)
    if not gang_stack.scheduler.running():
        gang_stack.scheduler.restart()
        gang_stack.scheduler.wait_ready(60)
    yield gang_stack


def _group_of(pod: Any) -> str | None:
    """The name of the group the pod joins, whatever its source (the extender's own rule,
    extender/core/model/sources.py)."""
    group = pod.spec.scheduling_group
    m = membership(pod.metadata.labels or {}, pod.metadata.annotations or {},
                   (group.pod_group_name or "") if group is not None else "")
    return m.name if m is not None else None


@dataclass
class PodRecord:
    node: str = ""
    bound_at: float | None = None
    phase: str = "Pending"
    phase_at: dict[str, float] = field(default_factory=dict)
    group: str | None = None


class Recorder:
    """Watches the pods of one namespace and records when each was bound and changed
    phase, from the API's own event stream, so invariants are checked on every change
    rather than on samples."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.pods: dict[str, PodRecord] = {}
        self.history: list[tuple[float, str, str, str]] = []  # (t, pod, what, value)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def __enter__(self) -> Self:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _run(self) -> None:
        core = kube().core
        rv = core.list_namespaced_pod(self.namespace).metadata.resource_version
        self._ready.set()
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(core.list_namespaced_pod, self.namespace,
                                   resource_version=rv, timeout_seconds=5):
                    pod = ev["object"]
                    rv = pod.metadata.resource_version
                    self._observe(pod)
                    if self._stop.is_set():
                        break
            except Exception:
                rv = core.list_namespaced_pod(self.namespace).metadata.resource_version
            finally:
                w.stop()

    def _observe(self, pod: Any) -> None:
        now = time.monotonic()
        name = pod.metadata.name
        with self._lock:
            rec = self.pods.setdefault(name, PodRecord())
            rec.group = _group_of(pod)
            if pod.spec.node_name and rec.bound_at is None:
                rec.node, rec.bound_at = pod.spec.node_name, now
                self.history.append((now, name, "bound", pod.spec.node_name))
            phase = (pod.status.phase if pod.status else None) or "Pending"
            if phase != rec.phase:
                rec.phase = phase
                rec.phase_at.setdefault(phase, now)
                self.history.append((now, name, "phase", phase))

    def bound(self, group: str | None = None) -> dict[str, PodRecord]:
        with self._lock:
            return {n: r for n, r in self.pods.items()
                    if r.bound_at is not None and (group is None or r.group == group)}

    def bind_times(self, group: str) -> list[float]:
        return sorted(r.bound_at for r in self.bound(group).values() if r.bound_at is not None)

    def assert_never_partial(self, group: str, min_member: int, window: float = 2.0) -> None:
        """Bindings of a gang's quorum come as one burst: the first `min_member` bindings
        fall within `window` seconds (separate API calls cannot be simultaneous), and
        never fewer than `min_member` members end up bound."""
        times = self.bind_times(group)
        if not times:
            return
        assert len(times) >= min_member, (
            f"gang {group}: only {len(times)} of {min_member} members were ever bound: "
            f"{self.history}"
        )
        spread = times[min_member - 1] - times[0]
        assert spread <= window, (
            f"gang {group}: its quorum of {min_member} was bound over {spread:.2f}s "
            f"(more than {window}s: partially bound in between)"
        )


# A member asking for a hostPort that is taken on every node is never offered to the
# extender (kube-scheduler's own NodePorts filter rejects it, and the extender does not
# model ports), so a reservation that includes it stays assembling until its deadline.
# Deleting the blockers lets it through.
PORT = 9000


def time_ordinary_gang(rec: Recorder, gang: GangStack, ns: str, **group: Any) -> float:
    """Places the ordinary gang the hostile-input tests set beside what they test (PodGroup
    `ordinary`, 2 members of 100m cpu; `group`: more of its PodGroup's fields) and returns
    the seconds from creating it to both members bound."""
    created = time.monotonic()
    create_podgroup(ns, "ordinary", 2, timeout=30, **group)
    for i in range(2):
        create_pod(ns, f"ordinary-{i}", cpu="100m", scheduler_name=GANG_SCHEDULER,
                   pod_group="ordinary")
    wait_for(lambda: len(rec.bound("ordinary")) == 2 or NotYet(pod_nodes(ns)), 60,
             "the ordinary gang bound", logs=gang.logs())
    return max(rec.bind_times("ordinary")) - created


def port_pod(ns: str, name: str, *, node: str | None = None, group: str | None = None,
             cpu: str = "0") -> None:
    """A pod holding hostPort 9000: pinned to `node` (a blocker), or a gang member."""
    labels = {GANG_LABEL: group} if group else {}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "1d"],
                        "ports": [{"containerPort": PORT, "hostPort": PORT}],
                        "resources": {"requests": {"cpu": cpu, "memory": "0"}}}],
        "terminationGracePeriodSeconds": 0,
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = "gang-scheduler"
    kube().core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels}, "spec": spec}, _preload_content=False)


def block_ports(ns: str, nodes: list[str]) -> list[str]:
    names = [f"blocker-{n}" for n in nodes]
    for name, node in zip(names, nodes, strict=True):
        port_pod(ns, name, node=node)
    return names

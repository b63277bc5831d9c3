"""pytest fixtures and helpers for end-to-end tests against a real control plane.

Fixtures (import them in a ``conftest.py``; ``e2e/conftest.py`` does):

* ``control_plane`` (session): a started :class:`ControlPlane`, or an
  :class:`ExternalCluster` when ``$E2E_KUBECONFIG`` is set (kind, a dev cluster).
* ``local_control_plane`` (function): the same, but skips under ``$E2E_KUBECONFIG``; for
  tests that start their own kube-scheduler.
* ``kube`` (session): :class:`Kube`, API objects bound to the admin client.
* ``default_scheduler`` (session): the cluster's main scheduler (``default-scheduler``).
* ``fake_kubelet`` (session): :class:`FakeKubelet` (node CRUD + the kubelet process).
* ``fake_nodes`` (function): node CRUD whose nodes (and their pods) are deleted after the
  test. Prefer it over ``fake_kubelet`` so tests do not see each other's nodes.
* ``namespace`` (function): a fresh namespace, deleted afterwards.

Helpers are plain functions on the cluster chosen by the ``control_plane`` fixture (or
:func:`use_cluster` outside pytest, e.g. for demos and benchmarks). They take and return
plain JSON dicts, the shape ``kubectl get -o json`` shows.

Skipping: if the binaries cannot be obtained the tests *fail*, unless ``E2E_SKIP=1``, which
turns that into a skip with the reason. CI must not skip silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import pprint
import re
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .base import HarnessError
from .binaries import find_etcd, find_k8s_bin
from .cluster import ControlPlane
from .clusterbase import Cluster, ExternalCluster
from .fakekubelet import FakeKubelet
from .k8s import ApiException, client
from .kubeletpod import ANN_FAIL, ANN_RENDEZVOUS, ANN_RENDEZVOUS_SIZE, ANN_RUN_SECONDS
from .process import ManagedProcess, tail_file

T = TypeVar("T")

GANG_SCHEDULER = "gang-scheduler"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
DEFAULT_IMAGE = os.environ.get("E2E_IMAGE", "busybox:1.36")
"""Ignored by the fake kubelet; on a real cluster (kind) the container really runs."""

LOG_LINES = int(os.environ.get("E2E_LOG_LINES", "25"))


# ----------------------------------------------------------------------------------------
# The current cluster (set by the control_plane fixture or use_cluster)


@dataclass
class Kube:
    """Admin API objects for one cluster (the client is shared, thread-safe)."""

    api: Any
    core: Any
    batch: Any
    apps: Any
    custom: Any
    events: Any


_cluster: Cluster | None = None
_kube: Kube | None = None


def use_cluster(cluster: Cluster) -> Kube:
    """Make ``cluster`` the target of the helper functions; returns its API objects."""
    global _cluster, _kube
    api = cluster.api_client()
    _cluster = cluster
    _kube = Kube(api, client.CoreV1Api(api), client.BatchV1Api(api), client.AppsV1Api(api),
                 client.CustomObjectsApi(api), client.EventsV1Api(api))
    return _kube


@contextlib.contextmanager
def cluster_in_use(cluster: Cluster) -> Iterator[Kube]:
    """Point the helpers at ``cluster`` for a block, then back at the one before: for a
    test module that runs a control plane of its own (other gates) beside the session's."""
    global _cluster, _kube
    before = _cluster, _kube
    k = use_cluster(cluster)
    try:
        yield k
    finally:
        k.api.close()
        _cluster, _kube = before


def kube() -> Kube:
    """API objects of the current cluster."""
    if _kube is None:
        raise RuntimeError("no cluster: use the control_plane fixture or use_cluster()")
    return _kube


def current_cluster() -> Cluster:
    """The cluster the helpers talk to."""
    if _cluster is None:
        raise RuntimeError("no cluster: use the control_plane fixture or use_cluster()")
    return _cluster


def _json(resp: Any) -> Any:
    return json.loads(resp.data)


# ----------------------------------------------------------------------------------------
# wait_for


class NotYet:
    """A falsy predicate result that carries the state observed, for the failure message.

    ``return NotYet({"phase": phase})`` from a predicate reads better in a failure than
    ``False``.
    """

    def __init__(self, state: object) -> None:
        self.state = state

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return pprint.pformat(self.state, width=100)


class WaitTimeout(AssertionError):
    """``wait_for`` gave up; the message has the description, last state and log tails."""


LogSource = ManagedProcess | str | Path


def logs_text(logs: Sequence[LogSource] | None = None, lines: int = LOG_LINES) -> str:
    """Tails of the given logs, or of every process of the current cluster when None.

    Strings name processes of the current cluster (``"kube-scheduler"``) or are paths.
    """
    if logs is None:
        return current_cluster().log_tails(lines) if _cluster is not None else ""
    parts = []
    for src in logs:
        if isinstance(src, ManagedProcess):
            parts.append(f"----- {src!r} -----\n{src.log_tail(lines)}")
        elif isinstance(src, str) and _cluster is not None and src in _cluster.processes:
            parts.append(_cluster.log_tails(lines, names=[src]))
        else:
            parts.append(f"----- {src} -----\n{tail_file(Path(src), lines)}")
    return "\n".join(parts)


def wait_for(
    predicate: Callable[[], T | NotYet],
    timeout: float = 30.0,
    description: str = "condition",
    logs: Sequence[LogSource] | None = None,
    interval: float = 0.2,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that (never a
    :class:`NotYet`, which is always falsy).

    Exceptions from the predicate (an API 404 while an object is being created) count as
    "not yet" and are shown as the last state. On timeout raises :class:`WaitTimeout` with
    the description, the last observed state (the last falsy return, e.g. a
    :class:`NotYet`, or exception) and the log tails of ``logs`` (default: every process of
    the current cluster: apiserver, schedulers, extender, fake kubelet).
    """
    deadline = time.monotonic() + timeout
    last: object = "<predicate never returned>"
    while True:
        try:
            result = predicate()
            if result and not isinstance(result, NotYet):
                return result
            last = result
        except Exception as e:  # reported as the last state
            last = f"exception: {e!r}"
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    state = last if isinstance(last, str) else pprint.pformat(last, width=100)
    raise WaitTimeout(
        f"timed out after {timeout:.0f}s waiting for: {description}\n"
        f"last observed state:\n{state}\n{logs_text(logs)}"
    )


# ----------------------------------------------------------------------------------------
# Object helpers


def pod_spec(
    cpu: str = "100m",
    memory: str = "64Mi",
    gpus: int = 0,
    scheduler_name: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    image: str = DEFAULT_IMAGE,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str | None = None,
    restart_policy: str = "Never",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A one-container pod spec requesting ``cpu``/``memory``/``gpus`` (limits for GPUs).

    The container really sleeps ``run_seconds`` (then exits 0, or 1 with ``fail``) so the
    same test behaves alike on kind; the fake kubelet reads the annotations instead.
    """
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    script = f"sleep {run_seconds:g}" if run_seconds is not None else "sleep 2147483647"
    if fail:
        script += "; exit 1"
    container: dict[str, Any] = {
        "name": "main", "image": image, "command": ["sh", "-c", script],
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }
    spec: dict[str, Any] = {
        "containers": [container], "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 1,
    }
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority_class:
        spec["priorityClassName"] = priority_class
    spec.update(extra or {})
    return spec


def pod_metadata(
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    pod_group: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    rendezvous: str | None = None,
    rendezvous_size: int | None = None,
) -> dict[str, Any]:
    """Labels and annotations, including the fake-kubelet and PodGroup conventions."""
    lab = dict(labels or {})
    if pod_group:
        lab[POD_GROUP_LABEL] = pod_group
    ann = dict(annotations or {})
    if run_seconds is not None:
        ann[ANN_RUN_SECONDS] = f"{run_seconds:g}"
    if fail:
        ann[ANN_FAIL] = "true"
    if rendezvous is not None:
        if rendezvous_size is None:
            raise ValueError("rendezvous needs rendezvous_size")
        ann[ANN_RENDEZVOUS] = rendezvous
        ann[ANN_RENDEZVOUS_SIZE] = str(rendezvous_size)
    md: dict[str, Any] = {}
    if lab:
        md["labels"] = lab
    if ann:
        md["annotations"] = ann
    return md


def create_pod(
    ns: str,
    name: str,
    cpu: str = "100m",
    memory: str = "64Mi",
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    pod_group: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    rendezvous: str | None = None,
    rendezvous_size: int | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str | None = None,
    image: str = DEFAULT_IMAGE,
    spec_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Create a bare pod and return it as JSON.

    ``pod_group`` sets the ``scheduling.x-k8s.io/pod-group`` label; ``run_seconds``,
    ``fail``, ``rendezvous``/``rendezvous_size`` set the fake-kubelet annotations;
    ``scheduler_name`` e.g. :data:`GANG_SCHEDULER`; ``spec_extra`` merges into the spec
    (affinity, overhead, ...).
    """
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **pod_metadata(
            labels, annotations, pod_group, run_seconds, fail, rendezvous, rendezvous_size)},
        "spec": pod_spec(cpu, memory, gpus, scheduler_name, run_seconds, fail, image,
                         node_selector, tolerations, priority_class, extra=spec_extra),
    }
    out: dict[str, Any] = _json(kube().core.create_namespaced_pod(
        ns, body, _preload_content=False))
    return out


def create_job(
    ns: str,
    name: str,
    parallelism: int,
    completions: int | None = None,
    template: Mapping[str, Any] | None = None,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    pod_group: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    rendezvous: str | None = None,
    rendezvous_size: int | None = None,
    backoff_limit: int = 6,
    completion_mode: str | None = None,
    job_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Create a batch/v1 Job (the shape gang users submit) and return it as JSON.

    ``template`` replaces the generated pod template entirely; otherwise one is built from
    the same keywords as :func:`create_pod` (restartPolicy Never). ``completions`` defaults
    to ``parallelism``.
    """
    if template is None:
        template = {
            "metadata": pod_metadata(labels, annotations, pod_group, run_seconds, fail,
                                     rendezvous, rendezvous_size),
            "spec": pod_spec(cpu, memory, gpus, scheduler_name, run_seconds, fail),
        }
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "completions": completions if completions is not None else parallelism,
        "backoffLimit": backoff_limit,
        "template": dict(template),
    }
    if completion_mode:
        spec["completionMode"] = completion_mode
    spec.update(job_extra or {})
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}
    out: dict[str, Any] = _json(kube().batch.create_namespaced_job(
        ns, body, _preload_content=False))
    return out


def create_podgroup(
    ns: str,
    name: str,
    min_member: int,
    timeout: int | None = None,
    min_resources: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Create a ``scheduling.x-k8s.io/v1alpha1`` PodGroup; ``timeout`` is
    ``spec.scheduleTimeoutSeconds``; ``annotations``, e.g. the topology ones."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    if min_resources:
        spec["minResources"] = dict(min_resources)
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    body = {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": meta,
            "spec": spec}
    out: dict[str, Any] = _json(kube().custom.create_namespaced_custom_object(
        PG_GROUP, PG_VERSION, ns, PG_PLURAL, body, _preload_content=False))
    return out


def _get_or_none(fn: Callable[[], Any]) -> dict[str, Any] | None:
    try:
        out: dict[str, Any] = _json(fn())
        return out
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def served_workload_version() -> str | None:
    """The version of scheduling.k8s.io whose PodGroups the cluster serves, newest first
    (no release serves both), or None."""
    return next((v for v in ("v1beta1", "v1alpha2") if workload_api_served(v)), None)


def workload_api_served(version: str = "v1alpha2") -> bool:
    """Whether the cluster serves the upstream Workload API's PodGroups in `version` of
    scheduling.k8s.io: v1alpha2 on 1.36, v1beta1 on 1.37 (the local control plane serves
    its release's, harness/versions.py)."""
    try:
        kube().custom.list_cluster_custom_object("scheduling.k8s.io", version, "podgroups",
                                                 limit=1)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def get_pod(ns: str, name: str) -> dict[str, Any] | None:
    """The pod as JSON, or None if it does not exist."""
    return _get_or_none(lambda: kube().core.read_namespaced_pod(
        name, ns, _preload_content=False))


def get_job(ns: str, name: str) -> dict[str, Any] | None:
    """The Job as JSON, or None."""
    return _get_or_none(lambda: kube().batch.read_namespaced_job(
        name, ns, _preload_content=False))


def get_podgroup(ns: str, name: str) -> dict[str, Any] | None:
    """The PodGroup as JSON, or None."""
    return _get_or_none(lambda: kube().custom.get_namespaced_custom_object(
        PG_GROUP, PG_VERSION, ns, PG_PLURAL, name, _preload_content=False))


def list_pods(ns: str, label_selector: str | None = None) -> list[dict[str, Any]]:
    """Pods of a namespace as JSON (one LIST)."""
    kw = {"label_selector": label_selector} if label_selector else {}
    items: list[dict[str, Any]] = _json(kube().core.list_namespaced_pod(
        ns, _preload_content=False, **kw))["items"]
    return items


def pod_phases(ns: str, label_selector: str | None = None) -> dict[str, str]:
    """``{pod name: phase}``; handy as the state shown by a failing :func:`wait_for`."""
    return {p["metadata"]["name"]: (p.get("status") or {}).get("phase", "?")
            for p in list_pods(ns, label_selector)}


def pod_nodes(ns: str, label_selector: str | None = None) -> dict[str, str]:
    """``{pod name: node name or ""}``."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or ""
            for p in list_pods(ns, label_selector)}


def job_condition(job: Mapping[str, Any] | None, cond_type: str) -> bool:
    """True if the Job has condition ``cond_type`` (e.g. "Complete", "Failed") True."""
    if not job:
        return False
    return any(c.get("type") == cond_type and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def delete_pod(ns: str, name: str, grace_seconds: int = 0) -> None:
    """Delete a pod (404 ignored)."""
    try:
        kube().core.delete_namespaced_pod(name, ns, grace_period_seconds=grace_seconds,
                                          _preload_content=False)
    except ApiException as e:
        if e.status != 404:
            raise


def wait_pods_phase(
    ns: str,
    phase: str,
    count: int,
    label_selector: str | None = None,
    timeout: float = 30.0,
    logs: Sequence[LogSource] | None = None,
) -> dict[str, str]:
    """Wait until at least ``count`` pods (matching the selector) are in ``phase``."""

    def check() -> dict[str, str] | NotYet:
        phases = pod_phases(ns, label_selector)
        n = sum(1 for p in phases.values() if p == phase)
        return phases if n >= count else NotYet(phases)

    result = wait_for(check, timeout, f"{count} pods of {ns} ({label_selector or 'all'}) "
                      f"in phase {phase}", logs)
    assert isinstance(result, dict)  # NotYet is falsy, so never returned
    return result


# ----------------------------------------------------------------------------------------
# Fixtures


def _obtain_cluster() -> Cluster:
    kubeconfig = os.environ.get("E2E_KUBECONFIG")
    if kubeconfig:
        return ExternalCluster(Path(kubeconfig))
    try:
        bin_dir, etcd = find_k8s_bin(), find_etcd()
    except HarnessError as e:
        if os.environ.get("E2E_SKIP") == "1":
            pytest.skip(f"E2E_SKIP=1 and control-plane binaries unavailable: {e}")
        pytest.fail(f"cannot obtain control-plane binaries: {e}\n(run e2e/setup-deps.sh, or "
                    "set E2E_SKIP=1 to skip e2e tests on this machine)", pytrace=False)
    # The upstream Workload API served, so the gang sources' e2e tests can use it
    # (e2e/tests/test_gang_sources.py); the schedulers run without its gates.
    return ControlPlane(bin_dir, etcd, workload_api=True).start()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Cluster]:
    """The cluster for the session: started locally, or external via $E2E_KUBECONFIG."""
    global _cluster, _kube
    cluster = _obtain_cluster()
    try:
        use_cluster(cluster)
        yield cluster
    finally:
        if _kube is not None:
            _kube.api.close()
        _cluster = _kube = None
        cluster.stop()


@pytest.fixture
def local_control_plane(control_plane: Cluster) -> ControlPlane:
    """The local control plane; skips when running against $E2E_KUBECONFIG."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane (E2E_KUBECONFIG is set)")
    return control_plane


@pytest.fixture(scope="session", name="kube")
def kube_fixture(control_plane: Cluster) -> Kube:
    """Admin API objects (core, batch, apps, custom, events) for the session cluster."""
    return kube()


@pytest.fixture(scope="session")
def default_scheduler(control_plane: Cluster) -> ManagedProcess | None:
    """The main scheduler (profile ``default-scheduler``); None on an external cluster,
    which has its own."""
    if isinstance(control_plane, ControlPlane):
        return control_plane.start_default_scheduler()
    return None


class _NoFakeKubelet:
    """Stand-in on external clusters: fake nodes would never run anything there."""

    external = True

    def _skip(self, *_: Any, **__: Any) -> Any:
        pytest.skip("fake nodes need the local control plane (E2E_KUBECONFIG is set)")

    add_node = delete_node = cordon = uncordon = set_ready = _skip


@pytest.fixture(scope="session")
def fake_kubelet(control_plane: Cluster) -> Iterator[FakeKubelet | _NoFakeKubelet]:
    """The fake kubelet process plus node CRUD (``add_node``, ``cordon``, ...).

    On an external cluster node methods skip the test (real kubelets run pods there).
    """
    if not isinstance(control_plane, ControlPlane):
        yield _NoFakeKubelet()
        return
    fk = FakeKubelet(control_plane).start()
    try:
        yield fk
    finally:
        fk.stop()


class NodeSet:
    """Per-test node CRUD: nodes added here (and their pods) are removed after the test."""

    def __init__(self, fk: FakeKubelet | _NoFakeKubelet) -> None:
        self.fk = fk
        self.added: list[str] = []

    @property
    def external(self) -> bool:
        """True on an external cluster, where ``add_node`` skips."""
        return isinstance(self.fk, _NoFakeKubelet)

    def add_node(
        self,
        name: str,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: int = 110,
        gpus: int = 0,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        extra_resources: Mapping[str, str] | None = None,
    ) -> str:
        """See :meth:`e2e.harness.fakenodes.FakeNodes.add_node`."""
        out: str = self.fk.add_node(name, cpu, memory, pods, gpus, labels, taints,
                                    extra_resources)
        self.added.append(out)
        return out

    def add_nodes(self, count: int, prefix: str = "node", **shape: Any) -> list[str]:
        """``count`` identical nodes named ``<prefix>-<i>``."""
        return [self.add_node(f"{prefix}-{i}", **shape) for i in range(count)]

    def delete_node(self, name: str, evict_pods: bool = True) -> None:
        """Delete a node (and by default force-delete its pods)."""
        self.fk.delete_node(name, evict_pods)
        if name in self.added:
            self.added.remove(name)

    def cordon(self, name: str) -> None:
        """Mark unschedulable."""
        self.fk.cordon(name)

    def uncordon(self, name: str) -> None:
        """Mark schedulable."""
        self.fk.uncordon(name)

    def set_ready(self, name: str, ready: bool) -> None:
        """Flip Ready and the not-ready taint."""
        self.fk.set_ready(name, ready)

    def cleanup(self) -> None:
        """Delete every node this test added, with its pods."""
        for n in list(self.added):
            self.delete_node(n)


@pytest.fixture
def fake_nodes(fake_kubelet: FakeKubelet | _NoFakeKubelet) -> Iterator[NodeSet]:
    """Node CRUD scoped to one test (nodes removed afterwards)."""
    nodes = NodeSet(fake_kubelet)
    try:
        yield nodes
    finally:
        nodes.cleanup()


def _ns_name(test_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"e2e-{base}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(request: pytest.FixtureRequest, control_plane: Cluster) -> Iterator[str]:
    """A fresh namespace named after the test, with its ``default`` service account ready.

    Waiting for the service account matters: the ServiceAccount admission plugin rejects
    pods created before the controller made it.

    Teardown empties the namespace itself (Jobs, PodGroups, then pods with grace 0) and
    waits up to ``$E2E_NS_DELETE_WAIT`` seconds (default 10) for the pods to be gone, so
    the next test starts with free capacity; then deletes the namespace without waiting.
    The namespace controller processes every namespace event 5 s late
    (``namespaceDeletionGracePeriod``), so waiting for the namespace itself would add 5 s
    to every test for nothing.
    """
    k = kube()
    name = _ns_name(request.node.name)
    k.core.create_namespace({"metadata": {"name": name, "labels": {"e2e": "true"}}},
                            _preload_content=False)

    def sa_ready() -> bool:
        k.core.read_namespaced_service_account("default", name, _preload_content=False)
        return True

    wait_for(sa_ready, 30, f"service account default in namespace {name}",
             logs=["kube-controller-manager"] if not control_plane.external else [])
    try:
        yield name
    finally:
        _empty_and_delete_namespace(k, name)


def _empty_and_delete_namespace(k: Kube, name: str) -> None:
    def attempt(fn: Callable[[], Any]) -> None:
        try:
            fn()
        except ApiException as e:
            if e.status not in (404, 405):
                raise

    attempt(lambda: k.batch.delete_collection_namespaced_job(
        name, propagation_policy="Background", _preload_content=False))
    attempt(lambda: k.custom.delete_collection_namespaced_custom_object(
        PG_GROUP, PG_VERSION, name, PG_PLURAL, _preload_content=False))
    attempt(lambda: k.core.delete_collection_namespaced_pod(
        name, grace_period_seconds=0, _preload_content=False))
    deadline = time.monotonic() + float(os.environ.get("E2E_NS_DELETE_WAIT", "10"))
    while time.monotonic() < deadline:
        try:
            if not list_pods(name):
                break
        except ApiException:
            break
        time.sleep(0.1)
    attempt(lambda: k.core.delete_namespace(name, _preload_content=False))

"""pytest fixtures for end-to-end tests against a real control plane.

Fixtures (import them in a ``conftest.py``; ``e2e/conftest.py`` does):

* ``control_plane`` (session): a started :class:`ControlPlane`, or an
  :class:`ExternalCluster` when ``$E2E_KUBECONFIG`` is set (kind, a dev cluster).
* ``local_control_plane`` (function): the same, but skips under ``$E2E_KUBECONFIG``; for
  tests that start their own kube-scheduler.
* ``kube`` (session): :class:`ClusterApis`, API objects bound to the admin client.
* ``default_scheduler`` (session): the cluster's main scheduler (``default-scheduler``).
* ``fake_kubelet`` (session): :class:`FakeKubelet` (node CRUD + the kubelet process).
* ``fake_nodes`` (function): node CRUD whose nodes (and their pods) are deleted after the
  test. Prefer it over ``fake_kubelet`` so tests do not see each other's nodes.
* ``namespace`` (function): a fresh namespace, deleted afterwards.

The helpers tests call live beside it, free of pytest: :mod:`e2e.harness.target` (the
cluster they talk to), :mod:`e2e.harness.objects` (``create_pod``, ``create_job``,
``create_podgroup``), :mod:`e2e.harness.queries` (``get_pod``, ``list_pods``...) and
:mod:`e2e.harness.waiting` (``wait_for``, ``NotYet``). Only the fixtures (and
:class:`NodeSet`, what ``fake_nodes`` gives) are here, the one module that needs pytest.

Skipping: if the binaries cannot be obtained the tests *fail*, unless ``E2E_SKIP=1``, which
turns that into a skip with the reason. CI must not skip silently.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .base import HarnessError
from .binaries import find_etcd, find_k8s_bin
from .cluster import ControlPlane
from .clusterbase import Cluster, ExternalCluster
from .fakekubelet import FakeKubelet
from .k8s import ApiException
from .objects import PG_GROUP, PG_PLURAL, PG_VERSION
from .process import ManagedProcess
from .queries import list_pods
from .target import ClusterApis, kube, release_cluster, use_cluster
from .waiting import wait_for


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
    # (e2e/tests/gangs/test_gang_sources.py); the schedulers run without its gates.
    return ControlPlane(bin_dir, etcd, workload_api=True).start()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Cluster]:
    """The cluster for the session: started locally, or external via $E2E_KUBECONFIG."""
    cluster = _obtain_cluster()
    try:
        use_cluster(cluster)
        yield cluster
    finally:
        release_cluster()
        cluster.stop()


@pytest.fixture
def local_control_plane(control_plane: Cluster) -> ControlPlane:
    """The local control plane; skips when running against $E2E_KUBECONFIG."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane (E2E_KUBECONFIG is set)")
    return control_plane


@pytest.fixture(scope="session", name="kube")
def kube_fixture(control_plane: Cluster) -> ClusterApis:
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


def _empty_and_delete_namespace(k: ClusterApis, name: str) -> None:
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

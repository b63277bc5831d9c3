"""The Cluster Autoscaler, unchanged, as a local process that grows a pool of fake nodes.

Issue 31's gangs ask for capacity with a ProvisioningRequest (``autoscaling.x-k8s.io/v1``);
only the real autoscaler shows that what the extender writes is what the autoscaler reads
and answers. How it runs on the loopback control plane, and why (read from the module's
``cloudprovider/kwok``, ``processors/provreq`` and ``provisioningrequest``):

* Built by ``e2e/build-operator.sh cluster-autoscaler`` from the autoscaler's source at tag
  ``cluster-autoscaler-1.36.1`` with the ``kwok`` build tag (the only cloud provider
  compiled in), next to the ProvisioningRequest CRD of the same source
  (``apis/config/crd``), which :meth:`Autoscaler.install` installs.
* Cloud provider ``kwok``: a node group is a Node template; growing it creates Node
  objects from the template (named ``<group>-<5 random chars>``, annotated
  ``kwok.x-k8s.io/node: fake``, provider ID ``kwok:<name>``); shrinking it deletes them.
  The template here is :func:`~e2e.harness.fakenodes.node_manifest` of the pool's shape:
  labelled for the fake kubelet, Ready. The fake kubelet then runs the pods bound there
  and lifts the ``not-ready`` taint admission gives every new node (the node-lifecycle
  controller that would does not run here). Templates and provider settings are two
  ConfigMaps (``kwok-provider-config``, ``kwok-provider-templates``) in the namespace the
  process is told by ``POD_NAMESPACE``; the group's sizes are annotations on the template.
* ``--enable-provisioning-requests``: each loop the autoscaler takes one request of a
  class it serves (``best-effort-atomic-scale-up`` or ``check-capacity``), sets
  ``Accepted``, simulates the pods of its PodTemplates on the cluster plus what the
  groups could add, and sets ``Provisioned`` (scale-up requested, or capacity already
  there), ``Provisioned=False`` (atomic class: not possible now, retried with backoff,
  ``Failed`` only after a week) or ``Failed`` (check-capacity class: not there now).
  A Provisioned request books its capacity for 10 minutes (then ``BookingExpired``):
  the autoscaler counts it as taken in its own simulations. Pods annotated
  ``autoscaling.x-k8s.io/consume-provisioning-request`` never trigger its ordinary
  scale-up.
* Loops every second (``--scan-interval``); scale-down off unless a test asks for it
  (``scale_down``), so nodes a test waits for are not taken away under it. Metrics and
  health on a free loopback port. Leader election off (one process). Credentials: the
  admin kubeconfig (the release's RBAC is not what is tested here).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.base import HarnessError
from e2e.harness.cluster import ControlPlane
from e2e.harness.crds import install_crds
from e2e.harness.fakenodes import FAKE_NODE_SELECTOR, PROVIDER_NODE_ANNOTATION, node_manifest
from e2e.harness.k8s import ApiException, client
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube

NAMESPACE = "gang-autoscaler"
"""Where the provider's ConfigMaps live (the process's ``POD_NAMESPACE``)."""
POOL_LABEL = "e2e.gang-extender.io/pool"
"""Node label whose value names a node's group (the provider's ``fromNodeLabelKey``)."""
MAX_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/max-count"
MIN_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/min-count"
GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
CRD_NAME = f"{PLURAL}.{GROUP}"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
"""Node annotation (``"true"``): the autoscaler's scale-down leaves the node alone."""


def provider_config() -> dict[str, Any]:
    """The kwok provider's settings: templates from a ConfigMap, groups by
    :data:`POOL_LABEL`, no ``kwok-provider`` taint (the pods here do not tolerate it)."""
    return {"apiVersion": "v1alpha1", "readNodesFrom": "configmap",
            "nodegroups": {"fromNodeLabelKey": POOL_LABEL},
            "nodes": {"skipTaint": True},
            "configmap": {"name": "kwok-provider-templates"}}


def template(pool: str, max_size: int, cpu: str, memory: str) -> dict[str, Any]:
    """The Node every node of ``pool`` is made from (at most ``max_size`` of them)."""
    node = node_manifest(f"{pool}-template", cpu=cpu, memory=memory,
                         labels={POOL_LABEL: pool})
    node["metadata"]["annotations"] = {MIN_ANNOTATION: "0", MAX_ANNOTATION: str(max_size)}
    return node


class Autoscaler:
    """The autoscaler process and its provider ConfigMaps for one pool of fake nodes."""

    name = "real"

    def __init__(self, cp: ControlPlane, bin_dir: Path) -> None:
        self.cp = cp
        self.bin_dir = bin_dir
        self.dir = cp.workdir / "cluster-autoscaler"
        self.proc: ManagedProcess | None = None
        self.settings: tuple[Any, ...] = ()

    def install(self) -> None:
        """The ProvisioningRequest CRD of the same source, and the namespace. Idempotent."""
        install_crds(kube().api, [self.bin_dir / "crds"], timeout=60)
        with contextlib.suppress(ApiException):
            kube().core.create_namespace({"metadata": {"name": NAMESPACE}})

    def uninstall(self, timeout: float = 60.0) -> None:
        """Remove the CRD (and with it every request) and wait until it is gone: the rest
        of a session runs without the API, as it did before."""
        ext = client.ApiextensionsV1Api(kube().api)
        with contextlib.suppress(ApiException):
            ext.delete_custom_resource_definition(CRD_NAME)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ext.read_custom_resource_definition(CRD_NAME)
            except ApiException as e:
                if e.status == 404:
                    return
                raise
            time.sleep(0.2)
        raise HarnessError(f"CRD {CRD_NAME} still there {timeout:g}s after its deletion")

    def _config_maps(self, pool: str, max_size: int, cpu: str, memory: str) -> None:
        nodes = {"apiVersion": "v1", "kind": "List",
                 "items": [template(pool, max_size, cpu, memory)]}
        for name, key, data in (
                ("kwok-provider-config", "config", yaml.safe_dump(provider_config())),
                ("kwok-provider-templates", "templates", yaml.safe_dump(nodes))):
            body = {"metadata": {"name": name}, "data": {key: data}}
            try:
                kube().core.create_namespaced_config_map(NAMESPACE, body)
            except ApiException as e:
                if e.status != 409:
                    raise
                kube().core.replace_namespaced_config_map(name, NAMESPACE, body)

    def start(self, pool: str, max_size: int, cpu: str = "4", memory: str = "16Gi",
              scale_down: float | None = None) -> None:
        """Run with one pool of at most ``max_size`` nodes of ``cpu``/``memory`` (a running
        one with other settings is replaced; the nodes it made stay). ``scale_down``:
        seconds a node must be unneeded before it is removed (default: scale-down off)."""
        wanted = (pool, max_size, cpu, memory, scale_down)
        if self.proc is not None and self.proc.running() and wanted == self.settings:
            return
        self._stop_process()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._config_maps(pool, max_size, cpu, memory)
        port = free_port()
        argv = [str(self.bin_dir / "cluster-autoscaler"), "--cloud-provider=kwok",
                f"--kubeconfig={self.cp.kubeconfig}", f"--namespace={NAMESPACE}",
                f"--address=127.0.0.1:{port}", "--leader-elect=false",
                "--enable-provisioning-requests=true", "--scan-interval=1s",
                "--provisioning-request-initial-backoff-time=2s",
                "--provisioning-request-max-backoff-time=4s",
                "--max-node-provision-time=1m", "--write-status-configmap=false",
                "--logtostderr=true", "--v=2"]
        if scale_down is None:
            argv.append("--scale-down-enabled=false")
        else:
            argv += ["--scale-down-enabled=true", f"--scale-down-unneeded-time={scale_down}s",
                     "--scale-down-delay-after-add=0s", "--scale-down-delay-after-delete=0s",
                     "--scale-down-delay-after-failure=0s", "--unremovable-node-recheck-timeout=1s"]
        env = {"POD_NAMESPACE": NAMESPACE, "KWOK_PROVIDER_MODE": "local"}
        self.proc = self.cp.start_process(argv, "cluster-autoscaler", env=env,
                                          ready=http_ok(f"http://127.0.0.1:{port}/health-check"),
                                          ready_timeout=90)
        self.settings = wanted

    def _stop_process(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.stop()
            self.proc = None
        self.settings = ()

    def stop(self) -> None:
        """Stop the process and delete the nodes it made (their pods go with them)."""
        self._stop_process()
        for name in self.nodes():
            with contextlib.suppress(ApiException):
                kube().core.delete_node(name, grace_period_seconds=0)

    def nodes(self, pool: str | None = None) -> list[str]:
        """Names of the nodes the provider made (of ``pool``, or of any)."""
        selector = FAKE_NODE_SELECTOR + (f",{POOL_LABEL}={pool}" if pool else "")
        resp = kube().core.list_node(label_selector=selector, _preload_content=False)
        return sorted(n["metadata"]["name"] for n in json.loads(resp.data)["items"]
                      if (n["metadata"].get("annotations") or {}).get(PROVIDER_NODE_ANNOTATION)
                      == "fake")


def requests_in(ns: str) -> list[dict[str, Any]]:
    """The ProvisioningRequests of namespace ``ns``."""
    resp = kube().custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL,
                                                       _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def conditions(request: Mapping[str, Any]) -> dict[str, str]:
    """Condition type -> status of a ProvisioningRequest."""
    return {c["type"]: c["status"]
            for c in (request.get("status") or {}).get("conditions") or []}


def iter_live(ns: str) -> Iterator[dict[str, Any]]:
    """The requests of ``ns`` not being deleted."""
    for r in requests_in(ns):
        if not r["metadata"].get("deletionTimestamp"):
            yield r

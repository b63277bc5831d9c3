"""Kueue v0.17.0, unchanged, as a local process in front of the gang scheduler.

Kueue decides *whether* a job may start (ClusterQueue quota); the pods' scheduler decides
*where* its pods go. Only the real manager shows that what Kueue writes (a suspended Job
let go, gated pods ungated, node selectors added) is what the extender reads. How it runs
on the loopback control plane, and why (read from the module's ``cmd/kueue``,
``pkg/config`` and ``config/``):

* Built by ``e2e/build-operator.sh kueue`` from ``sigs.k8s.io/kueue@v0.17.0`` into
  ``~/.cache/gang-extender/kueue/v0.17.0/`` with that module's CRDs
  (``config/components/crd/bases``), webhook configurations
  (``config/components/webhook``) and sample Configuration.
* Webhooks: the manager serves admission (and CRD conversion) webhooks over TLS, which
  the API server must call. In a cluster that goes through a Service and a certificate
  the manager makes itself (``internalCertManagement``), for the Service's DNS name. On
  loopback there is no Service: :func:`start` makes a CA and a serving certificate for
  ``127.0.0.1`` (openssl, like the control plane's PKI), runs the manager with
  ``internalCertManagement.enable: false``, ``webhook.host/port/certDir`` pointing at
  them, and installs the module's Mutating/ValidatingWebhookConfigurations and the CRDs'
  conversion webhooks with ``clientConfig.url: https://127.0.0.1:<port>/<path>`` and the
  CA as ``caBundle``.
* Every namespaced webhook also gets a namespace selector on :data:`MANAGED_LABEL` (the
  same selector as the Configuration's ``managedJobsNamespaceSelector``): the control
  plane is shared with the rest of the suite, and Kueue's webhooks (``failurePolicy:
  Fail``) would otherwise sit in front of every pod and Job of every other test. Stopping
  removes the configurations before the process.
* With internal certificates off the manager reads its metrics certificate from the fixed
  path ``/etc/kueue/metrics/certs`` and exits when it is missing (no setting moves it).
  Rather than write into the machine's ``/etc``, the manager runs in a private mount
  namespace (``unshare --user --map-root-user --mount``) where ``/etc`` is a read-only
  overlay of the real one plus that directory. Its metrics server itself is off
  (``bindAddress: "0"``).
* Not run: the visibility API server (``VisibilityOnDemand`` off): it is an aggregated
  API reached through a Service, which a loopback process cannot be. Leader election off
  (one manager). Integrations: ``batch/job`` and ``pod`` only.
* Credentials: the admin kubeconfig (Kueue's RBAC is not under test here).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from e2e import deploy_kit as dk
from e2e.harness.cluster import ControlPlane, HarnessError, http_ok, install_crds
from e2e.harness.fixtures import kube
from e2e.harness.k8s import ApiException, client
from e2e.harness.pki import generate_serving_pki
from e2e.harness.process import ManagedProcess, free_port

VERSION = "v0.17.0"
GROUP, API = "kueue.x-k8s.io", "v1beta2"
NAMESPACE = "kueue-system"
"""The Configuration's ``namespace`` (its default); Kueue keeps nothing there we read."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
MANAGED_LABEL = "e2e.gang-extender.io/kueue"
"""Label of the namespaces Kueue manages here (value ``"true"``)."""
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
"""CRDs whose conversion webhook the module's ``crd/kustomization.yaml`` turns on."""
WEBHOOK_NAMES = ("mutating-webhook-configuration", "validating-webhook-configuration")
FRAMEWORKS = ("batch/job", "pod")


def _plural_of(crd: Mapping[str, Any]) -> str:
    return str(crd["spec"]["names"]["plural"])


def crd_docs(bin_dir: Path, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The module's CRDs, the converted ones with their webhook at ``127.0.0.1:port``."""
    docs: list[dict[str, Any]] = []
    for f in sorted((bin_dir / "crds").glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        if _plural_of(doc) in CONVERTED:
            doc["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": f"https://127.0.0.1:{port}/convert",
                                 "caBundle": base64.b64encode(ca_pem).decode()},
                "conversionReviewVersions": ["v1"]}}
        docs.append(doc)
    return docs


def webhook_docs(bin_dir: Path, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The module's two webhook configurations, served at ``127.0.0.1:port``, each
    namespaced webhook limited to namespaces labelled :data:`MANAGED_LABEL`."""
    text = (bin_dir / "webhook" / "manifests.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    bundle = base64.b64encode(ca_pem).decode()
    for doc in docs:
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": bundle}
            hook["namespaceSelector"] = {"matchLabels": {MANAGED_LABEL: "true"}}
    return docs


def configuration(webhook_port: int, health_port: int, cert_dir: Path,
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manager's Configuration: the module's sample, adapted to loopback (see the
    module doc); ``extra`` is merged on top (``waitForPodsReady``, ``featureGates``)."""
    cfg: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_LABEL: "true"}},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "featureGates": {"VisibilityOnDemand": False},
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = copy.deepcopy(value)
    return cfg


class Kueue:
    """The manager process, its certificates and its webhook configurations."""

    def __init__(self, cp: ControlPlane, bin_dir: Path) -> None:
        self.cp = cp
        self.bin_dir = bin_dir
        self.dir = cp.workdir / "kueue"
        self.webhook_port = free_port()
        self.ca_pem = b""
        self.proc: ManagedProcess | None = None
        self.extra: dict[str, Any] = {}

    def _certs(self) -> Path:
        certs = self.dir / "certs"
        if not (certs / "tls.crt").exists():
            ca, _ = generate_serving_pki(certs, "kueue-webhook",
                                         ["IP:127.0.0.1", "DNS:localhost"])
            self.ca_pem = ca.cert.read_bytes()
        elif not self.ca_pem:
            self.ca_pem = (certs / "ca.crt").read_bytes()
        # the metrics certificate Kueue insists on, at /etc/kueue/metrics/certs inside
        # its mount namespace
        metrics = self.dir / "etc-overlay" / "kueue" / "metrics" / "certs"
        metrics.mkdir(parents=True, exist_ok=True)
        for f in ("tls.crt", "tls.key"):
            shutil.copyfile(certs / f, metrics / f)
        return certs

    def install(self) -> None:
        """Namespace, CRDs (conversion through this manager). Idempotent."""
        self._certs()
        with contextlib.suppress(ApiException):
            kube().core.create_namespace({"metadata": {"name": NAMESPACE}})
        crd_dir = self.dir / "crds"
        crd_dir.mkdir(parents=True, exist_ok=True)
        for doc in crd_docs(self.bin_dir, self.webhook_port, self.ca_pem):
            (crd_dir / f"{_plural_of(doc)}.yaml").write_text(yaml.safe_dump(doc))
        install_crds(kube().api, [crd_dir], timeout=60)

    def start(self, extra: Mapping[str, Any] | None = None) -> ManagedProcess:
        """Run the manager with ``extra`` in its Configuration (a running one with other
        settings is stopped first); returns once it is ready and its webhooks installed."""
        wanted = dict(extra or {})
        if self.proc is not None and self.proc.running():
            if wanted == self.extra:
                return self.proc
            self.stop()
        certs = self._certs()
        for tool in ("unshare", "mount"):
            if shutil.which(tool) is None:
                raise HarnessError(f"{tool} not found: Kueue runs in a mount namespace "
                                   f"(see e2e/kueue.py)")
        health = free_port()
        cfg = configuration(self.webhook_port, health, certs, wanted)
        cfg_path = self.dir / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        overlay = self.dir / "etc-overlay"
        script = (f"mount -t overlay kueue-etc -o lowerdir={overlay}:/etc /etc && "
                  f'exec "$0" "$@"')
        argv = ["unshare", "--user", "--map-root-user", "--mount", "--",
                "sh", "-c", script, str(self.bin_dir / "kueue"), f"--config={cfg_path}",
                "--zap-log-level=2"]
        self.proc = self.cp.start_process(
            argv, "kueue", ready=http_ok(f"http://127.0.0.1:{health}/readyz"),
            ready_timeout=90)
        self.extra = wanted
        errors = dk.apply(dk.dynamic_client(kube().api),
                          webhook_docs(self.bin_dir, self.webhook_port, self.ca_pem))
        if errors:
            self.stop()
            raise HarnessError("installing Kueue's webhooks failed:\n" + "\n".join(errors))
        return self.proc

    def stop(self) -> None:
        """Remove the webhook configurations (nothing may call a stopped server), then
        stop the process."""
        adm = client.AdmissionregistrationV1Api(kube().api)
        with contextlib.suppress(ApiException):
            adm.delete_mutating_webhook_configuration(WEBHOOK_NAMES[0])
        with contextlib.suppress(ApiException):
            adm.delete_validating_webhook_configuration(WEBHOOK_NAMES[1])
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        self.extra = {}


# ----------------------------------------------------------------------------------------
# Kueue's objects


def _create(plural: str, body: dict[str, Any], ns: str | None = None) -> None:
    custom = kube().custom
    if ns is None:
        custom.create_cluster_custom_object(GROUP, API, plural, body, _preload_content=False)
    else:
        custom.create_namespaced_custom_object(GROUP, API, ns, plural, body,
                                               _preload_content=False)


def create_flavor(name: str, node_labels: Mapping[str, str] | None = None,
                  topology: str | None = None) -> None:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if topology:
        spec["topologyName"] = topology
    _create("resourceflavors", {"apiVersion": f"{GROUP}/{API}", "kind": "ResourceFlavor",
                                "metadata": {"name": name}, "spec": spec})


def create_topology(name: str, levels: Sequence[str]) -> None:
    """A Topology for Topology Aware Scheduling: node labels, widest level first."""
    _create("topologies", {"apiVersion": f"{GROUP}/{API}", "kind": "Topology",
                           "metadata": {"name": name},
                           "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}})


def create_cluster_queue(name: str, flavor: str, cpu: str, memory: str,
                         namespaces: Sequence[str] = ()) -> None:
    """A ClusterQueue of one flavor with ``cpu``/``memory`` nominal quota, open to the
    given namespaces (by name) only, so parallel test runs never share quota."""
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                      "operator": "In", "values": list(namespaces)}]}
    _create("clusterqueues", {
        "apiVersion": f"{GROUP}/{API}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": selector,
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                     "name": flavor, "resources": [
                         {"name": "cpu", "nominalQuota": cpu},
                         {"name": "memory", "nominalQuota": memory}]}]}]}})


def create_local_queue(ns: str, name: str, cluster_queue: str) -> None:
    _create("localqueues", {"apiVersion": f"{GROUP}/{API}", "kind": "LocalQueue",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {"clusterQueue": cluster_queue}}, ns)


def delete_cluster_objects(plural: str, names: Sequence[str]) -> None:
    for n in names:
        with contextlib.suppress(ApiException):
            kube().custom.delete_cluster_custom_object(GROUP, API, plural, n)


def workloads(ns: str) -> list[dict[str, Any]]:
    resp = kube().custom.list_namespaced_custom_object(GROUP, API, ns, "workloads",
                                                       _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def condition(obj: Mapping[str, Any], cond_type: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == cond_type:
            out: dict[str, Any] = c
            return out
    return None


def is_true(obj: Mapping[str, Any], cond_type: str) -> bool:
    c = condition(obj, cond_type)
    return c is not None and c.get("status") == "True"


def managed_namespace(ns: str) -> None:
    """Put ``ns`` under Kueue (its webhooks and managedJobsNamespaceSelector)."""
    kube().core.patch_namespace(ns, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})


def owner_key(wl: Mapping[str, Any]) -> str:
    """A Workload's name as tests know it: its Job, else its pod group, else its own."""
    md = wl["metadata"]
    for o in md.get("ownerReferences") or []:
        if o.get("kind") == "Job":
            return str(o["name"])
    return str((md.get("labels") or {}).get(GROUP_LABEL) or md["name"])


class WorkloadTimeline:
    """Polls the Workloads of a namespace (every 0.1 s, in a thread) and keeps when each
    condition was first seen in each state, on this process's monotonic clock, which the
    :class:`~e2e.gang.Recorder` of pod bindings uses too (the conditions' own timestamps
    have whole seconds only). Keys: ``(workload, "Admitted=True")``,
    ``(workload, "Evicted=True:PodsReadyTimeout")``, ...; ``evictions`` counts the
    transitions to Evicted=True seen, ``requeues`` the largest ``status.requeueState.count``
    (Kueue's own count of requeues after a PodsReady timeout)."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.first: dict[tuple[str, str], float] = {}
        self.evictions: dict[str, int] = {}
        self.requeues: dict[str, int] = {}
        self._last: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkloadTimeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with contextlib.suppress(Exception):
                self.observe(workloads(self.ns), time.monotonic())

    def observe(self, items: Sequence[Mapping[str, Any]], now: float) -> None:
        for wl in items:
            key = owner_key(wl)
            count = ((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0
            self.requeues[key] = max(self.requeues.get(key, 0), int(count))
            for c in (wl.get("status") or {}).get("conditions") or []:
                state = f"{c.get('type')}={c.get('status')}"
                self.first.setdefault((key, state), now)
                self.first.setdefault((key, f"{state}:{c.get('reason')}"), now)
                if (c.get("type") == "Evicted" and c.get("status") == "True"
                        and self._last.get((key, "Evicted")) != "True"):
                    self.evictions[key] = self.evictions.get(key, 0) + 1
                self._last[(key, str(c.get("type")))] = str(c.get("status"))

    def at(self, workload: str, state: str) -> float | None:
        return self.first.get((workload, state))

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
  namespace (``unshare --user --map-root-user --mount``, or ``unshare --mount`` as root
  where user namespaces are refused) where ``/etc`` is a read-only overlay of the real one
  plus that directory. Its metrics server itself is off (``bindAddress: "0"``).
* Not run: the visibility API server (``VisibilityOnDemand`` off): it is an aggregated
  API reached through a Service, which a loopback process cannot be. Leader election off
  (one manager). Integrations: ``batch/job`` and ``pod`` only.
* Credentials: a token of the manager's own ServiceAccount, bound to the module's
  ClusterRole ``manager-role`` as its release does (``config/default``: namespace
  ``kueue-system``, names prefixed ``kueue-``), and to its Role on Secrets of that
  namespace (the manager watches them even with internal certificates off), so the
  release RBAC is what is tested. Not applied: the leader-election Role (unused here).

Kueue's objects (queues, flavors, Workloads) as the tests use them:
:mod:`e2e.integrations.kueue_objects`.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from e2e import deploy_kit as dk
from e2e.harness.base import HarnessError
from e2e.harness.cluster import ControlPlane
from e2e.harness.crds import install_crds
from e2e.harness.k8s import ApiException, client
from e2e.harness.pki import generate_serving_pki
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube

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
SERVICE_ACCOUNT = "kueue-controller-manager"
RBAC_FILES = ("service_account.yaml", "role.yaml", "role_binding.yaml",
              "manager_secrets_role.yaml", "manager_secrets_role_binding.yaml")
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


def rbac_docs(bin_dir: Path) -> list[dict[str, Any]]:
    """The manager's ServiceAccount, ClusterRole and binding from the module, named and
    placed as ``config/default``'s kustomization does (prefix ``kueue-``, namespace
    :data:`NAMESPACE`)."""
    docs: list[dict[str, Any]] = []
    for f in RBAC_FILES:
        for doc in yaml.safe_load_all((bin_dir / "rbac" / f).read_text()):
            if not doc:
                continue
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            if "namespace" in doc["metadata"]:
                doc["metadata"]["namespace"] = NAMESPACE
            if "roleRef" in doc:
                doc["roleRef"]["name"] = "kueue-" + doc["roleRef"]["name"]
            for subject in doc.get("subjects") or []:
                subject["name"] = "kueue-" + subject["name"]
                subject["namespace"] = NAMESPACE
            docs.append(doc)
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


def mount_namespace(overlay: Path) -> list[str]:
    """The argv prefix that runs a command where ``/etc`` is ``overlay`` over the real
    ``/etc`` (see the module doc): in a user and mount namespace of its own, or, where user
    namespaces are refused (some container runtimes), a mount namespace of root's."""
    if shutil.which("unshare") is None:
        raise HarnessError("unshare (util-linux) not found: Kueue runs in a mount "
                           "namespace of its own (see e2e/integrations/kueue.py)")
    script = f'mount -t overlay kueue-etc -o lowerdir={overlay}:/etc /etc && exec "$0" "$@"'
    tried = []
    for flags in (["--user", "--map-root-user", "--mount"], ["--mount"]):
        probe = subprocess.run(["unshare", *flags, "--", "sh", "-c", script, "true"],
                               capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            return ["unshare", *flags, "--", "sh", "-c", script]
        tried.append(f"unshare {' '.join(flags)}: {probe.stderr.strip()}")
    raise HarnessError("cannot give Kueue its /etc/kueue/metrics/certs without writing the "
                       "machine's /etc: no mount namespace with an overlay could be made:\n"
                       + "\n".join(tried))


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
        errors = dk.apply(dk.dynamic_client(kube().api), rbac_docs(self.bin_dir))
        if errors:
            raise HarnessError("applying Kueue's RBAC failed:\n" + "\n".join(errors))

    def start(self, extra: Mapping[str, Any] | None = None) -> ManagedProcess:
        """Run the manager with ``extra`` in its Configuration (a running one with other
        settings is stopped first); returns once it is ready and its webhooks installed."""
        wanted = dict(extra or {})
        if self.proc is not None and self.proc.running():
            if wanted == self.extra:
                return self.proc
            self.stop()
        certs = self._certs()
        health = free_port()
        cfg = configuration(self.webhook_port, health, certs, wanted)
        cfg_path = self.dir / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        argv = [*mount_namespace(self.dir / "etc-overlay"), str(self.bin_dir / "kueue"),
                f"--config={cfg_path}", "--zap-log-level=2"]
        kubeconfig = dk.sa_kubeconfig(self.cp, kube().core, NAMESPACE, SERVICE_ACCOUNT,
                                      self.dir / "kueue.kubeconfig")
        self.proc = self.cp.start_process(
            argv, "kueue", env={"KUBECONFIG": str(kubeconfig)}, ready=http_ok(f"http://127.0.0.1:{health}/readyz"),
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

"""JobSet v0.11.1, unchanged, as a local process beside the gang scheduler.

JobSet (``jobset.x-k8s.io/v1alpha2``) makes a set of Jobs (a driver, replicated workers)
from one object, labels every pod with the set's name, uid and restart attempt, and
recreates all of its Jobs when its failure policy says so. The extender reads JobSets and
those labels (extender/core/model/convert_jobset.py): only the real controller shows that
what it writes is what the extender reads. How it runs on the loopback control plane, and
why (read from the module's ``main.go``, ``api/config`` and ``config/``):

* Built by ``e2e/build-operator.sh jobset`` from ``sigs.k8s.io/jobset@v0.11.1`` into
  ``~/.cache/gang-extender/jobset/v0.11.1/`` with that module's CRD
  (``config/components/crd/bases``), webhook configurations
  (``config/components/webhook``) and RBAC.
* Webhooks: the manager serves a defaulting and a validating webhook for JobSets and a
  mutating and a validating one for their pods (exclusive placement), over TLS, which the
  API server must call. As for Kueue (:mod:`e2e.integrations.kueue`): a CA and a serving
  certificate for ``127.0.0.1``, the manager run with ``internalCertManagement.enable:
  false`` and ``webhook.host/port/certDir`` pointing at them, the module's webhook
  configurations installed with ``clientConfig.url`` and the CA as ``caBundle``. The pod
  webhooks keep the module's own object selector (the kustomize patch in
  ``config/components/webhook/patches``: pods labelled ``jobset.sigs.k8s.io/jobset-name``),
  so no other test's pod goes through them; the JobSet ones see only JobSets.
* Metrics off (``metrics.bindAddress: "0"``): unlike Kueue's, JobSet's metrics server
  needs no certificate when it is off, so no mount namespace is needed. Leader election
  off (one manager).
* Credentials: a token of the manager's own ServiceAccount, bound to the module's
  ClusterRole as its release does (``config/default``: namespace ``jobset-system``, names
  prefixed ``jobset-``), so the release RBAC is what is tested.
"""

from __future__ import annotations

import base64
import contextlib
import json
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

VERSION = "v0.11.1"
GROUP, API, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
NAMESPACE = "jobset-system"
PREFIX = "jobset-"
SERVICE_ACCOUNT = "controller-manager"
RBAC_FILES = ("service_account.yaml", "role.yaml", "role_binding.yaml",
              "manager_secrets_role.yaml", "manager_secrets_role_binding.yaml")
WEBHOOK_NAMES = ("mutating-webhook-configuration", "validating-webhook-configuration")
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def webhook_docs(bin_dir: Path, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The module's two webhook configurations, served at ``127.0.0.1:port``, named with
    the release's prefix; each pod webhook with the object selector of the module's
    kustomize patch (what its release installs)."""
    text = (bin_dir / "webhook" / "manifests.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    patches = {}
    for f in ("mutating-patch.yaml", "validating-patch.yaml"):
        for op in yaml.safe_load((bin_dir / "webhook" / "patches" / f).read_text()):
            patches[op["value"]["name"]] = op["value"].get("objectSelector")
    bundle = base64.b64encode(ca_pem).decode()
    for doc in docs:
        doc["metadata"]["name"] = PREFIX + doc["metadata"]["name"]
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": bundle}
            if patches.get(hook["name"]):
                hook["objectSelector"] = patches[hook["name"]]
            if "pods" in hook["rules"][0]["resources"] and not hook.get("objectSelector"):
                raise HarnessError(f"JobSet's pod webhook {hook['name']} has no object "
                                   f"selector: it would see every pod of the suite")
    return docs


# Kinds the release's kustomization places in its namespace (some files name none).
_NAMESPACED = ("ServiceAccount", "Role", "RoleBinding")


def rbac_docs(bin_dir: Path) -> list[dict[str, Any]]:
    """The manager's ServiceAccount, ClusterRole and bindings from the module, named and
    placed as ``config/default``'s kustomization does."""
    docs: list[dict[str, Any]] = []
    for f in RBAC_FILES:
        for doc in yaml.safe_load_all((bin_dir / "rbac" / f).read_text()):
            if not doc:
                continue
            doc["metadata"]["name"] = PREFIX + doc["metadata"]["name"]
            if "namespace" in doc["metadata"] or doc["kind"] in _NAMESPACED:
                doc["metadata"]["namespace"] = NAMESPACE
            if "roleRef" in doc:
                doc["roleRef"]["name"] = PREFIX + doc["roleRef"]["name"]
            for subject in doc.get("subjects") or []:
                subject["name"] = PREFIX + subject["name"]
                subject["namespace"] = NAMESPACE
            docs.append(doc)
    return docs


def configuration(webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """The manager's Configuration: the module's sample, adapted to loopback."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


class JobSetController:
    """The manager process, its certificates and its webhook configurations."""

    def __init__(self, cp: ControlPlane, bin_dir: Path) -> None:
        self.cp = cp
        self.bin_dir = bin_dir
        self.dir = cp.workdir / "jobset"
        self.webhook_port = free_port()
        self.ca_pem = b""
        self.proc: ManagedProcess | None = None

    def _certs(self) -> Path:
        certs = self.dir / "certs"
        if not (certs / "tls.crt").exists():
            ca, _ = generate_serving_pki(certs, "jobset-webhook",
                                         ["IP:127.0.0.1", "DNS:localhost"])
            self.ca_pem = ca.cert.read_bytes()
        elif not self.ca_pem:
            self.ca_pem = (certs / "ca.crt").read_bytes()
        return certs

    def install(self) -> None:
        """Namespace, CRD, RBAC. Idempotent."""
        self._certs()
        with contextlib.suppress(ApiException):
            kube().core.create_namespace({"metadata": {"name": NAMESPACE}})
        install_crds(kube().api, [self.bin_dir / "crds"], timeout=60)
        errors = dk.apply(dk.dynamic_client(kube().api), rbac_docs(self.bin_dir))
        if errors:
            raise HarnessError("applying JobSet's RBAC failed:\n" + "\n".join(errors))

    def start(self) -> ManagedProcess:
        """Run the manager; returns once it is ready and its webhooks installed."""
        if self.proc is not None and self.proc.running():
            return self.proc
        certs = self._certs()
        health = free_port()
        cfg_path = self.dir / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(configuration(self.webhook_port, health, certs)))
        kubeconfig = dk.sa_kubeconfig(self.cp, kube().core, NAMESPACE, PREFIX + SERVICE_ACCOUNT,
                                      self.dir / "jobset.kubeconfig")
        self.proc = self.cp.start_process(
            [str(self.bin_dir / "jobset"), f"--config={cfg_path}", "--zap-log-level=2"],
            "jobset", env={"KUBECONFIG": str(kubeconfig)},
            ready=http_ok(f"http://127.0.0.1:{health}/readyz"), ready_timeout=90)
        errors = dk.apply(dk.dynamic_client(kube().api),
                          webhook_docs(self.bin_dir, self.webhook_port, self.ca_pem))
        if errors:
            self.stop()
            raise HarnessError("installing JobSet's webhooks failed:\n" + "\n".join(errors))
        return self.proc

    def stop(self) -> None:
        """Remove the webhook configurations (nothing may call a stopped server), then
        stop the process."""
        adm = client.AdmissionregistrationV1Api(kube().api)
        with contextlib.suppress(ApiException):
            adm.delete_mutating_webhook_configuration(PREFIX + WEBHOOK_NAMES[0])
        with contextlib.suppress(ApiException):
            adm.delete_validating_webhook_configuration(PREFIX + WEBHOOK_NAMES[1])
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


# ----- JobSets as the tests make them ---------------------------------------------------


def replicated_job(name: str, replicas: int, pods: int, cpu: str,
                   annotations: Mapping[str, str] | None = None,
                   scheduler: str = "gang-scheduler") -> dict[str, Any]:
    """A replicated Job of ``replicas`` Jobs of ``pods`` pods each (Indexed, completions
    = parallelism, no retry: a failed pod fails its Job, and the JobSet's failure policy
    decides), every pod asking ``cpu`` and naming ``scheduler``."""
    return {"name": name, "replicas": replicas, "template": {"spec": {
        "parallelism": pods, "completions": pods, "completionMode": "Indexed",
        "backoffLimit": 0,
        "template": {
            "metadata": {"annotations": dict(annotations or {})},
            "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu,
                                                                "memory": "256Mi"}}}]}}}}}


def jobset(name: str, replicated_jobs: list[dict[str, Any]], *,
           max_restarts: int | None = None,
           annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A JobSet of ``replicated_jobs``; the failure policy restarts it up to
    ``max_restarts`` times (none: a failed Job fails the set)."""
    spec: dict[str, Any] = {"replicatedJobs": replicated_jobs}
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {"apiVersion": f"{GROUP}/{API}", "kind": "JobSet",
            "metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": spec}


def create_jobset(ns: str, body: Mapping[str, Any]) -> None:
    kube().custom.create_namespaced_custom_object(GROUP, API, ns, PLURAL, dict(body),
                                                  _preload_content=False)


def get_jobset(ns: str, name: str) -> dict[str, Any] | None:
    try:
        resp = kube().custom.get_namespaced_custom_object(GROUP, API, ns, PLURAL, name,
                                                          _preload_content=False)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    out: dict[str, Any] = json.loads(resp.data)
    return out


def jobset_condition(ns: str, name: str, cond_type: str) -> bool:
    conds = ((get_jobset(ns, name) or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == cond_type and c.get("status") == "True" for c in conds)


def delete_jobsets(ns: str) -> None:
    """Every JobSet of ``ns`` (background: the garbage collector removes Jobs and pods)."""
    with contextlib.suppress(ApiException):
        kube().custom.delete_collection_namespaced_custom_object(
            GROUP, API, ns, PLURAL, propagation_policy="Background", _preload_content=False)

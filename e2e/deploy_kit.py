"""Helpers for testing the install story: render deploy/ (kustomize) and charts/ (Helm),
apply manifests with server-side apply (optionally dry run), mint a ServiceAccount's
credentials, and run the gang scheduler (extender + stock kube-scheduler) exactly as the
Deployment in deploy/ does, under any kubeconfig.

helm and kustomize come from ``e2e/setup-deps.sh`` (pinned, built into
``~/.cache/gang-extender/tools``); ``$E2E_HELM`` / ``$E2E_KUSTOMIZE`` override the paths.
Without them the tests fail, or skip with ``E2E_SKIP=1``, like the rest of the harness.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.base import REPO_ROOT
from e2e.harness.cluster import ControlPlane
from e2e.harness.k8s import ApiException, client, config, dynamic
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube

DEPLOY_DIR = REPO_ROOT / "deploy"
CHART_DIR = REPO_ROOT / "charts" / "gang-scheduler"
CRD_FILE = "scheduling.x-k8s.io_podgroups.yaml"
INSTALL_NS = "gang-scheduler-system"
SERVICE_ACCOUNT = "gang-scheduler"  # the kube-scheduler's (the pod's)
EXTENDER_SERVICE_ACCOUNT = "gang-scheduler-extender"
EXTENDER_TOKEN_SECRET = "gang-scheduler-extender-token"
EXTENDER_CONTAINER = "gang-extender"
SCHEDULER_CONTAINER = "kube-scheduler"
CONFIG_KEY = "scheduler-config.yaml"
FIELD_MANAGER = "gang-e2e"

Doc = dict[str, Any]


# ----------------------------------------------------------------------------------------
# Tools


def tools_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "gang-extender" / "tools"


def find_tool(name: str) -> Path:
    """``$E2E_<NAME>``, else the pinned build from e2e/setup-deps.sh; fails (or skips with
    ``E2E_SKIP=1``) when neither exists. PATH is not searched: a random version there
    would make the tests mean something else."""
    env = os.environ.get(f"E2E_{name.upper()}")
    path = Path(env) if env else tools_dir() / name
    if os.access(path, os.X_OK):
        return path
    msg = f"{name} not found at {path} (run e2e/setup-deps.sh, or set E2E_{name.upper()})"
    if os.environ.get("E2E_SKIP") == "1":
        pytest.skip(f"E2E_SKIP=1 and {msg}")
    pytest.fail(msg, pytrace=False)


def _run(argv: Sequence[str | Path]) -> str:
    res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False,
                         timeout=120)
    if res.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({res.returncode}):\n"
                             f"{res.stderr}{res.stdout}")
    return res.stdout


def load_docs(text: str) -> list[Doc]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def kustomize_build(path: Path = DEPLOY_DIR) -> list[Doc]:
    """``kustomize build deploy/`` as a list of objects."""
    return load_docs(_run([find_tool("kustomize"), "build", path]))


def helm_template(
    release: str = "gang-scheduler",
    namespace: str = INSTALL_NS,
    values: Mapping[str, str] | None = None,
    kube_version: str | None = None,
) -> list[Doc]:
    """``helm template --include-crds`` of the chart; ``values`` are ``--set`` pairs."""
    argv: list[str | Path] = [find_tool("helm"), "template", release, CHART_DIR,
                              "--namespace", namespace, "--include-crds"]
    if kube_version:
        argv += ["--kube-version", kube_version]
    for k, v in (values or {}).items():
        argv += ["--set", f"{k}={v}"]
    return load_docs(_run(argv))


def k8s_version() -> str:
    """The Kubernetes version the tests pin (e2e/k8sbuild/go.mod)."""
    for line in (REPO_ROOT / "e2e" / "k8sbuild" / "go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["require", "k8s.io/kubernetes"] or parts[:1] == ["k8s.io/kubernetes"]:
            return parts[-1]
    raise AssertionError("k8s.io/kubernetes not found in e2e/k8sbuild/go.mod")


# ----------------------------------------------------------------------------------------
# Looking into rendered manifests


def find(docs: Iterable[Doc], kind: str, name: str | None = None,
         prefix: str | None = None) -> Doc:
    """The one object of ``kind`` named ``name`` (or whose name starts with ``prefix``)."""
    hits = [d for d in docs if d.get("kind") == kind
            and (name is None or d["metadata"]["name"] == name)
            and (prefix is None or d["metadata"]["name"].startswith(prefix))]
    assert len(hits) == 1, f"expected one {kind} {name or prefix or ''}, got {len(hits)}"
    return hits[0]


def scheduler_config(docs: Iterable[Doc]) -> Doc:
    """The KubeSchedulerConfiguration in the gang scheduler's ConfigMap."""
    cm = find(docs, "ConfigMap", prefix="gang-scheduler-config")
    out: Doc = yaml.safe_load(cm["data"][CONFIG_KEY])
    return out


def pod_spec(docs: Iterable[Doc]) -> Doc:
    spec: Doc = find(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(docs: Iterable[Doc], name: str) -> Doc:
    spec = pod_spec(docs)
    for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        if c["name"] == name:
            out: Doc = c
            return out
    raise AssertionError(f"no container {name} in the Deployment")


def rbac_docs(docs: Iterable[Doc]) -> list[Doc]:
    """What the ServiceAccount tests install for real: the namespace, the accounts, the
    extender's token Secret, every role and binding, and the admission policy on the
    extender's pod patches (not the Deployment, which would need the images)."""
    kinds = {"Namespace", "ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding",
             "Role", "RoleBinding", "ValidatingAdmissionPolicy",
             "ValidatingAdmissionPolicyBinding"}
    return [d for d in docs if d.get("kind") in kinds]


# ----------------------------------------------------------------------------------------
# Applying


def dynamic_client(api_client: Any) -> Any:
    return dynamic.DynamicClient(api_client)


def apply(dyn: Any, docs: Iterable[Doc], dry_run: bool = False,
          namespace: str | None = None) -> list[str]:
    """Server-side apply each object (``kubectl apply --server-side --force-conflicts``);
    with ``dry_run`` the API server admits and validates but stores nothing. Objects
    without a namespace get ``namespace`` if they are namespaced. Returns errors, one
    ``kind/name: message`` per refused object, so a test can show them all at once."""
    errors: list[str] = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        kind, name = doc["kind"], doc["metadata"]["name"]
        try:
            res = dyn.resources.get(api_version=doc["apiVersion"], kind=kind)
            ns = None
            if res.namespaced:
                ns = doc["metadata"].get("namespace") or namespace
                doc["metadata"]["namespace"] = ns
            res_ns = {"namespace": ns} if ns else {}
            dyn.server_side_apply(res, body=doc, name=name, field_manager=FIELD_MANAGER,
                                  force_conflicts=True, dry_run="All" if dry_run else None,
                                  **res_ns)
        except Exception as e:
            body = getattr(e, "body", None) or str(e)
            errors.append(f"{kind}/{name}: {body}")
    return errors


# ----------------------------------------------------------------------------------------
# ServiceAccount credentials


def sa_kubeconfig(cp: ControlPlane, core: Any, namespace: str, name: str, path: Path,
                  seconds: int = 3600) -> Path:
    """A kubeconfig holding a fresh token of ``namespace/name`` (TokenRequest API): the
    credentials a pod of that account gets, not the admin's."""
    tr = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": seconds}})
    return _token_kubeconfig(cp, namespace, name, tr.status.token, path)


def secret_token_kubeconfig(cp: ControlPlane, core: Any, namespace: str, secret: str,
                            path: Path, timeout: float = 30.0) -> Path:
    """A kubeconfig holding the token the token controller put into a
    ``kubernetes.io/service-account-token`` Secret: what the extender container of
    deploy/'s pod mounts. Waits for the controller to fill it."""
    deadline = time.monotonic() + timeout
    while True:
        obj = core.read_namespaced_secret(secret, namespace)
        token = (obj.data or {}).get("token")
        if token:
            break
        assert time.monotonic() < deadline, f"Secret {namespace}/{secret} has no token"
        time.sleep(0.2)
    account = obj.metadata.annotations["kubernetes.io/service-account.name"]
    return _token_kubeconfig(cp, namespace, account, base64.b64decode(token).decode(), path)


def deployed_kubeconfigs(cp: ControlPlane, core: Any, directory: Path,
                         namespace: str = INSTALL_NS) -> tuple[Path, Path]:
    """The kube-scheduler's and the extender's credentials as deploy/'s pod has them: a
    token of the pod's account, and the token from the extender's Secret."""
    return (sa_kubeconfig(cp, core, namespace, SERVICE_ACCOUNT,
                          directory / "scheduler.kubeconfig"),
            secret_token_kubeconfig(cp, core, namespace, EXTENDER_TOKEN_SECRET,
                                    directory / "extender.kubeconfig"))


def _token_kubeconfig(cp: ControlPlane, namespace: str, name: str, token: str,
                      path: Path) -> Path:
    assert cp.pki is not None
    ca = base64.b64encode(Path(cp.pki.ca.cert).read_bytes()).decode()
    user = f"system:serviceaccount:{namespace}:{name}"
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": cp.server,
                                                 "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return path


def sa_api_client(kubeconfig: Path) -> Any:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    return client.ApiClient(cfg)


# ----------------------------------------------------------------------------------------
# The gang scheduler as deploy/ runs it


def _set_flag(args: list[str], flag: str, value: str) -> list[str]:
    """Replace ``--flag=...`` (or append it)."""
    out = [a for a in args if not a.startswith(f"{flag}=")]
    return [*out, f"{flag}={value}"]


@dataclass
class DeployedStack:
    extender: ManagedProcess
    scheduler: ManagedProcess
    scheduler_name: str
    port: int
    metrics_port: int

    def logs(self) -> list[ManagedProcess]:
        return [self.extender, self.scheduler]

    def stop(self) -> None:
        for p in (self.scheduler, self.extender):
            with contextlib.suppress(Exception):
                p.stop()


def start_deployed_stack(
    cp: ControlPlane,
    docs: list[Doc],
    kubeconfig: Path,
    name: str,
    scheduler_name: str | None = None,
    extender_kubeconfig: Path | None = None,
) -> DeployedStack:
    """Run the extender with the sidecar's args from the Deployment and a kube-scheduler
    with the ConfigMap's KubeSchedulerConfiguration, the kube-scheduler under
    ``kubeconfig`` and the extender under ``extender_kubeconfig`` (default: the same).

    Changed from the manifests, and only this: local ports instead of the pod's (the
    urlPrefix of both extender entries follows), the kubeconfigs, and optionally the
    schedulerName (profile and ``--scheduler-name``), so a test stack never competes with
    another gang scheduler of the same session. Leader election stays as configured; its
    lease is deleted first so a stack stopped earlier cannot delay this one.
    """
    ext_c = container(docs, EXTENDER_CONTAINER)
    port, metrics_port = free_port(), free_port()
    args = list(ext_c["args"])
    assert args[0] == "serve", args
    args = _set_flag(args, "--listen", f"127.0.0.1:{port}")
    args = _set_flag(args, "--metrics-listen", f"127.0.0.1:{metrics_port}")
    ext_kubeconfig = extender_kubeconfig or kubeconfig
    args = _set_flag(args, "--kubeconfig", str(ext_kubeconfig))
    cfg = scheduler_config(docs)
    if scheduler_name:
        args = _set_flag(args, "--scheduler-name", scheduler_name)
        for prof in cfg["profiles"]:
            prof["schedulerName"] = scheduler_name
    sched_name = cfg["profiles"][0]["schedulerName"]
    for e in cfg["extenders"]:
        assert e["urlPrefix"].startswith("http://127.0.0.1:"), e
        e["urlPrefix"] = f"http://127.0.0.1:{port}"
    cfg["clientConnection"] = {"kubeconfig": str(kubeconfig)}

    exe = shutil.which("gang-extender", path=str(Path(sys.executable).parent))
    argv = [exe] if exe else [sys.executable, "-m", "extender.cli"]
    extender = cp.start_process([*argv, *args], f"{name}-extender", cwd=REPO_ROOT,
                                env={"KUBECONFIG": str(ext_kubeconfig)},
                                ready=http_ok(f"http://127.0.0.1:{metrics_port}/readyz"),
                                ready_timeout=30)
    le = cfg.get("leaderElection") or {}
    if le.get("leaderElect"):
        try:
            client.CoordinationV1Api(kube().api).delete_namespaced_lease(
                le["resourceName"], le["resourceNamespace"])
        except ApiException as e:
            if e.status != 404:
                raise
    try:
        scheduler = cp.start_scheduler(cfg, f"{name}-kube-scheduler")
    except BaseException:
        extender.stop()
        raise
    return DeployedStack(extender, scheduler, sched_name, port, metrics_port)


"""The command lines and configuration of each control-plane component: which flags, feature
gates, controllers and scheduler settings the harness runs etcd, kube-apiserver,
kube-controller-manager and kube-scheduler with.

Why apart: what each component is told changes with every Kubernetes release (gates,
runtime-config, controllers); how the processes are started, awaited and stopped does not.
A new release touches this module and :mod:`e2e.harness.versions`, not the lifecycle in
:mod:`e2e.harness.cluster`.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import HarnessError
from .pki import PKI

SERVICE_CIDR = "10.0.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"

# Controllers the harness needs: namespaces, service accounts and their tokens (pods are
# admitted with projected SA tokens as in a real cluster), the workload controllers (Jobs are
# what gang users run), garbage collection (ownerReferences), podgc (pods of deleted nodes),
# root CA publishing (the kube-root-ca.crt ConfigMap the SA volume references), RBAC
# aggregation (admin/edit/view roles used by deploy manifests). Deliberately absent:
# node-lifecycle and taint-eviction (fake nodes send no heartbeats), anything cloud/volume.
KCM_CONTROLLERS = (
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
    "replicaset-controller",
    "deployment-controller",
    "statefulset-controller",
    "disruption-controller",
    "pod-garbage-collector-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    # Dynamic Resource Allocation: makes a pod's ResourceClaims from its templates and
    # names them in its status, and releases them when the pod is done (e2e/fakedra.py).
    "resourceclaim-controller",
)

# The upstream Workload API (Kubernetes 1.36 alpha): scheduling.k8s.io/v1alpha2 PodGroups
# and the pods' spec.schedulingGroup. Found by experiment on v1.36.3:
# * GenericWorkload serves PodGroup and Workload and keeps spec.schedulingGroup on pods;
# * spec.schedulingConstraints of a PodGroup is dropped on create unless
#   TopologyAwareWorkloadScheduling is on too;
# * the PodGroupProtection admission plugin puts the finalizer
#   scheduling.k8s.io/podgroup-protection on every PodGroup, and only the controller
#   manager's podgroup-protection-controller (itself behind GenericWorkload) removes it:
#   without it a deleted PodGroup never goes away.
# The API server and the controller manager get them; the schedulers do not, so the stock
# kube-scheduler does no gang scheduling of its own and the extender is what is tested.
# The same gates serve scheduling.k8s.io/v1beta1 on 1.37, which the runtime-config asks
# for instead of v1alpha2 (versions.py; found by experiment on v1.37.2 too).
WORKLOAD_API_APISERVER_GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
WORKLOAD_API_KCM_GATES = "GenericWorkload=true"
WORKLOAD_API_CONTROLLERS = ("podgroup-protection-controller",)
# Job-made gangs (alpha since 1.36, needs GenericWorkload): the Job controller of
# kube-controller-manager creates a Workload and a PodGroup for a Job and sets the pods'
# spec.schedulingGroup; on 1.37 the API server needs it too, for the Job's
# spec.scheduling. Only with ``workload_with_job``: on 1.37 it gives every Job a PodGroup.
WORKLOAD_WITH_JOB_GATES = "WorkloadWithJob=true"



def apiserver_gates(workload_api: bool, apiserver_feature_gates: str,
                    workload_with_job: bool) -> str:
    """The API server's own feature gates, on top of the control plane's."""
    return ",".join(g for g in (
        WORKLOAD_API_APISERVER_GATES if workload_api else "",
        apiserver_feature_gates,
        WORKLOAD_WITH_JOB_GATES if workload_with_job else "") if g)


def kcm_gates(workload_api: bool, workload_with_job: bool) -> str:
    """The controller manager's own feature gates, on top of the control plane's."""
    return ",".join(g for g in (
        WORKLOAD_API_KCM_GATES if workload_api else "",
        WORKLOAD_WITH_JOB_GATES if workload_with_job else "") if g)


def kcm_controllers(workload_api: bool) -> list[str]:
    """The controllers the controller manager runs (see KCM_CONTROLLERS)."""
    return [*KCM_CONTROLLERS, *(WORKLOAD_API_CONTROLLERS if workload_api else ())]


def etcd_args(etcd_bin: Path, data_dir: Path, etcd_url: str, peer_port: int) -> list[str]:
    """etcd serving ``etcd_url`` from ``data_dir``, a cluster of one."""
    return [
        str(etcd_bin),
        "--name=e2e",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={etcd_url}",
        f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
        "--log-level=warn", "--logger=zap",
    ]


def apiserver_args(
    binary: str,
    etcd_url: str,
    port: int,
    pki: PKI,
    workdir: Path,
    verbosity: int,
    gate_flags: Sequence[str],
    runtime_config: str | None,
    extra: Sequence[str],
) -> list[str]:
    """kube-apiserver on 127.0.0.1:``port`` (the choices are explained on ControlPlane)."""
    return [
        binary,
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki.apiserver.cert}",
        f"--tls-private-key-file={pki.apiserver.key}",
        f"--client-ca-file={pki.ca.cert}",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
        "--allow-privileged=true",
        "--profiling=false",
        f"--cert-dir={workdir / 'apiserver-certs'}",
        f"--v={verbosity}",
        *gate_flags,
        *([f"--runtime-config={runtime_config}"] if runtime_config is not None else []),
        *extra,
    ]


def kcm_args(
    binary: str,
    kubeconfig: Path,
    port: int,
    pki: PKI,
    workdir: Path,
    verbosity: int,
    controllers: Sequence[str],
    gate_flags: Sequence[str],
) -> list[str]:
    """kube-controller-manager on 127.0.0.1:``port`` running ``controllers``."""
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        f"--controllers={','.join(controllers)}",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca.cert}",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        f"--cert-dir={workdir / 'kcm-certs'}",
        f"--v={verbosity}",
        *gate_flags,
    ]


def scheduler_config(config: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """A full KubeSchedulerConfiguration from a test's: ``apiVersion``/``kind``,
    ``clientConnection.kubeconfig`` and ``leaderElection.leaderElect: false`` when absent."""
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        **config,
    }
    cc = dict(cfg.get("clientConnection") or {})
    if not cc.get("kubeconfig"):
        cc["kubeconfig"] = str(kubeconfig)
    cfg["clientConnection"] = cc
    le = dict(cfg.get("leaderElection") or {})
    le.setdefault("leaderElect", False)
    cfg["leaderElection"] = le
    return cfg


def hostname_wrapper(hostname: str | None) -> list[str]:
    """The command prefix that runs a scheduler in a UTS namespace of its own under
    ``hostname`` (needs root and util-linux ``unshare``); none for None."""
    wrap: list[str] = []
    if hostname is not None:
        unshare = shutil.which("unshare")
        if unshare is None:
            raise HarnessError("unshare (util-linux) is needed to give a scheduler its "
                               "own host name")
        # unshare and sh both exec: the pid stays the scheduler's, so kill() hits it.
        wrap = [unshare, "--uts", "--", "sh", "-c", 'hostname "$1" && shift && exec "$@"',
                "sh", hostname]
    return wrap


def scheduler_args(
    wrap: Sequence[str],
    binary: str,
    cfg_path: Path,
    port: int,
    verbosity: int,
    gate_flags: Sequence[str],
) -> list[str]:
    """kube-scheduler with the config at ``cfg_path`` on 127.0.0.1:``port``."""
    return [
        *wrap,
        binary,
        f"--config={cfg_path}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        # /metrics readable without credentials: benchmarks scrape scheduler latency.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        f"--v={max(verbosity, 2)}",
        *gate_flags,
    ]

"""The Kubeflow Training Operator v1.7.0, unchanged, as a local process on the local control
plane: the second operator of issue 19, item 5, driven through its PyTorchJob.

How it runs here, and why (read from the module's ``cmd/`` and ``pkg/``):

* Built by ``e2e/build-operator.sh training-operator`` from
  ``github.com/kubeflow/training-operator@v1.7.0``, the last release without admission
  webhooks, with the module's kustomize base (``manifests/base``).
* Installed from that base as its ``standalone`` overlay would: the ServiceAccount in the
  namespace ``kubeflow``, the ClusterRole and its binding, and of the CRDs only
  ``pytorchjobs.kubeflow.org``. Its ``mpijobs.kubeflow.org`` (v1) has the name of the MPI
  Operator's v2beta1 CRD: one cluster holds one of the two.
* Flags: ``--gang-scheduler-name=<scheduler name>`` (any value but ``volcano`` selects the
  scheduler-plugins PodGroup; it becomes the pods' ``schedulerName`` when their template
  names none), ``--enable-scheme=pytorchjob`` (the kinds whose CRDs are installed), and
  the metrics and health addresses on free loopback ports instead of ``:8080`` and
  ``:8081`` on every interface. Leader election is off by default; nothing is fixed to a
  machine-wide port, so unlike the MPI Operator it needs no lock.
* Credentials: a token of its ServiceAccount via ``$KUBECONFIG`` (controller-runtime reads
  it), so the release RBAC is what is tested.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e import deploy_kit as dk
from e2e.harness.base import HarnessError
from e2e.harness.cluster import ControlPlane
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.readiness import log_contains
from e2e.harness.target import kube
from e2e.integrations.operators import JobKind, rendezvous_annotations, wait_crd_established

VERSION = "v1.7.0"
GROUP, API_VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
CRD_FILE = "kubeflow.org_pytorchjobs.yaml"
CRD_NAME = "pytorchjobs.kubeflow.org"
OPERATOR_NS = "kubeflow"
"""The namespace of the module's standalone overlay."""
OPERATOR_SA = "training-operator"
READY_LINE = "Starting workers"
"""Logged by controller-runtime once the PyTorchJob controller's caches are synced."""


def install_docs(bin_dir: Path) -> list[dk.Doc]:
    """The objects ``kustomize build manifests/overlays/standalone`` would apply, less the
    Deployment and Service (the process replaces them) and the other kinds' CRDs."""
    base = bin_dir / "manifests"
    docs: list[dk.Doc] = [{"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": OPERATOR_NS}}]
    docs += dk.load_docs((base / "crds" / CRD_FILE).read_text())
    for f in ("service-account.yaml", "role.yaml", "cluster-role-binding.yaml"):
        for d in dk.load_docs((base / "rbac" / f).read_text()):
            d = copy.deepcopy(d)
            # kustomize's namespace transformer: namespaced objects and the subjects of
            # bindings that name a ServiceAccount.
            if d["kind"] == "ServiceAccount":
                d["metadata"]["namespace"] = OPERATOR_NS
            for s in d.get("subjects", []):
                if s.get("kind") == "ServiceAccount":
                    s["namespace"] = OPERATOR_NS
            docs.append(d)
    return docs


def install(bin_dir: Path) -> None:
    """Apply :func:`install_docs` (server-side apply); wait for the CRD. Idempotent."""
    errors = dk.apply(dk.dynamic_client(kube().api), install_docs(bin_dir))
    if errors:
        raise HarnessError("applying the Training Operator manifests failed:\n"
                           + "\n".join(errors))
    wait_crd_established(CRD_NAME)


class TrainingOperator:
    """Starts and stops the operator process."""

    def __init__(self, cp: ControlPlane, bin_dir: Path) -> None:
        self.cp = cp
        self.bin_dir = bin_dir
        self.proc: ManagedProcess | None = None
        self.gang_scheduler: str | None = None

    def start(self, gang_scheduler: str) -> ManagedProcess:
        """Run it with ``--gang-scheduler-name``; returns once its workers started. A
        running operator with another name is stopped first."""
        if self.proc is not None and self.proc.running():
            if self.gang_scheduler == gang_scheduler:
                return self.proc
            self.stop()
        kubeconfig = dk.sa_kubeconfig(self.cp, kube().core, OPERATOR_NS, OPERATOR_SA,
                                      self.cp.workdir / "training-operator.kubeconfig")
        argv = [str(self.bin_dir / "training-operator"),
                f"--gang-scheduler-name={gang_scheduler}",
                "--enable-scheme=pytorchjob",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}"]
        self.proc = self.cp.start_process(argv, "training-operator",
                                          env={"KUBECONFIG": str(kubeconfig)},
                                          ready=log_contains(READY_LINE), ready_timeout=60)
        self.gang_scheduler = gang_scheduler
        return self.proc

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        self.gang_scheduler = None


def pytorchjob(
    name: str,
    workers: int,
    worker_resources: Mapping[str, str],
    master_resources: Mapping[str, str],
    run_seconds: float = 2.0,
) -> dict[str, Any]:
    """A PyTorchJob (kubeflow.org/v1) as a user writes it: a master and ``workers``
    workers, nothing about gang scheduling (no ``schedulerName``: the operator sets it only
    where the template names none). Master and workers form one fake-kubelet rendezvous of
    ``workers + 1`` pods, as ``torch.distributed`` waits for its world size."""
    ann = rendezvous_annotations(name, workers + 1, run_seconds)

    def replica(count: int, resources: Mapping[str, str]) -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": "OnFailure", "template": {
            "metadata": {"annotations": dict(ann)},
            "spec": {"containers": [{
                # The operator finds its container by this name (ports, env).
                "name": "pytorch", "image": "docker.io/kubeflowkatib/pytorch-mnist:v1",
                "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                "resources": {"requests": dict(resources), "limits": dict(resources)}}]}}}

    return {
        "apiVersion": f"{GROUP}/{API_VERSION}", "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"},
                 "pytorchReplicaSpecs": {"Master": replica(1, master_resources),
                                         "Worker": replica(workers, worker_resources)}},
    }


PYTORCHJOB = JobKind(kind="PyTorchJob", group=GROUP, version=API_VERSION, plural=PLURAL,
                     role_label="training.kubeflow.org/replica-type", leader_role="master",
                     make=pytorchjob)
"""PyTorchJobs for :mod:`e2e.integrations.operators`' scenarios."""

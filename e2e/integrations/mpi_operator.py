"""The Kubeflow MPI Operator v0.6.0, unchanged, as a local process on the local control plane.

Why a real operator: users do not write PodGroups and labels by hand, their operator does.
The MPI Operator's scheduler-plugins gang option is what makes the PodGroup
(``minMember`` = workers + 1, ``minResources``, an ownerReference to the MPIJob), labels the
launcher and worker pods and sets their ``schedulerName``; only the real binary shows that
what it writes is what the extender reads.

How it runs here, and why (all read from the module's ``cmd/`` and ``pkg/``):

* Built by ``e2e/build-operator.sh mpi-operator`` from ``github.com/kubeflow/mpi-operator``
  ``@v0.6.0`` into ``~/.cache/gang-extender/mpi-operator/v0.6.0/`` with that module's
  release manifest ``deploy/v2beta1/mpi-operator.yaml``. Everything in the manifest but
  the Deployment is applied as is: the ``mpi-operator`` Namespace, the
  ``mpijobs.kubeflow.org`` CRD, the ServiceAccount and its ClusterRoles. No webhook, no
  cert-manager: v0.6.0 has neither.
* The process gets the Deployment's own args plus ``--gang-scheduling=<scheduler name>``:
  any value but ``volcano`` selects the scheduler-plugins PodGroup
  (``scheduling.x-k8s.io/v1alpha1``) and becomes the pods' ``schedulerName``
  (``NewSchedulerPluginsCtrl``), so ``gang-scheduler`` needs no other setting. The flag's
  documented ``scheduler-plugins`` would name a scheduler that does not exist here.
* Credentials: a token of its own ServiceAccount, not the admin's, so the release RBAC is
  what is tested. ``$KUBECONFIG`` is set to it because the operator lets that variable
  override ``--kubeConfig``.
* ``-logtostderr`` instead of the Deployment's ``-alsologtostderr``: the operator logs with
  klog v1, which otherwise also writes log files into ``/tmp``.
* Leader election cannot be turned off (no flag); its Lease ``mpi-operator/mpi-operator``
  of a previous run is deleted before a start, or the new process would wait out the old
  holder's 15 s lease.
* Its health server listens on ``:8080``, hard-coded (``healthCheckPort``), on every
  interface, and the process exits when that port is taken. So one operator runs per
  machine at a time: starting one takes a machine-wide file lock (held until it stops;
  other sessions wait) and fails with a clear message if something else holds the port.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from e2e import deploy_kit as dk
from e2e.harness.base import HarnessError
from e2e.harness.cluster import ControlPlane
from e2e.harness.k8s import ApiException, client
from e2e.harness.process import ManagedProcess
from e2e.harness.readiness import log_contains
from e2e.harness.target import kube
from e2e.integrations.operators import JobKind, rendezvous_annotations, wait_crd_established

VERSION = "v0.6.0"
MPI_GROUP, MPI_VERSION, MPI_PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
CRD_NAME = "mpijobs.kubeflow.org"
OPERATOR_NS = "mpi-operator"
"""Namespace of the release manifest: its ServiceAccount and the leader-election Lease."""
OPERATOR_SA = "mpi-operator"
LEASE_NAME = "mpi-operator"
HEALTH_PORT = 8080
"""``healthCheckPort`` in cmd/mpi-operator/app/server.go; no flag changes it."""
READY_LINE = "Started workers"
"""Logged by ``MPIJobController.Run`` once its informers are synced."""
LOCK_WAIT = 300.0
"""How long a start waits for another session's operator to stop (its test module)."""


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gang-extender"


def release_docs(bin_dir: Path) -> list[dk.Doc]:
    """The release manifest of the built version, parsed."""
    return dk.load_docs((bin_dir / "mpi-operator.yaml").read_text())


def deployment_args(docs: list[dk.Doc]) -> list[str]:
    """The args the release Deployment gives the operator's container."""
    dep = dk.find(docs, "Deployment", "mpi-operator")
    args: list[str] = dep["spec"]["template"]["spec"]["containers"][0].get("args", [])
    return list(args)


def install_release(docs: list[dk.Doc]) -> None:
    """Apply everything of the release manifest but the Deployment (server-side apply) and
    wait for the MPIJob CRD to be Established. Idempotent."""
    wanted = [d for d in docs if d.get("kind") != "Deployment"]
    errors = dk.apply(dk.dynamic_client(kube().api), wanted)
    if errors:
        raise HarnessError("applying the MPI Operator manifest failed:\n" + "\n".join(errors))
    wait_crd_established(CRD_NAME)


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listener does
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _take_port_lock(timeout: float) -> IO[str]:
    path = cache_root() / "mpi-operator" / f".port-{HEALTH_PORT}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    f = path.open("w")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() > deadline:
                f.close()
                raise HarnessError(
                    f"another MPI Operator of this machine held {path} for {timeout:.0f}s "
                    f"(its health port {HEALTH_PORT} is hard-coded: one at a time)") from None
            time.sleep(0.5)


class MpiOperator:
    """Starts and stops the operator process; one at a time per machine (see module doc)."""

    def __init__(self, cp: ControlPlane, bin_dir: Path, docs: list[dk.Doc]) -> None:
        self.cp = cp
        self.bin_dir = bin_dir
        self.base_args = deployment_args(docs)
        self.proc: ManagedProcess | None = None
        self.gang_scheduling: str | None = None
        self._lock: IO[str] | None = None

    def start(self, gang_scheduling: str) -> ManagedProcess:
        """Run the operator with the release args plus ``--gang-scheduling``; returns once
        its workers started. A running operator with other flags is stopped first."""
        if self.proc is not None and self.proc.running():
            if self.gang_scheduling == gang_scheduling:
                return self.proc
            self.stop()
        if self._lock is None:
            self._lock = _take_port_lock(LOCK_WAIT)
        if _port_in_use(HEALTH_PORT):
            self.stop()
            raise HarnessError(
                f"port {HEALTH_PORT} is in use: the MPI Operator v0.6.0 always serves its "
                f"health check there and exits when it cannot (free it, or run the test "
                f"elsewhere)")
        k = kube()
        with contextlib.suppress(ApiException):
            client.CoordinationV1Api(k.api).delete_namespaced_lease(LEASE_NAME, OPERATOR_NS)
        kubeconfig = dk.sa_kubeconfig(self.cp, k.core, OPERATOR_NS, OPERATOR_SA,
                                      self.cp.workdir / "mpi-operator.kubeconfig")
        argv = [str(self.bin_dir / "mpi-operator"),
                *[a for a in self.base_args if a != "-alsologtostderr"],
                "-logtostderr", f"--gang-scheduling={gang_scheduling}"]
        self.proc = self.cp.start_process(argv, "mpi-operator",
                                          env={"KUBECONFIG": str(kubeconfig)},
                                          ready=log_contains(READY_LINE), ready_timeout=60)
        self.gang_scheduling = gang_scheduling
        return self.proc

    def stop(self) -> None:
        """Stop the process and release the machine-wide lock."""
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        self.gang_scheduling = None
        if self._lock is not None:
            self._lock.close()  # closing the file releases the flock
            self._lock = None


# ----------------------------------------------------------------------------------------
# MPIJobs


def mpijob(
    name: str,
    workers: int,
    worker_resources: Mapping[str, str],
    launcher_resources: Mapping[str, str],
    run_seconds: float = 2.0,
) -> dict[str, Any]:
    """An MPIJob (kubeflow.org/v2beta1) as a user writes it for the MPI Operator.

    Nothing in it mentions gang scheduling: the operator adds the PodGroup, the label and
    the schedulerName. The only test-specific part is the fake kubelet's annotations on
    both templates: launcher and workers form one rendezvous of ``workers + 1`` pods, so
    they finish ``run_seconds`` after the last of them runs, and a job with a rank
    missing hangs, as ``mpirun`` does.
    """
    ann = rendezvous_annotations(name, workers + 1, run_seconds)

    def template(container: str, command: list[str],
                 resources: Mapping[str, str]) -> dict[str, Any]:
        return {"metadata": {"annotations": dict(ann)},
                "spec": {"containers": [{
                    "name": container, "image": "mpioperator/mpi-pi:openmpi",
                    "command": command,
                    "resources": {"requests": dict(resources), "limits": dict(resources)}}]}}

    return {
        "apiVersion": f"{MPI_GROUP}/{MPI_VERSION}", "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(
                    "launcher", ["mpirun", "-n", str(workers), "/home/mpiuser/pi"],
                    launcher_resources)},
                "Worker": {"replicas": workers, "template": template(
                    "worker", ["/usr/sbin/sshd", "-De"], worker_resources)},
            },
        },
    }


MPIJOB = JobKind(kind="MPIJob", group=MPI_GROUP, version=MPI_VERSION, plural=MPI_PLURAL,
                 role_label="training.kubeflow.org/job-role", leader_role="launcher",
                 make=mpijob)
"""MPIJobs for :mod:`e2e.integrations.operators`' scenarios."""

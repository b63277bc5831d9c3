"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager
and any number of kube-schedulers, all unmodified upstream binaries.

Why not mocks: the extender's correctness depends on how the stock kube-scheduler calls it,
retries it and re-queues pods, and on how the job controller reacts to pods. Only the real
components show that. There are no kubelets: nodes are API objects driven by
:mod:`e2e.harness.fakekubelet`, which is why the node-lifecycle controller is not run
(it would taint and evict pods of nodes that never post heartbeats).

This module is the processes' lifecycle (start, await, stop, clean up); what each component
is told lives in :mod:`e2e.harness.components`.

Typical use::

    cp = ControlPlane(find_k8s_bin()).start()
    cp.start_default_scheduler()
    ...
    cp.stop()
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .base import HarnessError
from .binaries import find_etcd, find_k8s_bin
from .clusterbase import Cluster
from .components import (
    apiserver_args,
    apiserver_gates,
    etcd_args,
    hostname_wrapper,
    kcm_args,
    kcm_controllers,
    kcm_gates,
    scheduler_args,
    scheduler_config,
)
from .crds import DEFAULT_CRD_DIRS, install_crds
from .pki import PKI, generate_pki, write_kubeconfig
from .process import ManagedProcess, free_port, stop_all
from .readiness import http_ok
from .versions import (
    composite_gates,
    dra_workload_gates,
    k8s_minor,
    podgroups_served,
    workload_runtime_config,
)

ETCD_DIR_PREFIX = "gang-e2e-etcd-"
OWNER_FILE = "harness-owner.pid"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_orphaned_etcd_dirs(base: Path) -> None:
    """Delete etcd data dirs left by harness processes that were SIGKILLed.

    The children die with their parent (PR_SET_PDEATHSIG), but data on tmpfs would hold
    RAM until reboot. Only directories carrying our owner file with a dead pid go.
    """
    for d in base.glob(ETCD_DIR_PREFIX + "*"):
        try:
            pid = int((d / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if not _pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)


class ControlPlane(Cluster):
    """etcd + kube-apiserver + kube-controller-manager on 127.0.0.1 with fresh PKI.

    Why each choice:

    * Secure port only, client-certificate auth, ``Node,RBAC`` authorization: the extender's
      RBAC and the deploy manifests are exercised as in production.
    * Service-account issuer and signing key: pods get projected SA tokens exactly as in a
      real cluster (the wire format the extender parses includes those volumes).
    * ``--endpoint-reconciler-type=none``: the ``kubernetes`` Endpoints may not point at a
      loopback address, and nothing here needs it.
    * API priority-and-fairness off: benchmarks create hundreds of pods from few clients;
      APF's per-user queues would measure the throttle, not the scheduler.
    * etcd data on tmpfs (``/dev/shm``) when available: etcd 3.4 fsyncs every write and
      has no ``--unsafe-no-fsync``; tmpfs makes that free.
    """

    def __init__(
        self,
        bin_dir: Path | None = None,
        etcd: Path | None = None,
        workdir: Path | None = None,
        crd_dirs: Sequence[Path] | None = None,
        keep_workdir: bool | None = None,
        feature_gates: str | None = None,
        extra_apiserver_args: Sequence[str] = (),
        verbosity: int = 1,
        workload_api: bool = False,
        apiserver_feature_gates: str = "",
        workload_with_job: bool = False,
    ) -> None:
        wd = workdir or Path(tempfile.mkdtemp(prefix="gang-e2e-"))
        wd.mkdir(parents=True, exist_ok=True)
        super().__init__(wd, wd / "admin.kubeconfig")
        self.bin_dir = bin_dir or find_k8s_bin()
        self.etcd_bin = etcd or find_etcd()
        self.crd_dirs = tuple(crd_dirs) if crd_dirs is not None else DEFAULT_CRD_DIRS
        self.keep_workdir = (
            keep_workdir if keep_workdir is not None else os.environ.get("E2E_KEEP_DIR") == "1"
        )
        self.feature_gates = feature_gates
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.verbosity = verbosity
        # Serve the upstream Workload API (see WORKLOAD_API_* in components.py), on
        # releases that have its PodGroup (versions.py).
        self.workload_api = workload_api and podgroups_served(k8s_minor(self.bin_dir))
        # Gates for the API server only, e.g. GangScheduling for a benchmark whose upstream
        # gang scheduler gets it too while the other schedulers do not.
        self.apiserver_feature_gates = apiserver_feature_gates
        # WorkloadWithJob on the API server and the controller manager (not the schedulers).
        self.workload_with_job = workload_with_job
        self.pki: PKI | None = None
        self.etcd_data: Path | None = None
        self.apiserver_port = 0
        self.server = ""
        self.crds: list[str] = []
        self.startup_seconds: float | None = None
        self._stopped = False

    # -- start -----------------------------------------------------------------------

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    @property
    def minor(self) -> tuple[int, int]:
        """(1, 37) for a 1.37.x control plane (versions.py), for callers whose gates or
        API versions depend on it."""
        return k8s_minor(self.bin_dir)

    def _fg(self, extra: str = "") -> list[str]:
        gates = ",".join(g for g in (self.feature_gates, extra) if g)
        return [f"--feature-gates={gates}"] if gates else []

    def start(self) -> ControlPlane:
        """Bring up etcd, kube-apiserver and kube-controller-manager; install CRDs.

        Returns once /readyz of the API server and /healthz of the controller manager
        answer 200 and every CRD is Established. On failure everything started is stopped
        and the error carries the log tails.
        """
        t0 = time.monotonic()
        atexit.register(self.stop)
        atexit.register(stop_all)
        try:
            self._start()
        except BaseException as e:
            tails = self.log_tails(60)
            self.stop()
            if isinstance(e, Exception):
                raise HarnessError(f"control plane failed to start: {e}\n{tails}") from e
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _start(self) -> None:
        pki = self.pki = generate_pki(self.workdir / "pki")
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.workdir
        _remove_orphaned_etcd_dirs(base)
        self.etcd_data = Path(tempfile.mkdtemp(prefix=ETCD_DIR_PREFIX, dir=base))
        (self.etcd_data / OWNER_FILE).write_text(str(os.getpid()))

        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        etcd = ManagedProcess(etcd_args(self.etcd_bin, self.etcd_data, etcd_url, peer_port),
                              "etcd", self.log_dir / "etcd.log", port=etcd_port)
        self._register(etcd)
        etcd.start()

        self.apiserver_port = free_port()
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        write_kubeconfig(self.kubeconfig, self.server, pki.ca.cert, pki.admin, "admin")
        write_kubeconfig(self.workdir / "kube-scheduler.kubeconfig", self.server, pki.ca.cert,
                         pki.scheduler, "kube-scheduler")
        write_kubeconfig(self.workdir / "kube-controller-manager.kubeconfig", self.server,
                         pki.ca.cert, pki.controller_manager, "kube-controller-manager")
        # The API server retries etcd, so both start in parallel; readiness is awaited
        # on /readyz, which includes the etcd check and every bootstrap post-start hook.
        apiserver = ManagedProcess(apiserver_args(
            self._bin("kube-apiserver"), etcd_url, self.apiserver_port, pki, self.workdir,
            self.verbosity,
            self._fg(apiserver_gates(self.workload_api, ",".join(g for g in (
                self.apiserver_feature_gates,
                composite_gates(self.minor) if self.workload_api else "",
                dra_workload_gates(self.minor) if self.workload_api else "") if g),
                self.workload_with_job)),
            workload_runtime_config(k8s_minor(self.bin_dir)) if self.workload_api else None,
            self.extra_apiserver_args,
        ), "kube-apiserver", self.log_dir / "kube-apiserver.log",
            ready=http_ok(f"{self.server}/readyz", pki.ca.cert, (pki.admin.cert, pki.admin.key)),
            ready_timeout=90, port=self.apiserver_port)
        self._register(apiserver)
        apiserver.start()

        kcm_port = free_port()
        kcm = ManagedProcess(kcm_args(
            self._bin("kube-controller-manager"), self.kubeconfig, kcm_port, pki, self.workdir,
            self.verbosity, kcm_controllers(self.workload_api),
            self._fg(",".join(g for g in (
                kcm_gates(self.workload_api, self.workload_with_job),
                dra_workload_gates(self.minor) if self.workload_api else "") if g)),
        ), "kube-controller-manager", self.log_dir / "kube-controller-manager.log",
            ready=http_ok(f"https://127.0.0.1:{kcm_port}/healthz"), ready_timeout=60,
            port=kcm_port)
        self._register(kcm)
        # Start the controller manager, install CRDs while it comes up, then wait for it.
        kcm_ready, kcm.ready = kcm.ready, None
        kcm.start()
        api = self.api_client()
        try:
            self.crds = install_crds(api, self.crd_dirs)
        finally:
            api.close()
        kcm.ready = kcm_ready
        kcm.wait_ready(60)

    # -- schedulers ------------------------------------------------------------------

    def start_scheduler(self, config: dict[str, Any], name: str,
                        hostname: str | None = None, binary: Path | None = None,
                        feature_gates: str = "") -> ManagedProcess:
        """Run a stock kube-scheduler with the given KubeSchedulerConfiguration.

        Fills what a test should not have to: ``apiVersion``/``kind``,
        ``clientConnection.kubeconfig`` (admin) and ``leaderElection.leaderElect: false``
        when absent. Listens on its own free secure port on 127.0.0.1; returns once
        ``/readyz`` answers 200 (informers synced). The config is written to
        ``workdir/schedulers/<name>.yaml``.

        ``hostname``: run it in a UTS namespace of its own under that host name (needs
        root and util-linux ``unshare``). Its leader-election identity is
        ``<hostname>_<uuid>``, so replicas on one machine can be told apart the way pods
        are in a cluster.

        ``binary``: another kube-scheduler build (e.g. scheduler-plugins', which takes the
        same flags); ``feature_gates``: gates for this scheduler only, on top of the
        control plane's.
        """
        cfg = scheduler_config(config, self.kubeconfig)
        cfg_dir = self.workdir / "schedulers"
        cfg_dir.mkdir(parents=True, exist_ok=True)
        cfg_path = cfg_dir / f"{name}.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        port = free_port()
        wrap = hostname_wrapper(hostname)
        proc = ManagedProcess(scheduler_args(
            wrap, str(binary) if binary is not None else self._bin("kube-scheduler"),
            cfg_path, port, self.verbosity, self._fg(feature_gates),
        ), name, self.log_dir / f"{name}.log",
            ready=http_ok(f"https://127.0.0.1:{port}/readyz"), ready_timeout=60, port=port)
        self._register(proc)
        return proc.start()

    def start_default_scheduler(self, name: str = "kube-scheduler",
                                feature_gates: str = "") -> ManagedProcess:
        """The cluster's main scheduler: stock kube-scheduler, profile ``default-scheduler``.
        ``feature_gates``: for it only (e.g. its own gang scheduling, GenericWorkload)."""
        return self.start_scheduler(
            {"profiles": [{"schedulerName": "default-scheduler"}]}, name,
            feature_gates=feature_gates,
        )

    # -- stop ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every process (newest first, by pid) and delete the data directories.

        Idempotent. The workdir (logs, PKI, kubeconfig) is kept when ``keep_workdir`` or
        ``$E2E_KEEP_DIR=1``; its path is printed so a developer can inspect it.
        """
        if self._stopped:
            return
        self._stopped = True
        self.stop_processes()
        if self.etcd_data is not None:
            shutil.rmtree(self.etcd_data, ignore_errors=True)
        if self.keep_workdir:
            print(f"e2e control plane workdir kept: {self.workdir}")
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)

"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager
and any number of kube-schedulers, all unmodified upstream binaries.

Why not mocks: the extender's correctness depends on how the stock kube-scheduler calls it,
retries it and re-queues pods, and on how the job controller reacts to pods. Only the real
components show that. There are no kubelets: nodes are API objects driven by
:mod:`e2e.harness.fakekubelet`, which is why the node-lifecycle controller is not run
(it would taint and evict pods of nodes that never post heartbeats).

Typical use::

    cp = ControlPlane(find_k8s_bin()).start()
    cp.start_default_scheduler()
    ...
    cp.stop()
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import yaml

from .k8s import ApiException, client, config
from .pki import PKI, generate_pki, write_kubeconfig
from .process import START_MARKER, ManagedProcess, free_port, stop_all
from .versions import k8s_minor, pinned_version, podgroups_served, workload_runtime_config

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout root, found from this file so the harness works from any cwd."""

E2E_DIR = REPO_ROOT / "e2e"
DEFAULT_CRD_DIRS = (REPO_ROOT / "crds",)

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


ETCD_DIR_PREFIX = "gang-e2e-etcd-"
OWNER_FILE = "harness-owner.pid"


class HarnessError(RuntimeError):
    """The control plane could not be set up (missing binaries, a component failed)."""


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


# ----------------------------------------------------------------------------------------
# Locating binaries


def find_etcd() -> Path:
    """etcd from ``$E2E_ETCD``, ``PATH`` or the Debian ``etcd-server`` location."""
    candidates = [os.environ.get("E2E_ETCD"), shutil.which("etcd"), "/usr/bin/etcd"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return Path(c)
    raise HarnessError("etcd not found (set E2E_ETCD or run e2e/setup-deps.sh)")


def find_k8s_bin(build: bool = True) -> Path:
    """Directory with kube-apiserver, kube-controller-manager and kube-scheduler.

    ``$E2E_K8S_BIN`` wins; otherwise ``e2e/build-k8s.sh`` is run, which returns at once when
    its cache is warm and builds (minutes) otherwise. ``build=False`` only accepts a warm
    cache, for callers that must not block.
    """
    names = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

    def ok(d: Path) -> bool:
        return all(os.access(d / n, os.X_OK) for n in names)

    env_dir = os.environ.get("E2E_K8S_BIN")
    if env_dir:
        if not ok(Path(env_dir)):
            raise HarnessError(f"E2E_K8S_BIN={env_dir} lacks one of {', '.join(names)}")
        return Path(env_dir)
    script = E2E_DIR / "build-k8s.sh"
    if not build:
        # Same cache rule as the script: any .built-* stamp with all binaries present.
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        # The release the script would build: K8S=1.36's, or the default's (versions.py),
        # never another one that happens to be cached beside it.
        version = pinned_version(os.environ.get("K8S", ""))
        d = cache / "gang-extender" / "k8s" / (version or "none")
        if version and any(d.glob(".built-*")) and ok(d):
            return d
        raise HarnessError(f"no cached Kubernetes {version or os.environ.get('K8S', '')} "
                           "binaries (run e2e/setup-deps.sh)")
    # Same lock as setup-deps.sh: never two compiles at once, a second caller waits.
    cache_root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    lock_path = cache_root / "gang-extender" / "k8s" / ".build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        res = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                             check=False)
    out = res.stdout.strip().splitlines()
    if res.returncode != 0 or not out or not ok(Path(out[-1])):
        raise HarnessError(
            f"{script} failed (exit {res.returncode}):\n{res.stderr[-4000:]}\n{res.stdout}"
        )
    return Path(out[-1])


# ----------------------------------------------------------------------------------------
# Readiness checks


def _tls_context(ca: Path | None, client: tuple[Path, Path] | None) -> ssl.SSLContext:
    if ca is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        ctx.load_cert_chain(str(client[0]), str(client[1]))
    return ctx


def http_ok(
    url: str, ca: Path | None = None, client: tuple[Path, Path] | None = None
) -> Callable[[ManagedProcess], bool]:
    """Ready check for :class:`ManagedProcess`: ``GET url`` answers 200.

    HTTPS without ``ca`` skips verification (component serving certs are self-signed).
    """
    verify: ssl.SSLContext | bool = (
        _tls_context(ca, client) if url.startswith("https") else True
    )

    def check(_: ManagedProcess) -> bool:
        r = httpx.get(url, verify=verify, timeout=2.0)
        return r.status_code == 200

    return check


def log_contains(text: str) -> Callable[[ManagedProcess], bool]:
    """Ready check: the process's log contains ``text`` (for daemons without a health port).

    Only the part written since the latest start counts, so a restart waits afresh.
    """

    def check(p: ManagedProcess) -> bool:
        try:
            content = p.log_path.read_text(errors="replace")
        except OSError:
            return False
        return text in content.rsplit(START_MARKER, 1)[-1]

    return check


# ----------------------------------------------------------------------------------------
# CRDs


def _crd_docs(dirs: Iterable[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for d in dirs:
        if not d.is_dir():
            continue
        for f in sorted([*d.rglob("*.yaml"), *d.rglob("*.yml")]):
            for doc in yaml.safe_load_all(f.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    docs.append(doc)
    return docs


def crd_names(dirs: Iterable[Path]) -> set[str]:
    """Names (``plural.group``) of the CRDs defined in YAML files under ``dirs``."""
    return {str(d["metadata"]["name"]) for d in _crd_docs(dirs)}


def install_crds(api: Any, dirs: Iterable[Path], timeout: float = 30.0) -> list[str]:
    """Create (or replace) every CRD in YAML files under ``dirs`` and wait until Established.

    Uses the Python client rather than kubectl so a fresh CI machine needs nothing else.
    Returns the CRD names; an empty or missing directory installs nothing.
    """
    ext = client.ApiextensionsV1Api(api)
    names: list[str] = []
    for doc in _crd_docs(dirs):
        name = doc["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(body=doc)
        except ApiException as e:
            if e.status != 409:
                raise
            cur = ext.read_custom_resource_definition(name)
            doc = {**doc, "metadata": {**doc["metadata"],
                                       "resourceVersion": cur.metadata.resource_version}}
            ext.replace_custom_resource_definition(name, body=doc)
        names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = ext.read_custom_resource_definition(name)
            conds = {c.type: c.status for c in (crd.status.conditions or [])}
            if conds.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise HarnessError(f"CRD {name} not Established after {timeout}s: {conds}")
            time.sleep(0.1)
    return names


# ----------------------------------------------------------------------------------------
# Clusters


class Cluster:
    """What tests need from any cluster: a kubeconfig, API clients, local processes, logs.

    Subclassed by :class:`ControlPlane` (started here) and :class:`ExternalCluster`
    (e.g. kind, via ``$E2E_KUBECONFIG``).
    """

    external = False

    def __init__(self, workdir: Path, kubeconfig: Path) -> None:
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.log_dir = workdir / "logs"
        self.processes: dict[str, ManagedProcess] = {}
        self._lock = threading.Lock()

    def api_client(self, qps_pool: int = 32) -> Any:
        """A new ``client.ApiClient`` for the admin user.

        A larger connection pool than the default (4) so threaded helpers (fake kubelet,
        load generators) do not serialise on connections.
        """
        cfg = client.Configuration()
        config.load_kube_config(
            config_file=str(self.kubeconfig), client_configuration=cfg
        )
        cfg.connection_pool_maxsize = qps_pool
        return client.ApiClient(cfg)

    def _register(self, proc: ManagedProcess) -> None:
        with self._lock:
            old = self.processes.get(proc.name)
            if old is not None and old.running():
                raise HarnessError(f"a process named {proc.name!r} is already running")
            self.processes[proc.name] = proc

    def start_process(
        self,
        argv: Sequence[str],
        name: str,
        env: Mapping[str, str] | None = None,
        ready: Callable[[ManagedProcess], bool] | None = None,
        ready_timeout: float = 60.0,
        cwd: Path | None = None,
    ) -> ManagedProcess:
        """Start any local process (e.g. the extender) with a log under ``workdir/logs``.

        ``KUBECONFIG`` is set to the admin kubeconfig unless ``env`` overrides it. The
        process is stopped by :meth:`stop` and its log tail shows in :meth:`log_tails`.
        ``ready`` (see :func:`http_ok`, :func:`log_contains`) is awaited before returning.
        """
        full_env = {"KUBECONFIG": str(self.kubeconfig), **(env or {})}
        proc = ManagedProcess(argv, name, self.log_dir / f"{name}.log", env=full_env,
                              cwd=cwd, ready=ready, ready_timeout=ready_timeout)
        self._register(proc)
        return proc.start()

    def log_tails(self, lines: int = 30, names: Iterable[str] | None = None) -> str:
        """Tail of every (or the named) component's log, for assertion messages."""
        with self._lock:
            procs = list(self.processes.values())
        wanted = set(names) if names is not None else None
        parts = []
        for p in procs:
            if wanted is not None and p.name not in wanted:
                continue
            parts.append(f"----- {p!r} (last {lines} lines) -----\n{p.log_tail(lines)}")
        return "\n".join(parts)

    def stop_processes(self) -> None:
        """Stop the processes started through this object, newest first."""
        with self._lock:
            procs = list(self.processes.values())
        for p in reversed(procs):
            with contextlib.suppress(Exception):
                p.stop()

    def start_scheduler(self, config: dict[str, Any], name: str,
                        hostname: str | None = None, binary: Path | None = None,
                        feature_gates: str = "") -> ManagedProcess:
        """Run a kube-scheduler with ``config``; see :meth:`ControlPlane.start_scheduler`."""
        raise HarnessError(f"{type(self).__name__} cannot start local schedulers")

    def stop(self) -> None:
        """Release everything this object started."""
        self.stop_processes()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ExternalCluster(Cluster):
    """An existing cluster (kind, a dev cluster) given by kubeconfig; nothing is started.

    Local helper processes (an extender under test) may still be started with
    :meth:`start_process`.
    """

    external = True

    def __init__(self, kubeconfig: Path, workdir: Path | None = None) -> None:
        wd = workdir or Path(tempfile.mkdtemp(prefix="gang-e2e-ext-"))
        super().__init__(wd, kubeconfig)
        self._own_workdir = workdir is None

    def stop(self) -> None:
        """Stop local processes; remove the log directory if this object created it."""
        self.stop_processes()
        if self._own_workdir and os.environ.get("E2E_KEEP_DIR") != "1":
            shutil.rmtree(self.workdir, ignore_errors=True)


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
        # Serve the upstream Workload API (see WORKLOAD_API_* above), on releases that
        # have its PodGroup (versions.py).
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
        etcd = ManagedProcess([
            str(self.etcd_bin),
            "--name=e2e",
            f"--data-dir={self.etcd_data}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
            "--log-level=warn", "--logger=zap",
        ], "etcd", self.log_dir / "etcd.log", port=etcd_port)
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
        apiserver = ManagedProcess([
            self._bin("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
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
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--v={self.verbosity}",
            *self._fg(",".join(g for g in (
                WORKLOAD_API_APISERVER_GATES if self.workload_api else "",
                self.apiserver_feature_gates,
                WORKLOAD_WITH_JOB_GATES if self.workload_with_job else "") if g)),
            *([f"--runtime-config={workload_runtime_config(k8s_minor(self.bin_dir))}"]
              if self.workload_api else []),
            *self.extra_apiserver_args,
        ], "kube-apiserver", self.log_dir / "kube-apiserver.log",
            ready=http_ok(f"{self.server}/readyz", pki.ca.cert, (pki.admin.cert, pki.admin.key)),
            ready_timeout=90, port=self.apiserver_port)
        self._register(apiserver)
        apiserver.start()

        kcm_port = free_port()
        controllers = [*KCM_CONTROLLERS, *(WORKLOAD_API_CONTROLLERS if self.workload_api else ())]
        kcm = ManagedProcess([
            self._bin("kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={kcm_port}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            f"--controllers={','.join(controllers)}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca.cert}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            f"--cert-dir={self.workdir / 'kcm-certs'}",
            f"--v={self.verbosity}",
            *self._fg(",".join(g for g in (
                WORKLOAD_API_KCM_GATES if self.workload_api else "",
                WORKLOAD_WITH_JOB_GATES if self.workload_with_job else "") if g)),
        ], "kube-controller-manager", self.log_dir / "kube-controller-manager.log",
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
        cfg: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            **config,
        }
        cc = dict(cfg.get("clientConnection") or {})
        if not cc.get("kubeconfig"):
            cc["kubeconfig"] = str(self.kubeconfig)
        cfg["clientConnection"] = cc
        le = dict(cfg.get("leaderElection") or {})
        le.setdefault("leaderElect", False)
        cfg["leaderElection"] = le
        cfg_dir = self.workdir / "schedulers"
        cfg_dir.mkdir(parents=True, exist_ok=True)
        cfg_path = cfg_dir / f"{name}.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        port = free_port()
        wrap: list[str] = []
        if hostname is not None:
            unshare = shutil.which("unshare")
            if unshare is None:
                raise HarnessError("unshare (util-linux) is needed to give a scheduler its "
                                   "own host name")
            # unshare and sh both exec: the pid stays the scheduler's, so kill() hits it.
            wrap = [unshare, "--uts", "--", "sh", "-c", 'hostname "$1" && shift && exec "$@"',
                    "sh", hostname]
        proc = ManagedProcess([
            *wrap,
            str(binary) if binary is not None else self._bin("kube-scheduler"),
            f"--config={cfg_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            # /metrics readable without credentials: benchmarks scrape scheduler latency.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            f"--v={max(self.verbosity, 2)}",
            *self._fg(feature_gates),
        ], name, self.log_dir / f"{name}.log",
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

"""What tests need from any cluster, local or not: its kubeconfig, API clients, the local
processes started beside it and their logs.

Why apart: an external cluster (kind, via ``$E2E_KUBECONFIG``) has all of this and none of
the control plane's start-up; helpers and tests typed against :class:`Cluster` run on both.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from .base import HarnessError
from .k8s import client, config
from .process import ManagedProcess


class Cluster:
    """What tests need from any cluster: a kubeconfig, API clients, local processes, logs.

    Subclassed by :class:`~e2e.harness.cluster.ControlPlane` (started locally) and
    :class:`ExternalCluster` (e.g. kind, via ``$E2E_KUBECONFIG``).
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

"""Child processes of the harness: started in their own process group, stopped by pid.

Every component (etcd, kube-apiserver, schedulers, extenders, the fake kubelet) is a
``ManagedProcess``. Stopping goes through the process group id we recorded at start, never
through a name lookup, so a developer's own kube-* processes are never touched. All live
instances are kept in a registry so an ``atexit`` hook can reap them if a test session dies
without running its finalizers.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
START_MARKER = "===== harness: starting "
"""Written to a log before each (re)start, so readers can find the current run's part."""

_registry: set[ManagedProcess] = set()  # strong refs: a running child must stay reachable
_registry_lock = threading.Lock()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    The kernel picks it (bind to port 0), which avoids collisions between parallel runs
    far better than a fixed port range would; the small window until the child binds it
    is acceptable for tests.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tail_file(path: Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """Last ``lines`` lines of a (possibly large, still growing) log file.

    Reads only the end of the file so failure messages stay cheap even after a long run.
    """
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _child_setup() -> None:
    """Ask the kernel to SIGKILL the child if the harness process dies.

    Runs in the forked child before exec. Only used when starting from the main thread:
    PR_SET_PDEATHSIG fires when the *thread* that forked exits, which would kill children
    started from short-lived worker threads.
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ManagedProcess:
    """One child process with a log file, restartable with the same argv and environment.

    Why a class rather than bare ``Popen``: tests need to kill (SIGKILL) and restart
    schedulers and the extender to check restart safety, and failure messages need the
    tail of every component's log.
    """

    def __init__(
        self,
        argv: Sequence[str],
        name: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ready: Callable[[ManagedProcess], bool] | None = None,
        ready_timeout: float = 60.0,
        port: int | None = None,
    ) -> None:
        self.port = port
        """The main port the child listens on, if the starter knows it (for URLs in tests)."""
        self.argv = [str(a) for a in argv]
        self.name = name
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.ready = ready
        self.ready_timeout = ready_timeout
        self.popen: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    # -- lifecycle -------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Pid of the running child, or None before start/after stop."""
        return self.popen.pid if self.popen is not None else None

    def start(self) -> ManagedProcess:
        """Start the child (appending to its log) and wait for ``ready`` if one was given."""
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if self.env is not None:
            env.update(self.env)
        with self.log_path.open("ab") as log:
            log.write(f"\n{START_MARKER}{self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            on_main = threading.current_thread() is threading.main_thread()
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.cwd,
                start_new_session=True,  # own process group: stop() signals the whole tree
                preexec_fn=_child_setup if on_main else None,
            )
        with _registry_lock:
            _registry.add(self)
        if self.ready is not None:
            self.wait_ready(self.ready_timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Poll the ready check; fail early with the log tail if the child exits."""
        assert self.ready is not None
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise RuntimeError(
                    f"{self.name} exited with code {self.returncode()} before becoming ready;"
                    f" log {self.log_path}:\n{self.log_tail(60)}"
                )
            try:
                if self.ready(self):
                    return
            except Exception:  # the check itself may fail until the port is open
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name} not ready after {timeout:.0f}s; log {self.log_path}:\n"
                    f"{self.log_tail(60)}"
                )
            time.sleep(0.1)

    def running(self) -> bool:
        """True while the child has not exited."""
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        """Exit code once exited (negative: killed by that signal)."""
        return self.popen.poll() if self.popen is not None else None

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, sig)  # pgid == pid thanks to start_new_session
        except ProcessLookupError:
            pass
        except PermissionError:
            # The group is gone and its id was reused by someone else's process: only
            # signal our own child then.
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop: SIGTERM to the process group, SIGKILL after ``timeout``."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.popen.wait(10)
        # Reap any grandchildren left in the group (e.g. a shell wrapper's child).
        self._signal_group(signal.SIGKILL)
        with _registry_lock:
            _registry.discard(self)

    def kill(self) -> None:
        """Crash the component (SIGKILL, no cleanup), as a node failure or OOM would."""
        if self.popen is None:
            return
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        with _registry_lock:
            _registry.discard(self)

    def restart(self, graceful: bool = True) -> ManagedProcess:
        """Stop (or kill) and start again with the same argv; waits for ready again."""
        if graceful:
            self.stop()
        else:
            self.kill()
        self.restarts += 1
        return self.start()

    # -- diagnostics -----------------------------------------------------------------

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of this component's log, for failure messages."""
        return tail_file(self.log_path, lines)

    def __repr__(self) -> str:
        state = "running" if self.running() else f"exited({self.returncode()})"
        return f"<ManagedProcess {self.name} pid={self.pid} {state} log={self.log_path}>"


def live_processes() -> list[ManagedProcess]:
    """Every started and not yet stopped ManagedProcess of this Python process."""
    with _registry_lock:
        return [p for p in _registry if p.popen is not None]


def stop_all() -> None:
    """Kill every process this harness started (atexit safety net, by pid only)."""
    for p in live_processes():
        with contextlib.suppress(Exception):
            p.kill()


def cpu_seconds(pid: int | None) -> float | None:
    """User plus system CPU time of process `pid` so far (None: unreadable, e.g. gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

"""`gang-extender serve` run as a process against a stand-in API server on loopback, for
the tests of the command itself (leadership, supervision, what its logs hold): the
stand-in server for a handler class, the kubeconfig that points at it, the process with
its output in a file, and the wait for it to answer. Each test keeps its own handler,
flags and checks; these are the steps they all take the same way."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from e2e.harness.process import free_port

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def stand_in(handler: type[BaseHTTPRequestHandler],
             release: Callable[[], None] = lambda: None) -> Iterator[str]:
    """A threaded HTTP server on a free loopback port answering with `handler`, its base
    URL yielded; on the way out `release()` (what ends the handler's open watches, so
    that the shutdown does not wait on them), then shut down and closed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release()
        server.shutdown()
        server.server_close()


def write_kubeconfig(path: Path, server: str, token: str = "t") -> Path:
    """A kubeconfig of one context: `server`, a bearer `token`."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server}}],
        "users": [{"name": "t", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
    }))
    return path


def start_serve(kubeconfig: Path, log_path: Path, *flags: str,
                env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """`gang-extender serve --kubeconfig ... --listen <a free loopback port> *flags`,
    its output (stdout and stderr) in `log_path`; the process and its base URL."""
    port = free_port()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig", str(kubeconfig),
             "--listen", f"127.0.0.1:{port}", *flags],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    return proc, f"http://127.0.0.1:{port}"


def wait_until(check: Callable[[], Any], timeout: float, what: str, log: Path,
               proc: subprocess.Popen[bytes] | None = None) -> Any:
    """`check()`'s first true value, asked every 0.05 s; an answer not there yet or not
    readable (an HTTP error, a body without the key asked) is asked again. Fails with
    `what` and the process's output after `timeout` seconds, or at once when `proc` has
    exited."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        if proc is not None:
            assert proc.poll() is None, f"{what}: the process exited\n{log.read_text()}"
        assert time.monotonic() < deadline, f"{what}\n{log.read_text()}"
        time.sleep(0.05)

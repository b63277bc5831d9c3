"""Ready checks for :class:`~e2e.harness.process.ManagedProcess`: a health URL, a log line.

Why apart: every starter of a process (the control plane, tests starting an extender,
benchmarks, the fake kubelet's process) picks one of these; none of them needs the control
plane to do so.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import httpx

from .process import START_MARKER, ManagedProcess


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

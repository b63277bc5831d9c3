"""Polling with a failure message worth reading: :func:`wait_for`, :class:`NotYet` and the
log tails shown when a wait times out.

Why apart: an e2e failure is almost always a timeout, and what it prints (the last state
seen, the components' logs) decides whether it can be understood; the rule for that is
one, shared by tests, demos and benchmarks, and needs no pytest.
"""

from __future__ import annotations

import os
import pprint
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from .process import ManagedProcess, tail_file
from .queries import pod_phases
from .target import cluster_or_none

T = TypeVar("T")

LOG_LINES = int(os.environ.get("E2E_LOG_LINES", "25"))


class NotYet:
    """A falsy predicate result that carries the state observed, for the failure message.

    ``return NotYet({"phase": phase})`` from a predicate reads better in a failure than
    ``False``.
    """

    def __init__(self, state: object) -> None:
        self.state = state

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return pprint.pformat(self.state, width=100)


class WaitTimeout(AssertionError):
    """``wait_for`` gave up; the message has the description, last state and log tails."""


LogSource = ManagedProcess | str | Path


def logs_text(logs: Sequence[LogSource] | None = None, lines: int = LOG_LINES) -> str:
    """Tails of the given logs, or of every process of the current cluster when None.

    Strings name processes of the current cluster (``"kube-scheduler"``) or are paths.
    """
    cluster = cluster_or_none()
    if logs is None:
        return cluster.log_tails(lines) if cluster is not None else ""
    parts = []
    for src in logs:
        if isinstance(src, ManagedProcess):
            parts.append(f"----- {src!r} -----\n{src.log_tail(lines)}")
        elif isinstance(src, str) and cluster is not None and src in cluster.processes:
            parts.append(cluster.log_tails(lines, names=[src]))
        else:
            parts.append(f"----- {src} -----\n{tail_file(Path(src), lines)}")
    return "\n".join(parts)


def wait_for(
    predicate: Callable[[], T | NotYet],
    timeout: float = 30.0,
    description: str = "condition",
    logs: Sequence[LogSource] | None = None,
    interval: float = 0.2,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that (never a
    :class:`NotYet`, which is always falsy).

    Exceptions from the predicate (an API 404 while an object is being created) count as
    "not yet" and are shown as the last state. On timeout raises :class:`WaitTimeout` with
    the description, the last observed state (the last falsy return, e.g. a
    :class:`NotYet`, or exception) and the log tails of ``logs`` (default: every process of
    the current cluster: apiserver, schedulers, extender, fake kubelet).
    """
    deadline = time.monotonic() + timeout
    last: object = "<predicate never returned>"
    while True:
        try:
            result = predicate()
            if result and not isinstance(result, NotYet):
                return result
            last = result
        except Exception as e:  # reported as the last state
            last = f"exception: {e!r}"
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    state = last if isinstance(last, str) else pprint.pformat(last, width=100)
    raise WaitTimeout(
        f"timed out after {timeout:.0f}s waiting for: {description}\n"
        f"last observed state:\n{state}\n{logs_text(logs)}"
    )


def wait_pods_phase(
    ns: str,
    phase: str,
    count: int,
    label_selector: str | None = None,
    timeout: float = 30.0,
    logs: Sequence[LogSource] | None = None,
) -> dict[str, str]:
    """Wait until at least ``count`` pods (matching the selector) are in ``phase``."""

    def check() -> dict[str, str] | NotYet:
        phases = pod_phases(ns, label_selector)
        n = sum(1 for p in phases.values() if p == phase)
        return phases if n >= count else NotYet(phases)

    result = wait_for(check, timeout, f"{count} pods of {ns} ({label_selector or 'all'}) "
                      f"in phase {phase}", logs)
    assert isinstance(result, dict)  # NotYet is falsy, so never returned
    return result

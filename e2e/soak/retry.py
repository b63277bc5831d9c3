"""API calls that survive an API server restart, apart from the run because every part
of it (setup, gangs, neighbours, the drain) makes such calls while the chaos restarts
kube-apiserver under them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from e2e.harness.k8s import ApiException

T = TypeVar("T")


def retry(fn: Callable[[], T], what: str, timeout: float = 120.0) -> T | None:
    """Call `fn` until it succeeds; 409 AlreadyExists and 404 count as done (a retry of a
    create that went through, a delete of something gone)."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        try:
            return fn()
        except ApiException as e:
            if e.status in (404, 409):
                return None
            err: Exception = e
        except Exception as e:  # connection refused while the API server restarts
            err = e
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: still failing after {timeout:.0f}s: {err!r}")
        time.sleep(delay)
        delay = min(delay * 2, 3.0)

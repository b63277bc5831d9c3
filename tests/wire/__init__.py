"""Request and response bodies a stock kube-scheduler exchanged with an HTTP extender,
recorded by ``python -m e2e.capture_wire`` (README.md here says how and from which
Kubernetes release).

Why kept in the checkout: the tests that replay them must run in a fresh clone with
nothing beside it, and a new release is recorded again by the same command rather than
by hand. Tests read them through :func:`sample` and :func:`capture`, never by path, so
where the files live is decided here alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WIRE_DIR = Path(__file__).resolve().parent


def sample(name: str) -> Any:
    """A fresh copy of one recorded body (``nodecachecapable-true.filter.request.json``):
    callers may change it freely."""
    return json.loads((WIRE_DIR / name).read_text())


def capture() -> dict[str, Any]:
    """The recording's manifest: the Kubernetes version and, per mode, the pod as the API
    server returned it on create (uid, creation time), against which decoded bodies are
    checked."""
    data: dict[str, Any] = json.loads((WIRE_DIR / "capture.json").read_text())
    return data


def created_pod(node_cache_capable: bool) -> dict[str, str]:
    """``namespace``, ``name``, ``uid`` and ``creationTimestamp`` of the pod recorded in
    that mode, as the API server assigned them."""
    for mode in capture()["modes"]:
        if mode["nodeCacheCapable"] is node_cache_capable:
            pod: dict[str, str] = mode["pod"]
            return pod
    raise LookupError(f"no mode nodeCacheCapable={node_cache_capable} in capture.json")

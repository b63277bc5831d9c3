"""Lease objects as kube-scheduler writes them (holder, duration, MicroTime renewals), for
the tests of leadership: the decision's own tests, and those of the standby, supervision
and command line that need a replica to be leader or not."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from extender.kube.leader import LeaseRef

REF = LeaseRef("ns", "gang-scheduler")


def micro(t: float) -> str:
    """A Lease MicroTime, as kube-scheduler writes renewTime."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease(holder: str, renewed: float, duration: int = 15) -> dict[str, Any]:
    return {"metadata": {"name": REF.name, "namespace": REF.namespace, "resourceVersion": "7"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "acquireTime": micro(renewed - 100), "renewTime": micro(renewed)}}

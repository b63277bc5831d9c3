"""The cluster the e2e helpers talk to: set by the ``control_plane`` fixture, or by
:func:`use_cluster` outside pytest (demos, benchmarks, the soak driver).

Why apart: helpers (object builders, queries, waits) are plain functions that take and
return plain JSON dicts, the shape ``kubectl get -o json`` shows, with no cluster
argument; this module holds the one piece of state they share, so none of them depends on
pytest or on the fixtures that set it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .clusterbase import Cluster
from .k8s import client


@dataclass
class ClusterApis:
    """Admin API objects for one cluster (the client is shared, thread-safe)."""

    api: Any
    core: Any
    batch: Any
    apps: Any
    custom: Any
    events: Any


_cluster: Cluster | None = None
_kube: ClusterApis | None = None


def use_cluster(cluster: Cluster) -> ClusterApis:
    """Make ``cluster`` the target of the helper functions; returns its API objects."""
    global _cluster, _kube
    api = cluster.api_client()
    _cluster = cluster
    _kube = ClusterApis(api, client.CoreV1Api(api), client.BatchV1Api(api), client.AppsV1Api(api),
                 client.CustomObjectsApi(api), client.EventsV1Api(api))
    return _kube


@contextlib.contextmanager
def cluster_in_use(cluster: Cluster) -> Iterator[ClusterApis]:
    """Point the helpers at ``cluster`` for a block, then back at the one before: for a
    test module that runs a control plane of its own (other gates) beside the session's."""
    global _cluster, _kube
    before = _cluster, _kube
    k = use_cluster(cluster)
    try:
        yield k
    finally:
        k.api.close()
        _cluster, _kube = before


def kube() -> ClusterApis:
    """API objects of the current cluster."""
    if _kube is None:
        raise RuntimeError("no cluster: use the control_plane fixture or use_cluster()")
    return _kube


def current_cluster() -> Cluster:
    """The cluster the helpers talk to."""
    if _cluster is None:
        raise RuntimeError("no cluster: use the control_plane fixture or use_cluster()")
    return _cluster


def cluster_or_none() -> Cluster | None:
    """The cluster the helpers talk to, or None when none is set (no error)."""
    return _cluster


def release_cluster() -> None:
    """Close the current cluster's client and point the helpers at no cluster (the
    ``control_plane`` fixture's teardown)."""
    global _cluster, _kube
    if _kube is not None:
        _kube.api.close()
    _cluster = _kube = None

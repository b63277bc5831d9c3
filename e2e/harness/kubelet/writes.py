"""The fake kubelet's writes to the API server: a pod's status, a node's taints, a pod's
force delete.

Why apart: they are the one part of the kubelet a measurement swaps. The fake kubelet
shares the 2-core machine with the schedulers ``bench.e2e`` times, so what each write
costs is measured per client (``lab.experiments.kubelet_writes`` passes other
:class:`PodWrites` to the same loop); the loop and the pod's life only say *which* write
is due, through this interface, and never which client carries it.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..rawapi import STRATEGIC_MERGE_PATCH, RawApi, path_segment


class PodWrites(Protocol):
    """The writes a kubelet makes, one call each, raising on an API error (the caller
    retries)."""

    def patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None: ...

    def untaint(self, name: str, resource_version: str,
                taints: list[dict[str, Any]]) -> None: ...

    def force_delete(self, ns: str, name: str, uid: str) -> None: ...

    def close(self) -> None: ...


def pod_path(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{path_segment(ns)}/pods/{path_segment(name)}"


class RawPodWrites:
    """The writes through :class:`~e2e.harness.rawapi.RawApi`: the cheapest client the
    measurement found (its numbers are in ``e2e/harness/rawapi.py``)."""

    def __init__(self, raw: RawApi) -> None:
        self.raw = raw

    def patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        """Strategic merge patch of the status subresource (what ``patch_namespaced_pod_status``
        sends for a dict body)."""
        self.raw.request("PATCH", pod_path(ns, name) + "/status", body={"status": status},
                         content_type=STRATEGIC_MERGE_PATCH)

    def untaint(self, name: str, resource_version: str,
                taints: list[dict[str, Any]]) -> None:
        """The node's taints without ``not-ready``, on the version seen (409 if it changed
        since: a later event brings the node again)."""
        self.raw.request("PATCH", f"/api/v1/nodes/{path_segment(name)}", body={
            "metadata": {"resourceVersion": resource_version}, "spec": {"taints": taints}},
            content_type=STRATEGIC_MERGE_PATCH)

    def force_delete(self, ns: str, name: str, uid: str) -> None:
        """Delete now, but only the pod we saw: a new pod of the same name (a StatefulSet
        replacement, a test re-creating it) fails the uid precondition with 409."""
        self.raw.request("DELETE", pod_path(ns, name), {"gracePeriodSeconds": 0},
                         body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})

    def close(self) -> None:
        self.raw.close()

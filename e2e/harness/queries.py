"""Reading the e2e objects back as JSON: one pod, Job or PodGroup (None when absent), a
namespace's pods, their phases and nodes, a Job's conditions, which Workload API version
the cluster serves.

Why apart: assertions and wait predicates are built from these reads; they change with
what tests look at, not with how objects are made or how long a wait lasts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .k8s import ApiException
from .objects import PG_GROUP, PG_PLURAL, PG_VERSION, json_body
from .target import kube


def _get_or_none(fn: Callable[[], Any]) -> dict[str, Any] | None:
    try:
        out: dict[str, Any] = json_body(fn())
        return out
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def served_workload_version() -> str | None:
    """The version of scheduling.k8s.io whose PodGroups the cluster serves, newest first
    (no release serves both), or None."""
    return next((v for v in ("v1beta1", "v1alpha2") if workload_api_served(v)), None)


def workload_api_served(version: str = "v1alpha2") -> bool:
    """Whether the cluster serves the upstream Workload API's PodGroups in `version` of
    scheduling.k8s.io: v1alpha2 on 1.36, v1beta1 on 1.37 (the local control plane serves
    its release's, harness/versions.py)."""
    try:
        kube().custom.list_cluster_custom_object("scheduling.k8s.io", version, "podgroups",
                                                 limit=1)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def get_pod(ns: str, name: str) -> dict[str, Any] | None:
    """The pod as JSON, or None if it does not exist."""
    return _get_or_none(lambda: kube().core.read_namespaced_pod(
        name, ns, _preload_content=False))


def get_job(ns: str, name: str) -> dict[str, Any] | None:
    """The Job as JSON, or None."""
    return _get_or_none(lambda: kube().batch.read_namespaced_job(
        name, ns, _preload_content=False))


def get_podgroup(ns: str, name: str) -> dict[str, Any] | None:
    """The PodGroup as JSON, or None."""
    return _get_or_none(lambda: kube().custom.get_namespaced_custom_object(
        PG_GROUP, PG_VERSION, ns, PG_PLURAL, name, _preload_content=False))


def list_pods(ns: str, label_selector: str | None = None) -> list[dict[str, Any]]:
    """Pods of a namespace as JSON (one LIST)."""
    kw = {"label_selector": label_selector} if label_selector else {}
    items: list[dict[str, Any]] = json_body(kube().core.list_namespaced_pod(
        ns, _preload_content=False, **kw))["items"]
    return items


def pod_phases(ns: str, label_selector: str | None = None) -> dict[str, str]:
    """``{pod name: phase}``; handy as the state shown by a failing :func:`wait_for`."""
    return {p["metadata"]["name"]: (p.get("status") or {}).get("phase", "?")
            for p in list_pods(ns, label_selector)}


def pod_nodes(ns: str, label_selector: str | None = None) -> dict[str, str]:
    """``{pod name: node name or ""}``."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or ""
            for p in list_pods(ns, label_selector)}


def job_condition(job: Mapping[str, Any] | None, cond_type: str) -> bool:
    """True if the Job has condition ``cond_type`` (e.g. "Complete", "Failed") True."""
    if not job:
        return False
    return any(c.get("type") == cond_type and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])

"""Upstream PodGroups (scheduling.k8s.io) as the e2e tests make and read them, in whichever
version the API server serves: the served version (or a skip), the name of its Scheduled
condition there, a group and its members made, the group read back with its conditions
and the managers of its status. The upstream-status and in-tree-gang tests both use
them, so they are a module of their own rather than a test module the other imports
from."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness.objects import GANG_SCHEDULER, create_pod
from e2e.harness.queries import served_workload_version
from e2e.harness.target import kube

EXTENDER_MANAGER = "gang-extender"  # managedFields manager: the extender's User-Agent


def version() -> str:
    v = served_workload_version()
    if v is None:
        pytest.skip("no version of scheduling.k8s.io PodGroups is served")
    return v


def scheduled_type(v: str) -> str:
    return "PodGroupScheduled" if v == "v1alpha2" else "PodGroupInitiallyScheduled"


def create_upstream(ns: str, name: str, min_count: int, v: str) -> None:
    kube().custom.create_namespaced_custom_object(
        "scheduling.k8s.io", v, ns, "podgroups",
        {"apiVersion": f"scheduling.k8s.io/{v}", "kind": "PodGroup",
         "metadata": {"name": name},
         "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


def get_upstream(ns: str, name: str, v: str) -> dict[str, Any]:
    out: dict[str, Any] = kube().custom.get_namespaced_custom_object(
        "scheduling.k8s.io", v, ns, "podgroups", name)
    return out


def conditions(ns: str, name: str, v: str) -> dict[str, dict[str, Any]]:
    st = get_upstream(ns, name, v).get("status") or {}
    return {c["type"]: c for c in st.get("conditions") or []}


def status_managers(obj: dict[str, Any]) -> set[str]:
    return {m.get("manager", "") for m in (obj.get("metadata") or {}).get("managedFields") or []
            if m.get("subresource") == "status"}


def member(ns: str, name: str, group: str, cpu: str, sel: dict[str, str],
           scheduler: str = GANG_SCHEDULER, klass: str | None = None) -> None:
    create_pod(ns, name, cpu=cpu, scheduler_name=scheduler, node_selector=sel, labels=sel,
               priority_class=klass, spec_extra={"schedulingGroup": {"podGroupName": group}})

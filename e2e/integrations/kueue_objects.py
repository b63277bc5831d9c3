"""Kueue's objects as the tests write and read them: ResourceFlavors, Topologies,
ClusterQueues and LocalQueues (``kueue.x-k8s.io/v1beta2``, the version v0.17.0 stores),
Workloads and when their conditions changed. The manager process: :mod:`e2e.integrations.kueue`."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from e2e.harness.k8s import ApiException
from e2e.harness.target import kube
from e2e.integrations.kueue import API, GROUP, GROUP_LABEL, MANAGED_LABEL


def _create(plural: str, body: dict[str, Any], ns: str | None = None) -> None:
    custom = kube().custom
    if ns is None:
        custom.create_cluster_custom_object(GROUP, API, plural, body, _preload_content=False)
    else:
        custom.create_namespaced_custom_object(GROUP, API, ns, plural, body,
                                               _preload_content=False)


def create_flavor(name: str, node_labels: Mapping[str, str] | None = None,
                  topology: str | None = None) -> None:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if topology:
        spec["topologyName"] = topology
    _create("resourceflavors", {"apiVersion": f"{GROUP}/{API}", "kind": "ResourceFlavor",
                                "metadata": {"name": name}, "spec": spec})


def create_topology(name: str, levels: Sequence[str]) -> None:
    """A Topology for Topology Aware Scheduling: node labels, widest level first."""
    _create("topologies", {"apiVersion": f"{GROUP}/{API}", "kind": "Topology",
                           "metadata": {"name": name},
                           "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}})


def create_cluster_queue(name: str, flavor: str, cpu: str, memory: str,
                         namespaces: Sequence[str] = ()) -> None:
    """A ClusterQueue of one flavor with ``cpu``/``memory`` nominal quota, open to the
    given namespaces (by name) only, so parallel test runs never share quota."""
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                      "operator": "In", "values": list(namespaces)}]}
    _create("clusterqueues", {
        "apiVersion": f"{GROUP}/{API}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": selector,
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                     "name": flavor, "resources": [
                         {"name": "cpu", "nominalQuota": cpu},
                         {"name": "memory", "nominalQuota": memory}]}]}]}})


def create_local_queue(ns: str, name: str, cluster_queue: str) -> None:
    _create("localqueues", {"apiVersion": f"{GROUP}/{API}", "kind": "LocalQueue",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {"clusterQueue": cluster_queue}}, ns)


def delete_cluster_objects(plural: str, names: Sequence[str]) -> None:
    for n in names:
        with contextlib.suppress(ApiException):
            kube().custom.delete_cluster_custom_object(GROUP, API, plural, n)


def workloads(ns: str) -> list[dict[str, Any]]:
    resp = kube().custom.list_namespaced_custom_object(GROUP, API, ns, "workloads",
                                                       _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def condition(obj: Mapping[str, Any], cond_type: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == cond_type:
            out: dict[str, Any] = c
            return out
    return None


def is_true(obj: Mapping[str, Any], cond_type: str) -> bool:
    c = condition(obj, cond_type)
    return c is not None and c.get("status") == "True"


def managed_namespace(ns: str) -> None:
    """Put ``ns`` under Kueue (its webhooks and managedJobsNamespaceSelector)."""
    kube().core.patch_namespace(ns, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})


def owner_key(wl: Mapping[str, Any]) -> str:
    """A Workload's name as tests know it: its Job, else its pod group, else its own."""
    md = wl["metadata"]
    for o in md.get("ownerReferences") or []:
        if o.get("kind") == "Job":
            return str(o["name"])
    return str((md.get("labels") or {}).get(GROUP_LABEL) or md["name"])


class WorkloadTimeline:
    """Polls the Workloads of a namespace (every 0.1 s, in a thread) and keeps when each
    condition was first seen in each state, on this process's monotonic clock, which the
    :class:`~e2e.gang.Recorder` of pod bindings uses too (the conditions' own timestamps
    have whole seconds only). Keys: ``(workload, "Admitted=True")``,
    ``(workload, "Evicted=True:PodsReadyTimeout")``, ...; ``evictions`` counts the
    transitions to Evicted=True seen, ``requeues`` the largest ``status.requeueState.count``
    (Kueue's own count of requeues after a PodsReady timeout)."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.first: dict[tuple[str, str], float] = {}
        self.evictions: dict[str, int] = {}
        self.requeues: dict[str, int] = {}
        self._last: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkloadTimeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with contextlib.suppress(Exception):
                self.observe(workloads(self.ns), time.monotonic())

    def observe(self, items: Sequence[Mapping[str, Any]], now: float) -> None:
        for wl in items:
            key = owner_key(wl)
            count = ((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0
            self.requeues[key] = max(self.requeues.get(key, 0), int(count))
            for c in (wl.get("status") or {}).get("conditions") or []:
                state = f"{c.get('type')}={c.get('status')}"
                self.first.setdefault((key, state), now)
                self.first.setdefault((key, f"{state}:{c.get('reason')}"), now)
                if (c.get("type") == "Evicted" and c.get("status") == "True"
                        and self._last.get((key, "Evicted")) != "True"):
                    self.evictions[key] = self.evictions.get(key, 0) + 1
                self._last[(key, str(c.get("type")))] = str(c.get("status"))

    def at(self, workload: str, state: str) -> float | None:
        return self.first.get((workload, state))

"""Gang tests that run on any cluster where the gang scheduler is installed (issue 19).

A test marked ``any_cluster`` asks the ``any_cluster`` fixture for nodes and gets
:class:`Slots`: node names, the gang scheduler's name and a pod size of which exactly one
fits on each of those nodes. Its pods are pinned to those nodes (required node affinity on
``kubernetes.io/hostname``) and sized from their free capacity, so nothing else on the
cluster changes the outcome, and the test reads only what the API shows (pod conditions,
Events, PodGroup status): never the extender's debug port, which a cluster keeps on
loopback.

* Locally (no ``$E2E_KUBECONFIG``): fresh fake nodes of 4 CPUs and 8 GiB, and the
  session's gang stack (``e2e/gang.py``).
* External (``$E2E_KUBECONFIG``: kind via ``e2e/kind/run.sh``, or CI's run against the
  local control plane with the stack started from ``deploy/``,
  ``e2e/tests/install/test_external_mode.py``): the cluster's schedulable nodes (Ready, not
  cordoned, no NoSchedule/NoExecute taint), their allocatable minus what the pods bound
  there request, and the installed gang scheduler, ``$E2E_GANG_SCHEDULER`` (default
  ``gang-scheduler``). A cluster with too few such nodes skips, saying so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from e2e.gang import GangStack
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import create_pod
from e2e.harness.process import ManagedProcess
from e2e.harness.queries import list_pods
from e2e.harness.target import kube
from extender.core.model.convert import node_from_k8s, pod_from_k8s

SCHEDULER_ENV = "E2E_GANG_SCHEDULER"
HOSTNAME = "kubernetes.io/hostname"
LOCAL_NODE = {"cpu": "4", "memory": "8Gi"}
POD_MEMORY = 64 << 20  # what each test pod asks for besides its CPU


@dataclass(frozen=True)
class NodeFree:
    name: str
    hostname: str
    cpu: int  # millicores free
    memory: int  # bytes free
    pods: int  # pod slots free


def _schedulable(node: dict[str, Any]) -> bool:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or []):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def free_nodes() -> list[NodeFree]:
    """Schedulable nodes and what is free on them, as kube-scheduler counts it: allocatable
    minus the requests of every unfinished pod bound there (the extender's own rules,
    extender/core/model/resources.py)."""
    raw = json.loads(kube().core.list_node(_preload_content=False).data)["items"]
    nodes = {n["metadata"]["name"]: n for n in raw if _schedulable(n)}
    used: dict[str, dict[str, int]] = {name: {} for name in nodes}
    pods = json.loads(kube().core.list_pod_for_all_namespaces(_preload_content=False).data)
    for obj in pods["items"]:
        try:
            p = pod_from_k8s(obj)
        except ValueError:
            continue
        if p.takes_capacity and p.node_name in used:
            for r, q in p.requests.items():
                used[p.node_name][r] = used[p.node_name].get(r, 0) + q
    out = []
    for name, obj in nodes.items():
        alloc = node_from_k8s(obj).allocatable
        u = used[name]
        hostname = (obj["metadata"].get("labels") or {}).get(HOSTNAME, name)
        out.append(NodeFree(name, hostname, alloc.get("cpu", 0) - u.get("cpu", 0),
                            alloc.get("memory", 0) - u.get("memory", 0),
                            alloc.get("pods", 0) - u.get("pods", 0)))
    return sorted(out, key=lambda n: (-n.cpu, n.name))


def one_per_node(nodes: Sequence[NodeFree]) -> int | None:
    """A CPU request (millicores) of which exactly one pod fits on each node: at most the
    least free, more than half the most free. None when the nodes differ too much."""
    low, high = min(n.cpu for n in nodes), max(n.cpu for n in nodes)
    cpu = max(low * 6 // 10, high // 2 + 1)
    return cpu if cpu <= low else None


@dataclass
class Slots:
    """Nodes lent to one test: one `cpu`-sized pod fits on each, and no more."""

    scheduler: str
    nodes: list[str]
    hostnames: list[str]
    cpu: str
    logs: list[ManagedProcess | str] = field(default_factory=list)

    @property
    def affinity(self) -> dict[str, Any]:
        """spec_extra that keeps a pod on these nodes."""
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME, "operator": "In", "values": list(self.hostnames)}]}]}}}}

    def pod(self, ns: str, name: str, *, spec_extra: Mapping[str, Any] | None = None,
            **kw: Any) -> dict[str, Any]:
        """A pod of the gang scheduler, node-sized and pinned to these nodes; `kw` as
        :func:`e2e.harness.objects.create_pod` (labels, annotations, pod_group, ...)."""
        return create_pod(ns, name, cpu=self.cpu, memory=f"{POD_MEMORY >> 20}Mi",
                          scheduler_name=self.scheduler,
                          spec_extra={**self.affinity, **(spec_extra or {})}, **kw)

    def bound(self, ns: str) -> dict[str, str]:
        """{pod: node} of the namespace's bound pods."""
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in list_pods(ns)
                if p["spec"].get("nodeName")}


class AnyCluster:
    def __init__(self, cluster: Cluster, nodes: NodeSet, namespace: str,
                 stack: GangStack | None) -> None:
        self.cluster = cluster
        self.node_set = nodes
        self.namespace = namespace
        self.stack = stack

    @property
    def external(self) -> bool:
        return self.stack is None

    def nodes(self, count: int) -> Slots:
        """`count` nodes for this test: fresh fake ones locally; on an external cluster
        the `count` with the most free CPU (skips when there are fewer, or when they
        differ too much to size one pod per node)."""
        if self.stack is not None:
            prefix = self.namespace.removeprefix("e2e-")[:30].rstrip("-")
            names = self.node_set.add_nodes(count, prefix=prefix, **LOCAL_NODE)
            return Slots("gang-scheduler", names, names, "2400m", [*self.stack.logs()])
        have = [n for n in free_nodes() if n.memory >= POD_MEMORY and n.pods >= 1]
        if len(have) < count:
            pytest.skip(f"needs {count} schedulable nodes with room, the cluster has "
                        f"{len(have)}: {[(n.name, n.cpu) for n in have]}")
        chosen = have[:count]
        cpu = one_per_node(chosen)
        if cpu is None:
            pytest.skip(f"the {count} freest nodes differ too much in free CPU to size one "
                        f"pod per node: {[(n.name, n.cpu) for n in chosen]}")
        return Slots(os.environ.get(SCHEDULER_ENV, "gang-scheduler"),
                     [n.name for n in chosen], [n.hostname for n in chosen], f"{cpu}m")


def any_cluster_fixture(request: pytest.FixtureRequest, control_plane: Cluster,
                        fake_nodes: NodeSet, namespace: str) -> Iterator[AnyCluster]:
    stack = None
    if isinstance(control_plane, ControlPlane):
        stack = request.getfixturevalue("gang")  # the session's stack, made sure to be up
    yield AnyCluster(control_plane, fake_nodes, namespace, stack)


any_cluster = pytest.fixture(any_cluster_fixture, name="any_cluster")

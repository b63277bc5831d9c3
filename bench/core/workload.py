"""The benchmark's synthetic cluster and gang workload, as Kubernetes JSON shaped like
kube-scheduler's informer copies.

Nodes of 32 CPU / 128Gi (every 4th a tainted 8-GPU node), about one running
default-scheduler pod per node, and pending pods in PodGroups of 1-64 members (four
request shapes, one in five gangs on GPUs) plus 5 % plain pods of the gang scheduler.
Seeded: the same sizes give the same workload on every run.

With `topology`, the same nodes and gangs, plus a three-level topology (docs/topology.md):
racks of 32 nodes (8 of them GPU nodes: 64 GPUs a rack) in blocks of 16 racks, the node
being the third level. Of the gangs, 4 in 10 require one rack, 2 require one block and
prefer one rack, 2 prefer a rack, then a block, and 2 ask for nothing. Drawn from a
generator of their own, so the shapes and sizes are those of the case without topology.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from extender.core.model.types import GROUP_LABEL

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
]
T0 = 1_790_000_000.0  # simulated epoch seconds
RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
RACK_NODES = 32
BLOCK_RACKS = 16
REQUIRED = "gang-extender.x-k8s.io/topology-required"
PREFERRED = "gang-extender.x-k8s.io/topology-preferred"


@dataclass(frozen=True)
class Shape:
    name: str
    requests: dict[str, str]
    gpu: bool = False


SHAPES = (
    Shape("small", {"cpu": "500m", "memory": "1Gi"}),
    Shape("medium", {"cpu": "2", "memory": "4Gi"}),
    Shape("large", {"cpu": "4", "memory": "16Gi"}),
    Shape("gpu", {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}, gpu=True),
)
SHAPE_WEIGHTS = (3, 3, 2, 2)


# ----- Kubernetes JSON --------------------------------------------------------------------


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def node_json(i: int, topology: bool = False) -> dict[str, Any]:
    name = f"node-{i:05d}"
    gpu = i % 4 == 3
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    if gpu:
        alloc.update({"memory": "256Gi", "nvidia.com/gpu": "8"})
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "node.kubernetes.io/instance-type": "gpu-8x" if gpu else "cpu-32"}
    if topology:
        rack = i // RACK_NODES
        labels[BLOCK] = f"b{rack // BLOCK_RACKS:02d}"
        labels[RACK] = f"b{rack // BLOCK_RACKS:02d}-r{rack % BLOCK_RACKS:02d}"
    return {
        "metadata": {"name": name, "uid": f"node-uid-{i}", "labels": labels},
        "spec": {"taints": [GPU_TAINT] if gpu else []},
        "status": {"capacity": dict(alloc), "allocatable": alloc},
    }


def pod_json(
    ns: str, name: str, uid: str, requests: dict[str, str], created: float,
    group: str | None = None, index: int = 0, gpu: bool = False, node: str = "",
    phase: str = "Pending", scheduler: str = "gang-scheduler",
) -> dict[str, Any]:
    labels = {"app": name.rsplit("-", 1)[0], "index": str(index)}
    if group:
        labels[GROUP_LABEL] = group
    tolerations = [*DEFAULT_TOLERATIONS, *([GPU_TOLERATION] if gpu else [])]
    limits = {"nvidia.com/gpu": requests["nvidia.com/gpu"]} if gpu else {}
    return {
        "metadata": {
            "name": name, "namespace": ns, "uid": uid, "resourceVersion": "1",
            "creationTimestamp": _ts(created), "labels": labels,
            "annotations": {"example.com/owner": "bench"},
        },
        "spec": {
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ], "defaultMode": 420}}],
            "containers": [{
                "name": "main", "image": "registry.invalid/trainer:1",
                "resources": {"requests": dict(requests), **({"limits": limits} if gpu else {})},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "schedulerName": scheduler, "tolerations": tolerations, "priority": 0,
            "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
            **({"nodeName": node} if node else {}),
        },
        "status": {"phase": phase, "qosClass": "Burstable"},
    }


def group_json(ns: str, name: str, min_member: int, created: float,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": f"pg-{name}",
                     "creationTimestamp": _ts(created),
                     **({"annotations": annotations} if annotations else {})},
        "spec": {"minMember": min_member},
    }


# What the gangs of the topology case ask for, and how often (weights).
TOPOLOGIES: tuple[tuple[dict[str, str], int], ...] = (
    ({REQUIRED: RACK}, 4),
    ({REQUIRED: BLOCK, PREFERRED: RACK}, 2),
    ({PREFERRED: f"{RACK},{BLOCK}"}, 2),
    ({}, 2),
)


@dataclass
class Workload:
    nodes: list[dict[str, Any]]
    running: list[dict[str, Any]]  # default-scheduler pods already bound
    groups: list[dict[str, Any]]
    pending: list[dict[str, Any]]  # in kube-scheduler's queue order
    shape_of: dict[str, Shape]  # pod uid -> shape
    gang_sizes: list[int]
    # What arrives together in "stream" mode: a PodGroup (None for a plain pod) and its
    # pods; batch_of: pod uid -> index into batches.
    batches: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]]
    batch_of: dict[str, int]


def make_workload(n_nodes: int, n_pods: int, seed: int = 1, topology: bool = False) -> Workload:
    """At 500 nodes and 10,000 pods the cluster is oversubscribed (many gangs wait); at
    5,000 nodes everything fits, with `topology` too (each gang in the domain it asks
    for)."""
    rng = random.Random(seed)
    topo_rng = random.Random(seed + 1)
    nodes = [node_json(i, topology) for i in range(n_nodes)]
    running = []
    for i in range(n_nodes):
        for k in range(i % 3):  # 0-2 busy pods per node: fragmentation for the planner
            running.append(pod_json(
                "default", f"svc-{i}-{k}", f"run-{i}-{k}",
                {"cpu": str(1 + (i + k) % 3), "memory": f"{2 + (i * 7 + k) % 6}Gi"},
                T0 - 3600, node=f"node-{i:05d}", phase="Running",
                scheduler="default-scheduler"))
    groups: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    shape_of: dict[str, Shape] = {}
    sizes: list[int] = []
    batches: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]] = []
    g = 0
    while len(pending) < n_pods:
        created = T0 + g
        shape = rng.choices(SHAPES, SHAPE_WEIGHTS)[0]
        ns = f"team-{g % 7}"
        if rng.random() < 0.05:  # a plain pod of the gang scheduler
            uid = f"plain-{g}"
            pending.append(pod_json(ns, f"plain-{g}-0", uid, shape.requests, created,
                                    gpu=shape.gpu))
            shape_of[uid] = shape
            batches.append((None, pending[-1:]))
        else:
            size = min(rng.randint(1, 64), n_pods - len(pending))
            name = f"job-{g}"
            annotations = None
            if topology:
                annotations = topo_rng.choices([t for t, _ in TOPOLOGIES],
                                               [w for _, w in TOPOLOGIES])[0]
            groups.append(group_json(ns, name, size, created, annotations))
            sizes.append(size)
            for j in range(size):
                uid = f"{name}-{j}"
                pending.append(pod_json(ns, f"{name}-{j}", uid, shape.requests, created,
                                        group=name, index=j, gpu=shape.gpu))
                shape_of[uid] = shape
            batches.append((groups[-1], pending[-size:]))
        g += 1
    batch_of = {p["metadata"]["uid"]: i for i, (_, pods) in enumerate(batches) for p in pods}
    return Workload(nodes, running, groups, pending, shape_of, sizes, batches, batch_of)

"""kube-scheduler's own view of the cluster: the nodes it would send an extender's filter.

Before it calls an extender, kube-scheduler runs its own filter plugins on every node:
NodeUnschedulable, TaintToleration and NodeAffinity against the node, NodeResourcesFit
against the node's allocatable minus the requests of the pods bound to it and of those
it has assumed (filter passed, bind pending). The extender only ever sees the nodes
that pass. This is that check and nothing else of kube-scheduler: the benchmark's loop
(bench/core/case.py) and the core tests' stand-in scheduler (tests/core/sim.py) each drive it
in their own way.

Kept incrementally, because the benchmark asks on every scheduling cycle at 5,000
nodes: a node's free capacity is charged and credited as pods come and go, and for
each pod shape the nodes it no longer fits on are kept, so its feasible list is rebuilt
only when one of them flips.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from extender.core.model.constraints import node_matches
from extender.core.model.resources import fits
from extender.core.model.types import NodeInfo, NodeSelectorTerm, PodInfo, Resources, Toleration

_ShapeKey = tuple[
    tuple[tuple[str, int], ...],
    tuple[tuple[str, str], ...],
    "tuple[NodeSelectorTerm, ...] | None",
    tuple[Toleration, ...],
]


@dataclass(eq=False, slots=True)
class PodShape:
    """Pods kube-scheduler's filters cannot tell apart: the same requests and the same
    node-level constraints (those of `proto`, the first such pod asked about)."""

    proto: PodInfo
    allowed: list[str] = field(default_factory=list)  # pass the node-level filters, in order
    full: set[str] = field(default_factory=set)  # where the requests do not fit now
    feasible: list[str] | None = None  # allowed and not full; None: to be rebuilt


class KubeSchedulerView:
    """Nodes, and what the pods bound or assumed on them use, as kube-scheduler sees them."""

    def __init__(self, nodes: Iterable[NodeInfo] = ()) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.free: dict[str, Resources] = {}  # allocatable minus used, per node
        self._used: dict[str, Resources] = {}  # also for nodes not (or no longer) listed
        self._shapes: dict[_ShapeKey, PodShape] = {}
        self.set_nodes(nodes)

    def set_nodes(self, nodes: Iterable[NodeInfo]) -> None:
        """The cluster's nodes, in the order kube-scheduler lists them."""
        self.nodes = {n.name: n for n in nodes}
        self.free = {}
        for name, node in self.nodes.items():
            used = self._used.get(name, {})
            self.free[name] = {k: v - used.get(k, 0) for k, v in node.allocatable.items()}
        for shape in self._shapes.values():
            self._build(shape)

    def charge(self, node: str, requests: Resources) -> None:
        """A pod bound or assumed on `node`."""
        self._adjust(node, requests, 1)

    def credit(self, node: str, requests: Resources) -> None:
        """A pod on `node` finished or went away, or its assumption was forgotten."""
        self._adjust(node, requests, -1)

    def _adjust(self, node: str, requests: Resources, sign: int) -> None:
        used = self._used.setdefault(node, {})
        for k, v in requests.items():
            used[k] = used.get(k, 0) + sign * v
        free = self.free.get(node)
        if free is None:
            return
        for k, v in requests.items():
            if k in free:
                free[k] -= sign * v
        for shape in self._shapes.values():
            now_full = not fits(shape.proto.requests, free)
            if now_full != (node in shape.full):
                (shape.full.add if now_full else shape.full.discard)(node)
                shape.feasible = None

    def shape_of(self, pod: PodInfo) -> PodShape:
        key: _ShapeKey = (
            tuple(sorted(pod.requests.items())),
            tuple(sorted(pod.node_selector.items())),
            pod.required_node_affinity,
            pod.tolerations,
        )
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = PodShape(pod)
            self._build(shape)
        return shape

    def _build(self, shape: PodShape) -> None:
        pod = shape.proto
        shape.allowed = [n for n, node in self.nodes.items() if node_matches(pod, node) is None]
        shape.full = {n for n, free in self.free.items() if not fits(pod.requests, free)}
        shape.feasible = None

    def feasible(self, shape: PodShape) -> list[str]:
        """The nodes that pass kube-scheduler's filters for pods of `shape`, in order.
        Shared until the next change: read it, do not modify it."""
        if shape.feasible is None:
            full = shape.full
            shape.feasible = [n for n in shape.allowed if n not in full]
        return shape.feasible

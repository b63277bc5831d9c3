"""What the planner plans against, as one object: nodes, free capacity, the pods on
each node, and the fit index kept for exactly that free capacity.

A view of the cache, not a copy. kube-scheduler copies its cache into a snapshot at the
start of each cycle because its informers keep writing while a cycle runs; here every
watch event, verb and tick runs on one thread, so nothing changes under a plan, and a
copy of thousands of nodes per plan would cost more than the plan itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache.devices import DeviceView
from extender.core.cache.fitindex import FitIndex
from extender.core.cache.topology import Domains
from extender.core.model.constraints import repels_beyond_node
from extender.core.model.types import NodeInfo, PodInfo, Resources


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: Mapping[str, NodeInfo]
    # Free capacity per node, after bound pods, assumed pods and reservations; a node
    # that is absent has nothing free.
    free: Mapping[str, Resources]
    # Pods bound to each node or reserved on it, for anti-affinity.
    pods_on_node: Mapping[str, Sequence[PodInfo]]
    # Kept by the cache for these very `nodes` and `free`; None for any other view.
    index: FitIndex | None = None
    # The nodes grouped by topology labels, kept by the cache for these `nodes`; None:
    # grouped when needed (docs/topology.md).
    domains: Domains | None = None
    # The pods of `pods_on_node` whose anti-affinity reaches beyond their node, with
    # their node: kept by the cache; None: looked for in `pods_on_node` when needed.
    repellers: Mapping[tuple[str, str], tuple[str, PodInfo]] | None = None
    # The devices (DRA) and what of them is taken, for members with claims; None: no
    # member's claims are planned (a view built by hand, without devices).
    devices: DeviceView | None = None

    def __post_init__(self) -> None:
        if self.index is not None and (
            self.index.free is not self.free or self.index.nodes is not self.nodes
        ):
            raise ValueError("a fit index belongs to the free capacity it was built for")
        if self.domains is not None and self.domains.nodes is not self.nodes:
            raise ValueError("topology domains belong to the nodes they were built for")

    def with_free(self, free: Mapping[str, Resources]) -> Snapshot:
        """The same nodes with other free capacity (e.g. as if no reservation held any),
        planned by scanning, since the index does not describe it."""
        return Snapshot(self.nodes, free, self.pods_on_node, domains=self.domains,
                        repellers=self.repellers, devices=self.devices)

    def beyond_node_repellers(self) -> list[tuple[str, PodInfo]]:
        """(node, pod) of every pod on a node whose anti-affinity reaches beyond it."""
        if self.repellers is not None:
            return list(self.repellers.values())
        return [(n, p) for n, pods in self.pods_on_node.items() for p in pods
                if repels_beyond_node(p)]

    def topology(self) -> Domains:
        """The nodes grouped by topology labels: the cache's, or grouped now."""
        return self.domains if self.domains is not None else Domains(self.nodes)


class FreeOverlay(Mapping[str, Resources]):
    """`free` with some nodes replaced, without copying every node: what the cluster
    would have free if some capacity were given back (reservations, victims)."""

    def __init__(self, base: Mapping[str, Resources], over: dict[str, Resources]) -> None:
        self._base = base
        self._over = over

    def __getitem__(self, key: str) -> Resources:
        if key in self._over:
            return self._over[key]
        return self._base[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

    def __contains__(self, key: object) -> bool:
        return key in self._over or key in self._base

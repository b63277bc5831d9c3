"""Devices (DRA) in a plan: a member with claims fits a node only if its devices can be
allocated there, besides what claims have allocated, what other gangs' slots hold and
what this plan gave the members placed before it.

Only shapes whose members have claims come here (`Shape.devices`): their nodes are
found by scanning (`Candidates` with `devices`), each counted by how many such members the node's
free devices hold, one member's devices taken after the other's, as kube-scheduler's
DynamicResources plugin allocates them pod by pod. The fit index, kept for requests
alone, serves every other shape as before, so a cluster without claims plans exactly as
it did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.core.cache.devices import DeviceView
from extender.core.devices.allocate import DeviceKey
from extender.core.model.fit import fit_count
from extender.core.model.types import NodeInfo
from extender.core.planner.shapes import Shape

__all__ = ["DevicePlan", "device_room"]


@dataclass(slots=True)
class DevicePlan:
    """What one planning attempt takes of the devices: `base` (allocated or held by a
    slot, read once per attempt) and, per node, what its members placed so far took."""

    view: DeviceView
    base: frozenset[DeviceKey] | None = None
    on_node: dict[str, frozenset[DeviceKey]] = field(default_factory=dict)

    def _taken(self, name: str) -> frozenset[DeviceKey]:
        if self.base is None:
            self.base = self.view.taken()
        mine = self.on_node.get(name)
        return self.base | mine if mine else self.base

    def count(self, shape: Shape, node: NodeInfo) -> int:
        """How many more members of `shape` the node's free devices hold."""
        if shape.devices is None:
            return 1 << 62
        if shape.device_missing:
            return 0
        return self.view.copies(node, shape.devices, self._taken(node.name))

    def place(self, shape: Shape, node: NodeInfo) -> None:
        """One member of `shape` placed on `node`: its devices are this plan's."""
        if shape.devices:
            chosen = self.view.choose(node, shape.devices, self._taken(node.name))
            if chosen:
                self.on_node[node.name] = self.on_node.get(node.name, frozenset()) | chosen


def device_room(shape: Shape, plan: DevicePlan, node: NodeInfo,
                free: Mapping[str, int] | None) -> int:
    """Members of `shape` that fit on `node` by requests and devices (a topology
    domain's room, counted before any member is placed)."""
    cnt = fit_count(shape.items, free, node, shape.proto, shape.plain,
                    tuple(shape.proto.node_selector.items()))
    if cnt <= 0:
        return 0
    return min(cnt, plan.count(shape, node))

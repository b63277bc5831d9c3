"""Devices (DRA) in a plan: a member with claims fits a node only if its devices can be
allocated there, besides what claims have allocated, what other gangs' slots hold and
what this plan gave the members placed before it.

Only shapes whose members have claims come here (`Shape.devices`): their nodes are
found by scanning (`Candidates` with `devices`), each counted by how many such members the node's
free devices hold, one member's devices taken after the other's, as kube-scheduler's
DynamicResources plugin allocates them pod by pod. The fit index, kept for requests
alone, serves every other shape as before, so a cluster without claims plans exactly as
it did.

A claim members name (`Shape.shared`) is one allocation, whoever uses it: the first
member placed chooses its devices on its node (the plan's pin, as kube-scheduler
allocates it for the first member it schedules), and every later member naming it goes
only where those devices can be used: the same node for a node's own devices, any node
the pool is published for when the devices are network-attached (a node selector, or all
nodes). The members of a shape sharing a claim start on a node that holds them all when
one does (`roomiest`), not on the tightest node, which would strand the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extender.core.cache.devices import DeviceView
from extender.core.devices.allocate import Claim, DeviceKey, Fit, NoFit
from extender.core.model.fit import fit_count
from extender.core.model.types import NodeInfo
from extender.core.planner.shapes import Shape

__all__ = ["DevicePlan", "device_room", "roomiest"]


@dataclass(slots=True)
class DevicePlan:
    """What one planning attempt takes of the devices: `base` (allocated or held by a
    slot, read once per attempt), per node what its members placed so far took, and
    the devices the plan chose for shared claims (`pinned`, by claim name; `pins`, all of
    them: no other claim may take them)."""

    view: DeviceView
    base: frozenset[DeviceKey] | None = None
    on_node: dict[str, frozenset[DeviceKey]] = field(default_factory=dict)
    pinned: dict[str, tuple[DeviceKey, ...]] = field(default_factory=dict)
    pins: frozenset[DeviceKey] = frozenset()
    # Whether some pool is network-attached (`DeviceInventory.network_attached`), read
    # once per attempt: its devices, usable from several nodes, once taken by a member
    # are counted taken on every node (in `pins`), and each member's node is checked
    # again before it is placed (`usable`), since a node's count was made before.
    network: bool | None = None

    def _taken(self, name: str) -> frozenset[DeviceKey]:
        if self.base is None:
            self.base = self.view.taken()
        taken = self.base | self.pins if self.pins else self.base
        mine = self.on_node.get(name)
        return taken | mine if mine else taken

    def _shared(self, shape: Shape) -> tuple[Claim, ...]:
        """The shape's shared claims, those this plan allocated standing as allocated
        (so they fit only where their devices are)."""
        return tuple(Claim(c.name, c.spec, self.pinned[c.name])
                     if not c.allocated and c.name in self.pinned else c
                     for c in shape.shared)

    def _own(self, shape: Shape) -> tuple[Claim, ...]:
        assert shape.devices is not None
        return shape.devices[:len(shape.devices) - len(shape.shared)]

    def count(self, shape: Shape, node: NodeInfo) -> int:
        """How many more members of `shape` the node's free devices hold: none where its
        shared claims cannot be allocated (or, allocated, used); otherwise as many as
        its own claims' devices hold once the shared claims' are taken."""
        if shape.devices is None:
            return 1 << 62
        if shape.device_missing:
            return 0
        taken = self._taken(node.name)
        if shape.shared:
            fit = self.view.fit(node, self._shared(shape), taken)
            if isinstance(fit, NoFit):
                return 0
            taken = taken | fit.devices()
        return self.view.copies(node, self._own(shape), taken)

    def _network(self) -> bool:
        if self.network is None:
            self.network = self.view.state.inventory.network_attached()
        return self.network

    def usable(self, shape: Shape, node: NodeInfo) -> bool:
        """Whether the shared claims this plan already allocated can be used on `node`,
        and, where pools are network-attached, whether the node's devices still hold a
        member (a count made before the members placed since does not know)."""
        if shape.devices and self._network():
            if shape.device_missing:
                return False
            claims = (*self._own(shape), *self._shared(shape))
            return isinstance(self.view.fit(node, claims, self._taken(node.name)), Fit)
        if not shape.shared or not self.pinned:
            return True
        pinned = tuple(c for c in self._shared(shape) if c.allocated)
        return not pinned or isinstance(self.view.fit(node, pinned, frozenset()), Fit)

    def unpinned(self, shape: Shape) -> bool:
        """Whether a shared claim of `shape` is still to be allocated by this plan."""
        return any(not c.allocated and c.name not in self.pinned for c in shape.shared)

    def place(self, shape: Shape, node: NodeInfo) -> None:
        """One member of `shape` placed on `node`: its devices are this plan's, its
        shared claims allocated there if they were not yet."""
        if not shape.devices:
            return
        taken = self._taken(node.name)
        if self.unpinned(shape):
            fit = self.view.fit(node, self._shared(shape), taken)
            if isinstance(fit, Fit):
                chosen: dict[str, list[DeviceKey]] = {}
                for claim, _, key in fit.chosen:
                    chosen.setdefault(claim, []).append(key)
                for claim, keys in chosen.items():
                    self.pinned[claim] = tuple(keys)
                self.pins = self.pins | fit.devices()
                taken = taken | fit.devices()
        own = self._own(shape)
        if own:
            mine = self.view.choose(node, own, taken)
            if mine:
                self.on_node[node.name] = self.on_node.get(node.name, frozenset()) | mine
                if self._network():
                    elsewhere = mine - self.view.state.inventory.local_keys(node.name)
                    if elsewhere:
                        self.pins = self.pins | elsewhere


def roomiest(order: Sequence[str], left: Mapping[str, int], want: int) -> str | None:
    """The first node of `order` that can take `want` members (where members sharing a
    node's own devices should start), None if none can."""
    for name in order:
        if left.get(name, 0) >= want:
            return name
    return None


def device_room(shape: Shape, plan: DevicePlan, node: NodeInfo,
                free: Mapping[str, int] | None) -> int:
    """Members of `shape` that fit on `node` by requests and devices (a topology
    domain's room, counted before any member is placed)."""
    cnt = fit_count(shape.items, free, node, shape.proto, shape.plain,
                    tuple(shape.proto.node_selector.items()))
    if cnt <= 0:
        return 0
    return min(cnt, plan.count(shape, node))

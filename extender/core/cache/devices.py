"""The cache's devices (DRA): the inventory kept from the watches, and the devices
reservation slots hold, so that a plan counts what is free as kube-scheduler's
DynamicResources plugin will find it.

What is taken on a node is what claims have allocated plus what slots hold: a slot of a
member with claims holds the devices its claims would get on the slot's node, chosen in
the order the slots were made, none of another's. So does a pod with claims bound to a
node, until the watch shows its claims allocated: kube-scheduler writes the allocation
before the Binding, but the two watches may deliver them in either order. A pod whose
claims are allocated holds its allocation (already taken), nothing more. The set is
computed when asked and kept until a slot, a bound pod with claims, a claim or a slice
changes; no pod without claims ever enters it, so a cluster without DRA pays nothing.

The planner reads it through `DeviceView`: the cluster as it is, or emptied of every
allocation and slot (the test whether a gang could ever be placed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.core.devices.allocate import Claim, DeviceKey, Fit, NoFit
from extender.core.devices.inventory import MAX_COPIES, DeviceInventory, MemberClaims
from extender.core.devices.model import (
    ALL,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    SelectorCompiler,
    SelectorError,
)
from extender.core.model.types import NodeInfo, PodInfo

__all__ = ["DEVICE_KINDS", "DeviceObject", "DeviceState", "DeviceView", "no_selectors",
           "requests_words"]

DeviceObject = ResourceSlice | DeviceClass | ResourceClaim | ResourceClaimTemplate
# The informer kinds whose objects `DeviceState.apply` takes, keyed as the API names them.
DEVICE_KINDS = ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")


def no_selectors(text: str) -> Any:
    """The compiler of a core built without a CEL runtime (tests that plan no device
    with a selector): every selector is an error, so no device is selected by one."""
    raise SelectorError(f"no CEL runtime to evaluate selector {text[:60]!r}")


class DeviceState:
    """The inventory, the slots' devices, and what is taken."""

    def __init__(self, compile_selector: SelectorCompiler) -> None:
        self.inventory = DeviceInventory(compile_selector)
        # ("slot" | "bound", uid) -> (node, pod), in the order they came
        self._slots: dict[tuple[str, str], tuple[str, PodInfo]] = {}
        self._held: frozenset[DeviceKey] | None = frozenset()

    def apply(self, kind: str, key: str, obj: DeviceObject | None) -> None:
        """A watch event of `kind` (`DEVICE_KINDS`): `obj` added or changed, or the
        object `key` ("name" or "namespace/name") deleted when `obj` is None."""
        inv = self.inventory
        ns, _, name = key.rpartition("/")
        if kind == "resourceslices":
            if isinstance(obj, ResourceSlice):
                inv.upsert_slice(obj)
            else:
                inv.remove_slice(key)
        elif kind == "deviceclasses":
            if isinstance(obj, DeviceClass):
                inv.upsert_class(obj)
            else:
                inv.remove_class(key)
        elif kind == "resourceclaims":
            if isinstance(obj, ResourceClaim):
                inv.upsert_claim(obj)
            else:
                inv.remove_claim(ns, name)
        elif kind == "resourceclaimtemplates":
            if isinstance(obj, ResourceClaimTemplate):
                inv.upsert_template(obj)
            else:
                inv.remove_template(ns, name)
        else:
            raise ValueError(f"unknown device kind {kind!r}")
        self._held = None if self._slots else frozenset()

    # ----- slots -------------------------------------------------------------------------

    def reserve(self, node: str, pod: PodInfo, bound: bool = False) -> None:
        """A slot (or, `bound`, the pod itself) on `node` holds the pod's devices."""
        if pod.claims is not None:
            self._slots["bound" if bound else "slot", pod.uid] = (node, pod)
            self._held = None

    def release(self, uid: str, bound: bool = False) -> None:
        if self._slots.pop(("bound" if bound else "slot", uid), None) is not None:
            self._held = None

    def held(self, nodes: Mapping[str, NodeInfo]) -> frozenset[DeviceKey]:
        """The devices the slots hold (module docstring)."""
        if self._held is None:
            inv = self.inventory
            held: set[DeviceKey] = set()
            for node_name, pod in self._slots.values():
                node = nodes.get(node_name)
                member = self.member(pod)
                if node is None or member.missing or not member.own:
                    continue
                if all(c.allocated for c in member.own):
                    continue  # its allocation is taken already (and most bound pods')
                fit = inv.fit(node, member.own, frozenset(held))
                if isinstance(fit, Fit):
                    held |= fit.devices()
            self._held = frozenset(held)
        return self._held

    def taken(self, nodes: Mapping[str, NodeInfo]) -> frozenset[DeviceKey]:
        """Allocated or held by a slot."""
        held = self.held(nodes)
        allocated = self.inventory.allocated()
        return allocated | held if held else allocated

    def member(self, pod: PodInfo) -> MemberClaims:
        """The pod's claims resolved (none for a pod without claims)."""
        if pod.claims is None:
            return MemberClaims()
        return self.inventory.member_claims(pod.namespace, pod.claims)


@dataclass(frozen=True, slots=True)
class DeviceView:
    """The devices as a plan reads them: `emptied` counts nothing taken (no allocation,
    no slot), as the test whether a gang could ever be placed needs."""

    state: DeviceState
    nodes: Mapping[str, NodeInfo]
    emptied: bool = False

    def taken(self) -> frozenset[DeviceKey]:
        return frozenset() if self.emptied else self.state.taken(self.nodes)

    def member(self, pod: PodInfo) -> MemberClaims:
        return self.state.member(pod)

    def copies(self, node: NodeInfo, claims: tuple[Claim, ...],
               taken: frozenset[DeviceKey]) -> int:
        """How many members with `claims` the node's devices hold besides `taken`."""
        return self.state.inventory.copies(node, claims, taken, MAX_COPIES, self.emptied)

    def choose(self, node: NodeInfo, claims: tuple[Claim, ...],
               taken: frozenset[DeviceKey]) -> frozenset[DeviceKey]:
        """The devices one member with `claims` would get on `node` (none if it does not
        fit, which `copies` said it does)."""
        fit = self.state.inventory.fit(node, claims, taken, self.emptied)
        return frozenset() if isinstance(fit, NoFit) else fit.devices()

    def refusal(self, node: NodeInfo, pod: PodInfo) -> str | None:
        """Why `pod`'s claims cannot be allocated on `node` besides what is taken (a
        slot of a gang holds the devices), None if they can."""
        member = self.member(pod)
        if member.missing:
            return member.missing
        claims = (*member.own, *member.shared)
        if not claims:
            return None
        fit = self.state.inventory.fit(node, claims, self.taken(), self.emptied)
        return fit.message if isinstance(fit, NoFit) else None

    def free_on(self, node: NodeInfo, taken: frozenset[DeviceKey]) -> int:
        """Devices the node can use that nothing takes, for messages."""
        return sum(1 for d in self.state.inventory.devices_for(node) if d.key not in taken)


def requests_words(claims: tuple[Claim, ...]) -> str:
    """A member's devices as messages say them: "{2 × gpu.example.com}" (each request's
    first alternative: count and device class)."""
    parts = []
    for c in claims:
        for r in c.spec.requests:
            sub = r.alternatives[0]
            count = "all" if sub.mode == ALL else str(sub.count)
            parts.append(f"{count} \u00d7 {sub.device_class}")
    return "{" + ", ".join(parts) + "}"

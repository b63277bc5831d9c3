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

import dataclasses
from collections.abc import Iterable, Mapping
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
from extender.core.model.claims import PodClaims
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
        # What the slots hold: None to choose again for every slot; otherwise what each
        # holds, and the slots made since whose devices are still to be chosen.
        self._held: frozenset[DeviceKey] | None = frozenset()
        self._by_slot: dict[tuple[str, str], frozenset[DeviceKey]] = {}
        self._pending: list[tuple[str, str]] = []
        self._wanting: set[tuple[str, str]] = set()  # slots that found no devices
        # Shared claims (named by several pods: one allocation) a slot chose devices
        # for, by claim name: the other slots naming them use those, on their nodes.
        self._pins: dict[str, tuple[DeviceKey, ...]] = {}
        # Upstream PodGroups' shared claims, by gang key: (the group's name, its claims).
        self._groups: dict[str, tuple[str, PodClaims]] = {}

    def apply(self, kind: str, key: str, obj: DeviceObject | None) -> bool:
        """A watch event of `kind` (`DEVICE_KINDS`): `obj` added or changed, or the
        object `key` ("name" or "namespace/name") deleted when `obj` is None. Whether a
        plan may come out differently: a claim's event only when its allocation moved
        (the most frequent event by far is a claim's status naming who uses it)."""
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
            moved = (inv.upsert_claim(obj) if isinstance(obj, ResourceClaim)
                     else inv.remove_claim(ns, name))
            if not moved:
                return False
        elif kind == "resourceclaimtemplates":
            if isinstance(obj, ResourceClaimTemplate):
                inv.upsert_template(obj)
            else:
                inv.remove_template(ns, name)
        else:
            raise ValueError(f"unknown device kind {kind!r}")
        self._held = None if self._slots else frozenset()
        return True

    # ----- slots -------------------------------------------------------------------------

    def reserve(self, node: str, pod: PodInfo, bound: bool = False) -> None:
        """A slot (or, `bound`, the pod itself) on `node` holds the pod's devices."""
        if pod.claims is not None:
            key = ("bound" if bound else "slot", pod.uid)
            self._slots[key] = (node, pod)
            if self._held is not None:
                self._pending.append(key)  # its devices chosen when next asked

    def release(self, uid: str, bound: bool = False) -> None:
        key = ("bound" if bound else "slot", uid)
        if self._slots.pop(key, None) is None:
            return
        mine = self._by_slot.pop(key, None)
        self._wanting.discard(key)
        if mine and any(mine.intersection(p) for p in self._pins.values()):
            # It chose a shared claim's devices others follow: all chosen again.
            self._held = None
        if mine and self._held is not None:
            # The others' devices were chosen apart from these: they stay as they are;
            # a slot that found none (its node short) may find these now.
            self._held = self._held - mine
            self._pending.extend(self._wanting)
            self._wanting.clear()

    def held(self, nodes: Mapping[str, NodeInfo]) -> frozenset[DeviceKey]:
        """The devices the slots hold (module docstring): all of them chosen again after
        a slice or claim changed, otherwise only those of slots made since last asked,
        so a plan made while many gangs hold slots costs one check per new slot."""
        if self._held is None:
            self._by_slot.clear()
            self._wanting.clear()
            self._pins.clear()
            self._pending = list(self._slots)
            self._held = frozenset()
        if self._pending:
            held = set(self._held)
            for key in dict.fromkeys(self._pending):
                entry = self._slots.get(key)
                if entry is None or key in self._by_slot:
                    continue
                mine = self._choose(nodes.get(entry[0]), entry[1], frozenset(held))
                if mine:
                    self._by_slot[key] = mine
                    held |= mine
                else:
                    self._wanting.add(key)
            self._pending.clear()
            self._held = frozenset(held)
        return self._held

    def _choose(self, node: NodeInfo | None, pod: PodInfo,
                held: frozenset[DeviceKey]) -> frozenset[DeviceKey]:
        """The devices `pod`'s slot on `node` holds, none of `held`."""
        member = self.member(pod)
        claims = (*member.own, *(Claim(c.name, c.spec, self._pins[c.name])
                                 if not c.allocated and c.name in self._pins else c
                                 for c in member.shared))
        if node is None or member.missing or not claims:
            return frozenset()
        if all(c.allocated for c in claims):
            return frozenset()  # its allocation is taken already (and most bound pods')
        fit = self.inventory.fit(node, claims, held)
        if not isinstance(fit, Fit):
            return frozenset()
        shared = {c.name for c in member.shared}
        for claim, _, key in fit.chosen:
            if claim in shared:
                self._pins[claim] = (*self._pins.get(claim, ()), key)
        return fit.devices()

    def frees(self, nodes: Mapping[str, NodeInfo],
              pods: Iterable[PodInfo]) -> frozenset[DeviceKey]:
        """The devices that come free once `pods` (evicted, or their slots released) are
        gone: what their own claims have allocated (the resourceclaim controller deletes
        a claim made from a template with its pod) and what their slots or bound entries
        hold. A named claim is not counted: it outlives its users, and others may share
        it."""
        held = self.held(nodes)
        out: set[DeviceKey] = set()
        for pod in pods:
            if pod.claims is None:
                continue
            for key in (("slot", pod.uid), ("bound", pod.uid)):
                out |= self._by_slot.get(key, frozenset())
            for c in self.member(pod).own:
                out.update(c.allocated)
        return frozenset(out & (held | self.inventory.allocated()))

    def slot_devices(self, nodes: Mapping[str, NodeInfo], pod: PodInfo) -> tuple[DeviceKey, ...]:
        """The devices `pod`'s slot is planned on, for people (`/debug`, the reserved
        message): what it holds, its shared claims' devices (held by the slot that chose
        them), and what its claims already have allocated."""
        if pod.claims is None:
            return ()
        self.held(nodes)
        out = set(self._by_slot.get(("slot", pod.uid), ()))
        member = self.member(pod)
        for c in (*member.own, *member.shared):
            out.update(c.allocated or self._pins.get(c.name, ()))
        return tuple(sorted(out))

    def planned_words(self, nodes: Mapping[str, NodeInfo], pods: Iterable[PodInfo],
                      most: int = 4) -> str:
        """The devices members are planned on, for the reserved message (the PodGroup's
        status and its Event): "; devices: a-0 on node-0/gpu-0,node-0/gpu-1, ...", the
        first `most` members with claims named (a long list is `/debug`'s); "" when no
        member has claims."""
        parts = []
        for pod in pods:
            keys = self.slot_devices(nodes, pod)
            if keys:
                parts.append(f"{pod.name} on {','.join(f'{k[1]}/{k[2]}' for k in keys)}")
        if not parts:
            return ""
        more = f" (+{len(parts) - most} more)" if len(parts) > most else ""
        return f"; devices: {', '.join(parts[:most])}{more}"

    def class_counts(self, nodes: Mapping[str, NodeInfo]) -> dict[str, tuple[int, int, int]]:
        """Per DeviceClass, its devices (`DeviceInventory.by_class`) that are free,
        reserved (held by a slot, not allocated yet) and allocated: the metrics'."""
        held = self.held(nodes)
        allocated = self.inventory.allocated()
        out: dict[str, tuple[int, int, int]] = {}
        for name, keys in self.inventory.by_class().items():
            n_allocated = len(keys & allocated)
            n_reserved = len((keys & held) - allocated)
            out[name] = (len(keys) - n_allocated - n_reserved, n_reserved, n_allocated)
        return out

    def taken(self, nodes: Mapping[str, NodeInfo]) -> frozenset[DeviceKey]:
        """Allocated or held by a slot."""
        held = self.held(nodes)
        allocated = self.inventory.allocated()
        return allocated | held if held else allocated

    def set_group(self, key: str, name: str, claims: PodClaims | None) -> bool:
        """The claims an upstream PodGroup `key` shares among its members (None: none,
        or the group is gone); whether they changed."""
        old = self._groups.get(key)
        if claims is None:
            if old is None:
                return False
            del self._groups[key]
        elif old == (name, claims):
            return False
        else:
            self._groups[key] = (name, claims)
        self._held = None if self._slots else frozenset()
        return True

    def member(self, pod: PodInfo) -> MemberClaims:
        """The pod's claims resolved (none for a pod without claims), its group's
        shared claims among them."""
        if pod.claims is None:
            return MemberClaims()
        group = self._groups.get(pod.gang or "") if self._groups else None
        return self.inventory.member_claims(pod.namespace, pod.claims, group)


@dataclass(frozen=True, slots=True)
class DeviceView:
    """The devices as a plan reads them: `emptied` counts nothing taken (no allocation,
    no slot), as the test whether a gang could ever be placed needs."""

    state: DeviceState
    nodes: Mapping[str, NodeInfo]
    emptied: bool = False
    # Counted free though taken: the devices of victims a preemptor's plan is tried
    # without (`preemption/victims.py`).
    freed: frozenset[DeviceKey] = frozenset()

    def taken(self) -> frozenset[DeviceKey]:
        if self.emptied:
            return frozenset()
        taken = self.state.taken(self.nodes)
        return taken - self.freed if self.freed else taken

    @property
    def _given(self) -> bool:
        """Whether the `taken` passed to the inventory is all that is taken: emptied,
        or allocated devices given back (the inventory adds every allocation
        otherwise)."""
        return self.emptied or bool(self.freed)

    def without(self, pods: Iterable[PodInfo]) -> DeviceView:
        """The view with the devices `pods` hold given back (`DeviceState.frees`)."""
        freed = self.state.frees(self.nodes, pods)
        return dataclasses.replace(self, freed=self.freed | freed) if freed else self

    def member(self, pod: PodInfo) -> MemberClaims:
        return self.state.member(pod)

    def copies(self, node: NodeInfo, claims: tuple[Claim, ...],
               taken: frozenset[DeviceKey]) -> int:
        """How many members with `claims` the node's devices hold besides `taken`."""
        return self.state.inventory.copies(node, claims, taken, MAX_COPIES, self._given)

    def choose(self, node: NodeInfo, claims: tuple[Claim, ...],
               taken: frozenset[DeviceKey]) -> frozenset[DeviceKey]:
        """The devices one member with `claims` would get on `node` (none if it does not
        fit, which `copies` said it does)."""
        fit = self.fit(node, claims, taken)
        return frozenset() if isinstance(fit, NoFit) else fit.devices()

    def fit(self, node: NodeInfo, claims: tuple[Claim, ...],
            taken: frozenset[DeviceKey]) -> Fit | NoFit:
        """Whether `claims` can be allocated on `node` besides `taken`, and with which
        devices (a shared claim's allocation is chosen from these)."""
        return self.state.inventory.fit(node, claims, taken, self._given)

    def refusal(self, node: NodeInfo, pod: PodInfo) -> str | None:
        """Why `pod`'s claims cannot be allocated on `node` besides what is taken (a
        slot of a gang holds the devices), None if they can."""
        member = self.member(pod)
        if member.missing:
            return member.missing
        claims = (*member.own, *member.shared)
        if not claims:
            return None
        fit = self.state.inventory.fit(node, claims, self.taken(), self._given)
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

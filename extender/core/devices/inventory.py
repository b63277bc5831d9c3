"""The devices of the cluster as the planner asks about them: which devices a node can
use, which are allocated, what a pod's claims ask for, and how many members of a shape a
node's free devices hold.

Kept up to date from watch events (`upsert_*`, `remove_*`), like the cache's nodes and
pods; answers are memoized per node and dropped when a slice changes, so a planning pass
over thousands of nodes reads each node's devices once.

What a node can use, in order (the order the allocation check tries them): the devices of
pools published for that node (`nodeName`), then those of pools for a node selector the
node matches, then those of pools for all nodes. Only a pool's newest generation counts:
while a driver replaces a pool, the slices of the older generation are stale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.devices.allocate import Claim, DeviceKey, Fit, NoFit, allocate
from extender.core.devices.model import (
    CompiledSelector,
    Device,
    DeviceClass,
    PodClaims,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    SelectorCompiler,
    SelectorError,
)
from extender.core.model.claims import ClaimRef
from extender.core.model.constraints import node_selector_term_matches
from extender.core.model.types import NodeInfo

__all__ = ["MAX_COPIES", "DeviceInventory", "MemberClaims"]

# How many members of one shape `copies` counts on a node at most: a gang member's
# devices are few, and a node publishing more devices than this many members use is
# counted as holding this many.
MAX_COPIES = 64


@dataclass(frozen=True, slots=True)
class MemberClaims:
    """A member's claims, resolved: `own` are its alone (from templates, or named claims
    only it uses), `shared` are named claims other pods may use too (one allocation for
    all of them). `missing` names what could not be resolved (a template or claim not
    seen yet), in which case the member cannot be planned on devices."""

    own: tuple[Claim, ...] = ()
    shared: tuple[Claim, ...] = ()
    missing: str = ""

    @property
    def empty(self) -> bool:
        return not self.own and not self.shared and not self.missing


class _Remembered:
    """A compiled selector whose answer per device (by the identity of its `cel`, kept
    alive by its slice until the slices change) is computed once. Failures are not
    remembered: they are rare, and each says why."""

    def __init__(self, inner: CompiledSelector) -> None:
        self._inner = inner
        self._answers: dict[int, bool] = {}

    @property
    def text(self) -> str:
        return self._inner.text

    def matches(self, device: Mapping[str, Any]) -> bool:
        key = id(device)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._inner.matches(device)
        return answer


@dataclass(frozen=True, slots=True)
class _Placement:
    local: dict[str, tuple[Device, ...]]  # node name -> its own pools' devices
    selected: tuple[ResourceSlice, ...]  # slices for a node selector
    everywhere: tuple[Device, ...]  # slices for all nodes


def _place(slices: Mapping[str, ResourceSlice]) -> _Placement:
    """The slices of each pool's newest generation, by where their devices can be used,
    in name order (the order `devices_for` gives them)."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices.values():
        k = (s.driver, s.pool)
        newest[k] = max(newest.get(k, s.generation), s.generation)
    local: dict[str, list[Device]] = {}
    selected: list[ResourceSlice] = []
    everywhere: list[Device] = []
    for name in sorted(slices):
        s = slices[name]
        if s.generation != newest[(s.driver, s.pool)]:
            continue
        if s.node_name is not None:
            local.setdefault(s.node_name, []).extend(s.devices)
        elif s.node_selector is not None:
            selected.append(s)
        elif s.all_nodes:
            everywhere += s.devices
    return _Placement({n: tuple(d) for n, d in local.items()}, tuple(selected),
                      tuple(everywhere))


class DeviceInventory:
    """Slices, classes, claims and templates, and the questions the planner asks of them.

    Public: `upsert_slice`, `remove_slice`, `upsert_class`, `remove_class`,
    `upsert_claim`, `remove_claim`, `upsert_template`, `remove_template` (watch events);
    `devices_for(node)`, `allocated()`, `member_claims(...)`, `fit(...)`, `copies(...)`.
    """

    def __init__(self, compile_selector: SelectorCompiler) -> None:
        self._compiler = compile_selector
        self._remembered: dict[str, _Remembered] = {}
        self._slices: dict[str, ResourceSlice] = {}
        # The newest generation's slices, by where their devices can be used; made once
        # per change of the slices, so a node's devices are found without reading every
        # slice (`devices_for`, asked of every node a plan looks at).
        self._placed: _Placement | None = None
        self._classes: dict[str, DeviceClass] = {}
        self._claims: dict[tuple[str, str], ResourceClaim] = {}
        self._templates: dict[tuple[str, str], ResourceClaimTemplate] = {}
        self._by_node: dict[str, tuple[Device, ...]] = {}
        self._allocated: frozenset[DeviceKey] | None = None
        # The devices each class selects (`by_class`), until the slices or classes change.
        self._by_class: dict[str, frozenset[DeviceKey]] | None = None
        self._local_keys: dict[str, frozenset[DeviceKey]] = {}  # `local_keys`, per node

    # ----- watch events ------------------------------------------------------------------

    def upsert_slice(self, s: ResourceSlice) -> None:
        self._slices[s.name] = s
        self._slices_changed()

    def remove_slice(self, name: str) -> None:
        if self._slices.pop(name, None) is not None:
            self._slices_changed()

    def _slices_changed(self) -> None:
        self._by_node.clear()
        self._placed = None
        self._by_class = None
        self._local_keys.clear()
        # A selector's answers are remembered by device object: new objects now.
        self._remembered.clear()

    def _compile(self, text: str) -> CompiledSelector:
        """The compiled selector, its answer for each device remembered: a plan asks the
        same selectors of the same devices node after node and member after member, and
        a device's answer changes only with its slice."""
        r = self._remembered.get(text)
        if r is None:
            r = self._remembered[text] = _Remembered(self._compiler(text))
        return r

    def upsert_class(self, c: DeviceClass) -> None:
        self._classes[c.name] = c
        self._by_class = None

    def remove_class(self, name: str) -> None:
        self._classes.pop(name, None)
        self._by_class = None

    def upsert_claim(self, c: ResourceClaim) -> bool:
        """Whether what the claim holds changed (its allocation): a claim's other
        updates (who it is reserved for, its conditions) change no plan."""
        old = self._claims.get((c.namespace, c.name))
        self._claims[(c.namespace, c.name)] = c
        if old is not None and old.allocated == c.allocated:
            return False
        self._allocated = None
        return True

    def remove_claim(self, namespace: str, name: str) -> bool:
        """Whether the claim was holding devices."""
        old = self._claims.pop((namespace, name), None)
        if old is None or not old.allocated:
            return False
        self._allocated = None
        return True

    def upsert_template(self, t: ResourceClaimTemplate) -> None:
        self._templates[(t.namespace, t.name)] = t

    def remove_template(self, namespace: str, name: str) -> None:
        self._templates.pop((namespace, name), None)

    # ----- questions ---------------------------------------------------------------------

    def _placement(self) -> _Placement:
        if self._placed is None:
            self._placed = _place(self._slices)
        return self._placed

    def network_attached(self) -> bool:
        """Whether any pool is published for a node selector or all nodes: devices
        several nodes can use (a plan then counts them taken across nodes)."""
        placed = self._placement()
        return bool(placed.selected or placed.everywhere)

    def local_keys(self, node_name: str) -> frozenset[DeviceKey]:
        """The devices of the pools published for `node_name` alone."""
        keys = self._local_keys.get(node_name)
        if keys is None:
            keys = self._local_keys[node_name] = frozenset(
                d.key for d in self._placement().local.get(node_name, ()))
        return keys

    def by_class(self) -> dict[str, frozenset[DeviceKey]]:
        """The devices of every slice (newest generation) each DeviceClass selects, for
        the metrics; a device several classes select is in each, and a selector's
        failure on a device leaves it out, as the allocation check does. Kept until
        the slices or the classes change, so a scrape costs set operations."""
        if self._by_class is None:
            placed = self._placement()
            devices = [*(d for ds in placed.local.values() for d in ds),
                       *(d for s in placed.selected for d in s.devices), *placed.everywhere]
            out: dict[str, frozenset[DeviceKey]] = {}
            for name, dc in self._classes.items():
                try:
                    selectors = [self._compile(t) for t in dc.selectors]
                except SelectorError:
                    out[name] = frozenset()
                    continue
                keys = []
                for d in devices:
                    try:
                        if all(sel.matches(d.cel) for sel in selectors):
                            keys.append(d.key)
                    except SelectorError:
                        continue
                out[name] = frozenset(keys)
            self._by_class = out
        return self._by_class

    def devices_for(self, node: NodeInfo) -> tuple[Device, ...]:
        """The devices `node` can use (module docstring: its own pools first)."""
        cached = self._by_node.get(node.name)
        if cached is not None:
            return cached
        placed = self._placement()
        selected: list[Device] = []
        for s in placed.selected:
            if any(node_selector_term_matches(t, node) for t in s.node_selector or ()):
                selected += s.devices
        out = (*placed.local.get(node.name, ()), *selected, *placed.everywhere)
        self._by_node[node.name] = out
        return out

    def allocated(self) -> frozenset[DeviceKey]:
        """Devices some claim is allocated (admin access excepted)."""
        if self._allocated is None:
            self._allocated = frozenset(
                a.key for c in self._claims.values() for a in c.allocated
                if not a.admin_access)
        return self._allocated

    def member_claims(self, namespace: str, claims: PodClaims,
                      group: tuple[str, PodClaims] | None = None) -> MemberClaims:
        """A pod's claims resolved to specs. A template whose claim is not made yet
        stands for a claim of the template's spec. A claim the pod names
        (`resourceClaimName`) is shared: whoever else names it uses the same allocation,
        so it is never counted once per member. `group`: the name and claims of the
        upstream PodGroup the pod is a member of; a pod's claim matching one of the
        group's exactly (name, and the same claim or template) is the group's one
        claim, shared by its members, a template's stand-in named for the group until
        the control plane has made it."""
        own: list[Claim] = []
        shared: list[Claim] = []
        for ref in claims.refs:
            if group is not None and ref in group[1].refs:
                entry = self._group_claim(namespace, group[0], group[1], ref)
                if isinstance(entry, str):
                    return MemberClaims(missing=entry)
                shared.append(entry)
                continue
            name = claims.claim_name(ref)
            claim = self._claims.get((namespace, name)) if name else None
            if claim is not None:
                entry = Claim(f"{namespace}/{claim.name}", claim.spec,
                              tuple(a.key for a in claim.allocated))
                (shared if ref.claim is not None else own).append(entry)
                continue
            if ref.template is not None:
                t = self._templates.get((namespace, ref.template))
                if t is None:
                    return MemberClaims(missing=f"resource claim template "
                                                f"{namespace}/{ref.template} not found")
                own.append(Claim(f"{namespace}/{ref.template} (template)", t.spec))
                continue
            return MemberClaims(missing=f"resource claim {namespace}/{name} not found")
        return MemberClaims(tuple(own), tuple(shared))

    def _group_claim(self, namespace: str, group: str, claims: PodClaims,
                     ref: ClaimRef) -> Claim | str:
        """The group's claim `ref` resolved, or what is missing."""
        name = claims.claim_name(ref)
        claim = self._claims.get((namespace, name)) if name else None
        if claim is not None:
            return Claim(f"{namespace}/{claim.name}", claim.spec,
                         tuple(a.key for a in claim.allocated))
        if ref.template is None:
            return f"resource claim {namespace}/{name} not found"
        t = self._templates.get((namespace, ref.template))
        if t is None:
            return f"resource claim template {namespace}/{ref.template} not found"
        return Claim(f"{namespace}/{group}/{ref.name} (podgroup claim)", t.spec)

    def fit(self, node: NodeInfo, claims: Sequence[Claim],
            taken: frozenset[DeviceKey] = frozenset(), emptied: bool = False) -> Fit | NoFit:
        """Whether `claims` can be allocated on `node`, besides what is allocated and
        `taken` (devices reserved for planned gangs). `emptied`: as if no claim were
        allocated (whether a gang could ever be placed)."""
        return allocate(claims, self.devices_for(node), self._classes, self._compile,
                        taken if emptied else self.allocated() | taken)

    def copies(self, node: NodeInfo, member: Sequence[Claim],
               taken: frozenset[DeviceKey] = frozenset(), limit: int = MAX_COPIES,
               emptied: bool = False) -> int:
        """How many members with claims like `member` (own claims, unallocated) the
        node's free devices hold, at most `limit`: one member's devices taken after the
        other, as kube-scheduler allocates them pod by pod. `emptied`: as `fit`."""
        if not member:
            return limit
        used = taken if emptied else self.allocated() | taken
        devices = self.devices_for(node)
        n = 0
        while n < limit:
            result = allocate(member, devices, self._classes, self._compile, used)
            if isinstance(result, NoFit):
                break
            chosen = result.devices()
            if not chosen - used:
                return limit  # takes no device (admin access, shared devices): no bound
            used = used | chosen
            n += 1
        return n

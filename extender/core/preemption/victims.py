"""Which lower-priority work a preemptor evicts: victim units, ordered by harm, and the
least harmful set whose capacity lets the preemptor's whole plan fit.

A *unit* is what is evicted all or nothing:

* a **gang**: every member bound to a node (running or not yet), whatever its
  minMember; never part of one. Members not bound hold nothing and stay pending, so
  the gang goes back to the queue and is placed again whole;
* a **plain pod** (no PodGroup label), bound to a node;
* a **reservation** of a gang not yet bound (held or not, no Binding let through yet):
  released, nothing evicted, the gang back in the queue;
* a **composite**: every child of a CompositePodGroup with a gang policy
  (minGroupCount), taken together: all their bound members evicted and all their
  reservations released. One child evicted alone would leave the composite running with
  fewer than minGroupCount children placed, the partial start gang scheduling exists to
  prevent one level up; its children are then never units of their own. A composite
  with a child being committed (a reservation some of whose members are bound, or whose
  Bindings are under way) is still being placed and is no unit at all, as a gang is not.

Only units whose priority is strictly lower than the preemptor's are candidates (a
gang's priority is that of its most important member, or its composite's where its
members have none, as in the queue: `order.gang_priority`; a composite's is the highest
of its children's), and never one whose eviction a PodDisruptionBudget would refuse as a
whole.

**The rule** (docs/preemption.md). Candidates are ordered by harm:
lowest priority first; then the fewest pods evicted; then the fewest resources (the
sum, over the resources the unit frees, of its share of the cluster's allocatable);
then the youngest (latest created) first. The victims are the shortest prefix of that
order whose capacity lets the preemptor's whole plan fit (found by doubling, then
binary search: a handful of plans, not one per unit), minus every victim of that prefix
the plan turns out not to need, tried from the most harmful back (the prune tries at
most `PRUNE_LIMIT` of them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache import Cache
from extender.core.cache.snapshot import FreeOverlay, Snapshot
from extender.core.ledger import Reservations
from extender.core.model.order import gang_priority, inherited_priority
from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo, Resources
from extender.core.model.vocabulary import GANG, POD, RESERVATION
from extender.core.preemption.budgets import Budgets

# The prune plans once per victim it tries to give back; past this many (thousands of
# small plain pods) the rest of the prefix is kept, to bound a pass.
PRUNE_LIMIT = 32

# `Unit.kind` of every child of a CompositePodGroup taken as one victim. The core's own:
# what is reported is each child, as a gang or a reservation (`Preemptions._evict`).
COMPOSITE_UNIT = "composite"


@dataclass(frozen=True, slots=True)
class Unit:
    # A gang's key (namespace/name), a plain pod's "pod namespace/name", or a composite's.
    key: str
    kind: str  # GANG, POD, RESERVATION or COMPOSITE_UNIT
    priority: int
    pods: tuple[PodInfo, ...]  # evicted: bound and not being deleted (none for a reservation)
    frees: tuple[tuple[str, PodInfo], ...]  # (node, pod or slot) whose capacity comes back
    creation: float
    harm: tuple[int, int, float, float, str] = (0, 0, 0.0, 0.0, "")
    # A composite's: the keys of its children (every one, placed or not), and of those
    # whose reservations are released with it.
    children: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """As users read it: "gang ns/x", "pod ns/p", "reservation of gang ns/y",
        "CompositePodGroup ns/c"."""
        if self.kind == RESERVATION:
            return f"reservation of gang {self.key}"
        if self.kind == COMPOSITE_UNIT:
            return f"CompositePodGroup {self.key.split(':', 1)[-1]}"
        return f"gang {self.key}" if self.kind == GANG else self.key


def _with_harm(unit: Unit, totals: Mapping[str, int]) -> Unit:
    share = 0.0
    for _, p in unit.frees:
        for r, q in p.requests.items():
            total = totals.get(r, 0)
            if q > 0 and total > 0 and r != "pods":
                share += q / total
    harm = (unit.priority, len(unit.pods), share, -unit.creation, unit.key)
    return dataclasses.replace(unit, harm=harm)


def together(cache: Cache, group: GroupInfo | None) -> CompositeInfo | None:
    """The composite `group` is a victim with, if its parent has a gang policy; None:
    the group is a victim on its own (no parent, a "basic" one, or one not seen)."""
    if group is None or not group.parent:
        return None
    composite = cache.composites.get(group.parent)
    return composite if composite is not None and composite.min_group_count else None


def _inherited(cache: Cache, group: GroupInfo | None) -> int | None:
    """The priority `group` has where its members have none, as the queue reads it: its
    own spec.priority, else its composite's."""
    parent = cache.composites.get(group.parent) if group is not None and group.parent else None
    return inherited_priority(group, parent)


def _composites(
    cache: Cache, reservations: Reservations, bound: Mapping[str, list[PodInfo]], below: int,
    exclude: Mapping[str, object], leaving: Mapping[str, object],
) -> tuple[list[Unit], set[str]]:
    """A unit for every composite with a gang policy that has something placed, and
    the keys of all their children: none of those is a unit of its own, whether its
    composite made one or not (one being committed, excluded, leaving, or not below)."""
    kids: dict[str, list[GroupInfo]] = {}
    for g in cache.groups.values():
        composite = together(cache, g)
        if composite is not None:
            kids.setdefault(composite.key, []).append(g)
    units: list[Unit] = []
    taken: set[str] = set()
    for key, children in kids.items():
        composite = cache.composites[key]
        taken.update(g.key for g in children)
        pods = [p for g in children for p in bound.get(g.key, ())]
        released = []
        for g in children:
            res = reservations.get(g.key)
            if res is None:
                continue
            if res.committed or not res.slots or cache.tally(g).bound_or_succeeded:
                break  # a child being committed: the composite is still being placed
            released.append(res)
        else:
            if ((not pods and not released) or key in exclude
                    or any(g.key in exclude for g in children)
                    or any(p.uid in leaving for p in pods)):
                continue
            priority = max(gang_priority([*cache.members(g), *bound.get(g.key, ())],
                                         composite.priority) for g in children)
            if priority >= below:
                continue
            frees = [(p.node_name, p) for p in pods]
            frees += [(s.node, s.pod) for r in released for s in r.slots.values()]
            creation = composite.creation or min(g.creation for g in children)
            units.append(Unit(key, COMPOSITE_UNIT, priority, tuple(pods), tuple(frees),
                              creation, children=tuple(sorted(g.key for g in children)),
                              releases=tuple(r.gang for r in released)))
    return units, taken


def candidates(
    cache: Cache,
    reservations: Reservations,
    budgets: Budgets,
    below: int,
    exclude: Mapping[str, object],
    leaving: Mapping[str, object],
) -> tuple[list[Unit], list[str]]:
    """Every unit of priority lower than `below`, least harmful first, minus the units
    in `exclude` (refused a moment ago, or the preemptor itself) and those with a pod in
    `leaving` (already being evicted); and why each unit a budget protects is left
    out. Walks every pod bound to a node: the pass calls it only for a gang that failed
    to plan, once per change of the cluster."""
    gangs: dict[str, list[PodInfo]] = {}
    units: list[Unit] = []
    for node in cache.nodes:
        for p in cache.bound_on(node):
            if p.deleting or p.terminal:
                continue
            gang = p.gang
            if gang is not None:
                gangs.setdefault(gang, []).append(p)
            elif p.priority < below:
                key = f"pod {p.key}"
                if key not in exclude and p.uid not in leaving:
                    units.append(Unit(key, POD, p.priority, (p,), ((node, p),), p.creation))
    composites, taken = _composites(cache, reservations, gangs, below, exclude, leaving)
    units.extend(composites)
    for gang, bound in gangs.items():
        if (gang in exclude or gang in reservations or gang in taken
                or any(p.uid in leaving for p in bound)):
            continue  # a gang with a reservation is still being placed: never half of it
        group = cache.groups.get(gang)
        members = cache.members(group) if group is not None else bound
        priority = gang_priority([*members, *bound], _inherited(cache, group))
        if priority < below:
            creation = group.creation if group is not None else min(p.creation for p in bound)
            units.append(Unit(gang, GANG, priority, tuple(bound),
                              tuple((p.node_name, p) for p in bound), creation))
    for res in reservations.values():
        group = cache.groups.get(res.gang)
        if (group is None or res.gang in exclude or res.gang in taken or res.committed
                or not res.slots or cache.tally(group).bound_or_succeeded):
            continue  # committed, or members already bound: releasing it would not do
        priority = gang_priority(cache.members(group), _inherited(cache, group))
        if priority < below:
            units.append(Unit(res.gang, RESERVATION, priority, (),
                              tuple((s.node, s.pod) for s in res.slots.values()),
                              group.creation))
    totals: Resources = {}
    for info in cache.nodes.values():
        for r, q in info.allocatable.items():
            totals[r] = totals.get(r, 0) + q
    ranked = sorted((_with_harm(u, totals) for u in units), key=lambda u: u.harm)
    # A budget is spent by the least harmful units first; a unit it would refuse whole
    # is left out (a refusal halfway through would leave a gang half evicted).
    spent: dict[str, int] = {}
    out: list[Unit] = []
    protected: list[str] = []
    for unit in ranked:
        why = budgets.refusal(unit.pods, spent)
        if why is not None:
            protected.append(f"{unit.name}: {why}")
            continue
        for key, n in budgets.spends(unit.pods).items():
            spent[key] = spent.get(key, 0) + n
        out.append(unit)
    return out, protected


def already_leaving(cache: Cache) -> Unit:
    """The pods being deleted, as a unit nobody evicts: their capacity comes back
    anyway. Counted as free by every search, so that victims still terminating (after
    a restart of the extender, which forgot that it chose them) are not replaced by
    more victims."""
    frees = tuple((node, p) for node in cache.nodes for p in cache.bound_on(node)
                  if p.deleting and not p.terminal)
    return Unit("(leaving)", "leaving", 0, (), frees, 0.0)


def view_without(snapshot: Snapshot, units: Sequence[Unit]) -> Snapshot:
    """`snapshot` with the capacity of `units` given back, their devices (DRA) too: a
    gang asking for devices is only helped by victims that free devices."""
    over: dict[str, Resources] = {}
    for unit in units:
        for node, p in unit.frees:
            free = over.get(node)
            if free is None:
                base = snapshot.free.get(node)
                if base is None:
                    continue
                free = over[node] = dict(base)
            for r, q in p.requests.items():
                free[r] = free.get(r, 0) + q
    view = snapshot.with_free(FreeOverlay(snapshot.free, over))
    if view.devices is None:
        return view
    devices = view.devices.without(p for unit in units for _, p in unit.frees)
    return view if devices is view.devices else dataclasses.replace(view, devices=devices)


def select(units: Sequence[Unit], fits: Callable[[Sequence[Unit]], bool]) -> list[Unit] | None:
    """The least harmful victims among `units` (least harmful first) with which
    `fits` (the preemptor's whole plan fits with their capacity given back); [] if it
    fits without any; None if not even all of them will do."""
    if fits([]):
        return []  # nothing to evict: what it needs is leaving already
    if not units:
        return None
    k = 1
    while k < len(units) and not fits(units[:k]):
        k *= 2
    hi, lo = min(k, len(units)), k // 2
    if hi == len(units) and not fits(units):
        return None
    while hi - lo > 1:  # fits(units[:hi]); not fits(units[:lo]), or lo == 0
        mid = (lo + hi) // 2
        if fits(units[:mid]):
            hi = mid
        else:
            lo = mid
    chosen = list(units[:hi])
    for unit in list(reversed(chosen))[:PRUNE_LIMIT]:
        trial = [u for u in chosen if u is not unit]
        if trial and fits(trial):
            chosen = trial
    return chosen

"""Planning a CompositePodGroup's children as one unit (`CompositeInfo`): each child
at its own quorum, at least `minGroupCount` of them, all on one view of the free capacity,
and in one domain of the composite's topology key when it has one.

The children are planned one after another, each on the capacity the ones before it
took, largest first: the child whose biggest pod asks for the most (extended resources,
then cpu, then memory, as the planner orders a gang's shapes), then the one that needs
the most pods, then by name. Big pods need whole nodes that small ones would otherwise
split, so this first pass places most composites that fit at all. A child that does
not fit is skipped and the rest are still tried, so a composite of three whose quorum
is two is placed with the two that fit. With a topology key, every domain of it is tried
in turn (by label value) and the first where every child fits wins; failing that, the
one where the most fit, if that is enough.

When the first pass places fewer than `minGroupCount` children anywhere, a child it
placed may be the one that kept others out (one that spreads over every node leaves each
too little for siblings that fit together). The planner then searches other choices of
children (`_ChildSearch.choose`): the first pass again without one child, for each child in
turn (largest first, the likeliest to be in the way), then without two, and so on,
stopping at the first that places `minGroupCount`; a pass stops as soon as the children
left cannot make up the count, and a child planned on what the same children took
before is not planned again. Every other child is then planned on what the chosen ones
leave, so each one that still fits is placed with them. Left out in every way the count
allows, this tries every choice of children (each in the largest-first order), so a
composite that does not fit is told that no other choice fits either.

Why the search is bounded: a composite of n children has up to 2^n choices, each plan of
a child looks at every node (no fit index describes capacity its siblings took), and a
composite that does not fit is planned again on every queue pass that capacity changed,
some of them on kube-scheduler's filter path. So the search makes at most
`search_budget` plans beyond the first pass, for the whole composite across its
domains (those where the first pass came closest first): `SEARCH_WORK` node visits'
worth, at most `SEARCH_PLANS` and at least one per child, so a stuck composite's pass
costs about the same on any cluster; then it says that it stopped there rather than
that no choice fits. Measured with `python -m bench.core.composite` (8 children,
docs/performance.md, 2 shared cores, best of 5 over four runs): a composite that
cannot fit, its bound spent, took 60-96 ms at 1,000 nodes (64 plans searched; its first
pass alone 19-28 ms) and 111-128 ms at 5,000 (12 plans; first pass 93-107 ms); one the
search places, 17-35 and 75-107 ms (its failing first pass 11-24 and 48-49). Children
with DRA claims are planned as before: the devices one child takes are not yet charged
to its siblings.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domain, word
from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo, Resources
from extender.core.planner.gang import GangPlanner
from extender.core.planner.plan import Plan, Shortfall
from extender.core.planner.shapes import STANDARD

# The search's bound (module docstring): node visits (plans × the cluster's nodes)
# beyond the first pass, per composite and queue pass; and never more plans than
# `SEARCH_PLANS`, nor fewer than the composite has children.
SEARCH_WORK = 64_000
SEARCH_PLANS = 64
# Choices of children the search may look at, most of them answered from plans it made
# already: with many children, only the count of choices, not of plans, grows fast.
_PASSES = 1024


def search_budget(children: int, nodes: int) -> int:
    """The plans the search may make for a composite of `children` on `nodes` nodes."""
    return max(children, min(SEARCH_PLANS, SEARCH_WORK // max(nodes, 1)))


@dataclass(frozen=True, slots=True)
class Child:
    """One child group to plan: its group, its members, and its succeeded pods (which
    count toward its quorum as `plan_group` counts them)."""

    group: GroupInfo
    members: Sequence[PodInfo]
    succeeded: int = 0


@dataclass(frozen=True, slots=True)
class CompositePlan:
    """What the children's plans came to: a plan for each child that fits (`plans`, in
    planning order) and why each other one did not (`short`), in the domain tried
    (`where`, "" without a topology key). `placed`: enough children fit. When not,
    `searched` says how far the search for another choice of children went:
    "every" (every choice was tried), "bound" (it stopped at its bound), or "" (no
    search); `tried`: the plans it made."""

    plans: dict[str, Plan]
    short: dict[str, Shortfall]
    where: str = ""
    placed: bool = False
    searched: str = ""
    tried: int = 0


def plan_composite(composite: CompositeInfo, children: Sequence[Child], snapshot: Snapshot,
                   planner: GangPlanner, budget: int | None = None) -> CompositePlan:
    """The children of `composite` planned together on `snapshot` (module docstring).
    `budget`: the plans the search may make beyond the first pass (None:
    `search_budget`)."""
    need = composite.min_group_count
    if budget is None:
        budget = search_budget(len(children), len(snapshot.nodes))
    order = sorted(children, key=_size_key)
    if not composite.topology_required:
        search = _ChildSearch(order, planner, None)
        first = search.first(snapshot)
        if len(first.plans) >= need:
            return _with(first, placed=True)
        found, searched = search.choose(snapshot, need, budget)
        return found if found is not None else _with(first, searched=searched,
                                                      tried=search.spent)
    keys = (composite.topology_required,)
    groups = snapshot.topology().groups(keys)
    tried: list[tuple[CompositePlan, _ChildSearch, Snapshot]] = []
    for values in sorted(groups):
        names = groups[values]
        within = Snapshot(
            {n: snapshot.nodes[n] for n in names},
            {n: snapshot.free[n] for n in names if n in snapshot.free},
            snapshot.pods_on_node, repellers=snapshot.repellers, devices=snapshot.devices)
        search = _ChildSearch(order, planner, Domain(keys, values, 1))
        out = search.first(within)
        if len(out.plans) == len(children):
            return _with(out, placed=True)
        tried.append((out, search, within))
    if not tried:  # no node has the label at all
        msg = f"no node has the label {composite.topology_required}"
        return CompositePlan({}, {c.group.key: Shortfall(0, 0, msg, None, msg)
                                  for c in children}, f"no {word(keys[0])}")
    # The domain where the most fit (the first of equals) wins if that is enough; else
    # each domain is searched, the closest first, on what is left of the budget.
    tried.sort(key=lambda t: -len(t[0].plans))
    best = tried[0][0]
    if len(best.plans) >= need:
        return _with(best, placed=True)
    searched, spent = "every", 0
    for _, search, within in tried:
        found, how = search.choose(within, need, budget - spent)
        spent += search.spent
        if found is not None:
            return found
        if how == "bound" or (spent >= budget and search is not tried[-1][1]):
            searched = "bound"
            break
        if how == "":
            searched = ""
    return _with(best, searched=searched, tried=spent)


def _with(plan: CompositePlan, placed: bool = False, searched: str = "",
          tried: int = 0) -> CompositePlan:
    return CompositePlan(plan.plans, plan.short, plan.where, placed, searched, tried)


def _size_key(child: Child) -> tuple[int, int, int, int, str]:
    """Ascending sort key, largest child first (module docstring)."""
    biggest: tuple[int, int, int] = (0, 0, 0)
    bound = 0
    for m in child.members:
        if m.node_name:
            bound += 1
            continue
        req = m.requests
        extended = sum(v for k, v in req.items() if k not in STANDARD)
        biggest = max(biggest, (extended, req.get("cpu", 0), req.get("memory", 0)))
    need = max(child.group.min_member - child.succeeded - bound, 0)
    return (-biggest[0], -biggest[1], -biggest[2], -need, child.group.name)


@dataclass(slots=True)
class _ChildSearch:
    """One domain's (or the cluster's) planning of the ordered children: the first
    pass and the bounded search over choices of children (module docstring)."""

    order: Sequence[Child]
    planner: GangPlanner
    domain: Domain | None
    spent: int = 0  # plans the search made (the first pass's are not counted)
    # (the children taken so far, by index, the child planned next) -> its plan, None
    # if it did not fit: the first pass's answers, so the search does not plan those
    # again (its first branch is the first pass).
    _known: dict[tuple[tuple[int, ...], int], Plan | None] = field(default_factory=dict)

    def first(self, snapshot: Snapshot) -> CompositePlan:
        """Every child in order, each on what the ones that fit before it left: their
        members are charged to their nodes and sit on them (for anti-affinity), on
        overlays of the snapshot's own maps, which are never written."""
        view = _layer(snapshot)
        plans: dict[str, Plan] = {}
        short: dict[str, Shortfall] = {}
        taken: list[int] = []
        for i, child in enumerate(self.order):
            result = self.planner(child.group, child.members, child.succeeded, view)
            if isinstance(result, Shortfall):
                self._known[(tuple(taken), i)] = None
                short[child.group.key] = result
                continue
            plans[child.group.key] = self._known[(tuple(taken), i)] = self._within(result)
            _charge(view, child, result)
            taken.append(i)
        where = self.domain.describe() if self.domain is not None else ""
        return CompositePlan(plans, short, where)

    def choose(self, snapshot: Snapshot, need: int,
               budget: int) -> tuple[CompositePlan | None, str]:
        """A choice of at least `need` children that fit together, with every other
        child that still fits on top, or None and how far the search went
        (`CompositePlan.searched`). Needs `first` to have run on the same snapshot."""
        n = len(self.order)
        if need <= 0 or need > n:
            return None, ""
        passes = 0
        try:
            for size in range(1, n - need + 1):
                for left_out in combinations(range(n), size):
                    passes += 1
                    if passes > _PASSES:
                        return None, "bound"
                    taken = self._pass(snapshot, frozenset(left_out), need, budget)
                    if taken is not None:
                        return self._placed(snapshot, taken), ""
        except _OutOfBudget:
            return None, "bound"
        return None, "every"

    def _pass(self, snapshot: Snapshot, left_out: frozenset[int], need: int,
              budget: int) -> list[tuple[int, Plan]] | None:
        """The first pass without the children `left_out`: the children it takes and
        their plans if they are at least `need`, else None (as soon as the children
        left cannot make up the count)."""
        view = _layer(snapshot)
        taken: list[tuple[int, Plan]] = []
        rest = len(self.order) - len(left_out)
        for i, child in enumerate(self.order):
            if i in left_out:
                continue
            if len(taken) + rest < need:
                return None
            rest -= 1
            memo = (tuple(j for j, _ in taken), i)
            plan: Plan | None
            if memo in self._known:
                plan = self._known[memo]
            else:
                if self.spent >= budget:
                    raise _OutOfBudget
                self.spent += 1
                result = self.planner(child.group, child.members, child.succeeded, view,
                                      explain=False)
                plan = self._within(result) if isinstance(result, Plan) else None
                self._known[memo] = plan
            if plan is not None:
                _charge(view, child, plan)
                taken.append((i, plan))
        return taken if len(taken) >= need else None

    def _placed(self, snapshot: Snapshot, taken: Sequence[tuple[int, Plan]]) -> CompositePlan:
        """The children `taken` with their plans, and every other child planned once
        more on what they leave, in order: placed with them if it fits (one left out
        may), else why not, in the planner's words (the search did not ask for them)."""
        view = _layer(snapshot)
        plans: dict[str, Plan] = {}
        for i, p in taken:
            _charge(view, self.order[i], p)
            plans[self.order[i].group.key] = p
        short: dict[str, Shortfall] = {}
        chosen = {i for i, _ in taken}
        for i, child in enumerate(self.order):
            if i in chosen:
                continue
            result = self.planner(child.group, child.members, child.succeeded, view)
            if isinstance(result, Shortfall):
                short[child.group.key] = result
                continue
            plans[child.group.key] = self._within(result)
            _charge(view, child, result)
        where = self.domain.describe() if self.domain is not None else ""
        ordered = {c.group.key: plans[c.group.key] for c in self.order
                   if c.group.key in plans}
        return CompositePlan(ordered, short, where, placed=True)

    def _within(self, plan: Plan) -> Plan:
        if plan.domain is None and self.domain is not None:
            # Its slots move only inside the composite's domain (docs/topology.md).
            return Plan(plan.assignments, self.domain)
        return plan


class _OutOfBudget(Exception):
    """The search made the plans its bound allows."""


def _layer(snapshot: Snapshot) -> Snapshot:
    """A view whose free capacity and pods per node are overlays of `snapshot`'s,
    written by `_charge` only in their first layer."""
    return Snapshot(snapshot.nodes, ChainMap({}, snapshot.free),  # type: ignore[arg-type]
                    ChainMap({}, snapshot.pods_on_node),  # type: ignore[arg-type]
                    repellers=None, devices=snapshot.devices)


def _charged(view: Snapshot, child: Child, plan: Plan) -> Snapshot:
    """`view` with `child`'s plan charged on a new layer: `view` itself stays as it is,
    for the branch that leaves the child out."""
    out = _layer(view)
    _charge(out, child, plan)
    return out


def _charge(view: Snapshot, child: Child, plan: Plan) -> None:
    """`plan`'s members charged to their nodes in `view`'s first layer."""
    free = view.free
    pods = view.pods_on_node
    assert isinstance(free, ChainMap) and isinstance(pods, ChainMap)
    by_uid = {m.uid: m for m in child.members}
    for uid, node in plan.assignments.items():
        pod = by_uid[uid]
        left: Resources = dict(free.get(node, {}))
        for k, v in pod.requests.items():
            left[k] = left.get(k, 0) - v
        free.maps[0][node] = left
        pods.maps[0][node] = [*pods.get(node, ()), pod]


def children_words(keys: Mapping[str, object]) -> str:
    """"ns/a, ns/b" from gang keys, for messages (the source prefix dropped)."""
    return ", ".join(k.split(":", 1)[-1] for k in keys) or "none"

"""Whole-gang placement: a node for every member that must be placed, or why not.

The plan is made against real per-node free capacity, never aggregate sums: four
members of 4 GPUs do not fit on nodes with 6+2+2+2 free GPUs, and the planner must
say so (one fits), because a gang that is half placed is worse than one that waits.

How it works (greedy, and fast enough for the scheduler's serial loop):

* Members that are interchangeable for placement form a *shape*: same namespace,
  requests, node selector, node affinity, tolerations, anti-affinity terms and
  feasible-node restriction. Labels are deliberately left out: gang members
  usually carry a per-pod index label, which would make every member its own shape;
  labels only matter for anti-affinity, which is checked per member, lazily, on
  the node it is about to take.
* Shapes are placed biggest first (first-fit decreasing, scarce extended resources
  such as GPUs weighing most), so the hard-to-place members are not crowded out by
  small ones.
* For each shape, one pass over the nodes evaluates the constraints once per node
  and computes how many members fit there (min over resources of free // request).
  Nodes are preferred by that count, smallest first (best fit): the gang fills
  the holes that fit it most tightly and leaves emptier nodes whole for the next,
  possibly bigger, gang. Ties keep the order of `free` (or of the feasible list),
  so the result is deterministic for a given input. Nodes where exactly one member
  fits are the tightest possible, so the pass stops early once it has found one
  such node per member still to place. A shape whose members repel each other
  takes one slot per node, on nodes still ranked by how tightly it fits.
* Anti-affinity on kubernetes.io/hostname is checked per member against the pods
  on the node and the members already placed there by this plan.
* When only some of the pods are needed (`need` < len(pods)), the preferred ones
  are planned first, later ones stand in for those that do not fit, and if that
  still falls short the smallest `need` pods get a second attempt.

Where greedy can miss a feasible assignment (never for a gang of one shape without
constraints: there each node's count is exact and independent of the others, so a
plan is found iff the counts add up to `need`):

* several shapes competing for the same nodes, when the size order or best fit
  puts an earlier shape on the only nodes a later one could use (e.g. a bigger,
  unconstrained member taking the room on the one node a smaller, selector-bound
  member matches). Against brute force on random small clusters (up to 7
  members, 6 nodes, mixed constraints), greedy missed 2 of about 1,300 feasible
  cases;
* anti-affinity between members with different labels, where the order in which
  members claim nodes decides whether the rest still fit.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from extender.core.constraints import (
    HOSTNAME,
    NODE_SELECTOR_MISMATCH,
    NODE_UNSCHEDULABLE,
    anti_affinity_conflict,
    node_matches,
    self_anti_affine,
)
from extender.core.resources import format_resources, shortfall
from extender.core.types import NodeInfo, NodeSelectorTerm, PodInfo, Resources, Toleration

__all__ = ["FitIndex", "Plan", "Shortfall", "min_resources_shortfall", "plan_gang"]

_BIG = 1 << 62
_TIMES = "\u00d7"  # multiplication sign: "3 \u00d7 {cpu: 1}" in messages
_STANDARD = ("cpu", "memory", "ephemeral-storage", "pods")


@dataclass(frozen=True, slots=True)
class Plan:
    assignments: dict[str, str]  # pod uid -> node name, exactly `need` entries


@dataclass(frozen=True, slots=True)
class Shortfall:
    need: int  # how many members had to be placed
    fit: int  # how many could be placed (< need)
    message: str  # human, actionable: what did not fit and why
    pod: str | None  # ns/name of the first member (in preference order) not placed


# ----- shapes -------------------------------------------------------------------------


def _scan_order(name: str) -> tuple[int, str]:
    # Scarce resources first, so the check of a node that lacks them stops at once.
    if name in _STANDARD:
        return (1 + _STANDARD.index(name), name)
    return (0, name)


@dataclass(slots=True)
class _Shape:
    proto: PodInfo  # constraints and requests of every member are these
    members: list[PodInfo]
    items: tuple[tuple[str, int], ...]  # positive requests, scarcest first
    allowed: Collection[str] | None
    plain: bool  # no node selector, no node affinity: only taints/unschedulable matter
    one_per_node: bool  # every member repels every other

    def size_key(self) -> tuple[int, int, int, int, int, int]:
        """Descending sort key: extended resources outweigh cpu, which outweighs memory;
        on a tie the more constrained shape goes first."""
        req = self.proto.requests
        extended = sum(v for k, v in req.items() if k not in _STANDARD)
        return (
            -extended,
            -req.get("cpu", 0),
            -req.get("memory", 0),
            -req.get("ephemeral-storage", 0),
            0 if self.allowed is not None else 1,
            0 if not self.plain else 1,
        )


def _shapes(
    pods: Sequence[PodInfo], allowed: Mapping[str, Collection[str]] | None, by_size: bool = True
) -> list[_Shape]:
    by_key: dict[object, _Shape] = {}
    for p in pods:
        restriction = allowed.get(p.uid) if allowed is not None else None
        key = (
            p.namespace,
            tuple(sorted(p.requests.items())),
            tuple(sorted(p.node_selector.items())),
            p.required_node_affinity,
            p.tolerations,
            p.required_anti_affinity,
            None if restriction is None else p.uid,
        )
        shape = by_key.get(key)
        if shape is None:
            items = tuple(
                sorted(
                    ((k, v) for k, v in p.requests.items() if v > 0),
                    key=lambda kv: _scan_order(kv[0]),
                )
            )
            shape = by_key[key] = _Shape(
                proto=p,
                members=[],
                items=items,
                allowed=restriction,
                plain=not p.node_selector and p.required_node_affinity is None,
                one_per_node=False,
            )
        shape.members.append(p)
    out = list(by_key.values())
    for s in out:
        # Members of a shape share their terms, so if those terms select every
        # member, no two members may share a node.
        s.one_per_node = all(self_anti_affine(m) for m in s.members)
    if by_size:
        # sort() is stable: equal shapes keep the members' preference order.
        out.sort(key=_Shape.size_key)
    return out


# ----- the planner --------------------------------------------------------------------


@dataclass(slots=True)
class _Planner:
    """One planning attempt: the inputs, and what this plan has taken so far
    (`work` copies a node's free capacity on first use, so inputs stay untouched)."""

    nodes: Mapping[str, NodeInfo]
    free: Mapping[str, Resources]
    pods_on_node: Mapping[str, Sequence[PodInfo]]
    need: int
    index: FitIndex | None = None  # kept for exactly these `nodes` and `free`
    assignments: dict[str, str] = field(default_factory=dict)
    work: dict[str, Resources] = field(default_factory=dict)  # free of nodes this plan used
    placed_on: dict[str, list[PodInfo]] = field(default_factory=dict)
    placed_repelling: dict[str, list[PodInfo]] = field(default_factory=dict)  # with AA terms
    repelling: dict[str, list[PodInfo]] = field(default_factory=dict)  # existing, AA terms

    def free_of(self, name: str) -> Mapping[str, int] | None:
        w = self.work.get(name)
        return w if w is not None else self.free.get(name)

    def conflict(self, pod: PodInfo, name: str) -> str | None:
        """Why `pod` may not join node `name` for anti-affinity: "existing" (a pod
        already there) or "member" (one this plan put there); None if it may."""
        if pod.required_anti_affinity:
            if anti_affinity_conflict(pod, self.pods_on_node.get(name, ())) is not None:
                return "existing"
            placed = self.placed_on.get(name, ())
            return "member" if anti_affinity_conflict(pod, placed) is not None else None
        # Without terms of its own, only pods that have terms can repel it.
        rep = self.repelling.get(name)
        if rep is None:
            rep = self.repelling[name] = [
                p for p in self.pods_on_node.get(name, ()) if p.required_anti_affinity
            ]
        if rep and anti_affinity_conflict(pod, rep) is not None:
            return "existing"
        mates = self.placed_repelling.get(name)
        if mates and anti_affinity_conflict(pod, mates) is not None:
            return "member"
        return None

    def place(self, pod: PodInfo, shape: _Shape, name: str) -> None:
        w = self.work.get(name)
        if w is None:
            w = self.work[name] = dict(self.free.get(name) or {})
        for r, q in shape.items:
            w[r] = w.get(r, 0) - q
        self.placed_on.setdefault(name, []).append(pod)
        if pod.required_anti_affinity:
            self.placed_repelling.setdefault(name, []).append(pod)
        self.assignments[pod.uid] = name


def _labels_have(labels: Mapping[str, str], selector: tuple[tuple[str, str], ...]) -> bool:
    for k, v in selector:  # noqa: SIM110 - cheaper than all() over a generator
        if labels.get(k) != v:
            return False
    return True


@dataclass(slots=True)
class _Candidates:
    """Nodes that can take members of one shape, best fit first, found lazily."""

    planner: _Planner
    shape: _Shape
    source: Iterator[tuple[str, Mapping[str, int] | None]]
    order: list[str] = field(default_factory=list)
    left: dict[str, int] = field(default_factory=dict)  # members the node can still take
    buckets: dict[int, list[str]] = field(default_factory=dict)  # count > 1, until done
    done: bool = False

    def scan(self, want: int) -> None:
        """Extend `order`: stop after `want` more exact-fit nodes, or at the end of the
        nodes (then append every other fitting node, fewest fits first)."""
        items = self.shape.items
        work = self.planner.work
        has_work = bool(work)
        nodes_get = self.planner.nodes.get
        proto = self.shape.proto
        plain = self.shape.plain
        # Checked inline first: a selector rejects most nodes, and cheaply.
        selector = tuple(proto.node_selector.items())
        one = self.shape.one_per_node
        order, left, buckets = self.order, self.left, self.buckets
        found = 0
        for name, f in self.source:
            if has_work and name in work:
                f = work[name]
            elif f is None:
                continue
            cnt = _BIG
            for r, q in items:
                c = f.get(r, 0) // q
                if c < cnt:
                    cnt = c
                    if c <= 0:
                        break
            if cnt <= 0:
                continue
            node = nodes_get(name)
            if node is None:
                continue
            if selector and not _labels_have(node.labels, selector):
                continue
            if (not plain or node.taints or node.unschedulable) and node_matches(
                proto, node
            ) is not None:
                continue
            # One member per node under self anti-affinity, but ranked by how tightly
            # it fits all the same, to keep roomy nodes whole.
            left[name] = 1 if one else cnt
            if cnt == 1:
                order.append(name)
                found += 1
                if found >= want:
                    return
            else:
                b = buckets.get(cnt)
                if b is None:
                    buckets[cnt] = [name]
                else:
                    b.append(name)
        self.done = True
        for cnt in sorted(buckets):
            order.extend(buckets[cnt])
        buckets.clear()


def _fit_count(
    items: tuple[tuple[str, int], ...],
    f: Mapping[str, int] | None,
    node: NodeInfo | None,
    proto: PodInfo,
    plain: bool,
    selector: tuple[tuple[str, str], ...],
) -> int:
    """How many pods of a shape fit in free capacity `f` of `node`, 0 if none or if the
    node's labels and taints exclude the shape: `_Candidates.scan`'s test, node by node."""
    if f is None or node is None:
        return 0
    cnt = _BIG
    for r, q in items:
        c = f.get(r, 0) // q
        if c < cnt:
            cnt = c
            if c <= 0:
                return 0
    if selector and not _labels_have(node.labels, selector):
        return 0
    if (not plain or node.taints or node.unschedulable) and node_matches(proto, node) is not None:
        return 0
    return cnt


@dataclass(slots=True)
class _IndexedCandidates:
    """`_Candidates` read from a `FitIndex`: the same nodes in the same order (members
    that fit, fewest first, ties in the order of `free`), without visiting every node.
    Nodes this plan has already used (`work`) are counted from their working copy, as
    the scan does, and merged in at their place."""

    planner: _Planner
    shape: _Shape
    stream: Iterator[tuple[int, int, str]]
    order: list[str] = field(default_factory=list)
    left: dict[str, int] = field(default_factory=dict)
    done: bool = False

    @classmethod
    def open(cls, pl: _Planner, index: FitIndex, shape: _Shape) -> _IndexedCandidates:
        proto = shape.proto
        selector = tuple(proto.node_selector.items())
        used = set(pl.work)
        own = []
        for name in used:
            seq = index.position(name)
            if seq is None:
                continue
            cnt = _fit_count(shape.items, pl.work[name], pl.nodes.get(name), proto,
                             shape.plain, selector)
            if cnt > 0:
                own.append((cnt, seq, name))
        own.sort()
        rest = index.ordered(shape.items, proto, shape.plain, skip=used)
        return cls(pl, shape, heapq.merge(rest, own))

    def scan(self, want: int) -> None:
        """Extend `order` by up to `want` nodes; `done` once there are no more."""
        one = self.shape.one_per_node
        order, left = self.order, self.left
        for added, (cnt, _seq, name) in enumerate(self.stream, 1):
            order.append(name)
            left[name] = 1 if one else cnt
            if added >= want:
                return
        self.done = True


_ViewKey = tuple[
    tuple[tuple[str, int], ...],
    tuple[tuple[str, str], ...],
    "tuple[NodeSelectorTerm, ...] | None",
    tuple[Toleration, ...],
]


@dataclass(slots=True)
class _FitView:
    """One request shape: fit count per eligible node, and nodes bucketed by count
    (positions in `free`'s order, ascending)."""

    items: tuple[tuple[str, int], ...]
    proto: PodInfo
    plain: bool
    selector: tuple[tuple[str, str], ...]
    synced: int = 0  # how much of the index's change log is applied
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (count, seq)
    buckets: dict[int, list[int]] = field(default_factory=dict)


class FitIndex:
    """How many more pods of each request shape fit on each node, bucketed by that
    count and kept current incrementally.

    The planner's best-fit pass looks at every node for every gang it plans (about
    3 ms at 5,000 nodes, on the filter path of the gang's first member). With the
    index a plan reads the buckets, fewest fits first, and stops as soon as its
    members are placed. The cache calls `node_added`, `node_removed` and `changed`
    whenever a node or its free capacity changes; each shape's view catches up from
    that change log when it is next used. Plans made through the index are the
    same as the scan's (tests/core/test_fit_index.py checks it on random clusters).
    """

    MAX_VIEWS = 32

    def __init__(self, nodes: Mapping[str, NodeInfo], free: Mapping[str, Resources]) -> None:
        self.nodes = nodes
        self.free = free
        self._seq: dict[str, int] = {}  # node -> position in the iteration order of `free`
        self._name: dict[int, str] = {}
        self._next = 0
        self._log: list[str] = []  # nodes changed, in order; views remember how far they read
        self._views: dict[_ViewKey, _FitView] = {}  # least recently used first

    # ----- fed by the cache -------------------------------------------------------

    def node_added(self, name: str) -> None:
        """`name` became the last key of `free`."""
        seq = self._next
        self._next += 1
        self._seq[name] = seq
        self._name[seq] = name
        self.changed(name)

    def node_removed(self, name: str) -> None:
        seq = self._seq.pop(name, None)
        if seq is not None:
            del self._name[seq]
        self.changed(name)

    def changed(self, name: str) -> None:
        self._log.append(name)
        if len(self._log) > 4 * len(self._seq) + 4096:
            self._compact()

    def _compact(self) -> None:
        """Drop the part of the log every view has applied. A view further behind than
        twice the number of nodes is dropped instead (rebuilding it, one read of every
        node, is cheaper than replaying that much) and rebuilt when next used."""
        end = len(self._log)
        limit = 2 * len(self._seq) + 1024
        for key in [k for k, v in self._views.items() if end - v.synced > limit]:
            del self._views[key]
        start = min((v.synced for v in self._views.values()), default=end)
        del self._log[:start]
        for view in self._views.values():
            view.synced -= start

    # ----- read by the planner --------------------------------------------------------

    def position(self, name: str) -> int | None:
        return self._seq.get(name)

    def ordered(
        self,
        items: tuple[tuple[str, int], ...],
        proto: PodInfo,
        plain: bool,
        skip: Collection[str] = (),
    ) -> Iterator[tuple[int, int, str]]:
        """(count, position, node) of every node where a pod shaped like `proto` (with
        positive requests `items`) fits, fewest fits first, then in `free`'s order."""
        view = self._view(items, proto, plain)
        names = self._name
        for cnt in sorted(view.buckets):
            for seq in view.buckets[cnt]:
                name = names[seq]
                if name not in skip:
                    yield cnt, seq, name

    def _view(self, items: tuple[tuple[str, int], ...], proto: PodInfo, plain: bool) -> _FitView:
        key: _ViewKey = (
            items,
            tuple(sorted(proto.node_selector.items())),
            proto.required_node_affinity,
            proto.tolerations,
        )
        view = self._views.pop(key, None)
        if view is None:
            view = _FitView(items, proto, plain, tuple(proto.node_selector.items()))
            self._build(view)
        else:
            self._catch_up(view)
        self._views[key] = view  # most recently used last
        if len(self._views) > self.MAX_VIEWS:
            del self._views[next(iter(self._views))]
        return view

    def _count(self, view: _FitView, name: str) -> int:
        return _fit_count(view.items, self.free.get(name), self.nodes.get(name), view.proto,
                          view.plain, view.selector)

    def _build(self, view: _FitView) -> None:
        if len(self._seq) != len(self.free) or any(n not in self._seq for n in self.free):
            self._renumber()
        for name in self.free:
            cnt = self._count(view, name)
            if cnt > 0:
                seq = self._seq[name]
                view.counts[name] = (cnt, seq)
                view.buckets.setdefault(cnt, []).append(seq)
        for bucket in view.buckets.values():
            bucket.sort()
        view.synced = len(self._log)

    def _catch_up(self, view: _FitView) -> None:
        if view.synced == len(self._log):
            return
        for name in set(self._log[view.synced:]):
            entry = view.counts.pop(name, None)
            if entry is not None:
                bucket = view.buckets[entry[0]]
                del bucket[bisect_left(bucket, entry[1])]
                if not bucket:
                    del view.buckets[entry[0]]
            seq = self._seq.get(name)
            if seq is None:
                continue
            cnt = self._count(view, name)
            if cnt > 0:
                view.counts[name] = (cnt, seq)
                insort(view.buckets.setdefault(cnt, []), seq)
        view.synced = len(self._log)

    def _renumber(self) -> None:
        """Positions from `free` itself, should they ever disagree with it."""
        self._seq = {name: i for i, name in enumerate(self.free)}
        self._name = {i: name for name, i in self._seq.items()}
        self._next = len(self._seq)
        self._log.clear()
        self._views.clear()


def _source(
    shape: _Shape, free: Mapping[str, Resources]
) -> Iterator[tuple[str, Mapping[str, int] | None]]:
    if shape.allowed is None:
        return iter(free.items())
    # dict.fromkeys: a node listed twice must not be counted twice.
    return ((name, free.get(name)) for name in dict.fromkeys(shape.allowed))


@dataclass(slots=True)
class _Outcome:
    placed: int
    unplaced: list[PodInfo]
    candidates: _Candidates | _IndexedCandidates
    blocked_by_existing: set[str]


def _place_shape(pl: _Planner, shape: _Shape, members: Sequence[PodInfo]) -> _Outcome:
    cand: _Candidates | _IndexedCandidates
    if pl.index is not None and shape.allowed is None:
        cand = _IndexedCandidates.open(pl, pl.index, shape)
    else:
        cand = _Candidates(pl, shape, _source(shape, pl.free))
    cand.scan(len(members))
    order, left = cand.order, cand.left
    start = 0
    placed = 0
    unplaced: list[PodInfo] = []
    blocked: set[str] = set()
    failed_labels: list[dict[str, str]] = []
    for idx, pod in enumerate(members):
        if len(pl.assignments) >= pl.need:
            break
        if pod.labels in failed_labels:  # same shape, same labels: same answer
            unplaced.append(pod)
            continue
        chosen: str | None = None
        i = start
        while True:
            if i >= len(order):
                if cand.done:
                    break
                cand.scan(len(members) - idx)
                continue
            name = order[i]
            if left[name] <= 0:
                if i == start:
                    start += 1
                i += 1
                continue
            why = pl.conflict(pod, name)
            if why is not None:
                if why == "existing":
                    blocked.add(name)
                i += 1
                continue
            chosen = name
            break
        if chosen is None:
            unplaced.append(pod)
            failed_labels.append(pod.labels)
            continue
        pl.place(pod, shape, chosen)
        left[chosen] -= 1
        placed += 1
    return _Outcome(placed, unplaced, cand, blocked)


def plan_gang(
    pods: Sequence[PodInfo],
    need: int,
    nodes: Mapping[str, NodeInfo],
    free: Mapping[str, Resources],
    pods_on_node: Mapping[str, Sequence[PodInfo]],
    allowed: Mapping[str, Collection[str]] | None = None,
    explain: bool = True,
    index: FitIndex | None = None,
) -> Plan | Shortfall:
    """Place `need` of `pods` (earlier ones preferred) on nodes, all or nothing.

    `free` is each node's free capacity now (absent: nothing free); `pods_on_node`
    the pods bound or held there, for anti-affinity; `allowed` restricts some pods
    to given nodes (kube-scheduler's feasible list for the pod being filtered).
    The first `need` pods are planned; if some do not fit, later pods stand in for
    them, and failing that the `need` smallest pods are tried. A Plan never puts
    more on a node than its free capacity. `need` below 1 gives an empty Plan;
    above len(pods) (after dropping repeated uids), a Shortfall. `explain=False`
    leaves a failed plan's message empty, for callers that only ask whether it fits
    (the explanation looks at every node again and costs more than the plan).
    `index`: a `FitIndex` kept for these very `nodes` and `free`, to find nodes without
    visiting every one (ignored for any other mapping); the plan is the same.
    """
    if index is not None and (index.free is not free or index.nodes is not nodes):
        index = None
    if need <= 0:
        return Plan({})
    if len({p.uid for p in pods}) != len(pods):  # a pod listed twice is one pod
        pods = _first_occurrences(pods)
    if need > len(pods):
        return _too_few(pods, need, nodes, free, pods_on_node, allowed, index)

    pl, failure = _attempt(pods, need, nodes, free, pods_on_node, allowed, index)
    if failure is None:
        return Plan(pl.assignments)
    best_fit = len(pl.assignments)
    if len(pods) > need:
        # Only some members are needed: the preferred ones may be the big ones that
        # crowd each other out. Try again with the smallest members first.
        by_size = sorted(pods, key=_pod_size_key)
        if {p.uid for p in by_size[:need]} != {p.uid for p in pods[:need]}:
            alt, alt_failure = _attempt(by_size, need, nodes, free, pods_on_node, allowed,
                                        index)
            if alt_failure is None:
                return Plan(alt.assignments)
            best_fit = max(best_fit, len(alt.assignments))

    shapes, shape, outcome = failure
    message = ""
    if explain:
        message = _explain(pl, shape, outcome, shared=len(shapes) > 1)
        if len(shapes) > 1:
            message += f"; {len(pl.assignments)} of {need} members placed in all"
    first = next((p.key for p in pods[:need] if p.uid not in pl.assignments), None)
    return Shortfall(need=need, fit=best_fit, message=message, pod=first)


_Failure = tuple[list[_Shape], _Shape, _Outcome]


def _attempt(
    pods: Sequence[PodInfo],
    need: int,
    nodes: Mapping[str, NodeInfo],
    free: Mapping[str, Resources],
    pods_on_node: Mapping[str, Sequence[PodInfo]],
    allowed: Mapping[str, Collection[str]] | None,
    index: FitIndex | None = None,
) -> tuple[_Planner, _Failure | None]:
    """Plan the first `need` pods, biggest shape first; let later pods stand in for
    those that do not fit. Returns the planner state and, unless all `need` were
    placed, the first shape that fell short (for the message)."""
    pl = _Planner(nodes, free, pods_on_node, need, index)
    shapes = _shapes(pods[:need], allowed)
    failure: _Failure | None = None
    for shape in shapes:
        outcome = _place_shape(pl, shape, shape.members)
        if outcome.unplaced and failure is None:
            failure = (shapes, shape, outcome)
    if failure is not None and len(pods) > need:
        # Stand-ins are taken in preference order, not by size: any that fits will do.
        for shape in _shapes(pods[need:], allowed, by_size=False):
            _place_shape(pl, shape, shape.members)
            if len(pl.assignments) >= need:
                break
    return pl, (None if len(pl.assignments) >= need else failure)


def _pod_size_key(p: PodInfo) -> tuple[int, int, int, int]:
    req = p.requests
    extended = sum(v for k, v in req.items() if k not in _STANDARD)
    return (extended, req.get("cpu", 0), req.get("memory", 0), req.get("ephemeral-storage", 0))


def _first_occurrences(pods: Sequence[PodInfo]) -> list[PodInfo]:
    seen: set[str] = set()
    out: list[PodInfo] = []
    for p in pods:
        if p.uid not in seen:
            seen.add(p.uid)
            out.append(p)
    return out


def _too_few(
    pods: Sequence[PodInfo],
    need: int,
    nodes: Mapping[str, NodeInfo],
    free: Mapping[str, Resources],
    pods_on_node: Mapping[str, Sequence[PodInfo]],
    allowed: Mapping[str, Collection[str]] | None,
    index: FitIndex | None = None,
) -> Shortfall:
    msg = f"needs {need} members, only {len(pods)} waiting to be placed"
    if not pods:
        return Shortfall(need, 0, msg, None)
    res = plan_gang(pods, len(pods), nodes, free, pods_on_node, allowed, index=index)
    if isinstance(res, Plan):
        return Shortfall(need, len(pods), msg, None)
    return Shortfall(need, res.fit, f"{msg}; {res.message}", res.pod)


# ----- explaining a shortfall ---------------------------------------------------------


def _as_node_count(reason: str) -> str:
    """node_matches' reason as it reads after a count ("3 node(s) were unschedulable"),
    in kube-scheduler's wording."""
    if reason == NODE_UNSCHEDULABLE:
        return "node(s) were unschedulable"
    if reason.startswith("untolerated taint"):
        return f"node(s) had {reason}"
    return reason


def _explain(pl: _Planner, shape: _Shape, outcome: _Outcome, shared: bool) -> str:
    """Name what did not fit: the count and per-member requests of the shape, how
    many fit, and the resource or constraint that stopped the rest. `shared`: other
    shapes of the gang competed for the same nodes. Runs only on failure, so it may
    look at every node again."""
    n = len(shape.members)
    fit = outcome.placed
    req = format_resources(dict(shape.items))
    proto = shape.proto

    reasons: Counter[str] = Counter()
    eligible: list[str] = []
    names: Collection[str] = dict.fromkeys(shape.allowed) if shape.allowed is not None else pl.nodes
    for name in names:
        node = pl.nodes.get(name)
        if node is None:
            reasons["node(s) unknown to gang-extender"] += 1
            continue
        if not node.taints and not node.unschedulable:
            if shape.plain:
                eligible.append(name)
                continue
            if not _labels_have(node.labels, tuple(proto.node_selector.items())):
                reasons[NODE_SELECTOR_MISMATCH] += 1
                continue
        why = node_matches(proto, node)
        if why is not None:
            reasons[_as_node_count(why)] += 1
        else:
            eligible.append(name)
    if shape.allowed is not None:
        outside = len(pl.nodes) - sum(1 for x in shape.allowed if x in pl.nodes)
        if outside > 0:
            reasons["node(s) not feasible for kube-scheduler"] += outside
    if outcome.blocked_by_existing:
        reasons["node(s) didn't satisfy anti-affinity with pods already there"] += len(
            outcome.blocked_by_existing
        )

    def excluded() -> str:
        if not reasons:
            return ""
        parts = ", ".join(f"{c} {r}" for r, c in sorted(reasons.items(), key=lambda x: -x[1]))
        return f"; excluded: {parts}"

    if not eligible:
        return f"needs {n} {_TIMES} {req}; {fit} fit; no node matches{excluded()}"

    usable = len(outcome.candidates.order) - len(outcome.blocked_by_existing)
    if shape.one_per_node and usable < n:
        return (
            f"{n} {_TIMES} {req} need distinct nodes (anti-affinity on {HOSTNAME}); "
            f"{usable} eligible node(s){excluded()}"
        )

    # A resource no eligible node has enough of even when empty is the whole story.
    for r, q in shape.items:
        if all(pl.nodes[name].allocatable.get(r, 0) < q for name in eligible):
            one = format_resources({r: q}, skip_pods=False)
            detail = f"no eligible node has {one} allocatable"
            return f"needs {n} {_TIMES} {req}; {fit} fit; {detail}{excluded()}"

    if shared:
        alone = 0
        for name in eligible:
            base = pl.free.get(name)  # before this plan placed anything
            if base is not None:
                k = min((max(0, base.get(r, 0)) // q for r, q in shape.items), default=_BIG)
                alone += min(k, 1) if shape.one_per_node else k
        if alone >= n:
            detail = f"the gang's other members take the room it needs ({alone} would fit alone)"
            return f"needs {n} {_TIMES} {req}; {fit} fit; {detail}{excluded()}"

    # The resource that alone would admit the fewest further members on the eligible
    # nodes; if it has enough in total, say the free amount is fragmented.
    worst: tuple[int, str, int] | None = None
    for r, q in shape.items:
        count = amount = 0
        for name in eligible:
            f = pl.free_of(name)
            if f is not None:
                v = max(0, f.get(r, 0))
                count += v // q
                amount += v
        if worst is None or count < worst[0]:
            worst = (count, r, amount)
    if worst is None:
        detail = "nodes are full"
    elif worst[0] + fit >= n:
        detail = f"free resources are on different nodes (no node has all of {req})"
    else:
        count, r, amount = worst
        detail = f"largest shortfall on {r}"
        if amount >= (n - fit) * shape.proto.requests[r]:
            detail += " (enough in total, but split across nodes)"
    return f"needs {n} {_TIMES} {req}; {fit} fit; {detail}{excluded()}"


def min_resources_shortfall(total_free: Resources, min_resources: Resources) -> str | None:
    """None if the cluster's free capacity covers PodGroup.spec.minResources, else
    what is missing. An aggregate check: it cannot prove a fit, only rule one out
    early with a message in the PodGroup's own terms."""
    missing = shortfall(min_resources, total_free)
    if not missing:
        return None
    worst = max(missing, key=lambda r: (missing[r] / max(min_resources[r], 1), r))
    have = {r: max(0, total_free.get(r, 0)) for r in min_resources}
    return (
        f"minResources {format_resources(min_resources, skip_pods=False)} exceed free "
        f"{format_resources(have, skip_pods=False)}; largest shortfall on {worst} "
        f"(short {format_resources({worst: missing[worst]}, skip_pods=False)[1:-1]})"
    )

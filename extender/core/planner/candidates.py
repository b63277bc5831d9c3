"""The nodes a shape's members may take, best fit first, and one attempt's working state."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from extender.core.cache.fitindex import FitIndex
from extender.core.model.constraints import anti_affinity_conflict
from extender.core.model.fit import fit_count
from extender.core.model.types import NodeInfo, PodInfo, Resources
from extender.core.planner.relations import Relations
from extender.core.planner.shapes import Shape


@dataclass(slots=True)
class PlanState:
    """One planning attempt: the inputs, and what this plan has taken so far
    (`work` copies a node's free capacity on first use, so inputs stay untouched)."""

    nodes: Mapping[str, NodeInfo]
    free: Mapping[str, Resources]
    pods_on_node: Mapping[str, Sequence[PodInfo]]
    need: int
    index: FitIndex | None = None  # kept for exactly these `nodes` and `free`
    # Constraints between members beyond one node (planner/relations.py), if any member
    # or pod on a node has one; and the nodes of the topology domain planned in, if any.
    relations: Relations | None = None
    within: Collection[str] | None = None
    assignments: dict[str, str] = field(default_factory=dict)
    work: dict[str, Resources] = field(default_factory=dict)  # free of nodes this plan used
    placed_on: dict[str, list[PodInfo]] = field(default_factory=dict)
    placed_repelling: dict[str, list[PodInfo]] = field(default_factory=dict)  # with AA terms
    repelling: dict[str, list[PodInfo]] = field(default_factory=dict)  # existing, AA terms

    def free_of(self, name: str) -> Mapping[str, int] | None:
        w = self.work.get(name)
        return w if w is not None else self.free.get(name)

    def conflict(self, pod: PodInfo, name: str) -> str | None:
        """Why `pod` may not join node `name`: for anti-affinity on the node, "existing"
        (a pod already there) or "member" (one this plan put there); "relation" for a
        constraint beyond the node (`relations`); None if it may. One body, no helper
        call: it runs for every node a member is offered."""
        if pod.required_anti_affinity:
            if anti_affinity_conflict(pod, self.pods_on_node.get(name, ())) is not None:
                return "existing"
            placed = self.placed_on.get(name, ())
            if anti_affinity_conflict(pod, placed) is not None:
                return "member"
        else:
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
        if self.relations is not None:
            node = self.nodes.get(name)
            if node is not None and self.relations.conflict(pod, node) is not None:
                return "relation"
        return None

    def place(self, pod: PodInfo, shape: Shape, name: str) -> None:
        w = self.work.get(name)
        if w is None:
            w = self.work[name] = dict(self.free.get(name) or {})
        for r, q in shape.items:
            w[r] = w.get(r, 0) - q
        self.placed_on.setdefault(name, []).append(pod)
        if pod.required_anti_affinity:
            self.placed_repelling.setdefault(name, []).append(pod)
        self.assignments[pod.uid] = name
        if self.relations is not None:
            self.relations.place(pod, self.nodes[name])


class DeviceCount(Protocol):
    """How many more members of a shape a node's free devices hold (`DevicePlan`)."""

    def count(self, shape: Shape, node: NodeInfo) -> int: ...


# How many members the nodes a scan of a shape with claims reads must hold, per member
# wanted, before it stops reading (`Candidates.scan`).
DEVICE_ROOM = 2


@dataclass(slots=True)
class Candidates:
    """Nodes that can take members of one shape, best fit first, found lazily. For a
    shape whose members have claims, `devices` caps each node's count by its devices."""

    planner: PlanState
    shape: Shape
    source: Iterator[tuple[str, Mapping[str, int] | None]]
    order: list[str] = field(default_factory=list)
    left: dict[str, int] = field(default_factory=dict)  # members the node can still take
    buckets: dict[int, list[str]] = field(default_factory=dict)  # count > 1, until done
    done: bool = False
    devices: DeviceCount | None = None

    def scan(self, want: int) -> None:
        """Extend `order`: stop after `want` more exact-fit nodes, or at the end of the
        nodes (then append every other fitting node, fewest fits first)."""
        items = self.shape.items
        work = self.planner.work
        has_work = bool(work)
        nodes_get = self.planner.nodes.get
        proto = self.shape.proto
        plain = self.shape.plain
        selector = tuple(proto.node_selector.items())
        one = self.shape.one_per_node
        devices = self.devices
        order, left, buckets = self.order, self.left, self.buckets
        found = room = 0
        for name, f in self.source:
            if has_work and name in work:
                f = work[name]
            elif f is None:
                continue
            node = nodes_get(name)
            cnt = fit_count(items, f, node, proto, plain, selector)
            if cnt <= 0:
                continue
            if devices is not None:
                cnt = min(cnt, devices.count(self.shape, node)) if node is not None else 0
                if cnt <= 0:
                    continue
                # A node's devices cost an allocation check per member it holds (about
                # 10 µs each): once the nodes read hold DEVICE_ROOM × `want` members, the
                # tightest among them are taken rather than every node read for them; a
                # later call reads on if they are not enough.
                room += 1 if one else cnt
                if cnt > 1 and room >= DEVICE_ROOM * want:
                    left[name] = 1 if one else cnt
                    buckets.setdefault(cnt, []).append(name)
                    break
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
        else:
            self.done = True
        for cnt in sorted(buckets):
            order.extend(buckets[cnt])
        buckets.clear()


@dataclass(slots=True)
class IndexedCandidates:
    """`Candidates` read from a `FitIndex`: the same nodes in the same order (members
    that fit, fewest first, ties in the order of `free`), without visiting every node.
    Nodes this plan has already used (`work`) are counted from their working copy, as
    the scan does, and merged in at their place."""

    planner: PlanState
    shape: Shape
    stream: Iterator[tuple[int, int, str]]
    order: list[str] = field(default_factory=list)
    left: dict[str, int] = field(default_factory=dict)
    done: bool = False

    @classmethod
    def open(cls, pl: PlanState, index: FitIndex, shape: Shape) -> IndexedCandidates:
        proto = shape.proto
        selector = tuple(proto.node_selector.items())
        used = set(pl.work)
        own = []
        for name in used:
            seq = index.position(name)
            if seq is None:
                continue
            cnt = fit_count(shape.items, pl.work[name], pl.nodes.get(name), proto,
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


def node_source(
    shape: Shape, free: Mapping[str, Resources], within: Collection[str] | None = None
) -> Iterator[tuple[str, Mapping[str, int] | None]]:
    if shape.allowed is None and within is None:
        return iter(free.items())
    # dict.fromkeys: a node listed twice must not be counted twice.
    names: Collection[str] = dict.fromkeys(shape.allowed if shape.allowed is not None
                                           else within or ())
    if shape.allowed is not None and within is not None:
        inside = within if isinstance(within, (set, frozenset, dict)) else set(within)
        names = [n for n in names if n in inside]
    return ((name, free.get(name)) for name in names)


@dataclass(slots=True)
class Outcome:
    placed: int
    unplaced: list[PodInfo]
    candidates: Candidates | IndexedCandidates
    blocked_by_existing: set[str]

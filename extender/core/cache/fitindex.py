"""The cache's index of how many more pods of each request shape fit on each node."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from extender.core.cache.topology import Values, domain_of
from extender.core.model.fit import fit_count
from extender.core.model.types import NodeInfo, NodeSelectorTerm, PodInfo, Resources, Toleration

_ViewKey = tuple[
    tuple[tuple[str, int], ...],
    tuple[tuple[str, str], ...],
    "tuple[NodeSelectorTerm, ...] | None",
    tuple[Toleration, ...],
]


def _view_key(items: tuple[tuple[str, int], ...], proto: PodInfo) -> _ViewKey:
    return (items, tuple(sorted(proto.node_selector.items())), proto.required_node_affinity,
            proto.tolerations)


@dataclass(slots=True)
class _Rooms:
    """For the domains of one keys tuple: how many pods of a view's shape fit in each,
    and on how many of its nodes at least one does."""

    of_node: dict[str, Values] = field(default_factory=dict)  # nodes counted, their domain
    room: dict[Values, list[int]] = field(default_factory=dict)  # -> [pods, nodes]

    def add(self, name: str, labels: Mapping[str, str], keys: tuple[str, ...],
            cnt: int) -> None:
        d = domain_of(labels, keys)
        if d is None:
            return
        self.of_node[name] = d
        r = self.room.get(d)
        if r is None:
            self.room[d] = [cnt, 1]
        else:
            r[0] += cnt
            r[1] += 1

    def drop(self, name: str, cnt: int) -> None:
        d = self.of_node.pop(name, None)
        if d is not None:
            r = self.room[d]
            r[0] -= cnt
            r[1] -= 1
            if r[1] == 0:
                del self.room[d]


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
    rooms: dict[tuple[str, ...], _Rooms] = field(default_factory=dict)  # per keys tuple


class FitIndex:
    """How many more pods of each request shape fit on each node, bucketed by that
    count and kept current incrementally.

    Without it the planner's best-fit pass looks at every node for every gang it plans,
    on the filter path of the gang's first member (docs/performance.md has the cost at
    5,000 nodes). With the index a plan reads the buckets, fewest fits first, and stops
    as soon as its members are placed. The cache calls `node_added`, `node_removed` and `changed`
    whenever a node or its free capacity changes; each shape's view catches up from
    that change log when it is next used. Plans made through the index are the
    same as the scan's (tests/core/cache/test_fit_index.py checks it on random clusters).
    """

    MAX_VIEWS = 32
    MAX_ROOMS = 8  # keys tuples whose rooms a view keeps current

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

    def rooms(
        self,
        items: tuple[tuple[str, int], ...],
        proto: PodInfo,
        plain: bool,
        keys: tuple[str, ...],
        of_node: Mapping[str, Values],
    ) -> Mapping[Values, Sequence[int]]:
        """Per topology domain of `keys`: [pods shaped like `proto` that fit in it, nodes
        of it where at least one fits]. Kept current with the counts once asked for, so
        a gang that must fit in one rack finds the racks it fits in without visiting
        every node (docs/topology.md). `of_node`: each node's domain now (the cache's
        `Domains.of_node`), read only when the rooms are first counted."""
        view = self._view(items, proto, plain)
        rooms = view.rooms.get(keys)
        if rooms is None:
            rooms = _Rooms()
            mine, room = rooms.of_node, rooms.room
            for name, (cnt, _seq) in view.counts.items():
                d = of_node.get(name)
                if d is None:
                    continue
                mine[name] = d
                r = room.get(d)
                if r is None:
                    room[d] = [cnt, 1]
                else:
                    r[0] += cnt
                    r[1] += 1
            if len(view.rooms) >= self.MAX_ROOMS:
                del view.rooms[next(iter(view.rooms))]
            view.rooms[keys] = rooms
        return rooms.room

    def warm(
        self,
        items: tuple[tuple[str, int], ...],
        proto: PodInfo,
        plain: bool,
        keys: Sequence[tuple[str, ...]],
        of_node: Callable[[tuple[str, ...]], Mapping[str, Values]],
    ) -> None:
        """Build the view of this shape, and its rooms for each keys tuple, if missing:
        the work the shape's first plan would do, done ahead of it (planner/warmup.py).
        Never evicts a view for it: with no free place, the plan builds it as before."""
        view = self._views.get(_view_key(items, proto))
        if view is None:
            if len(self._views) >= self.MAX_VIEWS:
                return
            view = self._view(items, proto, plain)
        for k in keys:
            if k not in view.rooms:
                self.rooms(items, proto, plain, k, of_node(k))

    def _view(self, items: tuple[tuple[str, int], ...], proto: PodInfo, plain: bool) -> _FitView:
        key = _view_key(items, proto)
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
        return fit_count(view.items, self.free.get(name), self.nodes.get(name), view.proto,
                          view.plain, view.selector)

    def _build(self, view: _FitView) -> None:
        """One read of every node, with the planner's own test (`fit_count`), so the
        index and the scan it replaces rank nodes the same way."""
        if self._seq.keys() != self.free.keys():
            self._renumber()
        items, proto, plain, selector = view.items, view.proto, view.plain, view.selector
        nodes_get, seqs = self.nodes.get, self._seq
        counts, buckets = view.counts, view.buckets
        for name, f in self.free.items():
            cnt = fit_count(items, f, nodes_get(name), proto, plain, selector)
            if cnt <= 0:
                continue
            seq = seqs[name]
            counts[name] = (cnt, seq)
            b = buckets.get(cnt)
            if b is None:
                buckets[cnt] = [seq]
            else:
                b.append(seq)
        for bucket in buckets.values():
            bucket.sort()
        view.synced = len(self._log)

    def _catch_up(self, view: _FitView) -> None:
        if view.synced == len(self._log):
            return
        rooms = view.rooms
        for name in set(self._log[view.synced:]):
            entry = view.counts.pop(name, None)
            if entry is not None:
                bucket = view.buckets[entry[0]]
                del bucket[bisect_left(bucket, entry[1])]
                if not bucket:
                    del view.buckets[entry[0]]
                for r in rooms.values():
                    r.drop(name, entry[0])
            seq = self._seq.get(name)
            if seq is None:
                continue
            cnt = self._count(view, name)
            if cnt > 0:
                view.counts[name] = (cnt, seq)
                insort(view.buckets.setdefault(cnt, []), seq)
                if rooms:
                    labels = self.nodes[name].labels
                    for keys, r in rooms.items():
                        r.add(name, labels, keys, cnt)
        view.synced = len(self._log)

    def _renumber(self) -> None:
        """Positions from `free` itself, should they ever disagree with it."""
        self._seq = {name: i for i, name in enumerate(self.free)}
        self._name = {i: name for name, i in self._seq.items()}
        self._next = len(self._seq)
        self._log.clear()
        self._views.clear()

"""The indexes a gang's plan will read, built when its members arrive rather than on the
filter call that plans it.

The first plan of a new request shape builds the fit index's view of every node (2-3 ms
at 5,000 nodes), and the first plan of a topology gang groups the nodes by its label keys
and counts its room in every domain (`domains.py`). On the filter call, that time is
spent on kube-scheduler's serial loop; when the watch delivers the gang's members, it is
usually spent before kube-scheduler gets to them. It is the same work, done earlier: a
view is built only while the index has a free place for it (none in use is evicted),
and what is already there costs a lookup. Members of one gang arrive one after another
and are alike: `Warmup` prepares for the first and compares the others with it.
"""

from __future__ import annotations

from extender.core.cache.snapshot import Snapshot
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.planner.domains import topology_of
from extender.core.planner.shapes import shapes_of


class Warmup:
    """Remembers what it last prepared for, so that the rest of a gang costs a tuple
    comparison per member on the watch path (every pod event runs there)."""

    def __init__(self) -> None:
        self._last: tuple[object, ...] | None = None

    def member(self, group: GroupInfo, pod: PodInfo, snapshot: Snapshot) -> None:
        key = (group.key, group.topology_required, group.topology_preferred,
               group.topology_error, pod.namespace, pod.requests, pod.node_selector,
               pod.required_node_affinity, pod.tolerations, pod.required_affinity)
        if key != self._last:
            self._last = key
            warm(group, pod, snapshot)


def warm(group: GroupInfo, pod: PodInfo, snapshot: Snapshot) -> None:
    """Prepare for planning `pod`'s gang: its shape's view, and for a topology gang its
    domains and rooms at every level."""
    index = snapshot.index
    if index is None:
        return
    shape = shapes_of([pod], None)[0]
    topo = None if group.topology_error else topology_of(group, [pod])
    keys = [k for k in topo.levels() if k] if topo is not None else []
    index.warm(shape.items, shape.proto, shape.plain, keys, snapshot.topology().of_node)

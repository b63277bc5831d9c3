"""How many pods of one request shape fit on one node: the test shared by the planner's
node scan and the cache's fit index, so both rank nodes the same way."""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.model.constraints import node_matches
from extender.core.model.types import NodeInfo, PodInfo

BIG = 1 << 62


def labels_have(labels: Mapping[str, str], selector: tuple[tuple[str, str], ...]) -> bool:
    for k, v in selector:  # noqa: SIM110 - cheaper than all() over a generator
        if labels.get(k) != v:
            return False
    return True


def fit_count(
    items: tuple[tuple[str, int], ...],
    f: Mapping[str, int] | None,
    node: NodeInfo | None,
    proto: PodInfo,
    plain: bool,
    selector: tuple[tuple[str, str], ...],
) -> int:
    """How many pods of a shape fit in free capacity `f` of `node`, 0 if none or if the
    node's labels and taints exclude the shape: the planner's scan's test, node by node."""
    if f is None or node is None:
        return 0
    cnt = BIG
    for r, q in items:
        c = f.get(r, 0) // q
        if c < cnt:
            cnt = c
            if c <= 0:
                return 0
    if selector and not labels_have(node.labels, selector):
        return 0
    if (not plain or node.taints or node.unschedulable) and node_matches(proto, node) is not None:
        return 0
    return cnt

"""Claims on a node that kube-scheduler's own checks miss when it places a plain pod or
an elastic extra, which the extender's filter and bind verb check for it
(architecture.md §7, §11):

* **Fresh pods**: pods a direct commit bound a moment ago (`Staleness.fresh_nodes`).
  kube-scheduler learns of them only through its watch; until then its fit check and
  its InterPodAffinity and PodTopologySpread filters run without them. Free capacity is
  checked by the filter and bind on fresh nodes; here, required pod anti-affinity (both
  ways, any topology key) and `DoNotSchedule` spread.
* **Nominations**: capacity kube-scheduler's preemption freed for a pending pod
  (`status.nominatedNodeName`). kube-scheduler keeps its own pods' nominations, not
  another scheduler's; the extender keeps every one, by kube-scheduler's rule (pods of
  equal or higher priority, the pod itself aside: `Cache.nominated_on`).

Functions of the cache and the ledger's staleness; no state of their own. The
predicates are the planner's (`core/model/constraints.py`, `core/planner/relations.py`).
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.core.cache import Cache
from extender.core.ledger import Staleness
from extender.core.model.constraints import (
    HOSTNAME,
    anti_affinity_conflict,
    label_selector_matches,
    term_matches,
)
from extender.core.model.resources import fits, format_resources, sub
from extender.core.model.types import PodInfo
from extender.core.planner.relations import relations_for

_UNSEEN = "bound there by a gang commit a moment ago, not yet seen by kube-scheduler"


def nominated_short(pod: PodInfo, node: str, cache: Cache) -> str | None:
    """Why `pod` (not charged to `node` yet) must not take `node`'s free capacity
    because it is nominated to other pods, or None."""
    kept = cache.nominated_requests(node, pod.priority, pod.uid)
    if not kept:
        return None
    free = cache.free.get(node, {})
    if fits(pod.requests, sub(free, kept)):
        return None
    names = ", ".join(p.key for p in cache.nominated_on(node, pod.priority, pod.uid)[:3])
    return (f"node {node}: {format_resources(kept)} of its free capacity is nominated to "
            f"pod(s) {names} by kube-scheduler's preemption (priority {pod.priority} or "
            f"more), and pod {pod.key} needs {format_resources(pod.requests)}")


def fresh_conflicts(pod: PodInfo, names: Iterable[str], cache: Cache, staleness: Staleness,
                    now: float) -> dict[str, str]:
    """Node -> why, for the nodes of `names` where `pod` clashes with a fresh pod by
    required anti-affinity or spread. A pod with neither constraint looks only at the
    fresh pods with anti-affinity of their own (nearly always none): O(1) then."""
    own = bool(pod.required_anti_affinity or pod.spread_constraints)
    fresh = [(n, p) for n, p in staleness.fresh_pods(now, repelling=not own)
             if p.uid != pod.uid]
    if not fresh:
        return {}
    on_node: dict[str, list[PodInfo]] = {}  # hostname anti-affinity: the node itself
    banned: dict[tuple[str, str], str] = {}  # (key, value): anti-affinity beyond the node
    spread: set[tuple[str, str]] = set()  # (key, value) where a fresh pod counts for pod
    for node, other in fresh:
        info = cache.nodes.get(node)
        if info is None:
            continue
        on_node.setdefault(node, []).append(other)
        labels = info.labels
        # Both ways: the pod's terms against the fresh pod, and the fresh pod's against it.
        for owner, target, words in ((pod, other, f"of {pod.key} with pod {other.key} in"),
                                     (other, pod, f"of pod {other.key} with {pod.key} in")):
            for t in owner.required_anti_affinity:
                v = labels.get(t.topology_key)
                if t.topology_key != HOSTNAME and v is not None and term_matches(
                        t, owner.namespace, target):
                    banned.setdefault((t.topology_key, v),
                                      f"anti-affinity {words} {t.topology_key} {v}")
        for c in pod.spread_constraints:
            v = labels.get(c.topology_key)
            if v is not None and other.namespace == pod.namespace and label_selector_matches(
                    c.selector, other.labels):
                spread.add((c.topology_key, v))
    out: dict[str, str] = {}
    for name in on_node.keys() & set(names):
        why = anti_affinity_conflict(pod, on_node[name])
        if why is not None:
            out[name] = f"node {name}: {why} ({_UNSEEN})"
    if not banned and not spread:
        return out
    relations = relations_for([pod], cache.snapshot) if spread else None
    for name in names:
        info = cache.nodes.get(name)
        if info is None or name in out:
            continue
        labels = info.labels
        why = next((w for (k, v), w in banned.items() if labels.get(k) == v), None)
        if why is None and relations is not None and any(
                labels.get(k) == v for k, v in spread):
            # Counted again with every pod the cache has on nodes, as the planner
            # counts a gang's spread: a domain without a fresh pod kube-scheduler has
            # already judged with every pod there is.
            why = relations.conflict(pod, info)
        if why is not None:
            out[name] = f"node {name}: {why} (counting pods {_UNSEEN})"
    return out

"""Why a gang's plan fell short, in words a user can act on (architecture.md §5), and what
a gang that waits for a pod awaits (`Awaited`), which those words name."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from extender.core.cache.devices import requests_words
from extender.core.cache.topology import word
from extender.core.model.constraints import (
    HOSTNAME,
    NODE_SELECTOR_MISMATCH,
    NODE_UNSCHEDULABLE,
    node_matches,
)
from extender.core.model.fit import BIG, fit_count, labels_have
from extender.core.model.resources import format_resources, shortfall
from extender.core.model.types import LabelSelector, PodAffinityTerm, Resources
from extender.core.planner.candidates import Candidates, Outcome, PlanState
from extender.core.planner.device_plan import DevicePlan
from extender.core.planner.shapes import Shape

TIMES = "\u00d7"  # multiplication sign: "3 \u00d7 {cpu: 1}" in messages


@dataclass(frozen=True, slots=True)
class Awaited:
    """A member's required pod affinity term that selects no pod on a node and no member
    of its gang: kube-scheduler places that member only once a pod the term selects runs
    in the term's domain. A pod yet to come, not capacity, is what the gang lacks: no
    node the cluster or an autoscaler could add helps (docs/topology.md)."""

    member: str  # ns/name of the member whose term it is
    namespace: str  # the member's namespace, the term's own by default
    term: PodAffinityTerm


def as_node_count(reason: str) -> str:
    """node_matches' reason as it reads after a count ("3 node(s) were unschedulable"),
    in kube-scheduler's wording."""
    if reason == NODE_UNSCHEDULABLE:
        return "node(s) were unschedulable"
    if reason.startswith("untolerated taint"):
        return f"node(s) had {reason}"
    return reason


def explain_shortfall(
    pl: PlanState, shape: Shape, outcome: Outcome, shared: bool
) -> tuple[str, str]:
    """Name what did not fit: the count and per-member requests of the shape, how
    many fit (the head: "needs 3 × {cpu: 1}; 2 fit", empty when the detail says it),
    and the resource or constraint that stopped the rest (the detail). `shared`: other
    shapes of the gang competed for the same nodes. Runs only on failure, so it may
    look at every node again."""
    n = len(shape.members)
    fit = outcome.placed
    req = format_resources(dict(shape.items))
    proto = shape.proto
    head = f"needs {n} {TIMES} {req}; {fit} fit"

    reasons: Counter[str] = Counter()
    if pl.relations is not None:
        reasons.update(pl.relations.reasons())
    eligible: list[str] = []
    names: Collection[str] = (dict.fromkeys(shape.allowed) if shape.allowed is not None
                              else pl.within if pl.within is not None else pl.nodes)
    for name in names:
        node = pl.nodes.get(name)
        if node is None:
            reasons["node(s) unknown to gang-extender"] += 1
            continue
        if not node.taints and not node.unschedulable:
            if shape.plain:
                eligible.append(name)
                continue
            if not labels_have(node.labels, tuple(proto.node_selector.items())):
                reasons[NODE_SELECTOR_MISMATCH] += 1
                continue
        why = node_matches(proto, node)
        if why is not None:
            reasons[as_node_count(why)] += 1
        else:
            eligible.append(name)
    if shape.allowed is not None and pl.within is None:
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
        return head, f"no node matches{excluded()}"
    cand = outcome.candidates
    if (shape.devices is not None and isinstance(cand, Candidates)
            and isinstance(cand.devices, DevicePlan)):
        said = _devices_short(pl, shape, cand.devices, eligible, fit)
        if said is not None:
            return said[0], f"{said[1]}{excluded()}"

    usable = len(outcome.candidates.order) - len(outcome.blocked_by_existing)
    if shape.one_per_node and usable < n:
        return "", (
            f"{n} {TIMES} {req} need distinct nodes (anti-affinity on {HOSTNAME}); "
            f"{usable} eligible node(s){excluded()}"
        )

    # A resource no eligible node has enough of even when empty is the whole story.
    for r, q in shape.items:
        most = max(pl.nodes[name].allocatable.get(r, 0) for name in eligible)
        if most < q:
            one = format_resources({r: q}, skip_pods=False)
            top = format_resources({r: most}, skip_pods=False)[1:-1]
            return head, (f"no eligible node has {one} allocatable (the most any has: "
                          f"{top}){excluded()}")

    if shared:
        alone = 0
        for name in eligible:
            base = pl.free.get(name)  # before this plan placed anything
            if base is not None:
                k = min((max(0, base.get(r, 0)) // q for r, q in shape.items), default=BIG)
                alone += min(k, 1) if shape.one_per_node else k
        if alone >= n:
            detail = f"the gang's other members take the room it needs ({alone} would fit alone)"
            return head, f"{detail}{excluded()}"

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
    return head, f"{detail}{excluded()}"


def _devices_short(pl: PlanState, shape: Shape, plan: DevicePlan, eligible: list[str],
                   fit: int) -> tuple[str, str] | None:
    """The head and detail when the members' devices, not their other requests, are what
    is short: "needs 4 × {2 × gpu.example.com}; 0 fit", "2 nodes have 2 free, 2 nodes
    have 0 free" (free: devices the node can use that no claim has allocated and no slot
    holds). None when requests alone would not fit either: that is said as for any shape."""
    n = len(shape.members)
    assert shape.devices is not None
    head = f"needs {n} {TIMES} {requests_words(shape.devices)}; {fit} fit"
    if shape.device_missing:
        return head, shape.device_missing
    room = 0
    selector = tuple(shape.proto.node_selector.items())
    for name in eligible:
        room += fit_count(shape.items, pl.free_of(name), pl.nodes.get(name), shape.proto,
                          shape.plain, selector)
        if room + fit >= n:
            break
    else:
        return None
    taken = plan.view.taken()
    by_free: Counter[int] = Counter(plan.view.free_on(pl.nodes[name], taken)
                                    for name in eligible)
    parts = [f"{c} node{'s' if c != 1 else ''} {'have' if c != 1 else 'has'} {k} free"
             for k, c in sorted(by_free.items(), key=lambda kc: -kc[0])[:4]]
    return head, ", ".join(parts) + " (devices not allocated or reserved)"


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


def awaited_words(awaits: Sequence[Awaited]) -> str:
    """What a gang waits for when a member's pod affinity selects no pod yet: the member,
    its term as the user wrote it, and where the pod must run."""
    return "; ".join(
        f"the required pod affinity of member {a.member} ({describe_term(a.namespace, a.term)}) "
        f"selects no pod, not even a member of the gang: kube-scheduler places it only in a "
        f"{word(a.term.topology_key)} where such a pod runs"
        for a in awaits)


def describe_term(namespace: str, term: PodAffinityTerm) -> str:
    """"pods with app=db in namespace ml, topologyKey topology.kubernetes.io/zone"."""
    if term.namespaces or term.namespace_selector is not None:
        where = [f"namespace(s) {', '.join(term.namespaces)}"] if term.namespaces else []
        sel = term.namespace_selector
        if sel is not None:
            where.append("any namespace" if sel == LabelSelector() else
                         f"namespaces with {_selector(sel)}")
        spaces = " or ".join(where)
    else:
        spaces = f"namespace {namespace}"
    pods = ("no pod (no labelSelector)" if term.selector is None else
            "any pod" if term.selector == LabelSelector() else
            f"pods with {_selector(term.selector)}")
    return f"{pods} in {spaces}, topologyKey {term.topology_key}"


def _selector(sel: LabelSelector) -> str:
    """A label selector in kubectl's words: "app=db,tier in (a, b),!legacy"."""
    parts = [f"{k}={v}" for k, v in sel.match_labels]
    for r in sel.match_expressions:
        if r.operator == "Exists":
            parts.append(r.key)
        elif r.operator == "DoesNotExist":
            parts.append(f"!{r.key}")
        else:
            parts.append(f"{r.key} {r.operator.lower()} ({', '.join(r.values)})")
    return ",".join(parts)

"""Pure placement predicates mirroring kube-scheduler's in-tree filters.

kube-scheduler runs its own filters only for the pod it is scheduling; the planner
places the *other* members of a gang too, so it must know which nodes they may use.
These functions reproduce the filters that decide that (NodeUnschedulable,
TaintToleration, NodeAffinity, the hostname part of InterPodAffinity) closely
enough that a slot planned for a member is one kube-scheduler will accept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from extender.core.model.types import (
    LabelSelector,
    NodeInfo,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Requirement,
    Taint,
    Toleration,
)

__all__ = [
    "HOSTNAME",
    "anti_affinity_conflict",
    "label_selector_matches",
    "node_matches",
    "node_selector_term_matches",
    "repels_beyond_node",
    "self_anti_affine",
    "term_matches",
    "tolerates",
]

HOSTNAME = "kubernetes.io/hostname"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# Reasons, short and in kube-scheduler's wording where it has one.
NODE_UNSCHEDULABLE = "node is unschedulable"
NODE_SELECTOR_MISMATCH = "node(s) didn't match node selector"
NODE_AFFINITY_MISMATCH = "node(s) didn't match node affinity"


def _toleration_tolerates(t: Toleration, key: str, value: str, effect: str) -> bool:
    # v1.Toleration.ToleratesTaint: empty effect/key are wildcards; "" means Equal.
    # Gt/Lt (alpha, gated off by default) tolerate nothing, as upstream with the gate off.
    if t.effect and t.effect != effect:
        return False
    if t.key and t.key != key:
        return False
    if t.operator == "Exists":
        return True
    if t.operator in ("Equal", ""):
        return t.value == value
    return False


def tolerates(tolerations: Iterable[Toleration], key: str, value: str, effect: str) -> bool:
    """Whether any toleration tolerates the taint key=value:effect."""
    return any(_toleration_tolerates(t, key, value, effect) for t in tolerations)


def _untolerated(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> Taint | None:
    # Plain loops: this runs for every tainted node a planner looks at.
    for taint in taints:
        effect = taint.effect
        if effect != "NoSchedule" and effect != "NoExecute":
            continue
        for t in tolerations:
            if _toleration_tolerates(t, taint.key, taint.value, effect):
                break
        else:
            return taint
    return None


def _requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    op = req.operator
    if op == "In":
        v = labels.get(req.key)
        return v is not None and v in req.values
    if op == "NotIn":
        v = labels.get(req.key)
        return v is None or v not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    if op in ("Gt", "Lt"):
        # Node selectors only. A non-integer label or bound makes the requirement
        # false (upstream fails to build the selector, which matches nothing).
        v = labels.get(req.key)
        if v is None or len(req.values) != 1:
            return False
        try:
            have, bound = int(v), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def node_selector_term_matches(term: NodeSelectorTerm, node: NodeInfo) -> bool:
    """A term's requirements are ANDed; a term with none matches nothing (upstream
    skips empty terms rather than letting them match every node)."""
    if not term.match_expressions and not term.match_fields:
        return False
    labels = node.labels
    for req in term.match_expressions:
        if not _requirement_matches(req, labels):
            return False
    for req in term.match_fields:
        # Only metadata.name exists as a field; unknown fields match nothing.
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
            return False
        if not _requirement_matches(req, {"metadata.name": node.name}):
            return False
    return True


def node_matches(pod: PodInfo, node: NodeInfo) -> str | None:
    """None if `pod` may be placed on `node` as far as node-level constraints go,
    else a short reason. Checks run in kube-scheduler's filter order (unschedulable,
    taints, affinity) so the reason is the one kube-scheduler would report first."""
    if node.unschedulable and not tolerates(pod.tolerations, UNSCHEDULABLE_TAINT, "", "NoSchedule"):
        return NODE_UNSCHEDULABLE
    if node.taints:
        taint = _untolerated(node.taints, pod.tolerations)
        if taint is not None:
            if taint.value:
                return f"untolerated taint {{{taint.key}: {taint.value}}}"
            return f"untolerated taint {{{taint.key}}}"
    if pod.node_selector:
        labels = node.labels
        for k, v in pod.node_selector.items():
            if labels.get(k) != v:
                return NODE_SELECTOR_MISMATCH
    terms = pod.required_node_affinity
    if terms is not None and not any(node_selector_term_matches(t, node) for t in terms):
        return NODE_AFFINITY_MISMATCH
    return None


def label_selector_matches(sel: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector semantics for affinity terms: a missing selector
    selects nothing, an empty one selects everything."""
    if sel is None:
        return False
    for k, v in sel.match_labels:
        if labels.get(k) != v:
            return False
    for req in sel.match_expressions:
        if req.operator in ("Gt", "Lt") or not _requirement_matches(req, labels):
            return False
    return True


def _term_covers_namespace(term: PodAffinityTerm, owner_ns: str, ns: str) -> bool:
    """Whether `term` (of a pod in `owner_ns`) looks at pods in namespace `ns`.

    Namespace labels are not modelled, so a namespaceSelector is evaluated against
    the one label every namespace carries, kubernetes.io/metadata.name: exact for
    `{}` (all namespaces) and for selectors by name; any other selector is taken
    as selecting nothing (kube-scheduler's own filter still checks the pod it
    schedules, so this can only make a plan too optimistic, never a bind unsafe).
    """
    if not term.namespaces and term.namespace_selector is None:
        return ns == owner_ns
    if ns in term.namespaces:
        return True
    return term.namespace_selector is not None and label_selector_matches(
        term.namespace_selector, {NAMESPACE_NAME_LABEL: ns}
    )


def term_matches(term: PodAffinityTerm, owner_ns: str, other: PodInfo) -> bool:
    """Whether `term` (of a pod in `owner_ns`) selects pod `other`, whatever its
    topology key."""
    return _term_covers_namespace(term, owner_ns, other.namespace) and label_selector_matches(
        term.selector, other.labels)


def _term_selects(term: PodAffinityTerm, owner_ns: str, other: PodInfo) -> bool:
    return term.topology_key == HOSTNAME and term_matches(term, owner_ns, other)


def anti_affinity_conflict(pod: PodInfo, others_on_node: Iterable[PodInfo]) -> str | None:
    """None if `pod` may share a node with `others_on_node` as far as required
    pod anti-affinity on kubernetes.io/hostname goes, else which pod it clashes with.

    Both directions count, as in InterPodAffinity: the pod's terms must not select
    a pod on the node, and no pod on the node may have a term selecting the pod.
    Terms on other topology keys (zones) are planned among a gang's members by
    `planner/relations.py`.
    """
    own = pod.required_anti_affinity
    for other in others_on_node:
        if other.uid == pod.uid:
            continue
        for term in own:
            if _term_selects(term, pod.namespace, other):
                return f"anti-affinity of {pod.key} with pod {other.key} on the node"
        for term in other.required_anti_affinity:
            if _term_selects(term, other.namespace, pod):
                return f"anti-affinity of pod {other.key} on the node with {pod.key}"
    return None


def repels_beyond_node(pod: PodInfo) -> bool:
    """Whether `pod` has a required anti-affinity term on a topology key other than the
    hostname (a zone, a rack): it keeps pods out of a whole domain."""
    return any(t.topology_key != HOSTNAME for t in pod.required_anti_affinity)


def self_anti_affine(pod: PodInfo) -> bool:
    """Whether two copies of `pod` may not share a node (it repels its own labels)."""
    return any(_term_selects(t, pod.namespace, pod) for t in pod.required_anti_affinity)

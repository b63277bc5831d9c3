"""Constraints between a gang's members that reach beyond one node, planned with the gang
(docs/topology.md):

* required pod anti-affinity on any topology key but the hostname (a zone, a rack): a
  member may not take a node in a domain where a pod its terms select runs or is placed
  by this plan, nor where such a pod's terms select it;
* topologySpreadConstraints with `whenUnsatisfiable: DoNotSchedule`: a member may take a
  node only if the skew stays within `maxSkew` there, counting the pods already there
  and the members placed before it.

Both are checked as kube-scheduler's InterPodAffinity and PodTopologySpread filters check
them, one member after the other, with the members this plan placed counted as if they
were bound (kube-scheduler counts a member whose bind the extender holds as assumed). A
plan that passes in the planner's order passes in any order kube-scheduler takes the
members in: anti-affinity because every member's domain holds no member it repels; the
spread because whenever a member's own slot is in a domain the skew rules out, another
member's slot in an allowed domain exists (`Reservations.move` swaps them).

Required pod affinity mostly decides the gang's domain (`planner/domains.py`). The
exception is checked here: a term that ties a group of members to each other alone (each
member it selects has it, and it selects each member that has it, but not the whole
gang), as JobSet's exclusive placement gives each Job's pods. The group goes in one
domain of the term's key, not the whole gang: a member may take a node only where a pod
the term selects already runs or was placed by this plan, or anywhere if there is none
yet (kube-scheduler lets the first pod of a term that selects itself go anywhere). The
groups' anti-affinity to each other keeps them apart as above. Hostname anti-affinity
stays in `candidates.PlanState`.

`Ties` is computed once per gang plan (one walk over the pods on nodes, only for gangs
that need it) and shared by its attempts; `Relations` is one attempt's state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from extender.core.cache.snapshot import Snapshot
from extender.core.model.constraints import (
    HOSTNAME,
    label_selector_matches,
    node_matches,
    repels_beyond_node,
    term_matches,
)
from extender.core.model.types import (
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    SpreadConstraint,
    Toleration,
)

Term = tuple[str, PodAffinityTerm]  # (namespace of the pod that has it, term)
Fits = Callable[[Sequence[PodInfo], Sequence[str]], bool]
_SpreadKey = tuple[object, ...]


@dataclass(slots=True)
class _SpreadBase:
    """One pod kind's spread constraint: the domain of every node it counts (those with
    all of the pod's spread keys that pass its node inclusion policies), and the pods
    already there that its selector matches, per domain."""

    constraint: SpreadConstraint
    namespace: str
    domain_of: dict[str, str]  # eligible node -> its value of the key
    counts: dict[str, int]  # every eligible domain, 0 included

    def matches(self, pod: PodInfo) -> bool:
        return pod.namespace == self.namespace and label_selector_matches(
            self.constraint.selector, pod.labels)


class Ties:
    """What the members' constraints depend on outside the plan, found once per gang and
    only for what a member asks about (the pods on nodes are walked at most once)."""

    def __init__(self, pods: Sequence[PodInfo], snapshot: Snapshot,
                 fits: Fits | None = None) -> None:
        """`fits`: whether members fit on some nodes planned alone (the planner's own
        plan, passed in by it); without it a group's domain is not chosen ahead."""
        self._fits = fits
        self.nodes = snapshot.nodes
        self._snapshot = snapshot
        self._planned = {p.uid for p in pods}
        self._on_nodes: list[tuple[str, PodInfo]] | None = None
        # Keys of the members' anti-affinity terms beyond the node: placed members are
        # indexed by their domains of these.
        self.groups = group_terms(pods)
        self._pods = pods
        self._holds: dict[Term, set[str] | None] = {}
        self.keys = frozenset(t.topology_key for p in pods for t in p.required_anti_affinity
                              if t.topology_key != HOSTNAME) | {
                                  t.topology_key for _, t in self.groups}
        # Pods on nodes whose own terms beyond the node may select a member.
        self.repellers = [(n, p) for n, p in snapshot.beyond_node_repellers()
                          if p.uid not in self._planned]
        self._values_with: dict[Term, set[str]] = {}
        self._repelled: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, set[str]]] = {}
        self._spreads: dict[_SpreadKey, _SpreadBase] = {}

    def on_nodes(self) -> list[tuple[str, PodInfo]]:
        """(node, pod) of every pod on a node that is not being planned."""
        if self._on_nodes is None:
            self._on_nodes = [(n, p) for n, ps in self._snapshot.pods_on_node.items()
                              for p in ps if p.uid not in self._planned]
        return self._on_nodes

    def values_with(self, ns: str, t: PodAffinityTerm) -> set[str]:
        """The values of `t`'s key where a pod it selects already is: where an
        anti-affinity term keeps a member out, and where an affinity term lets it in."""
        found = self._values_with.get((ns, t))
        if found is None:
            found = self._values_with[ns, t] = set()
            for name, other in self.on_nodes():
                node = self.nodes.get(name)
                v = node.labels.get(t.topology_key) if node is not None else None
                if v is not None and term_matches(t, ns, other):
                    found.add(v)
        return found

    def holds(self, term: Term) -> set[str] | None:
        """The values of a group term's key whose nodes hold every member the term
        selects, planned alone (None: no one domain does, and the search is not narrowed).
        Where the group's first member goes decides the group's domain: member by member,
        the tightest node could be in a domain too small for the rest of its group."""
        if term not in self._holds:
            if self._fits is None:
                return None
            ns, t = term
            group = [m for m in self._pods if term_matches(t, ns, m)]
            domains = self._snapshot.topology().groups((t.topology_key,))
            found = {d[0] for d, names in domains.items() if self._fits(group, names)}
            self._holds[term] = found or None
        return self._holds[term]

    @staticmethod
    def needed(pods: Sequence[PodInfo], snapshot: Snapshot) -> bool:
        """Whether any member has such a constraint, or any pod on a node could repel one.
        Asked on every plan, so a plain loop that stops at the first."""
        affinity = False
        for p in pods:
            if p.spread_constraints or (p.required_anti_affinity and repels_beyond_node(p)):
                return True
            affinity = affinity or bool(p.required_affinity)
        if affinity and group_terms(pods):
            return True
        if snapshot.repellers is not None:
            return bool(snapshot.repellers)
        return bool(snapshot.beyond_node_repellers())

    def repelled(self, pod: PodInfo) -> dict[str, set[str]]:
        """Key -> values where a pod on a node has a term beyond its node selecting `pod`."""
        memo_key = (pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._repelled.get(memo_key)
        if found is None:
            found = {}
            for name, other in self.repellers:
                node = self.nodes.get(name)
                if node is None:
                    continue
                for t in other.required_anti_affinity:
                    v = node.labels.get(t.topology_key)
                    if t.topology_key != HOSTNAME and v is not None and term_matches(
                            t, other.namespace, pod):
                        found.setdefault(t.topology_key, set()).add(v)
            self._repelled[memo_key] = found
        return found

    @staticmethod
    def spread_key(pod: PodInfo, c: SpreadConstraint) -> _SpreadKey:
        return (pod.namespace, c, pod.spread_constraints, tuple(sorted(pod.node_selector.items())),
                pod.required_node_affinity, pod.tolerations)

    def spread(self, pod: PodInfo, c: SpreadConstraint) -> _SpreadBase:
        key = self.spread_key(pod, c)
        found = self._spreads.get(key)
        if found is None:
            found = self._spreads[key] = self._spread(pod, c)
        return found

    def _spread(self, pod: PodInfo, c: SpreadConstraint) -> _SpreadBase:
        keys = [x.topology_key for x in pod.spread_constraints]
        # node_matches checks cordons, taints and node affinity at once; each policy is
        # checked on a copy of the pod that has only what it looks at.
        tolerations = PodInfo(pod.uid, pod.namespace, pod.name, {}, tolerations=pod.tolerations)
        affinity = PodInfo(pod.uid, pod.namespace, pod.name, {}, tolerations=_TOLERATE_ALL,
                           node_selector=pod.node_selector,
                           required_node_affinity=pod.required_node_affinity)
        domain_of: dict[str, str] = {}
        for name, node in self.nodes.items():
            if any(k not in node.labels for k in keys):
                continue
            if c.node_affinity_policy != "Ignore" and node_matches(affinity, node) is not None:
                continue
            if c.node_taints_policy == "Honor" and _tainted(tolerations, node):
                continue
            domain_of[name] = node.labels[c.topology_key]
        base = _SpreadBase(c, pod.namespace, domain_of, dict.fromkeys(domain_of.values(), 0))
        for name, other in self.on_nodes():
            d = domain_of.get(name)
            if d is not None and base.matches(other):
                base.counts[d] += 1
        return base


_TOLERATE_ALL = (Toleration(operator="Exists"),)


def _tainted(pod: PodInfo, node: NodeInfo) -> bool:
    """Whether `node` has a NoSchedule/NoExecute taint `pod` does not tolerate (a cordon
    does not count: it is not a taint of the node object)."""
    if not node.taints:
        return False
    bare = NodeInfo(node.name, node.allocatable, node.labels, node.taints, False)
    return node_matches(pod, bare) is not None


@dataclass(slots=True)
class _Spread:
    """One attempt's counts for a `_SpreadBase`, with its minimum kept as it grows."""

    base: _SpreadBase
    counts: dict[str, int]
    low: int = 0
    at_low: int = 0

    @classmethod
    def of(cls, base: _SpreadBase) -> _Spread:
        s = cls(base, dict(base.counts))
        s._recompute()
        return s

    def _recompute(self) -> None:
        if not self.counts:
            self.low, self.at_low = 0, 0
            return
        self.low = min(self.counts.values())
        self.at_low = sum(1 for v in self.counts.values() if v == self.low)

    def minimum(self) -> int:
        return self.low if len(self.counts) >= self.base.constraint.min_domains else 0

    def add(self, domain: str) -> None:
        was = self.counts[domain]
        self.counts[domain] = was + 1
        if was == self.low:
            self.at_low -= 1
            if self.at_low == 0:
                self._recompute()


@dataclass(slots=True)
class Relations:
    """One planning attempt's members, by the domains their constraints look at."""

    ties: Ties
    placed: dict[tuple[str, str], list[PodInfo]] = field(default_factory=dict)  # (key, value)
    placed_terms: dict[tuple[str, str], list[Term]] = field(default_factory=dict)
    spreads: dict[_SpreadKey, _Spread] = field(default_factory=dict)
    history: list[tuple[PodInfo, str]] = field(default_factory=list)  # (member, node)
    # Nodes turned down, by why, for the shortfall's message.
    rejected: dict[str, set[str]] = field(default_factory=dict)

    def conflict(self, pod: PodInfo, node: NodeInfo) -> str | None:
        why = self._why(pod, node)
        if why is not None:
            self.rejected.setdefault(why, set()).add(node.name)
        return why

    def _why(self, pod: PodInfo, node: NodeInfo) -> str | None:
        labels = node.labels
        ns = pod.namespace
        for t in pod.required_affinity:
            if (ns, t) not in self.ties.groups:
                continue
            k = t.topology_key
            v = labels.get(k)
            if v is None:
                return f"node(s) without label {k} (pod affinity)"
            there = self.ties.values_with(ns, t) | {
                pv for (pk, pv), ms in self.placed.items()
                if pk == k and any(term_matches(t, ns, m) for m in ms)}
            if there and v not in there:
                return (f"node(s) in a {k} without the members {pod.name}'s pod affinity "
                        f"selects")
            holds = None if there else self.ties.holds((ns, t))
            if holds is not None and v not in holds:
                return (f"node(s) in a {k} without room for all the members {pod.name}'s "
                        f"pod affinity selects")
        for t in pod.required_anti_affinity:
            k = t.topology_key
            v = labels.get(k)
            if k == HOSTNAME or v is None:
                continue
            if v in self.ties.values_with(ns, t):
                return f"node(s) in a {k} with a pod {pod.name} repels (pod anti-affinity)"
            if any(term_matches(t, ns, m) for m in self.placed.get((k, v), ())):
                return f"node(s) in a {k} with a member {pod.name} repels (pod anti-affinity)"
        for (k, v), terms in self.placed_terms.items():
            if labels.get(k) == v and any(term_matches(t, tns, pod) for tns, t in terms):
                return f"node(s) in a {k} with a member that repels {pod.name} (pod anti-affinity)"
        if self.ties.repellers:
            for k, values in self.ties.repelled(pod).items():
                if labels.get(k) in values:
                    return f"node(s) in a {k} with a pod that repels {pod.name} (pod anti-affinity)"
        for c in pod.spread_constraints:
            k = c.topology_key
            v = labels.get(k)
            if v is None:
                return f"node(s) without label {k} (topology spread)"
            s = self._spread(pod, c)
            skew = s.counts.get(v, 0) + (1 if s.base.matches(pod) else 0) - s.minimum()
            if skew > c.max_skew:
                return f"node(s) where the spread over {k} would exceed maxSkew {c.max_skew}"
        return None

    def _spread(self, pod: PodInfo, c: SpreadConstraint) -> _Spread:
        key = Ties.spread_key(pod, c)
        s = self.spreads.get(key)
        if s is None:
            s = self.spreads[key] = _Spread.of(self.ties.spread(pod, c))
            for member, name in self.history:  # placed before this count was first needed
                self._count(s, member, name)
        return s

    @staticmethod
    def _count(s: _Spread, member: PodInfo, name: str) -> None:
        d = s.base.domain_of.get(name)
        if d is not None and s.base.matches(member):
            s.add(d)

    def place(self, pod: PodInfo, node: NodeInfo) -> None:
        labels = node.labels
        for k in self.ties.keys:
            v = labels.get(k)
            if v is not None:
                self.placed.setdefault((k, v), []).append(pod)
        for t in pod.required_anti_affinity:
            v = labels.get(t.topology_key)
            if t.topology_key != HOSTNAME and v is not None:
                self.placed_terms.setdefault((t.topology_key, v), []).append((pod.namespace, t))
        self.history.append((pod, node.name))
        for s in self.spreads.values():
            self._count(s, pod, node.name)

    def reasons(self) -> Counter[str]:
        return Counter({why: len(names) for why, names in self.rejected.items()})


def group_terms(pods: Sequence[PodInfo]) -> frozenset[Term]:
    """The members' required affinity terms that tie a group of them to each other alone:
    the members a term selects are exactly those that have it, some but not all of the
    gang. Each such group needs one domain of its own rather than the gang needing one
    (three Jobs of a JobSet, each exclusive to a rack, are three racks). A term that
    selects the whole gang, none of it, or members that do not have it still decides
    the whole gang's domain, as before."""
    out: set[Term] = set()
    seen: set[Term] = set()
    for p in pods:
        for t in p.required_affinity:
            term = (p.namespace, t)
            if term in seen:
                continue
            seen.add(term)
            selected = {m.uid for m in pods if term_matches(t, p.namespace, m)}
            holders = {m.uid for m in pods if m.namespace == p.namespace
                       and t in m.required_affinity}
            if selected and len(selected) < len(pods) and selected == holders:
                out.add(term)
    return frozenset(out)


def relations_for(pods: Sequence[PodInfo], snapshot: Snapshot,
                  ties: Ties | None = None) -> Relations | None:
    """An attempt's relations, or None when no member has such a constraint and no pod
    on a node could repel one (the common case: then planning costs nothing more)."""
    if ties is None:
        if not Ties.needed(pods, snapshot):
            return None
        ties = Ties(pods, snapshot)
    return Relations(ties)



def interchangeable(a: PodInfo, b: PodInfo) -> bool:
    """Whether two members may take each other's slots: the same requests and node
    constraints, the same terms, and every selector among them sees both alike (so the
    counts and domains the plan checked stay what they were)."""
    if (a.namespace, a.requests, a.node_selector, a.required_node_affinity, a.tolerations,
            a.required_anti_affinity, a.required_affinity, a.spread_constraints) != (
            b.namespace, b.requests, b.node_selector, b.required_node_affinity, b.tolerations,
            b.required_anti_affinity, b.required_affinity, b.spread_constraints):
        return False
    if a.labels == b.labels:
        return True
    terms = (*a.required_anti_affinity, *a.required_affinity)
    selectors = [c.selector for c in a.spread_constraints]
    return (all(label_selector_matches(s, a.labels) == label_selector_matches(s, b.labels)
                for s in selectors)
            and all(term_matches(t, a.namespace, a) == term_matches(t, a.namespace, b)
                    for t in terms))

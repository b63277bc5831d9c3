"""Nodes grouped into topology domains: for a tuple of label keys, the nodes that share
one value of each (the nodes of "rack r2", or of "block b1, rack r2").

A gang with a topology is planned inside one domain at a time (docs/topology.md), so the
planner needs each domain's nodes. Grouping 5,000 nodes costs a few milliseconds, more
than a whole plan may take, so the grouping is kept per keys tuple and dropped only when
a node is added, removed or relabelled; capacity changes, cordons and taints leave it be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.core.model.types import NodeInfo

Values = tuple[str, ...]  # one label value per key: a domain


def domain_of(labels: Mapping[str, str], keys: Sequence[str]) -> Values | None:
    """The domain of a node with `labels` for `keys`; None if it lacks any of them (such
    a node belongs to no domain, and never qualifies for a gang that needs one)."""
    values = []
    for k in keys:
        v = labels.get(k)
        if v is None:
            return None
        values.append(v)
    return tuple(values)


class Domains:
    """Domain -> its nodes (in the order of `nodes`), and node -> its domain, per keys
    tuple, computed when first asked for and kept until the nodes change."""

    MAX_KEYS = 16  # keys tuples kept; gangs ask for a handful

    def __init__(self, nodes: Mapping[str, NodeInfo]) -> None:
        self.nodes = nodes
        self._groups: dict[tuple[str, ...], tuple[dict[Values, list[str]], dict[str, Values]]] = {}

    def changed(self) -> None:
        """A node was added, removed or relabelled."""
        self._groups.clear()

    def groups(self, keys: tuple[str, ...]) -> Mapping[Values, Sequence[str]]:
        return self._grouped(keys)[0]

    def of_node(self, keys: tuple[str, ...]) -> Mapping[str, Values]:
        """Node -> its domain, for the nodes that have one."""
        return self._grouped(keys)[1]

    def _grouped(self, keys: tuple[str, ...]
                 ) -> tuple[dict[Values, list[str]], dict[str, Values]]:
        found = self._groups.get(keys)
        if found is None:
            groups: dict[Values, list[str]] = {}
            of_node: dict[str, Values] = {}
            one = keys[0] if len(keys) == 1 else None
            for name, node in self.nodes.items():
                d: Values | None
                if one is not None:  # the usual case, without a tuple built per node
                    v = node.labels.get(one)
                    d = None if v is None else (v,)
                else:
                    d = domain_of(node.labels, keys)
                if d is not None:
                    of_node[name] = d
                    g = groups.get(d)
                    if g is None:
                        groups[d] = [name]
                    else:
                        g.append(name)
            if len(self._groups) >= self.MAX_KEYS:
                del self._groups[next(iter(self._groups))]
            found = self._groups[keys] = (groups, of_node)
        return found


def word(key: str) -> str:
    """How a message names a domain of `key`: its last segment ("rack" for
    example.com/rack, "zone" for topology.kubernetes.io/zone), "node" for the hostname."""
    if key == "kubernetes.io/hostname":
        return "node"
    return key.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class Domain:
    """Where a gang was placed: the nodes whose labels `keys` have `values`. The first
    `required` keys bind every slot of the gang (a slot that moves stays inside their
    domain); the others were only preferred (a slot moves outside if it must)."""

    keys: tuple[str, ...]
    values: Values
    required: int = 0

    def contains(self, labels: Mapping[str, str], upto: int | None = None) -> bool:
        """Whether a node with `labels` is in the domain of the first `upto` keys (all)."""
        n = len(self.keys) if upto is None else upto
        return all(labels.get(self.keys[i]) == self.values[i] for i in range(n))

    def narrowed(self, names: Sequence[str], nodes: Mapping[str, NodeInfo]) -> list[list[str]]:
        """`names` cut to the domain, then (if only some keys are required) to the
        required part of it, then (if none is) not cut at: where a slot of the gang may
        go, in the order to try. Empty cuts are left out."""
        out = []
        for upto in dict.fromkeys((len(self.keys), self.required)):
            inside = [n for n in names if n in nodes and self.contains(nodes[n].labels, upto)]
            if inside:
                out.append(inside)
        return out

    def describe(self) -> str:
        """"rack r2", "block b1, rack r2"."""
        return ", ".join(f"{word(k)} {v}" for k, v in zip(self.keys, self.values, strict=True))

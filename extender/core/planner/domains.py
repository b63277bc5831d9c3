"""The topology domain a gang is planned in: one rack, block or zone (docs/topology.md).

Which domains are tried, level by level, narrowest first:

* `topology-preferred: rack,block`: one rack, then one block, then anywhere;
* `topology-required: block`: one block, never anywhere; with a preferred key as well,
  one rack inside one block first (required bounds the search, preferred orders it);
* required pod affinity among the members on a key makes that key required too:
  kube-scheduler places the first member anywhere and every later one next to a pod the
  term selects, so a gang planned into one domain of the key is one kube-scheduler
  accepts in whatever order it takes the members (if pods the term selects already run,
  only their domains qualify). A term that selects no pod yet, nor a member, leaves the
  gang waiting for such a pod (`Awaited`), not for capacity: its plan says so, and whether
  it would fit, in any domain, once the pod came. A term that ties only a group of the
  members to each other (one Job of a JobSet under exclusive placement) does not: that
  group gets one domain of its own, planned member by member (`planner/relations.py`).

At each level, the domains the whole gang may fit in are tried tightest first: the
fewest members of the gang's biggest shape fit in the domain (node by node, as the
planner counts them), so the least room is left there after placing it and large
domains stay whole for large gangs; ties go to the smaller label value. For a gang of
one shape without constraints between its members this is exact: it fits in a domain
iff that count reaches the members it needs. The counts come from the fit index
(`FitIndex.rooms`) without visiting every node, and the plan inside a domain visits
only its nodes.

A gang with members already bound stays in their domain. Elastic extras go to the domain
of the bound quorum while it has room; beyond it, only if the topology is preferred.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domain, Values, domain_of, word
from extender.core.model.constraints import term_matches
from extender.core.model.fit import fit_count
from extender.core.model.resources import format_resources
from extender.core.model.types import GroupInfo, NodeInfo, PodInfo
from extender.core.planner.device_plan import DevicePlan, device_room
from extender.core.planner.plan import Plan, Shortfall, plan_gang, ties_for
from extender.core.planner.relations import Term, Ties, group_terms
from extender.core.planner.shapes import Shape, shapes_of
from extender.core.planner.shortfall import TIMES, Awaited, awaited_words


@dataclass(frozen=True, slots=True)
class Topology:
    """What a gang asks of its domain: keys it must stay within, keys it prefers
    (narrowest first), and the members' affinity terms that made keys required."""

    required: tuple[str, ...]
    preferred: tuple[str, ...]
    affinity: tuple[Term, ...]

    def levels(self) -> list[tuple[str, ...]]:
        """Keys tuples to try, narrowest first; () is anywhere."""
        out: list[tuple[str, ...]] = []
        for key in self.preferred:
            keys = self.required if key in self.required else (*self.required, key)
            if keys not in out:
                out.append(keys)
        if self.required not in out:
            out.append(self.required)
        return out


def topology_of(group: GroupInfo, pods: Sequence[PodInfo]) -> Topology | None:
    """The gang's topology; None when it asks for none (planned as before, at no cost)."""
    required = [group.topology_required] if group.topology_required else []
    affinity: list[Term] = []
    groups = group_terms(pods) if any(p.required_affinity for p in pods) else frozenset()
    for p in pods:
        for t in p.required_affinity:
            if (p.namespace, t) not in affinity and (p.namespace, t) not in groups:
                affinity.append((p.namespace, t))
                if t.topology_key not in required:
                    required.append(t.topology_key)
    if not required and not group.topology_preferred:
        return None
    return Topology(tuple(required), group.topology_preferred, tuple(affinity))


def plan_in_domains(
    pods: Sequence[PodInfo],
    need: int,
    bound: Sequence[PodInfo],
    snapshot: Snapshot,
    topo: Topology,
    explain: bool = True,
) -> Plan | Shortfall:
    """`need` of `pods` (earlier ones preferred) in one domain, the narrowest level
    first; `bound`: the gang's members already bound, whose domain it must stay in."""
    if need <= 0 or need > len(pods):
        return plan_gang(pods, need, snapshot, explain=explain)
    ties = ties_for(pods, snapshot)
    awaits: list[Awaited] = []
    holders: set[str] = set()  # uids of the members whose terms wait
    selects: dict[Term, bool] = {}  # each term looked for once, not once per member
    for p in pods:
        for t in p.required_affinity:
            found = selects.get((p.namespace, t))
            if found is None:
                found = selects[p.namespace, t] = bool(
                    ties.values_with(p.namespace, t)
                    or any(term_matches(t, p.namespace, m) for m in pods))
            if found:
                continue
            if t.selector is None:  # selects nothing, ever: no pod that comes can cure it
                msg = (f"the required pod affinity of member {p.key} has no labelSelector: it "
                       f"selects no pod, ever; kube-scheduler cannot place it")
                return Shortfall(need, 0, msg, p.key, msg)
            holders.add(p.uid)
            if all(a.namespace != p.namespace or a.term != t for a in awaits):
                awaits.append(Awaited(p.key, p.namespace, t))
    result = _plan_in_domains(pods, need, bound, snapshot, topo, explain, ties)
    if not awaits:
        return result
    if isinstance(result, Shortfall):  # short even once the pods come: both are said
        return dataclasses.replace(result, awaits=tuple(awaits))
    waiting = [u for u in result.assignments if u in holders]
    if not waiting:
        return result  # only members beyond the quorum wait
    words = awaited_words(awaits)
    first = next(p.key for p in pods if p.uid in holders)
    return Shortfall(need, need - len(waiting), words, first, words, awaits=tuple(awaits),
                     fits_otherwise=True)


def _plan_in_domains(
    pods: Sequence[PodInfo],
    need: int,
    bound: Sequence[PodInfo],
    snapshot: Snapshot,
    topo: Topology,
    explain: bool,
    ties: Ties,
) -> Plan | Shortfall:
    """`plan_in_domains` with the pods that the members' affinity awaits taken as able to
    come in any domain: only the domains of pods already there bound the search."""
    relate = ties if Ties.needed(pods, snapshot) else None
    shapes = shapes_of(pods[:need], None, devices=snapshot.devices)
    domains = snapshot.topology()
    for keys in topo.levels():
        if not keys:
            return plan_gang(pods, need, snapshot, explain=explain, ties=relate)
        groups = domains.groups(keys)
        rooms = [_rooms(s, keys, groups, snapshot) for s in shapes]
        allowed, why = _allowed(keys, groups, bound, snapshot.nodes, topo.affinity, ties)
        for _, d in _tightest(shapes, rooms, allowed):
            res = plan_gang(pods, need, snapshot, explain=False, within=groups[d], ties=relate)
            if isinstance(res, Plan):
                return Plan(res.assignments, Domain(keys, d, len(topo.required)))
        if keys == topo.required:
            return _required_shortfall(pods, need, snapshot, shapes, keys, groups, allowed,
                                       rooms[0], why, relate, explain)
    raise AssertionError("the last level is the required keys or anywhere")


def _tightest(
    shapes: Sequence[Shape],
    rooms: Sequence[Mapping[Values, Sequence[int]]],
    allowed: Collection[Values] | None,
) -> list[tuple[int, Values]]:
    """(room of the biggest shape, domain) of each domain where every shape's members
    fit if it were alone, tightest first. A loop over the domains with room, not over
    every domain: this runs on the filter call that plans the gang."""
    main, first = shapes[0], rooms[0]
    i, want = (1 if main.one_per_node else 0), len(main.members)
    rest = list(zip(shapes[1:], rooms[1:], strict=True))
    order = []
    for d, r in first.items():
        if r[i] < want or (allowed is not None and d not in allowed):
            continue
        if rest and any(_room(s, rs, d) < len(s.members) for s, rs in rest):
            continue
        order.append((r[i], d))
    order.sort()
    return order


def _room(shape: Shape, rooms: Mapping[Values, Sequence[int]], d: Values) -> int:
    r = rooms.get(d)
    if r is None:
        return 0
    return r[1] if shape.one_per_node else r[0]


def _rooms(shape: Shape, keys: tuple[str, ...], groups: Mapping[Values, Sequence[str]],
           snapshot: Snapshot) -> Mapping[Values, Sequence[int]]:
    """Per domain: [members of `shape` that fit, nodes where one does]; for members with
    claims, counted with their devices (the index counts requests alone)."""
    if shape.devices is not None and snapshot.devices is not None:
        plan = DevicePlan(snapshot.devices)

        def room(n: str) -> int:
            node = snapshot.nodes.get(n)
            return 0 if node is None else device_room(shape, plan, node, snapshot.free.get(n))
    elif snapshot.index is not None:
        return snapshot.index.rooms(shape.items, shape.proto, shape.plain, keys,
                                    snapshot.topology().of_node(keys))
    else:
        selector = tuple(shape.proto.node_selector.items())

        def room(n: str) -> int:
            return fit_count(shape.items, snapshot.free.get(n), snapshot.nodes.get(n),
                             shape.proto, shape.plain, selector)
    out: dict[Values, list[int]] = {}
    for d, names in groups.items():
        fits = [c for c in map(room, names) if c > 0]
        if fits:
            out[d] = [sum(fits), len(fits)]
    return out


def _allowed(
    keys: tuple[str, ...],
    groups: Mapping[Values, Sequence[str]],
    bound: Sequence[PodInfo],
    nodes: Mapping[str, NodeInfo],
    affinity: Sequence[Term],
    ties: Ties,
) -> tuple[set[Values] | None, str]:
    """The domains the gang may take at this level (None: any), and if none, why."""
    allowed: set[Values] | None = None
    if bound:
        where = set()
        for m in bound:
            node = nodes.get(m.node_name)
            where.add(domain_of(node.labels, keys) if node is not None else None)
        if None in where:
            return set(), (f"member(s) are bound on node(s) without label(s) "
                           f"{', '.join(keys)}")
        if len(where) > 1:
            names = ", ".join(sorted("/".join(v) for v in where if v is not None))
            return set(), f"its bound members are in different {_where(keys)}s ({names})"
        allowed = {d for d in where if d is not None and d in groups}
    for ns, t in affinity:
        i = keys.index(t.topology_key)
        values = ties.values_with(ns, t)
        if values:
            allowed = {d for d in (groups if allowed is None else allowed) if d[i] in values}
            if not allowed:
                return allowed, (f"pods its pod affinity selects run only in "
                                 f"{word(t.topology_key)}(s) {', '.join(sorted(values))}")
    return allowed, ""


def _where(keys: tuple[str, ...]) -> str:
    return " and ".join(word(k) for k in keys)


def _required_shortfall(
    pods: Sequence[PodInfo],
    need: int,
    snapshot: Snapshot,
    shapes: Sequence[Shape],
    keys: tuple[str, ...],
    groups: Mapping[Values, Sequence[str]],
    allowed: Collection[Values] | None,
    rooms: Mapping[Values, Sequence[int]],
    why: str,
    ties: Ties | None,
    explain: bool,
) -> Shortfall:
    """"needs 4 × {cpu: 8} in one rack (example.com/rack); the largest rack fits 3
    (rack r2: largest shortfall on cpu)"."""
    members = " + ".join(f"{len(s.members)} {TIMES} {format_resources(dict(s.items))}"
                         for s in shapes)
    w = _where(keys)
    head = f"needs {members} in one {w} ({', '.join(keys)})"
    fit, first = 0, pods[0].key
    if not groups:
        detail = f"no node has label{'s' if len(keys) > 1 else ''} {', '.join(keys)}"
    elif allowed is not None and not allowed:
        detail = why
    elif not explain:  # only whether it fits was asked: the best domain is not planned
        detail = ""
    else:
        best = min(groups if allowed is None else allowed,
                   key=lambda d: (-_room(shapes[0], rooms, d), d))
        res = plan_gang(pods, need, snapshot, explain=explain, within=groups[best], ties=ties)
        if isinstance(res, Plan):  # only a plan of several shapes can miss it: say so
            fit, inner = need, "the gang's shapes crowd each other out in every " + w
        else:
            fit, first, inner = res.fit, res.pod or first, res.detail
        detail = f"the largest {w} fits {fit} ({Domain(keys, best).describe()}: {inner})"
        if len(groups) > 1:
            detail += f"; {len(groups)} {w}s in all"
    message = f"{head}; {detail}"
    return Shortfall(need, fit, message, first, detail)


def extra_nodes(
    group: GroupInfo, members: Sequence[PodInfo], feasible: list[str],
    nodes: Mapping[str, NodeInfo],
) -> tuple[list[str], str]:
    """The nodes of `feasible` an elastic extra may take: those in the domain of its
    gang's bound members, narrowest level first; all of them if the gang asks for no
    domain, or only prefers one that is full. Empty with why: the required domain is."""
    topo = topology_of(group, members)
    bound = [m for m in members if m.node_name]
    if topo is None or not bound or not feasible:
        return feasible, ""
    for keys in topo.levels():
        if not keys:
            break
        where = set()
        for m in bound:
            node = nodes.get(m.node_name)
            d = domain_of(node.labels, keys) if node is not None else None
            if d is not None:  # a member on a node without the label is in no domain
                where.add(d)
        inside = [n for n in feasible
                  if n in nodes and domain_of(nodes[n].labels, keys) in where]
        if inside:
            return inside, ""
        if keys == topo.required:
            at = ", ".join(sorted(Domain(keys, v).describe() for v in where))
            return [], (f"gang {group.key}: its members must stay in one {_where(keys)} "
                        f"({at or 'none'}), which has no room for another member")
    return feasible, ""

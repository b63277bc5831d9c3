"""Victims for a preemptor that must stay inside one topology domain (docs/topology.md,
issue 18 point 4).

A gang that requires one rack (its `topology-required` key, or a key its members' pod
affinity makes required) is placed in one rack, so only victims in that rack make room
for it. Searching the whole cluster's harm order would find a set that fits, but it
may evict in two racks to place the gang in one, or take three pods in one rack when
one pod in another would do. So the search runs once per domain of the required keys,
over the units that are wholly inside it (a victim gang with members in two racks is
never evicted for a gang that needs one of them: half of the harm would be of no use to
it), each with `victims.select` and its rule; of the domains that make room, the
least harmful set is taken:

1. the lowest priority of the most important victim,
2. then the fewest pods evicted,
3. then the fewest resources (the sum of the victims' shares of the cluster),
4. then the fewest victims, and finally the smaller label value, so the choice is
   deterministic.

Each domain's search plans on that domain's nodes only (a few dozen, where planning
over the whole cluster, unindexed, would cost a scan of every node per try). The sets
found are then planned once more on the whole cluster, so a constraint that reaches
beyond the domain (a spread over zones) is honoured: a set whose whole-cluster plan
leaves the domain is not taken. That check runs least harmful set first and stops at the
first that holds, usually one plan: run for every domain, it made the search quadratic
(`lab.experiments.preemption_domains`: 2.5 s at 2,000 one-node domains, 15-18 s at 5,000).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Values
from extender.core.planner import Plan, Shortfall
from extender.core.preemption.victims import Unit, select, view_without

Planner = Callable[[Snapshot], "Plan | Shortfall"]


@dataclass(frozen=True, slots=True)
class Choice:
    """The victims chosen inside one domain, and the preemptor's plan once they are gone."""

    victims: list[Unit]
    plan: Plan
    domain: Values


def set_harm(units: Sequence[Unit]) -> tuple[int, int, float, int]:
    """How much evicting `units` together hurts, as the rule above orders sets."""
    return (max((u.priority for u in units), default=0), sum(len(u.pods) for u in units),
            sum(u.harm[2] for u in units), len(units))


def by_domain(units: Sequence[Unit], of_node: Mapping[str, Values]) -> dict[Values, list[Unit]]:
    """The units wholly inside each domain, in their harm order; units with capacity in
    two domains, or on a node of none, are in no list."""
    out: dict[Values, list[Unit]] = {}
    for u in units:
        where = {of_node.get(node) for node, _ in u.frees}
        if len(where) == 1:
            d = where.pop()
            if d is not None:
                out.setdefault(d, []).append(u)
    return out


def _inside(snapshot: Snapshot, names: Sequence[str]) -> Snapshot:
    """`snapshot` cut to the nodes `names`: the other nodes do not exist for the plan."""
    nodes = {n: snapshot.nodes[n] for n in names if n in snapshot.nodes}
    free = {n: snapshot.free[n] for n in nodes if n in snapshot.free}
    return Snapshot(nodes, free, snapshot.pods_on_node, repellers=snapshot.repellers)


def _fits_in(sub: Snapshot, leaving: Unit, plan: Planner) -> Callable[[Sequence[Unit]], bool]:
    def fits(victims: Sequence[Unit]) -> bool:
        return isinstance(plan(view_without(sub, [leaving, *victims])), Plan)
    return fits


def select_in_domains(
    units: Sequence[Unit],
    groups: Mapping[Values, Sequence[str]],
    of_node: Mapping[str, Values],
    snapshot: Snapshot,
    leaving: Unit,
    plan: Planner,
) -> Choice | None:
    """The least harmful victims wholly inside one domain of `groups` that let `plan`
    (the preemptor's whole plan) fit there; None if no domain's units do. `leaving`:
    capacity that comes back anyway (pods being deleted), counted everywhere. The
    caller has made sure the preemptor does not fit without victims."""
    found: list[tuple[tuple[tuple[int, int, float, int], Values], list[Unit]]] = []
    for d, inside in sorted(by_domain(units, of_node).items()):
        names = groups.get(d)
        if not names:
            continue
        chosen = select(inside, _fits_in(_inside(snapshot, names), leaving, plan))
        if chosen:  # None: not even all of them; []: cannot be (see the docstring)
            found.append(((set_harm(chosen), d), chosen))
    # The whole cluster's plan scans every node: least harmful first, until one holds.
    for (_, d), chosen in sorted(found, key=lambda f: f[0]):
        result = plan(view_without(snapshot, [leaving, *chosen]))
        members = set(groups[d])
        if isinstance(result, Plan) and all(
                n in members for n in result.assignments.values()):
            return Choice(chosen, result, d)
    return None

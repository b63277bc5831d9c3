"""Planning one gang: the members still to place, how many of them are needed, and the
topology domain they must or should share (`planner/domains.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from extender.core.cache.snapshot import Snapshot
from extender.core.model.types import GroupInfo, PodInfo, Resources
from extender.core.planner.domains import plan_in_domains, topology_of
from extender.core.planner.plan import Plan, Shortfall, plan_gang, unplaced
from extender.core.planner.shortfall import min_resources_shortfall


class GangPlanner(Protocol):
    """How the core plans a gang (`plan_group`); a parameter of the gang manager, so that
    a benchmark can time it without reaching into the core."""

    def __call__(self, group: GroupInfo, members: Sequence[PodInfo], succeeded: int,
                 snapshot: Snapshot, /, explain: bool = True) -> Plan | Shortfall: ...


def plan_group(
    group: GroupInfo, members: Sequence[PodInfo], succeeded: int, snapshot: Snapshot,
    explain: bool = True,
) -> Plan | Shortfall:
    """A node for every member still needed for `group`'s quorum (bound and `succeeded`
    members count toward it), oldest members first, inside the topology domain the
    PodGroup asks for. Every caller that places a whole gang goes through here, so
    every one of them gets the same domain. `explain=False`: a failed plan's message
    may be left empty (for callers that only ask whether it fits)."""
    unbound = [m for m in members if not m.node_name]
    unbound.sort(key=lambda p: (p.creation, p.name))
    need = group.min_member - (len(members) - len(unbound)) - succeeded
    if group.topology_error:
        msg = group.topology_error
        return Shortfall(need, 0, msg, None, msg, invalid=True)
    if group.min_resources:
        # scheduler-plugins' aggregate pre-check, in the PodGroup's own terms; the
        # node-by-node plan below is what actually proves a fit.
        total: Resources = {}
        for free in snapshot.free.values():
            for k, v in free.items():
                if v > 0:
                    total[k] = total.get(k, 0) + v
        missing = min_resources_shortfall(total, group.min_resources)
        if missing is not None:
            return Shortfall(need, 0, missing, None, missing)
    topo = topology_of(group, unbound)
    if topo is None:
        return plan_gang(unbound, need, snapshot, explain=explain)
    bound = [m for m in members if m.node_name]
    return plan_in_domains(unbound, need, bound, snapshot, topo, explain)


def without_room(group: GroupInfo, members: Sequence[PodInfo], succeeded: int,
                 snapshot: Snapshot) -> list[PodInfo]:
    """The members `plan_group` finds no room for on `snapshot`'s free capacity
    (capacity reserved or held for other gangs counted as taken), in its order. A gang
    that must share a topology domain gets all the members it needs: the room it has
    is in no one domain, and the autoscaler's pod templates name none."""
    unbound = [m for m in members if not m.node_name]
    unbound.sort(key=lambda p: (p.creation, p.name))
    need = group.min_member - (len(members) - len(unbound)) - succeeded
    topo = topology_of(group, unbound)
    if topo is not None and topo.required:
        return unbound[:max(need, 0)]
    return unplaced(unbound, need, snapshot)

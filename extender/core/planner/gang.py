"""Planning one gang: the members still to place, and how many of them are needed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from extender.core.planner.explain import min_resources_shortfall
from extender.core.planner.plan import Plan, Shortfall, plan_gang
from extender.core.snapshot import Snapshot
from extender.core.types import GroupInfo, PodInfo, Resources

# How the gang queue plans a gang; a parameter of the gang manager, so that a benchmark
# can time it without reaching into the core.
GangPlanner = Callable[[GroupInfo, Sequence[PodInfo], int, Snapshot], "Plan | Shortfall"]


def plan_group(
    group: GroupInfo, members: Sequence[PodInfo], succeeded: int, snapshot: Snapshot
) -> Plan | Shortfall:
    """A node for every member still needed for `group`'s quorum (bound and `succeeded`
    members count toward it), oldest members first."""
    unbound = [m for m in members if not m.node_name]
    unbound.sort(key=lambda p: (p.creation, p.name))
    need = group.min_member - (len(members) - len(unbound)) - succeeded
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
            return Shortfall(need, 0, missing, None)
    return plan_gang(unbound, need, snapshot)

"""Planning a CompositePodGroup's children as one unit (`CompositeInfo`): each child
at its own quorum, at least `minGroupCount` of them, all on one view of the free capacity,
and in one domain of the composite's topology key when it has one.

The children are planned one after another, in the order given (by name), each on the
capacity the ones before it took: a child that does not fit is skipped and the rest are
still tried, so a composite of three whose quorum is two is placed with the two that fit.
With a topology key, every domain of it is tried in turn (by label value) and the first
where every child fits wins; failing that, the first where the most fit, if that is
enough. Greedy in the children's order as the planner is in its members' order: a
different order could fit where this one does not, which the message does not claim to
rule out.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domain, word
from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo, Resources
from extender.core.planner.gang import GangPlanner
from extender.core.planner.plan import Plan, Shortfall


@dataclass(frozen=True, slots=True)
class Child:
    """One child group to plan: its group, its members, and its succeeded pods (which
    count toward its quorum as `plan_group` counts them)."""

    group: GroupInfo
    members: Sequence[PodInfo]
    succeeded: int = 0


@dataclass(frozen=True, slots=True)
class CompositePlan:
    """What the children's plans came to: a plan for each child that fits (`plans`, in
    planning order) and why each other one did not (`short`), in the domain tried
    (`where`, "" without a topology key). `placed`: enough children fit."""

    plans: dict[str, Plan]
    short: dict[str, Shortfall]
    where: str = ""
    placed: bool = False


def plan_composite(composite: CompositeInfo, children: Sequence[Child], snapshot: Snapshot,
                   planner: GangPlanner) -> CompositePlan:
    """The children of `composite` planned together on `snapshot` (module docstring)."""
    need = composite.min_group_count
    if not composite.topology_required:
        out = _accumulate(children, snapshot, planner, None)
        return dataclasses.replace(out, placed=len(out.plans) >= need)
    keys = (composite.topology_required,)
    groups = snapshot.topology().groups(keys)
    best: CompositePlan | None = None
    for values in sorted(groups):
        domain = Domain(keys, values, 1)
        names = groups[values]
        within = Snapshot(
            {n: snapshot.nodes[n] for n in names},
            {n: snapshot.free[n] for n in names if n in snapshot.free},
            snapshot.pods_on_node, repellers=snapshot.repellers, devices=snapshot.devices)
        out = _accumulate(children, within, planner, domain)
        if len(out.plans) == len(children):
            return dataclasses.replace(out, placed=True)
        if best is None or len(out.plans) > len(best.plans):
            best = out
    if best is None:  # no node has the label at all
        msg = f"no node has the label {composite.topology_required}"
        return CompositePlan({}, {c.group.key: Shortfall(0, 0, msg, None, msg)
                                  for c in children}, f"no {word(keys[0])}")
    return dataclasses.replace(best, placed=len(best.plans) >= need)


def _accumulate(children: Sequence[Child], snapshot: Snapshot, planner: GangPlanner,
                domain: Domain | None) -> CompositePlan:
    """Each child on what the ones planned before it left free: their members are
    charged to their nodes and sit on them (for anti-affinity), on overlays of the
    snapshot's own maps, which are never written."""
    free_over: dict[str, Resources] = {}
    pods_over: dict[str, Sequence[PodInfo]] = {}
    view = Snapshot(snapshot.nodes, ChainMap(free_over, snapshot.free),  # type: ignore[arg-type]
                    ChainMap(pods_over, snapshot.pods_on_node),  # type: ignore[arg-type]
                    repellers=None, devices=snapshot.devices)
    plans: dict[str, Plan] = {}
    short: dict[str, Shortfall] = {}
    for child in children:
        result = planner(child.group, child.members, child.succeeded, view)
        if isinstance(result, Shortfall):
            short[child.group.key] = result
            continue
        if result.domain is None and domain is not None:
            # Its slots move only inside the composite's domain (docs/topology.md).
            result = Plan(result.assignments, domain)
        plans[child.group.key] = result
        by_uid = {m.uid: m for m in child.members}
        for uid, node in result.assignments.items():
            pod = by_uid[uid]
            left = dict(view.free.get(node, {}))
            for k, v in pod.requests.items():
                left[k] = left.get(k, 0) - v
            free_over[node] = left
            pods_over[node] = [*view.pods_on_node.get(node, ()), pod]
    where = domain.describe() if domain is not None else ""
    return CompositePlan(plans, short, where)


def children_words(keys: Mapping[str, object]) -> str:
    """"ns/a, ns/b" from gang keys, for messages (the source prefix dropped)."""
    return ", ".join(k.split(":", 1)[-1] for k in keys) or "none"

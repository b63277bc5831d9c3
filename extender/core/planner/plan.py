"""plan_gang: all or nothing, a node for each of `need` members, or why not."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domain
from extender.core.model.types import PodInfo
from extender.core.planner.candidates import (
    Candidates,
    IndexedCandidates,
    Outcome,
    PlanState,
    node_source,
)
from extender.core.planner.device_plan import DevicePlan, roomiest
from extender.core.planner.relations import Ties, relations_for
from extender.core.planner.shapes import Shape, pod_size_key, shapes_of
from extender.core.planner.shortfall import Awaited, explain_shortfall


@dataclass(frozen=True, slots=True)
class Plan:
    assignments: dict[str, str]  # pod uid -> node name, exactly `need` entries
    # The topology domain every assignment is in, for a gang that asked for one and got
    # it; moves of its slots respect it (docs/topology.md).
    domain: Domain | None = None


@dataclass(frozen=True, slots=True)
class Shortfall:
    need: int  # how many members had to be placed
    fit: int  # how many could be placed (< need)
    message: str  # human, actionable: what did not fit and why
    pod: str | None  # ns/name of the first member (in preference order) not placed
    detail: str = ""  # why, without "needs N × {...}; K fit": for messages that wrap it
    invalid: bool = False  # the PodGroup asks for something malformed (Reason.INVALID_TOPOLOGY)
    # Terms that select no pod yet: the gang waits for such a pod and is planned again
    # when one is bound (`GangQueue`). The rest of the message says why it would fall
    # short even then, unless `fits_otherwise`: the plan fits but for them.
    awaits: tuple[Awaited, ...] = ()
    fits_otherwise: bool = False


def place_shape(pl: PlanState, shape: Shape, members: Sequence[PodInfo],
                devices: DevicePlan | None = None) -> Outcome:
    """`devices`: what the attempt takes of the devices, for a shape with claims."""
    cand: Candidates | IndexedCandidates
    if shape.devices is not None and devices is not None:
        cand = Candidates(pl, shape, node_source(shape, pl.free, pl.within),
                          devices=devices)
    elif pl.index is not None and shape.allowed is None and pl.within is None:
        cand = IndexedCandidates.open(pl, pl.index, shape)
    else:
        cand = Candidates(pl, shape, node_source(shape, pl.free, pl.within))
    cand.scan(len(members))
    order, left = cand.order, cand.left
    start = 0
    placed = 0
    unplaced: list[PodInfo] = []
    blocked: set[str] = set()
    failed_labels: list[dict[str, str]] = []
    taking = devices if shape.devices else None
    prefer: str | None = None
    if taking is not None and taking.unpinned(shape) and len(members) > 1:
        want = min(len(members), pl.need - len(pl.assignments))
        prefer = roomiest(order, left, want)
        while prefer is None and not cand.done:
            cand.scan(want)
            prefer = roomiest(order, left, want)
    for idx, pod in enumerate(members):
        if len(pl.assignments) >= pl.need:
            break
        if pod.labels in failed_labels:  # same shape, same labels: same answer
            unplaced.append(pod)
            continue
        chosen: str | None = None
        i = start
        if (prefer is not None and taking is not None and taking.unpinned(shape)
                and pl.conflict(pod, prefer) is None):
            # The first member naming a shared claim allocates it: where all can follow.
            chosen = prefer
        while chosen is None:
            if i >= len(order):
                if cand.done:
                    break
                cand.scan(len(members) - idx)
                continue
            name = order[i]
            if left[name] <= 0:
                if i == start:
                    start += 1
                i += 1
                continue
            why = pl.conflict(pod, name)
            if why is not None:
                if why == "existing":
                    blocked.add(name)
                i += 1
                continue
            if taking is not None and not taking.usable(shape, pl.nodes[name]):
                i += 1  # its shared claims' devices, allocated by this plan, are not here
                continue
            chosen = name
            break
        if chosen is None:
            unplaced.append(pod)
            failed_labels.append(pod.labels)
            continue
        pl.place(pod, shape, chosen)
        if taking is not None:
            taking.place(shape, pl.nodes[chosen])
        left[chosen] -= 1
        placed += 1
    return Outcome(placed, unplaced, cand, blocked)


def plan_gang(
    pods: Sequence[PodInfo],
    need: int,
    snapshot: Snapshot,
    allowed: Mapping[str, Collection[str]] | None = None,
    explain: bool = True,
    within: Collection[str] | None = None,
    ties: Ties | None = None,
) -> Plan | Shortfall:
    """Place `need` of `pods` (earlier ones preferred) on `snapshot`'s nodes, all or
    nothing.

    `within`: only these nodes (one topology domain). `ties`: what the members'
    constraints beyond one node depend on, when the caller plans the same gang in
    several domains (found here otherwise, and only if a member or a pod on a node has
    such a constraint).

    `allowed` restricts some pods to given nodes (kube-scheduler's feasible list for
    the pod being filtered). The first `need` pods are planned; if some do not fit,
    later pods stand in for them, and failing that the `need` smallest pods are
    tried. A Plan never puts more on a node than its free capacity. `need` below 1
    gives an empty Plan; above len(pods) (after dropping repeated uids), a Shortfall.
    `explain=False` leaves a failed plan's message empty, for callers that only ask
    whether it fits (the explanation looks at every node again and costs more than
    the plan). With the snapshot's fit index, nodes are found without visiting every
    one; the plan is the same.
    """
    if need <= 0:
        return Plan({})
    if len({p.uid for p in pods}) != len(pods):  # a pod listed twice is one pod
        pods = _first_occurrences(pods)
    if need > len(pods):
        # Why even the members there would not all fit, if they would not.
        present = plan_gang(pods, len(pods), snapshot, allowed, within=within) if pods else None
        return _too_few(need, len(pods), present)
    if ties is None and Ties.needed(pods, snapshot):
        ties = ties_for(pods, snapshot)

    pl, failure = _attempt(pods, need, snapshot, allowed, within, ties)
    if failure is None:
        return Plan(pl.assignments)
    best_fit = len(pl.assignments)
    if len(pods) > need:
        # Only some members are needed: the preferred ones may be the big ones that
        # crowd each other out. Try again with the smallest members first.
        by_size = sorted(pods, key=pod_size_key)
        if {p.uid for p in by_size[:need]} != {p.uid for p in pods[:need]}:
            alt, alt_failure = _attempt(by_size, need, snapshot, allowed, within, ties)
            if alt_failure is None:
                return Plan(alt.assignments)
            best_fit = max(best_fit, len(alt.assignments))

    shapes, shape, outcome = failure
    message = detail = ""
    if explain:
        head, detail = explain_shortfall(pl, shape, outcome, shared=len(shapes) > 1)
        message = f"{head}; {detail}" if head else detail
        if len(shapes) > 1:
            message += f"; {len(pl.assignments)} of {need} members placed in all"
    first = next((p.key for p in pods[:need] if p.uid not in pl.assignments), None)
    return Shortfall(need=need, fit=best_fit, message=message, pod=first, detail=detail)


def ties_for(pods: Sequence[PodInfo], snapshot: Snapshot) -> Ties:
    """The gang's `Ties`, able to ask whether a group of members fits in a domain alone
    (a planner's question, which `relations` cannot import without a cycle)."""
    def fits(group: Sequence[PodInfo], names: Sequence[str]) -> bool:
        return isinstance(plan_gang(group, len(group), snapshot, explain=False, within=names),
                          Plan)
    return Ties(pods, snapshot, fits)


def unplaced(pods: Sequence[PodInfo], need: int, snapshot: Snapshot) -> list[PodInfo]:
    """Of the first `need` of `pods`, the ones the plan leaves without a node (as many as
    it falls short by: later pods that stood in for some are not counted twice). What a
    gang short of capacity asks the autoscaler for (`core/provisioning.py`)."""
    if need <= 0:
        return []
    if len({p.uid for p in pods}) != len(pods):
        pods = _first_occurrences(pods)
    ties = ties_for(pods, snapshot) if Ties.needed(pods, snapshot) else None
    pl, _ = _attempt(pods, min(need, len(pods)), snapshot, None, None, ties)
    missing = need - len(pl.assignments)
    return [p for p in pods[:need] if p.uid not in pl.assignments][:max(missing, 0)]


Failure = tuple[list[Shape], Shape, Outcome]


def _attempt(
    pods: Sequence[PodInfo],
    need: int,
    snapshot: Snapshot,
    allowed: Mapping[str, Collection[str]] | None,
    within: Collection[str] | None,
    ties: Ties | None,
) -> tuple[PlanState, Failure | None]:
    """Plan the first `need` pods, biggest shape first; let later pods stand in for
    those that do not fit. Returns the planner state and, unless all `need` were
    placed, the first shape that fell short (for the message)."""
    pl = PlanState(snapshot.nodes, snapshot.free, snapshot.pods_on_node, need, snapshot.index,
                   relations=relations_for(pods, snapshot, ties) if ties else None,
                   within=within)
    view = snapshot.devices
    shapes = shapes_of(pods[:need], allowed, devices=view)
    devices = (DevicePlan(view) if view is not None
               and any(s.devices is not None for s in shapes) else None)
    failure: Failure | None = None
    for shape in shapes:
        outcome = place_shape(pl, shape, shape.members, devices)
        if outcome.unplaced and failure is None:
            failure = (shapes, shape, outcome)
    if failure is not None and len(pods) > need:
        # Stand-ins are taken in preference order, not by size: any that fits will do.
        for shape in shapes_of(pods[need:], allowed, by_size=False, devices=view):
            if devices is None and shape.devices is not None and view is not None:
                devices = DevicePlan(view)
            place_shape(pl, shape, shape.members, devices)
            if len(pl.assignments) >= need:
                break
    return pl, (None if len(pl.assignments) >= need else failure)


def _first_occurrences(pods: Sequence[PodInfo]) -> list[PodInfo]:
    seen: set[str] = set()
    out: list[PodInfo] = []
    for p in pods:
        if p.uid not in seen:
            seen.add(p.uid)
            out.append(p)
    return out


def _too_few(need: int, waiting: int, present: Plan | Shortfall | None) -> Shortfall:
    """Fewer members waiting than `need`; `present` is the plan of those waiting (None
    if there are none), whose shortfall, if any, is said too."""
    msg = f"needs {need} members, only {waiting} waiting to be placed"
    if not isinstance(present, Shortfall):
        return Shortfall(need, waiting, msg, None, msg)
    return Shortfall(need, present.fit, f"{msg}; {present.message}", present.pod,
                     f"{msg}; {present.detail}")

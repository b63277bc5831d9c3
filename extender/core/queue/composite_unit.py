"""Which waiting gangs the queue pass plans as one CompositePodGroup, and what their
members are told while it waits (`CompositeInfo`, `planner/composite_plan.py`).

A child of a composite with a gang policy is never planned alone: half of a leader and
its workers started is the partial start gang scheduling exists to prevent, one level
up. It is planned alone only where the composite asks for nothing more: a "basic"
policy, or once the composite has been placed (at least `minGroupCount` children at
their quorum bound), as upstream's `CompositePodGroupInitiallyScheduled` never reverts:
a child that starts later, or lost members and waits again, is then a gang of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.core.cache import Cache
from extender.core.ledger import Reservations
from extender.core.model.types import CompositeInfo, GroupInfo
from extender.core.model.vocabulary import Reason
from extender.core.planner.plan import Shortfall
from extender.core.preemption.preemptor import Preemptions

PREEMPTION = "preemption"  # `Reservation.held` of a preemptor's plan (`Preemptions`)


def unit_of(group: GroupInfo, cache: Cache) -> str | None:
    """The key of the composite the waiting `group` is planned with; None: alone."""
    if not group.parent:
        return None
    composite = cache.composites.get(group.parent)
    if composite is None or composite.error:
        return group.parent  # it waits, and says why (`not_planned`)
    if composite.min_group_count == 0 or placed(composite, cache):
        return None
    return group.parent


def placed(composite: CompositeInfo, cache: Cache) -> bool:
    """At least `minGroupCount` of its children have their quorum bound."""
    count = 0
    for child in cache.children(composite.key):
        if cache.quorum_counts(child).bound_or_succeeded >= child.min_member:
            count += 1
    return count >= composite.min_group_count


def _name(key: str) -> str:
    return key.split(":", 1)[-1]


@dataclass(frozen=True, slots=True)
class Holding:
    """Children of a composite that hold the capacity of its plan (`holding`)."""

    children: tuple[str, ...]  # their keys
    # What the composite's preemption said, if the holds wait for its victims to leave
    # ("": the starvation guard's holds).
    preempting: str


def holding(key: str, cache: Cache, reservations: Reservations,
            preemptions: Preemptions) -> Holding | None:
    """What the composite `key` holds capacity for while it is not placed yet: the
    children whose plan is held (by a preemption, or by the starvation guard). None: no
    child holds."""
    held = [(g.key, res.held) for g in cache.children(key)
            if (res := reservations.get(g.key)) is not None and res.held is not None]
    if not held:
        return None
    words = ""
    if any(kind == PREEMPTION for _, kind in held):
        words = preemptions.composite_preempting(key) or (
            f"CompositePodGroup {_name(key)} preempts lower-priority work; the capacity "
            f"it frees is held for it until the victims are gone")
    return Holding(tuple(k for k, _ in held), words)


def not_planned(key: str, composite: CompositeInfo | None,
                complete: Sequence[GroupInfo],
                holds: Holding | None = None) -> tuple[Reason, str] | None:
    """Why the complete children `complete` of the composite `key` are not planned at
    all this pass (their reason, the message after "gang <key>: "); None: they are.

    `holds`: children of the composite that already hold capacity for its plan. Too few
    children complete besides them (one created late, or whose pods came late) wait
    for that plan, not for "the others' pods": the others exist and hold. Once the
    composite is placed each is planned on its own (`unit_of`). They say what the
    holders say: waiting for a preemption is not being a victim of one."""
    if composite is None:
        return (Reason.WAITING_FOR_MEMBERS,
                f"part of CompositePodGroup {_name(key)}, which is not seen (yet); its "
                f"groups are planned together once it is")
    if composite.error:
        return (Reason.INVALID_TOPOLOGY,
                f"CompositePodGroup {_name(key)}: {composite.error}; none of its groups "
                f"is placed until it is fixed")
    if len(complete) >= composite.min_group_count:
        return None
    if holds is not None:
        names = ", ".join(_name(k) for k in holds.children)
        them = f"{len(holds.children)} of its groups ({names})"
        after = "this one is placed on its own once they are, when it fits"
        if holds.preempting:
            return Reason.PREEMPTING, f"{holds.preempting}, for {them}; {after}"
        return (Reason.CAPACITY_HELD,
                f"part of CompositePodGroup {_name(key)}, which starved and holds capacity "
                f"for {them} as it frees up; {after}")
    names = ", ".join(_name(g.key) for g in complete)
    return (Reason.WAITING_FOR_MEMBERS,
            f"part of CompositePodGroup {_name(key)}, whose groups are placed together, "
            f"{composite.min_group_count} at least (minGroupCount); {len(complete)} "
            f"ha{'s' if len(complete) == 1 else 've'} its quorum of pods ({names}): "
            f"waiting for the others' pods")


def short_words(key: str, composite: CompositeInfo, fit: Sequence[str], complete: int,
                where: str, searched: str = "", tried: int = 0) -> str:
    """Why none of the composite's children is placed: too few fit together, and how
    far the planner looked for another choice of them (`CompositePlan.searched`)."""
    names = ", ".join(_name(k) for k in fit) or "none"
    inside = f" in one {where.split(' ', 1)[0]}" if where else ""
    need = composite.min_group_count
    looked = {
        "every": f" (no other choice of {need} of them fits either)",
        "bound": f" (other choices of {need} of them were tried, {tried} plans, the "
                 f"search's bound on a cluster of this size; none fits)",
    }.get(searched, "")
    return (f"part of CompositePodGroup {_name(key)}, whose groups are placed together, "
            f"{need} at least (minGroupCount); {len(fit)} of its "
            f"{complete} groups with their pods fit together{inside} now ({names}){looked}, "
            f"so none is placed")


def child_words(own: Shortfall) -> str:
    """One child's shortfall, for its own status: how many of the pods it needs do not
    fit and the first of them, then the planner's words for why."""
    if own.pod is None or own.need <= own.fit:
        return own.message
    return (f"{own.need - own.fit} of the {own.need} pod(s) it needs do not fit (the "
            f"first: {own.pod}): {own.message}")

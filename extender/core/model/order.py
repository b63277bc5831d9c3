"""Gang queue order (architecture.md §3): pod priority (higher first), PodGroup creation time
(older first), then namespace/name, so every replica of the extender and every restart
grants capacity in the same order."""

from __future__ import annotations

from typing import NamedTuple

from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo


def gang_priority(members: list[PodInfo], inherited: int | None = None) -> int:
    """A gang runs at the priority of its most important member; where none of its
    members has a priority above 0 (none given by a PriorityClass, the common case for a
    child of a CompositePodGroup whose template alone names one), at the priority it
    inherits when that is set: an upstream PodGroup's own spec.priority
    (`GroupInfo.priority`), else its composite's (`CompositeInfo.priority`)."""
    top = max((p.priority for p in members), default=0)
    return inherited if inherited is not None and top == 0 else top


def inherited_priority(group: GroupInfo | None, composite: CompositeInfo | None) -> int | None:
    """The priority a gang runs at where its members have none (`gang_priority`): an
    upstream PodGroup's own spec.priority, else its composite's; one rule for the queue,
    the starvation guard and the victim choice, which must agree on gang order."""
    if group is not None and group.priority is not None:
        return group.priority
    return composite.priority if composite is not None else None


class QueueKey(NamedTuple):
    """A gang's place in the queue; compares as the tuple it is, smallest first. The
    priority is stored negated so that the higher one sorts first: read it through
    `priority`, never by decoding the tuple."""

    negated_priority: int
    creation: float
    gang: str

    @property
    def priority(self) -> int:
        return -self.negated_priority


def queue_sort_key(group: GroupInfo, members: list[PodInfo],
                   inherited: int | None = None) -> QueueKey:
    """`inherited`: the priority of the group's CompositePodGroup (`gang_priority`)."""
    return QueueKey(-gang_priority(members, inherited), group.creation, group.key)

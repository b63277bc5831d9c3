"""Gang queue order (architecture.md §3): pod priority (higher first), PodGroup creation time
(older first), then namespace/name, so every replica of the extender and every restart
grants capacity in the same order."""

from __future__ import annotations

from extender.core.model.types import GroupInfo, PodInfo


def gang_priority(members: list[PodInfo]) -> int:
    """A gang runs at the priority of its most important member."""
    return max((p.priority for p in members), default=0)


def queue_sort_key(group: GroupInfo, members: list[PodInfo]) -> tuple[int, float, str]:
    return (-gang_priority(members), group.creation, group.key)

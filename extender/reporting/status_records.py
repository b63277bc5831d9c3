"""What the PodGroup status writer (`reporting/status.py`) keeps: its settings, one
record per PodGroup, and the gangs gauge's counts kept in step with those records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extender.core.phase import GroupStatus


@dataclass
class StatusConfig:
    min_interval: float = 1.0  # seconds between two writes of one PodGroup
    loop_interval: float = 0.25
    max_writes_per_second: float = 50.0
    # Recompute every group with members this often, changed or not.
    resync_seconds: float = 30.0
    # Groups recomputed between two yields to the event loop.
    batch: int = 500
    max_error_backoff: float = 30.0
    # A PodGroup is usually created just before its pods. Its first status would say
    # "0 of N members exist" and be overwritten a moment later, so it is held back this
    # long after creation (a benchmark of 54 gangs: about half of all status writes).
    new_group_grace: float = 5.0
    # A changed status is written once it has held this long, or once the oldest
    # unwritten change is `max_lag` old: a gang that goes from "members arriving" through
    # Reserved and Bound to Running within a second gets one write, not four.
    settle: float = 0.5
    max_lag: float = 2.0


@dataclass(slots=True)
class GroupRecord:
    """What the writer keeps of one PodGroup."""

    uid: str
    observed: dict[str, Any] = field(default_factory=dict)  # status as the API shows it
    written: dict[str, Any] | None = None  # status this process wrote last
    written_at: float = float("-inf")
    unwritten: dict[str, Any] | None = None  # computed, differs from what was written
    unwritten_since: float = 0.0  # when the computed status first differed
    unwritten_changed: float = 0.0  # when it last changed
    current: GroupStatus | None = None
    phase: str = ""  # last computed (or observed) phase and Scheduled reason
    reason: str = ""
    quiet: bool = False  # that status got no Event (`events.quiet`)
    errors: int = 0
    retry_at: float = 0.0
    counted: tuple[str, str, str] | None = None  # its place in `StatusWriter.counts`


class GangCounts:
    """(phase, reason, source) -> gangs, for the gangs gauge: kept as each group's
    computed status changes, so a scrape costs the number of states, not of groups."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str], int] = {}

    def move(self, rec: GroupRecord, counted: tuple[str, str, str] | None) -> None:
        """`rec` is now counted under `counted` (None: no longer counted)."""
        if rec.counted == counted:
            return
        if rec.counted is not None:
            n = self._counts[rec.counted] - 1
            if n:
                self._counts[rec.counted] = n
            else:
                del self._counts[rec.counted]
        if counted is not None:
            self._counts[counted] = self._counts.get(counted, 0) + 1
        rec.counted = counted

    def snapshot(self) -> dict[tuple[str, str, str], int]:
        return dict(self._counts)

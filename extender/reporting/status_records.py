"""What the PodGroup status writer (`reporting/status.py`) keeps: its settings, one
record per PodGroup, and the gangs gauge's counts kept in step with those records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from extender.core.model.phase import GroupStatus


@dataclass
class StatusConfig:
    min_interval: float = 1.0  # seconds between two writes of one PodGroup
    loop_interval: float = 0.25
    max_writes_per_second: float = 50.0
    # Recompute every group with members this often, changed or not.
    resync_seconds: float = 30.0
    # Groups recomputed between two yields to the event loop.
    batch: int = 100
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


EMPTY_JSON = b"{}"


def compact_json(value: Any) -> bytes:
    """`value` as JSON bytes, kept per PodGroup: orjson's result keeps its 4 KiB buffer
    however short the JSON; copied, it does not."""
    return bytes(memoryview(orjson.dumps(value)))


@dataclass(slots=True)
class GroupRecord:
    """What the writer keeps of one PodGroup. The statuses it compares with (as the API
    shows it, as written last) are kept serialized: a finished group's status is about
    1.3 KiB as parsed JSON and a third of that as bytes, and it is read only when the
    group is recomputed (100,000 PodGroups: docs/reliability.md, "History at scale")."""

    uid: str
    observed_json: bytes = EMPTY_JSON  # status as the API shows it
    written_json: bytes | None = None  # status this process wrote last
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
    # An upstream PodGroup's (`reporting/upstream.py`): its status as the API shows it,
    # the conditions this process set last, and its metadata.generation.
    api_json: bytes = EMPTY_JSON
    api_written_json: bytes | None = None
    generation: int = 0

    @property
    def observed(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.observed_json)
        return value

    @observed.setter
    def observed(self, status: dict[str, Any]) -> None:
        self.observed_json = compact_json(status) if status else EMPTY_JSON

    @property
    def has_observed(self) -> bool:
        return self.observed_json != EMPTY_JSON

    @property
    def written(self) -> dict[str, Any] | None:
        if self.written_json is None:
            return None
        value: dict[str, Any] = orjson.loads(self.written_json)
        return value

    @written.setter
    def written(self, status: dict[str, Any] | None) -> None:
        self.written_json = None if status is None else compact_json(status)


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

"""Gang queue order and group backoff.

Order is design 3.5: pod priority (higher first), PodGroup creation time (older
first), then namespace/name, so every replica of the extender and every restart
grants capacity in the same order. Backoff follows the shape of Kueue's
requeuingStrategy (base doubling up to a cap, optional retry limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.types import GroupInfo, PodInfo


def gang_priority(members: list[PodInfo]) -> int:
    """A gang runs at the priority of its most important member."""
    return max((p.priority for p in members), default=0)


def queue_sort_key(group: GroupInfo, members: list[PodInfo]) -> tuple[int, float, str]:
    return (-gang_priority(members), group.creation, group.key)


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    base_seconds: float = 10.0
    cap_seconds: float = 300.0
    # None: retry forever. N: after N timed-out attempts the group is marked Failed.
    retry_limit: int | None = None

    def __post_init__(self) -> None:
        if self.base_seconds < 0 or self.cap_seconds < self.base_seconds:
            raise ValueError(
                f"backoff base {self.base_seconds}s must be >= 0 and <= cap {self.cap_seconds}s"
            )
        if self.retry_limit is not None and self.retry_limit < 1:
            raise ValueError(f"backoff retry limit must be >= 1, got {self.retry_limit}")

    def delay(self, attempts: int) -> float:
        """Wait after the `attempts`-th timeout (1-based): base * 2^(attempts-1), capped."""
        if attempts <= 0:
            return 0.0
        exponent = min(attempts - 1, 62)
        return float(min(self.base_seconds * (2**exponent), self.cap_seconds))

    def exhausted(self, attempts: int) -> bool:
        return self.retry_limit is not None and attempts >= self.retry_limit


@dataclass(slots=True)
class Backoff:
    """Timeouts a gang has had and when it may be tried again."""

    attempts: int = 0
    until: float = 0.0
    failed: bool = False
    group_uid: str = ""

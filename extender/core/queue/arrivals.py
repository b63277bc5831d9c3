"""How fast each gang's members are arriving: the filter's assembly wait reads it.

kube-scheduler takes a pod as soon as it is created, so it often reaches a gang's first
member while an operator is still creating the others. Turned away ("3 of 32 members
exist"), that member sits out kube-scheduler's pod backoff, 1-2 s (whole-second windows;
`podInitialBackoffSeconds` is at least 1), and its gang's waiting binds wait for it. A filter
call that waits a few tens of milliseconds for the rest avoids that, but it holds
kube-scheduler's serial loop, so it is only worth it while the gang's own arrival rate
says the rest will be there soon (`extender.core.filter`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Gang entries are dropped once their last member arrived this long ago: nothing waits
# on an arrival that old, and the table stays as small as the set of gangs being created.
_FORGET_AFTER_SECONDS = 30.0
_PRUNE_EVERY_SECONDS = 1.0


@dataclass(slots=True)
class Arrival:
    first: float  # when the first member was seen (since this entry was made)
    last: float  # when the newest one was
    count: int = 1  # members seen arriving
    gave_up: bool = False  # a wait ran out before the gang was complete

    def seconds_to(self, missing: int) -> float | None:
        """Time the missing members need, after the newest, at the rate seen so far;
        None while only one member has been seen (no rate yet). Members seen at the
        same instant make it 0."""
        if self.count < 2:
            return None
        return missing * (self.last - self.first) / (self.count - 1)


class Arrivals:
    def __init__(self) -> None:
        self._gangs: dict[str, Arrival] = {}
        self._pruned = float("-inf")

    def member_arrived(self, gang: str, now: float) -> None:
        entry = self._gangs.get(gang)
        if entry is None:
            self._gangs[gang] = Arrival(now, now)
        else:
            entry.last = now
            entry.count += 1

    def get(self, gang: str) -> Arrival | None:
        """The gang's arrivals, or None when none is recent or it gave up waiting once
        (a gang created slower than the wait allows is not waited for again)."""
        entry = self._gangs.get(gang)
        return None if entry is None or entry.gave_up else entry

    def recent(self, now: float, within: float) -> list[str]:
        """The gangs a member of which arrived in the last `within` seconds."""
        return [g for g, e in self._gangs.items() if now - e.last <= within]

    def give_up(self, gang: str) -> None:
        entry = self._gangs.get(gang)
        if entry is not None:
            entry.gave_up = True

    def drop(self, gang: str) -> None:
        self._gangs.pop(gang, None)

    def prune(self, now: float) -> None:
        if now - self._pruned < _PRUNE_EVERY_SECONDS:
            return
        self._pruned = now
        stale = [g for g, e in self._gangs.items() if now - e.last > _FORGET_AFTER_SECONDS]
        for gang in stale:
            del self._gangs[gang]

    def __len__(self) -> int:
        return len(self._gangs)

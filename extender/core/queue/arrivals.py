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

from dataclasses import dataclass, field

# Gang entries are dropped once their last member arrived this long ago: nothing waits
# on an arrival that old, and the table stays as small as the set of gangs being created.
_FORGET_AFTER_SECONDS = 30.0
_PRUNE_EVERY_SECONDS = 1.0


@dataclass(slots=True)
class Arrival:
    first: float  # when the first member still in the gang was seen (since this entry was made)
    last: float  # when the newest one was
    gave_up: bool = False  # a wait ran out before the gang was complete
    # Each member's arrival, by pod uid: a pod relabelled out of the gang, or deleted,
    # takes its own arrival with it, and one relabelled back in is one member again, not
    # two.
    times: dict[str, float] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """Members seen arriving (and still in the gang)."""
        return len(self.times)

    def seconds_to(self, missing: int) -> float | None:
        """Time the missing members need, after the newest, at the rate seen so far;
        None while only one member has been seen (no rate yet). Members seen at the
        same instant make it 0."""
        if self.count < 2:
            return None
        return missing * (self.last - self.first) / (self.count - 1)

    def add(self, uid: str, when: float) -> None:
        self.remove(uid)  # arriving again (relabelled out and back): its newest arrival
        if self.times:
            self.first, self.last = min(self.first, when), max(self.last, when)
        else:
            self.first = self.last = when
        self.times[uid] = when

    def remove(self, uid: str) -> float | None:
        """Forgets `uid`'s arrival; returns when it was, None if it had none here."""
        when = self.times.pop(uid, None)
        if when is not None and self.times and when in (self.first, self.last):
            # The oldest or the newest left (a relabel: rare): one walk of the rest.
            self.first, self.last = min(self.times.values()), max(self.times.values())
        return when


class Arrivals:
    def __init__(self) -> None:
        self._gangs: dict[str, Arrival] = {}
        self._pruned = float("-inf")

    def member_arrived(self, gang: str, uid: str, now: float) -> None:
        """The pod `uid` became a pending member of `gang` at `now`: created in it,
        its scheduling gates lifted, or labelled into it (`WatchInput.on_pod`); or, for
        a pod a JobSet's split moves, when it arrived in the gang it leaves."""
        entry = self._gangs.get(gang)
        if entry is None:
            self._gangs[gang] = entry = Arrival(now, now)
        entry.add(uid, now)

    def member_left(self, gang: str, uid: str) -> float | None:
        """The pod `uid` is no longer a member of `gang` (relabelled out, moved by its
        JobSet's split, or deleted): its arrival no longer says the gang is being
        created, nor counts toward its rate. Returns when it had arrived, None if it was
        not seen arriving. A gang none of whose arrivals is left is not arriving (unless a wait
        gave up on it: it is still not waited for again)."""
        entry = self._gangs.get(gang)
        when = entry.remove(uid) if entry is not None else None
        if entry is not None and not entry.times and not entry.gave_up:
            del self._gangs[gang]
        return when

    def get(self, gang: str) -> Arrival | None:
        """The gang's arrivals, or None when none is recent or it gave up waiting once
        (a gang created slower than the wait allows is not waited for again)."""
        entry = self._gangs.get(gang)
        return None if entry is None or entry.gave_up or not entry.times else entry

    def recent(self, now: float, within: float) -> list[str]:
        """The gangs a member of which arrived in the last `within` seconds."""
        return [g for g, e in self._gangs.items() if e.times and now - e.last <= within]

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

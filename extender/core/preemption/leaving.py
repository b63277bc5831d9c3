"""Victims on their way out: the evictions a preemption asked for, and what the
Eviction API answered.

The adapter tries each eviction once and reports at once
(`GangManager.eviction_answered`); the decisions are made here:

* a **refusal** (a PodDisruptionBudget that moved since the victims were chosen, or any
  other error) of a unit none of whose pods was evicted yet gives the unit up: it stops
  leaving, is not picked again for `REFUSED_SECONDS` (or until a budget changes), and
  its preemptor's held capacity is released, so that the next pass chooses other
  victims or the preemptor waits, and says so;
* a refusal in a gang of which another member *was* evicted cannot be undone: a gang
  missing a member is broken anyway, so the rest is evicted too, retried with a
  backoff (1 s doubling to 30 s) until it is let go. The gang is never left half
  evicted for longer than the budget keeps it so, and its controller places it again
  whole.

A composite victim (every child of a CompositePodGroup, `victims.COMPOSITE_UNIT`) leaves
as one gang does: a refusal after any of its pods went has the rest of all its children
evicted, and each of its children is leaving (`gang_leaving`, `preempted`) until the
last of them is gone.

A gang disrupted whole after it lost a member (`core/preemption/disruption.py`) leaves too: its
evicted members are on their way out (`disrupted`), and, as for a preempted gang, none
of its pods is placed until they are gone, or the new attempt would start beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from extender.core.model.vocabulary import GANG, EvictPods
from extender.core.outbox import Outbox
from extender.core.parked import ref
from extender.core.preemption.victims import COMPOSITE_UNIT, Unit

_WHOLE = (GANG, COMPOSITE_UNIT)  # units broken by a member gone: the rest must go too

REFUSED_SECONDS = 30.0
_RETRY_FIRST, _RETRY_MAX = 1.0, 30.0


@dataclass(slots=True)
class _Leaving:
    unit: Unit
    preemptor: str
    reason: str
    evicted: set[str] = field(default_factory=set)  # uids the API let go
    refused: set[str] = field(default_factory=set)  # uids it refused (the rest, retried)


class Leaving(Mapping[str, str]):
    """Pod uid -> the key of the unit it leaves with (a Mapping, for `candidates`)."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._units: dict[str, _Leaving] = {}
        self._pods: dict[str, str] = {}
        self._refused: dict[str, tuple[float, int]] = {}  # unit -> (until, budgets epoch)
        self._retries: dict[str, tuple[float, float]] = {}  # uid -> (due, delay)
        # Gangs disrupted whole -> uids of their evicted members not gone yet.
        self._disrupting: dict[str, set[str]] = {}
        # A child of a composite leaving whole -> the composite's key (its unit's).
        self._child_of: dict[str, str] = {}

    def __getitem__(self, uid: str) -> str:
        return self._pods[uid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def __len__(self) -> int:
        return len(self._pods)

    def evict(self, unit: Unit, preemptor: str, reason: str) -> None:
        self._units[unit.key] = _Leaving(unit, preemptor, reason)
        for child in unit.children:
            self._child_of[child] = unit.key
        for p in unit.pods:
            self._pods[p.uid] = unit.key
        self._outbox.append(EvictPods(unit.key, tuple(ref(p) for p in unit.pods), reason,
                                      preemptor))

    def gang_leaving(self, gang: str | None) -> bool:
        """Whether `gang` is being evicted whole: none of its members may be bound now
        (an extra bound after the victims were chosen would be left running alone)."""
        if gang is not None and gang in self._disrupting:
            return True
        gang = self._child_of.get(gang, gang) if gang is not None else None
        return gang is not None and gang in self._units and (
            gang in self._pods.values() or gang not in self._refused)

    def preempted(self, gang: str) -> bool:
        """Whether `gang` is a preemption's victim on its way out (not a disruption; not
        one whose eviction was refused before any of it went)."""
        gang = self._child_of.get(gang, gang)
        return gang in self._units and gang in self._pods.values()

    def why(self, gang: str) -> str:
        """What a member of a leaving gang is told (`gang_leaving`)."""
        unit = self._units.get(self._child_of.get(gang, ""))
        if unit is not None:
            return (f"gang {gang} is being preempted with every group of its "
                    f"{unit.unit.name}: their members are evicted, and it is placed again "
                    f"whole later")
        if gang in self._disrupting:
            return (f"gang {gang} lost a member and is disrupted whole: its members left "
                    f"are evicted, and it is placed again whole once they are gone")
        return (f"gang {gang} is being preempted: its members are evicted, and it is "
                f"placed again whole later")

    def disrupted(self, gang: str, uids: Iterable[str]) -> None:
        """`gang` is evicted whole after it lost a member: `uids` are on their way out."""
        leaving = self._disrupting.setdefault(gang, set())
        leaving.update(uids)
        if not leaving:
            del self._disrupting[gang]

    def excluded(self, now: float, budgets_epoch: int) -> dict[str, float]:
        """Units not to pick now: refused a moment ago (and no budget changed since)."""
        for key, (until, epoch) in list(self._refused.items()):
            if until <= now or epoch != budgets_epoch:
                del self._refused[key]
                if key not in self._pods.values():
                    self._forget(key)
        return {k: v[0] for k, v in self._refused.items()}

    def preempting(self, preemptor: str) -> list[Unit]:
        return [v.unit for v in self._units.values() if v.preemptor == preemptor]

    # ----- the Eviction API's answers ---------------------------------------------------------

    def done(self, uid: str) -> None:
        leaving = self._unit_of(uid)
        if leaving is None:
            return
        leaving.evicted.add(uid)
        self._retries.pop(uid, None)
        if leaving.unit.kind in _WHOLE and leaving.refused:
            # A member was refused before this one went: the gang is broken now.
            self._refused.pop(leaving.unit.key, None)
            for other in leaving.refused - leaving.evicted:
                self._pods[other] = leaving.unit.key
                self._retries.setdefault(other, (0.0, _RETRY_FIRST))

    def refused(self, uid: str, now: float, budgets_epoch: int) -> _Leaving | None:
        """The eviction of `uid` was refused. Returns the unit if it is given up (none
        of its pods went), so that its preemptor's hold is released."""
        leaving = self._unit_of(uid)
        if leaving is None:
            return None
        leaving.refused.add(uid)
        if leaving.unit.kind in _WHOLE and leaving.evicted:
            delay = min(self._retries.get(uid, (0.0, _RETRY_FIRST / 2))[1] * 2, _RETRY_MAX)
            self._retries[uid] = (now + delay, delay)
            return None
        self._refused[leaving.unit.key] = (now + REFUSED_SECONDS, budgets_epoch)
        for p in leaving.unit.pods:
            if p.uid not in leaving.evicted:
                self._pods.pop(p.uid, None)
        return leaving

    def gone(self, uid: str) -> None:
        """The pod was deleted: it left."""
        key = self._pods.pop(uid, None)
        self._retries.pop(uid, None)
        for gang, leaving in list(self._disrupting.items()):
            leaving.discard(uid)
            if not leaving:
                del self._disrupting[gang]
        if key is not None and not any(k == key for k in self._pods.values()):
            self._forget(key)

    def _forget(self, key: str) -> None:
        """The unit `key` is no longer leaving: nor are its children."""
        leaving = self._units.pop(key, None)
        if leaving is not None:
            for child in leaving.unit.children:
                if self._child_of.get(child) == key:
                    del self._child_of[child]

    def retry(self, now: float) -> None:
        """Evict again, once due, the rest of gangs broken by a refusal."""
        for uid, (due, delay) in list(self._retries.items()):
            if due > now:
                continue
            self._retries[uid] = (float("inf"), delay)  # until the answer comes
            leaving = self._unit_of(uid)
            if leaving is None:
                del self._retries[uid]
                continue
            pod = next(p for p in leaving.unit.pods if p.uid == uid)
            self._outbox.append(EvictPods(
                leaving.unit.key, (ref(pod),),
                f"{leaving.reason}; the rest of the gang, after a member was evicted",
                leaving.preemptor))

    def _unit_of(self, uid: str) -> _Leaving | None:
        key = self._pods.get(uid)
        if key is None:
            for leaving in self._units.values():
                if any(p.uid == uid for p in leaving.unit.pods):
                    return leaving
            return None
        return self._units.get(key)

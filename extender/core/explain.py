"""Why a gang waits: the core's latest word on each gang, as users read it.

Every change is pushed to the adapters as a `StatusChanged` action, so the status writer
and the metrics never poll the core. Messages name the gang, the members and the number
that did not fit (architecture.md §5).

Words only: this module neither plans nor asks. The queue pass, which judged the gang,
finds out what it needs to know (would it fit without other gangs' reservations? did it
ask the autoscaler?) and hands it in (`shortfall_words`), so that a gang's reason is
decided where the gang is judged and no part calls back into another through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.core.model.vocabulary import Decision, Reason, StatusChanged
from extender.core.outbox import Outbox
from extender.core.planner import Shortfall, awaited_words


@dataclass(frozen=True, slots=True)
class Behind:
    """A gang that would fit without other gangs' reservations: the holders, the ones
    granted in this pass first, and whether the first is older in gang order."""

    ahead: Sequence[str]
    older: bool


def shortfall_words(gang: str, shortfall: Shortfall, behind: Behind | None) -> tuple[Reason, str]:
    """Tell apart "does not fit in this cluster now" from "would fit, but capacity is
    reserved for a gang ahead of it" (`behind`), both from a PodGroup that asks for
    something malformed, and all of them from a gang that waits for a pod its members'
    affinity selects. `InsufficientCapacity` is the one a gang may replace by what it
    asked the autoscaler for (the queue pass asks)."""
    if shortfall.invalid:
        return Reason.INVALID_TOPOLOGY, f"gang {gang}: {shortfall.message}"
    if shortfall.awaits:
        # A pod yet to come is what it lacks first: no capacity, reserved or added by
        # an autoscaler, places it before that pod runs, so none is asked for.
        then = "" if shortfall.fits_otherwise else f"; even then: {shortfall.message}"
        return Reason.WAITING_FOR_POD_AFFINITY, (
            f"gang {gang}: waits for a pod: {awaited_words(shortfall.awaits)}; "
            f"planned again when one appears{then}")
    if behind is not None:
        ahead = behind.ahead
        return Reason.WAITING_BEHIND_OLDER_GANG, (
            f"gang {gang}: waiting behind {'older ' if behind.older else ''}gang {ahead[0]}"
            + (f" (+{len(ahead) - 1} more)" if len(ahead) > 1 else "")
            + ("" if behind.older else " which reserved the capacity first")
            + f"; {shortfall.message}")
    return Reason.INSUFFICIENT_CAPACITY, f"gang {gang}: {shortfall.message}"


# What a gang says that stays true once none of its pods is ours (`members_left`): its
# backoff, which its next pods wait out (`Failed` at the retry limit keeps the group
# Failed), as one carried over in a group's status is said for a group read anew
# (`Timeouts.restored`); and why its pods went, evicted for a higher priority.
_OUTLIVES_PODS = frozenset({Reason.BACKING_OFF, Reason.FAILED, Reason.PREEMPTED})


class Explanations:
    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._status: dict[str, Decision] = {}
        # reason -> gangs: kept as statuses change, so that the gauges a scrape reads
        # cost the number of reasons, not of every gang ever explained.
        self._reasons: dict[str, int] = {}

    def get(self, gang: str) -> Decision | None:
        return self._status.get(gang)

    def message(self, gang: str) -> str:
        st = self._status.get(gang)
        return st.message if st else f"gang {gang}: waiting to be planned"

    def set(self, gang: str, reason: Reason, message: str, now: float) -> None:
        cur = self._status.get(gang)
        if cur is None or cur.reason != reason or cur.message != message:
            self._publish(gang, Decision(reason, message, now, reason == Reason.FAILED))

    def retry_limit_lifted(self, gang: str) -> None:
        """The group started over (recreated, re-specified, or bound): whatever it says
        now, it is no longer Failed for good."""
        cur = self._status.get(gang)
        if cur is not None and cur.retry_limit_reached:
            self._publish(gang, Decision(cur.reason, cur.message, cur.since, False))

    def members_left(self, gang: str) -> None:
        """No pod of ours is left in the gang (all deleted, or replaced by pods naming
        another scheduler): it says what a PodGroup created without pods says, nothing
        of ours (the status writer counts its members: "0 of N members exist"). Its
        last word was about pods and capacity that are gone ("CapacityHeld ... 4
        slot(s) held" with nothing held, `Unplaceable` counted in the gauge for a gang
        with nothing to place), and stayed until a pass judged the gang again, which
        only its next pods bring; those pods' status showed it meanwhile. A word that
        outlives the pods stays (`_OUTLIVES_PODS`)."""
        cur = self._status.get(gang)
        if cur is not None and cur.reason not in _OUTLIVES_PODS:
            self.drop(gang)

    def drop(self, gang: str) -> None:
        old = self._status.pop(gang, None)
        if old is not None:
            self._count(old.reason, -1)
            self._outbox.append(StatusChanged(gang, None))

    def _publish(self, gang: str, status: Decision) -> None:
        old = self._status.get(gang)
        if old is not None:
            self._count(old.reason, -1)
        self._count(status.reason, 1)
        self._status[gang] = status
        self._outbox.append(StatusChanged(gang, status))

    def _count(self, reason: str, delta: int) -> None:
        n = self._reasons.get(reason, 0) + delta
        if n:
            self._reasons[reason] = n
        else:
            self._reasons.pop(reason, None)

    def reasons(self) -> dict[str, int]:
        return dict(self._reasons)

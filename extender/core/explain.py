"""Why a gang waits: the core's latest word on each gang, as users read it.

Every change is pushed to the adapters as a `StatusChanged` action, so the status writer
and the metrics never poll the core. Messages name the gang, the members and the number
that did not fit (architecture.md §5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from extender.core.cache import Cache
from extender.core.ledger import Ledger
from extender.core.model.order import queue_sort_key
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import Decision, Reason, StatusChanged
from extender.core.outbox import Outbox
from extender.core.planner import Plan, Shortfall, awaited_words, plan_group


class CapacityAsker(Protocol):
    """`core/provisioning.Provisioning`, told of each gang short of capacity."""

    def waiting(self, group: GroupInfo, members: list[PodInfo], shortfall: str,
                now: float, unplaceable: bool = False) -> str | None: ...


class Explanations:
    def __init__(self, cache: Cache, ledger: Ledger, outbox: Outbox) -> None:
        self._cache = cache
        self._ledger = ledger
        self._outbox = outbox
        # Set by `Core.wire` (it is built from these explanations): what a gang short of
        # capacity waits for instead, if it asked the autoscaler for capacity.
        self.asker: CapacityAsker | None = None
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

    def unplaceable(self, group: GroupInfo, members: Sequence[PodInfo], message: str,
                    now: float, ask: bool = True) -> None:
        """Set aside (`queue/unplaceable.py`): unless more nodes of the shapes the cluster
        has would place it and it asked the autoscaler for them. `ask=False`: nodes alone
        would not (a member waits for a pod its affinity selects), so it asks for none."""
        if not ask:
            self.set(group.key, Reason.UNPLACEABLE, message, now)
            return
        self._unless_asked(group, members, Reason.UNPLACEABLE, message, now, unplaceable=True)

    def shortfall(
        self,
        group: GroupInfo,
        members: Sequence[PodInfo],
        shortfall: Shortfall,
        granted_now: list[str],
        now: float,
    ) -> None:
        """Tell apart "does not fit in this cluster now" from "would fit, but capacity is
        reserved for a gang ahead of it" (architecture.md §5), both from a PodGroup that
        asks for something malformed, and all of them from a gang that waits for a pod its
        members' affinity selects."""
        if shortfall.invalid:
            self.set(group.key, Reason.INVALID_TOPOLOGY, f"gang {group.key}: {shortfall.message}",
                     now)
            return
        if shortfall.awaits:
            # A pod yet to come is what it lacks first: no capacity, reserved or added by
            # an autoscaler, places it before that pod runs, so none is asked for.
            then = ("" if shortfall.fits_otherwise else
                    f"; even then: {shortfall.message}")
            self.set(group.key, Reason.WAITING_FOR_POD_AFFINITY,
                     f"gang {group.key}: waits for a pod: {awaited_words(shortfall.awaits)}; "
                     f"planned again when one appears{then}", now)
            return
        holders = [k for k in self._ledger.gangs() if k != group.key]
        if holders:
            without = plan_group(group, members, self._cache.succeeded(group),
                                 self._ledger.without_reservations(), explain=False)
            if isinstance(without, Plan):
                ahead = sorted(holders, key=lambda k: (k not in granted_now, k))
                # "older" only when the holder really is ahead in gang order; a younger
                # gang may hold capacity it got while this one was incomplete.
                mine = queue_sort_key(group, list(members))
                holder = self._cache.groups.get(ahead[0])
                older = holder is not None and queue_sort_key(
                    holder, self._cache.members(holder)) < mine
                msg = (
                    f"gang {group.key}: waiting behind {'older ' if older else ''}gang "
                    f"{ahead[0]}"
                    + (f" (+{len(ahead) - 1} more)" if len(ahead) > 1 else "")
                    + ("" if older else " which reserved the capacity first")
                    + f"; {shortfall.message}"
                )
                self.set(group.key, Reason.WAITING_BEHIND_OLDER_GANG, msg, now)
                return
        self._unless_asked(group, members, Reason.INSUFFICIENT_CAPACITY,
                           f"gang {group.key}: {shortfall.message}", now)

    def _unless_asked(self, group: GroupInfo, members: Sequence[PodInfo], reason: Reason,
                      message: str, now: float, unplaceable: bool = False) -> None:
        """`reason` and `message`, unless the gang asks the autoscaler for what it
        lacks: then what it waits for (`CapacityAsker.waiting`) is its status."""
        waits = (self.asker.waiting(group, list(members), message, now, unplaceable)
                 if self.asker is not None else None)
        if waits is not None:
            self.set(group.key, Reason.WAITING_FOR_PROVISIONING, waits, now)
        else:
            self.set(group.key, reason, message, now)

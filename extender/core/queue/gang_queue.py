"""The gang queue's pass: grant reservations, in gang order, to every waiting gang that
fits now (architecture.md §3.5).

An older gang that does not fit does not block a younger one that does (no head-of-line
blocking), but it is planned first, so the younger one can only take capacity the older
cannot use. A pass is skipped when nothing it depends on moved since the last one.
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.config import Config
from extender.core.explain import Explanations
from extender.core.outbox import Outbox
from extender.core.parked import Parked
from extender.core.permit import Permit
from extender.core.planner import GangPlanner, Plan
from extender.core.queue.backoff import Backoffs
from extender.core.queue.order import queue_sort_key
from extender.core.reservations import Reservations
from extender.core.types import GroupInfo, PodInfo
from extender.core.vocabulary import GangReserved, GroupRef, QueueRow, Reason, WakePods

_FailureSignature = tuple[int, int, int, int]


class GangQueue:
    def __init__(
        self,
        config: Config,
        cache: Cache,
        reservations: Reservations,
        permit: Permit,
        backoffs: Backoffs,
        explanations: Explanations,
        parked: Parked,
        outbox: Outbox,
        planner: GangPlanner,
    ) -> None:
        self._config = config
        self._cache = cache
        self._reservations = reservations
        self._permit = permit
        self._backoffs = backoffs
        self._explanations = explanations
        self._parked = parked
        self._outbox = outbox
        self._plan = planner
        # gang -> (what its last failed plan depended on, then): unchanged, planning it
        # again would fail the same way.
        self._last_failure: dict[str, _FailureSignature] = {}
        self._quorum_since: dict[str, float] = {}
        # Gangs whose parked members were woken when the gang became complete but could
        # not be placed: kube-scheduler does not reliably retry a member it parked with
        # "2 of 3 members exist" when the last one appears, so it would keep that stale
        # reason (and wait up to 5 minutes). Once per completion.
        self._told_complete: set[str] = set()
        self._members_version = 0
        self._passed_at: tuple[int, int] | None = None

    # ----- told by the gang manager ------------------------------------------------------

    def members_changed(self) -> None:
        self._members_version += 1

    def quorum_present(self, gang: str, now: float) -> None:
        self._quorum_since.setdefault(gang, now)

    def quorum_seconds(self, gang: str, now: float) -> float | None:
        """Time from the quorum being present to now, once; None if never seen."""
        since = self._quorum_since.pop(gang, None)
        return None if since is None else max(0.0, now - since)

    def start_over(self, gang: str) -> None:
        """The gang was bound or timed out: its next attempt starts from nothing."""
        self._last_failure.pop(gang, None)
        self._told_complete.discard(gang)

    def forget(self, gang: str) -> None:
        self.start_over(gang)
        self._quorum_since.pop(gang, None)

    # ----- the pass ------------------------------------------------------------------------

    def run(self, now: float, scheduling: str | None = None) -> None:
        """`scheduling`: the member whose filter call runs this pass; it is in
        kube-scheduler's scheduling cycle, so it needs no wake-up."""
        version = (self._cache.capacity_epoch, self._members_version)
        if version == self._passed_at and not self._backoffs.any_ended(now):
            return
        self._reservations.new_pass()
        # 1. The gangs that wait: complete, not reserved, not bound, not backing off.
        waiting: list[tuple[tuple[int, float, str], GroupInfo, list[PodInfo]]] = []
        for key, group in self._cache.groups.items():
            if key in self._reservations or self._backoffs.blocks(key, now):
                continue
            self._backoffs.clear_ended(key, now)
            members, bound, present = self._cache.counts(group)
            if bound >= group.min_member:
                continue
            if present < group.min_member:
                self._told_complete.discard(key)
                if members:
                    self._explanations.set(
                        key, Reason.WAITING_FOR_MEMBERS,
                        f"gang {key}: {present} of {group.min_member} members exist", now)
                continue
            waiting.append((queue_sort_key(group, members), group, members))
        # 2. In gang order.
        waiting.sort(key=lambda w: w[0])
        granted: list[str] = []
        for _, group, members in waiting:
            key = group.key
            self._quorum_since.setdefault(key, now)
            # 3. Unchanged since its last failed plan: it would fail the same way.
            if self._last_failure.get(key) == self._failure_signature(group):
                continue
            # 4. Plan the whole gang; reserve, or say why not.
            result = self._plan(group, members, self._cache.succeeded(group),
                                self._cache.snapshot)
            if isinstance(result, Plan):
                self._reserve(group, result, now, scheduling)
                granted.append(key)
                continue
            self._explanations.shortfall(group, members, result, granted, now)
            self._last_failure[key] = self._failure_signature(group)
            # 5. Complete but not placeable: wake its parked members once.
            if key not in self._told_complete:
                self._told_complete.add(key)
                parked = self._parked.members(members, self._permit.waiting, scheduling)
                st = self._explanations.get(key)
                if parked and st is not None:
                    self._outbox.append(WakePods(f"gang {key} complete: {st.reason}",
                                                 parked, key))
        self._reservations.new_pass()
        self._passed_at = (self._cache.capacity_epoch, self._members_version)

    def _failure_signature(self, group: GroupInfo) -> _FailureSignature:
        """What a failed plan depends on. "Waiting behind older gang X" also depends on
        which capacity is reserved, so it is re-checked whenever a slot is released."""
        st = self._explanations.get(group.key)
        behind = st is not None and st.reason == Reason.WAITING_BEHIND_OLDER_GANG
        return (
            self._cache.capacity_epoch,
            self._cache.members_epoch.get(group.key, 0),
            group.min_member,
            self._cache.unreserve_epoch if behind else -1,
        )

    def _reserve(self, group: GroupInfo, plan: Plan, now: float, scheduling: str | None) -> None:
        timeout = group.schedule_timeout_seconds or self._config.default_timeout_seconds
        res = self._reservations.reserve(group, plan, now, timeout)
        self._last_failure.pop(group.key, None)
        nodes = {s.node for s in res.slots.values()}
        where = f" in {plan.domain.describe()}" if plan.domain is not None else ""
        msg = (
            f"gang {group.key}: reserved {len(res.slots)} slot(s) on {len(nodes)} node(s)"
            f"{where} for {timeout:g}s"
        )
        self._explanations.set(group.key, Reason.RESERVED, msg, now)
        self._outbox.append(GangReserved(GroupRef(group.namespace, group.name, group.uid), msg,
                                         res.slot_views(), res.created, res.deadline))
        parked = self._parked.members(self._cache.members(group), self._permit.waiting,
                                      scheduling)
        if parked:
            self._outbox.append(WakePods(f"gang {group.key} reserved", parked, group.key))

    # ----- view ------------------------------------------------------------------------------

    def rows(self) -> list[QueueRow]:
        """Gangs not yet bound, in the order capacity is granted."""
        rows = []
        for key, group in self._cache.groups.items():
            members, bound, present = self._cache.counts(group)
            if bound >= group.min_member or not members:
                continue  # running or finished, or no pods yet
            rows.append((queue_sort_key(group, members),
                         QueueRow(key, group.min_member, present, bound,
                                  self._explanations.get(key))))
        rows.sort(key=lambda r: r[0])
        return [r[1] for r in rows]

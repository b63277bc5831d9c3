"""The commit: the moment a gang's quorum is assembled at the permit barrier and every
waiting member is let through to be bound, all together.

Before it lets anyone through it checks every waiting member's node against everything
bound there since the plan, by anyone (architecture.md §8): a member whose node no
longer takes it is moved (its bind is rejected and kube-scheduler retries it onto the
new slot), the others keep waiting, and the gang commits only when the whole quorum
fits. Never a partial set.
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.permit import Permit
from extender.core.repair import Repair
from extender.core.reservations import Reservations
from extender.core.types import GroupInfo


class Commit:
    def __init__(
        self, cache: Cache, reservations: Reservations, permit: Permit, repair: Repair
    ) -> None:
        self._cache = cache
        self._reservations = reservations
        self._permit = permit
        self._repair = repair

    def maybe(self, group: GroupInfo, now: float) -> None:
        res = self._reservations.get(group.key)
        if res is None or self._permit.assembled(group) < group.min_member:
            return
        waiting = [(u, n) for u, n in self._permit.waiting.items() if u in res.slots]
        for uid, node in waiting:
            pod = self._cache.pods.get(uid)
            if pod is not None and self._repair.lost(node, pod) is not None:
                self._repair.node(node)
        if self._permit.assembled(group) < group.min_member:
            return  # a member fell out: the rest keep waiting for it
        through = self._permit.let_through(group.key, res.slots)
        if through:
            res.committed.update(through)
            if res.committed_at is None:
                # The grace runs from the gang's commit: a member retried and let through
                # again later must not push the partial-gang check back each time.
                res.committed_at = now

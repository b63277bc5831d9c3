"""The commit: the moment a gang's quorum is assembled and its reserved members get their
Bindings, all at once (architecture.md §7, §11), and `Ledger`, the package's door, which
makes it and holds the parts it reads.

The commit is where the two machines of the package docstring meet: it reads the
reservations (`_reservations.py`: which member holds which slot, moving one off a node
that no longer takes it) and lets the bind requests (`_binds.py`) through, turning the
members waiting at the barrier, and with the direct commit the reserved members with
nothing for kube-scheduler's plugins to do, into Bindings in flight.

"Never a partial bind": a gang member's Binding is created only by the commit (or, once
the quorum is bound, one by one like a plain pod, `Binds.bind_now`).
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.ledger import _repair
from extender.core.ledger._binds import Binds
from extender.core.ledger._reservations import Reservation, Reservations
from extender.core.ledger._staleness import Staleness
from extender.core.model.types import GroupInfo
from extender.core.model.vocabulary import BindPod
from extender.core.outbox import Outbox
from extender.core.parked import Parked, ref


class Ledger:
    """The door of the reservation ledger: the filter, bind, the queue pass, timeouts
    and the manager hold it (preemption and provisioning, which read only the
    reservations, are given that part alone), and reach the part that owns what they ask:

        reservations                       capacity held for gangs (`Reservations`)
        binds                              bind requests: waiting and in flight (`Binds`)
        staleness                          whether a node's free capacity can be trusted
        commit(group, now)                 the quorum is ready: all its members bound
    """

    def __init__(self, cache: Cache, parked: Parked, outbox: Outbox,
                 direct_commit: bool = False) -> None:
        self._cache = cache
        self._direct_commit = direct_commit
        self._parked = parked
        self._outbox = outbox
        # What the commit, the filter and bind ask before trusting a node's free capacity.
        self.staleness = Staleness()
        self.binds = Binds(cache, parked, outbox, self.staleness)
        self.reservations = Reservations(cache, self.binds, parked, outbox)

    # ----- the commit ------------------------------------------------------------------

    def _direct(self, res: Reservation) -> list[str]:
        """Members the commit binds without a bind request (architecture.md §7): a slot
        of an unheld reservation, no bind in progress, and nothing kube-scheduler's own
        plugins must do for it (`PodInfo.binds_via_scheduler`). Any other member comes
        through kube-scheduler's cycle and waits at the barrier."""
        if res.held is not None or not self._direct_commit:
            return []
        pods, waiting, in_flight = self._cache.pods, self.binds.waiting, self.binds.in_flight
        return [
            uid for uid in res.slots
            if uid not in waiting and uid not in in_flight
            and (pod := pods.get(uid)) is not None and not pod.binds_via_scheduler
            and not pod.node_name and not pod.deleting and not pod.terminal
        ]

    def _into_samples(self, res: Reservation) -> None:
        """Put each member whose filter call is in progress on a node that call passed,
        if one takes it (`Staleness.sample` says why)."""
        for uid, names in self.staleness.samples():
            slot = res.slots.get(uid)
            if (slot is not None and uid not in self.binds.waiting
                    and uid not in self.binds.in_flight and slot.node not in set(names)):
                self.reservations.move(res, self._cache.pods.get(uid) or slot.pod, names)

    def commit(self, group: GroupInfo, now: float) -> None:
        """The moment a gang's quorum is ready and its members are bound, all together:
        the members waiting at the barrier and those the extender binds directly
        (`_direct`), which need no scheduling cycle of their own; so a planned gang with
        no volume or claim to bind commits as soon as it is reserved. First every such
        member's node is checked against everything bound there since the plan, by
        anyone (architecture.md §11): a member whose node no longer takes it is moved (a
        waiting bind is rejected, kube-scheduler retries it onto the new slot), and the
        gang commits only when the whole quorum still fits. Never a partial set. Nor
        while a watch is broken (`Staleness.behind`): the check would read a cache
        behind the API. A child of a CompositePodGroup commits with every reserved
        sibling, when each of them is ready, or not at all (`_siblings`)."""
        if group.key not in self.reservations or self.staleness.is_behind():
            return
        ready: list[tuple[GroupInfo, Reservation, list[str]]] = []
        for g in self._siblings(group):
            res = self.reservations[g.key]
            direct = self._ready(g, res)
            if direct is None:
                return
            ready.append((g, res, direct))
        for g, res, direct in ready:
            self._bind(g, res, direct, now)

    def _siblings(self, group: GroupInfo) -> list[GroupInfo]:
        """The gangs that commit together with `group`: itself, and if it is a child of
        a CompositePodGroup with a gang policy, every child of it holding a reservation,
        reserved together by the queue pass (`queue/composite_unit.py`); a child whose quorum
        is bound holds none and waits for nothing. None while those and the children
        already bound are fewer than minGroupCount (a sibling's reservation ended: its
        PodGroup deleted or recreated): the rest would start part of the composite, so
        they wait, and their reservations end at their deadline."""
        composite = self._cache.composites.get(group.parent) if group.parent else None
        if composite is None or composite.min_group_count == 0:
            return [group]
        out, bound = [], 0
        for g in self._cache.children(composite.key):
            r = self.reservations.get(g.key)
            if r is not None and r.held is None:
                out.append(g)
            elif r is None and self._cache.quorum_counts(g).bound_or_succeeded >= g.min_member:
                bound += 1
        if group not in out:
            return [group]
        return out if len(out) + bound >= composite.min_group_count else []

    def _ready(self, group: GroupInfo, res: Reservation) -> list[str] | None:
        """The members `commit` binds directly, once the gang's quorum is ready and its
        nodes still take it; None: not ready."""
        direct = self._direct(res)
        if self.binds.assembled(group) + len(direct) < group.min_member:
            return None
        if res.held is None:  # a held gang's slots stay (its hold)
            self._into_samples(res)
        ready = [(u, n) for u, n in self.binds.waiting.items() if u in res.slots]
        ready += [(u, res.slots[u].node) for u in direct]
        repaired = False
        for uid, node in ready:
            pod = self._cache.pods.get(uid)
            if pod is not None and _repair.lost(self._cache, node, pod) is not None:
                self.reservations.repair(node)
                repaired = True
        if not repaired:
            return direct  # every node still takes its member: the quorum stands as counted
        if any((s := res.slots.get(u)) is not None and s.node != n
               and _repair.lost(self._cache, s.node, s.pod) is not None for u, n in ready):
            # A member the repair moved fits its new node's free capacity, but maybe not
            # around a nomination there (`_repair.nominated_away`): the commit waits.
            return None
        direct = self._direct(res)
        if self.binds.assembled(group) + len(direct) < group.min_member:
            return None  # a member fell out: the rest keep waiting for it
        return direct

    def _bind(self, group: GroupInfo, res: Reservation, direct: list[str], now: float) -> None:
        """The commit of a ready gang (`_ready`): every member at the barrier and every
        direct one gets its Binding."""
        waiting = [(u, n) for u, n in self.binds.waiting.items() if u in res.slots]
        bound = [(u, res.slots[u].node) for u in direct]
        self.binds.let_through(waiting + bound)
        for uid, node in waiting:
            self._outbox.append(BindPod(ref(self._cache.pods[uid]), node, group.key))
        for uid, node in bound:
            self.staleness.bound_directly(self._cache.pods[uid], node, now)
            self._parked.passed(uid)
            self._outbox.append(BindPod(ref(self._cache.pods[uid]), node, group.key))
        through = [uid for uid, _ in waiting + bound]
        for uid in through:
            self.staleness.committed(uid, group.key)
        if through:
            res.committed.update(through)
            if res.committed_at is None:
                # The grace runs from the gang's commit: a member retried and let through
                # again later must not push the partial-gang check back each time.
                res.committed_at = now

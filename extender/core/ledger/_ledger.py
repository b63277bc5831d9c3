"""The ledger: the one object the filter, bind, queue and preemption ask about
reservations and bind requests. The states it keeps are drawn in the package docstring.

It keeps the permit barrier itself (bind requests waiting for their gang's quorum, and
Bindings in flight), and the book of slots (`_book.py`) as its part. Everything that
touches both lives here, so neither part calls the other: a dropped slot rejects its
member's waiting bind, a released reservation rejects every waiting bind of the gang,
the commit checks every waiting member's node and lets the quorum through, and a lost
node (`_repair.py`) moves its slots and rejects the binds that waited there.

"Never a partial bind": a gang member's Binding is created only by the commit (or, once
the quorum is bound, one by one like a plain pod, `bind_now`).
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping

from extender.core.cache import Cache
from extender.core.cache.snapshot import Snapshot
from extender.core.ledger import _repair
from extender.core.ledger._book import Book, Reservation, Slot, plain_key
from extender.core.ledger._staleness import Staleness
from extender.core.model.resources import format_resources
from extender.core.model.types import GroupInfo, PodInfo, Resources
from extender.core.model.vocabulary import (
    BindPod,
    RejectWaitingBind,
    ReservationView,
    WaitingBindView,
)
from extender.core.outbox import Outbox
from extender.core.parked import Parked, ref
from extender.core.planner import Plan


class Ledger:
    """What the filter, bind, the queue pass, timeouts, preemption and the manager ask
    and tell about capacity held for gangs and about bind requests, one line each
    (`len`, `in` and iteration go over the gangs holding a reservation):

    reservations, read:
        get(gang)                          the gang's reservation, or None
        of(pod)                            the reservation holding capacity for the pod
        values()                           every reservation
        held()                             the reservations held ahead of free capacity
        has_room(res)                      every slot's node has room for its charge
        expired(now)                       the reservations whose deadline has passed
        lowest_priority()                  the lowest priority any slot is held for
        gangs_by_node()                    node -> the gangs with a slot there
        without_reservations()             the cluster as if nothing were reserved
        new_pass()                         a queue pass begins: cached views start afresh
        slot_count()                       slots held, every reservation together
        held_idle()                        free capacity held slots keep from others
        views()                            every reservation, for reporting
    reservations, changed:
        reserve(key, owner_uid, plan, now, timeout, held)   reserve a whole plan
        promote(res, now)                  a held reservation has room: it starts now
        reserve_one(res, pod, node_names)  a slot for one member short of it
        move(res, pod, node_names)         a member's slot to another of these nodes
        retarget(res, pod, node)           a member's slot to kube-scheduler's choice
        unreserve(res, uid, failure, bound_here)   drop one slot
        release(res, why)                  the whole reservation ends, its binds rejected
        withdraw(gang, why, also)          the gang's Bindings not yet sent are not sent
        bound(gang)                        the quorum is bound: the reservation is done
    bind requests, read:
        waiting                            pod uid -> node of each bind at the barrier
        in_flight                          pod uid -> node of each Binding not answered
        node_of(uid)                       the node of the pod's bind, in flight or waiting
        in_progress()                      uids of every bind waiting or in flight
        assembled(group)                   members bound, binding or waiting
        open_slots(slots)                  slots whose member has no bind in progress
        binding_in_flight(gang)            a Binding of the gang is in flight
        bind_views()                       every bind in progress, for reporting
    bind requests, changed:
        wait(uid, node, group, now)        a member's bind waits for its gang's quorum
        reject(uid, message)               a waiting bind is answered with an error
        bind_now(pod, node)                a plain pod or an extra: no barrier
        post_due(uid, node)                may this Binding be posted now? None, or why not
        finished(uid, error, unknown_since)   a Binding POST returned
        settle(uid)                        a Binding of unknown outcome is seen decided
        unknown_before(began)              Bindings of unknown outcome a list will settle
    the commit, and lost nodes:
        commit_with(pod, group, now)       commit, if this member may complete its gang
        commit(group, now)                 the quorum is ready: all its members bound
        squeezed(name)                     a pod bound to the node: move slots if short
        repair(name)                       move every slot off the node that no longer fits
    """

    def __init__(self, cache: Cache, parked: Parked, outbox: Outbox,
                 direct_commit: bool = False) -> None:
        self._cache = cache
        self._direct_commit = direct_commit
        # What the commit, the filter and bind ask before trusting a node's free capacity.
        self.staleness = Staleness()
        self._parked = parked
        self._outbox = outbox
        self._book = Book(cache)
        self._by_gang = self._book.by_gang  # read here without a call into the book
        self._waiting: dict[str, str] = {}  # pod uid -> node: bind request held open
        self._binding: dict[str, str] = {}  # pod uid -> node: Binding POST in flight
        # Pods whose Binding is in flight and who hold no slot, charged to their node
        # from the moment the Binding is decided until its answer (kube-scheduler's
        # assumed pods): plain pods and extras (`bind_now`), and members whose slot was
        # dropped while their Binding was in flight (`unreserve`).
        self._assumed: dict[str, tuple[str, PodInfo]] = {}
        # Pod uid -> why: Bindings in flight of a gang released since they were decided
        # (deleted, recreated, timed out, preempted). Not posted (`post_due`); one
        # already sent keeps its charge until it is answered.
        self._withdrawn: dict[str, str] = {}
        # Pod uid -> (node, since when): Bindings whose every try failed so that it is
        # not known whether one of them took effect (a connection reset, a lost answer,
        # and the pod could not be read back). The pod may be bound there: its charge
        # (its slot, or its assumption) stays until the watch shows it bound or it is
        # gone, or a list of pods begun after that shows it unbound (`settle`).
        self._unknown: dict[str, tuple[str, float]] = {}

    # ----- reservations: reading ------------------------------------------------------

    def get(self, gang: str | None) -> Reservation | None:
        return self._by_gang.get(gang) if gang is not None else None

    def __getitem__(self, gang: str) -> Reservation:
        return self._by_gang[gang]

    def __contains__(self, gang: object) -> bool:
        return gang in self._by_gang

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_gang)

    def __len__(self) -> int:
        return len(self._by_gang)

    def values(self) -> Iterator[Reservation]:
        return iter(self._by_gang.values())

    def of(self, pod: PodInfo) -> Reservation | None:
        """The reservation holding capacity for `pod`: its gang's, or a plain pod's own
        (a plain pod that preempted, `plain_key`)."""
        return self._by_gang.get(pod.gang or plain_key(pod))

    def lowest_priority(self) -> int | None:
        return self._book.lowest_priority()

    def held(self) -> list[Reservation]:
        return self._book.held()

    def has_room(self, res: Reservation) -> bool:
        return self._book.has_room(res)

    def held_idle(self) -> Resources:
        return self._book.held_idle()

    def expired(self, now: float) -> list[Reservation]:
        return self._book.expired(now)

    def gangs_by_node(self) -> dict[str, list[str]]:
        return self._book.gangs_by_node()

    def without_reservations(self) -> Snapshot:
        return self._book.without_reservations()

    def new_pass(self) -> None:
        self._book.new_pass()

    def slot_count(self) -> int:
        return self._book.slot_count()

    def views(self) -> tuple[ReservationView, ...]:
        return self._book.views()

    # ----- reservations: changing ------------------------------------------------------

    def reserve(self, key: str, owner_uid: str, plan: Plan, now: float, timeout: float,
                held: str | None = None) -> Reservation:
        """Reserve `plan` for the gang `key` (a PodGroup's key and uid; or a plain
        preemptor's `plain_key` and its pod's uid). `held`: the plan's nodes are not free
        yet (see `Reservation.held`)."""
        return self._book.reserve_key(key, owner_uid, plan, now, timeout, held)

    def promote(self, res: Reservation, now: float) -> None:
        self._book.promote(res, now)

    def reserve_one(self, res: Reservation, pod: PodInfo, node_names: list[str]) -> Slot | None:
        return self._book.reserve_one(res, pod, node_names)

    def move(self, res: Reservation, pod: PodInfo, node_names: list[str]) -> str | None:
        """Move a member's slot to another of `node_names`; slots of members whose bind
        is in progress are never swapped."""
        return self._book.move(res, pod, node_names, self._waiting.keys() | self._binding)

    def retarget(self, res: Reservation, pod: PodInfo, node: str) -> bool:
        return self._book.retarget(res, pod, node)

    def unreserve(
        self, res: Reservation, uid: str, failure: str | None, bound_here: bool = False
    ) -> None:
        """Drop one slot; with `failure`, the member's waiting bind is rejected with it.
        `bound_here`: the member is now bound to the slot's node (`Book.unreserve`).

        A slot whose Binding is in flight gives its charge to an assumption on the
        Binding's node instead of freeing it: that pod may land there whatever happens
        to its gang, so its requests stay taken until the Binding's answer
        (`finished`). Freed at once, a plain pod's bind would be let onto the same
        capacity, and both would land."""
        node = self._binding.get(uid) or self._unknown.get(uid, ("", 0.0))[0] or None
        slot = res.slots.get(uid)
        if node is None or slot is None or bound_here or uid in self._assumed:
            self._book.unreserve(res, uid, bound_here)
        else:
            # Not `freed` when the charge moves to an assumption on the same node: no
            # capacity came back, so waiting gangs need not be planned again for it.
            self._book.unreserve(res, uid, slot.node == node)
            self._assume(uid, node, slot.pod)
        if failure is not None:
            self.reject(uid, f"gang {res.gang}: {failure}")

    def release(self, res: Reservation, why: str) -> None:
        """Release the whole reservation; every waiting bind of the gang is rejected with
        "gang <key>: <why>", and plain pods turned away for it are woken."""
        self._book.pop(res.gang)
        self.withdraw(res.gang, why, res.slots)
        for uid in list(res.slots):
            self.unreserve(res, uid, why)
        for uid in list(self._waiting):
            pod = self._cache.pods.get(uid)
            if pod is not None and pod.gang == res.gang:
                self.reject(uid, f"gang {res.gang}: {why}")
        wake = self._parked.wake_plain(res.gang)
        if wake is not None:
            self._outbox.append(wake)

    def withdraw(self, gang: str, why: str, also: Container[str] = ()) -> None:
        """The Bindings in flight of `gang`'s pods (and of the pods `also` names: a
        released reservation's slots) are not to be sent: the gang they were decided for
        is released, or its PodGroup is gone or another one now, whether or not it
        still has a reservation (its quorum may have been bound by a lower minMember).
        One already sent keeps its charge until its answer."""
        for uid, node in self._binding.items():
            pod = self._cache.pods.get(uid)
            if uid in self._withdrawn or not (uid in also or (
                    pod is not None and pod.gang == gang)):
                continue
            key = pod.key if pod is not None else f"uid {uid}"
            self._withdrawn[uid] = (f"gang {gang}: {why}; the Binding of pod {key} to node "
                                    f"{node} is withdrawn")

    def bound(self, gang: str) -> Reservation | None:
        """The gang's quorum is bound: its reservation has done its job."""
        res = self._book.pop(gang)
        if res is not None:
            for uid in list(res.slots):
                self.unreserve(res, uid, "quorum is bound")
        return res

    # ----- bind requests: reading ------------------------------------------------------

    @property
    def waiting(self) -> Mapping[str, str]:
        """Pod uid -> node of every bind request waiting at the barrier."""
        return self._waiting

    @property
    def in_flight(self) -> Mapping[str, str]:
        """Pod uid -> node of every Binding decided and not yet answered."""
        return self._binding

    def node_of(self, uid: str) -> str | None:
        """The node of the pod's bind in progress: in flight, or waiting."""
        return self._binding.get(uid) or self._waiting.get(uid)

    def in_progress(self) -> set[str]:
        """Uids of every bind in progress: waiting at the barrier, or in flight."""
        return self._waiting.keys() | self._binding.keys()

    def assembled(self, group: GroupInfo) -> int:
        """Members bound (or succeeded), being bound, or waiting at the barrier."""
        count = self._cache.succeeded(group)
        for m in self._cache.members(group):
            if m.node_name or m.uid in self._binding or m.uid in self._waiting:
                count += 1
        return count

    def open_slots(self, slots: Mapping[str, object]) -> int:
        """Slots of a reservation whose member has no bind in progress yet."""
        return sum(1 for uid in slots if uid not in self._waiting and uid not in self._binding)

    def binding_in_flight(self, gang: str) -> bool:
        for uid in self._binding:
            pod = self._cache.pods.get(uid)
            if pod is not None and pod.gang == gang:
                return True
        return False

    def bind_views(self) -> list[WaitingBindView]:
        """Every bind in progress of a known pod, with its reservation's deadline while
        it waits."""
        out = []
        binds = [(u, n, False) for u, n in self._waiting.items()]
        binds += [(u, n, True) for u, n in self._binding.items()]
        for uid, node, in_flight in binds:
            pod = self._cache.pods.get(uid)
            if pod is None:
                continue
            res = None if in_flight else self.get(pod.gang)
            out.append(WaitingBindView(pod.key, uid, node, pod.gang, in_flight,
                                       res.deadline if res else None))
        return out

    # ----- bind requests: changing -----------------------------------------------------

    def wait(self, uid: str, node: str, group: GroupInfo, now: float) -> None:
        """A member's bind request waits at the barrier; it may be the one that
        completes its gang's quorum (`commit`). Waiting or let through, the member is
        not parked; rejected by the commit's check of its node, it was turned away, and
        stays so."""
        self._waiting[uid] = node
        self.commit(group, now)
        if uid in self._waiting or uid in self._binding:
            self._parked.passed(uid)

    def reject(self, uid: str, message: str | None) -> None:
        """Answer a waiting bind with an error; kube-scheduler re-queues the pod, and it
        may park it, so it is remembered for a wake-up. `message` None: the adapter
        stopped waiting for the answer already (its limit, `bind_wait_expired`), so
        nothing is sent."""
        if self._waiting.pop(uid, None) is not None:
            if message is not None:
                self._outbox.append(RejectWaitingBind(uid, message))
            self._parked.turned_away(uid)

    def bind_now(self, pod: PodInfo, node: str) -> None:
        """A plain pod or an elastic extra: no barrier. Charged at once so the next bind
        and every plan see it (architecture.md §8: placements not yet bound count)."""
        self._binding[pod.uid] = node
        self._parked.passed(pod.uid)
        self._assume(pod.uid, node, pod)
        self._outbox.append(BindPod(ref(pod), node, pod.gang))

    def _assume(self, uid: str, node: str, pod: PodInfo) -> None:
        """Charge `pod` to `node` until its Binding's answer (`finished`). A new decision
        for a pod whose earlier Binding's outcome was unknown replaces that charge: the
        pod is still unbound as far as a caught-up watch tells, which it would not be
        had that Binding landed."""
        self.settle(uid)
        self._assumed[uid] = (node, pod)
        self._cache.assume(node, pod)

    def post_due(self, uid: str, node: str) -> str | None:
        """Whether the Binding of `uid` to `node` may be posted now: None, or why not.
        Asked right before every POST of it (the first, one held for kube-scheduler's
        bind request, one queued behind a big commit, a retry after 429 or 5xx), since
        each may come well after the commit decided it: the gang may have been released
        since, the pod deleted, a watch broken, or the node taken by a pod bound there
        meanwhile (a `spec.nodeName` pod, another scheduler's). A post refused here ends
        as a failed Binding (`finished`): a member keeps its slot, or it moves off a
        node that lost its room, and is bound by the gang's next commit."""
        if self._binding.get(uid) != node:
            return f"the Binding of pod uid {uid} to node {node} is no longer wanted"
        withdrawn = self._withdrawn.get(uid)
        if withdrawn is not None:
            return withdrawn
        pod = self._cache.pods.get(uid)
        if pod is None:
            return f"pod uid {uid} was deleted; its Binding to node {node} is withdrawn"
        if pod.node_name:
            # Seen bound already (a try whose answer was lost): the POST's 409 confirms.
            return None if pod.node_name == node else (
                f"pod {pod.key} is bound to node {pod.node_name}, not {node}")
        if pod.deleting or pod.terminal:
            return f"pod {pod.key} is being deleted; its Binding to node {node} is withdrawn"
        if self.staleness.is_behind():
            return (f"a watch of the API is broken and not yet caught up, so node {node}'s "
                    f"free capacity is not known; pod {pod.key} is bound by its gang's "
                    f"next commit")
        short = (_repair.overcommitted(self._cache, node, pod)
                 or _repair.nominated_away(self._cache, node, pod))
        if short is not None:
            return f"pod {pod.key} is not bound to node {node}: {short}"
        return None

    def finished(self, uid: str, error: str | None, unknown_since: float | None = None
                 ) -> None:
        """The Binding POST for `uid` returned. A gang member's that failed keeps its
        slot and is not bound again until something asks (kube-scheduler's retry of the
        pod at the barrier, or the gang's next commit), never in a loop; it may have been
        parked, so it is remembered for a wake-up. Its slot moves if its node was found
        short (`post_due`): nothing else would move a slot whose Binding was in flight.

        `unknown_since`: it failed so that it may still have taken effect (its last try
        lost its answer and the pod could not be read back): no longer in flight, but its
        charge stays until the pod is seen (`_unknown`, `settle`)."""
        node = self._binding.pop(uid, None)
        self._withdrawn.pop(uid, None)
        if error is not None:
            self.staleness.landed(uid)
            self._parked.turned_away(uid)
        if unknown_since is not None and node is not None:
            self._unknown[uid] = (node, unknown_since)
            return
        assumed = self._assumed.pop(uid, None)
        if assumed is not None:
            self._cache.forget(assumed[0], assumed[1], freed=error is not None)
        if error is not None and node is not None:
            self.squeezed(node)

    def settle(self, uid: str) -> None:
        """The pod of a Binding whose outcome was unknown is seen: bound (the bound pod
        carries the charge now), gone, or unbound in a list begun after the outcome. Its
        assumption, if it had one, ends; a slot ends as slots do."""
        if self._unknown.pop(uid, None) is None:
            return
        assumed = self._assumed.pop(uid, None)
        if assumed is not None:
            self._cache.forget(assumed[0], assumed[1], freed=True)

    def unknown_before(self, began: float) -> list[str]:
        """Uids of the Bindings whose outcome became unknown by `began`: a list begun
        then shows whether each took effect."""
        return [uid for uid, (_, at) in self._unknown.items() if at <= began]

    # ----- the commit ------------------------------------------------------------------

    def _direct(self, res: Reservation) -> list[str]:
        """Members the commit binds without a bind request (architecture.md §7): a slot
        of an unheld reservation, no bind in progress, and nothing kube-scheduler's own
        plugins must do for it (`PodInfo.binds_via_scheduler`). Any other member comes
        through kube-scheduler's cycle and waits at the barrier."""
        if res.held is not None or not self._direct_commit:
            return []
        pods = self._cache.pods
        return [
            uid for uid in res.slots
            if uid not in self._waiting and uid not in self._binding
            and (pod := pods.get(uid)) is not None and not pod.binds_via_scheduler
            and not pod.node_name and not pod.deleting and not pod.terminal
        ]

    def _into_samples(self, res: Reservation) -> None:
        """Put each member whose filter call is in progress on a node that call passed,
        if one takes it (`Staleness.sample` says why)."""
        for uid, names in self.staleness.samples():
            slot = res.slots.get(uid)
            if (slot is not None and uid not in self._waiting and uid not in self._binding
                    and slot.node not in set(names)):
                self.move(res, self._cache.pods.get(uid) or slot.pod, names)

    def commit_with(self, pod: PodInfo, group: GroupInfo, now: float) -> None:
        """The commit, when `pod` (a member whose filter call found it a slot) may be
        the one that completes its gang directly: only a member the commit binds itself
        can be, so any other filter call costs nothing here."""
        if self._direct_commit and not pod.binds_via_scheduler:
            self.commit(group, now)

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
        if self._by_gang.get(group.key) is None or self.staleness.is_behind():
            return
        ready: list[tuple[GroupInfo, Reservation, list[str]]] = []
        for g in self._siblings(group):
            res = self._by_gang[g.key]
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
            r = self._by_gang.get(g.key)
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
        if self.assembled(group) + len(direct) < group.min_member:
            return None
        if res.held is None:  # a held gang's slots stay (its hold)
            self._into_samples(res)
        ready = [(u, n) for u, n in self._waiting.items() if u in res.slots]
        ready += [(u, res.slots[u].node) for u in direct]
        repaired = False
        for uid, node in ready:
            pod = self._cache.pods.get(uid)
            if pod is not None and _repair.lost(self._cache, node, pod) is not None:
                self.repair(node)
                repaired = True
        if not repaired:
            return direct  # every node still takes its member: the quorum stands as counted
        if any((s := res.slots.get(u)) is not None and s.node != n
               and _repair.lost(self._cache, s.node, s.pod) is not None for u, n in ready):
            # A member the repair moved fits its new node's free capacity, but maybe not
            # around a nomination there (`_repair.nominated_away`): the commit waits.
            return None
        direct = self._direct(res)
        if self.assembled(group) + len(direct) < group.min_member:
            return None  # a member fell out: the rest keep waiting for it
        return direct

    def _bind(self, group: GroupInfo, res: Reservation, direct: list[str], now: float) -> None:
        """The commit of a ready gang (`_ready`): every member at the barrier and every
        direct one gets its Binding."""
        through = [u for u in self._waiting if u in res.slots]
        for uid in through:
            node = self._waiting.pop(uid)
            self._binding[uid] = node
            self._outbox.append(BindPod(ref(self._cache.pods[uid]), node, group.key))
        for uid in direct:
            node = self._binding[uid] = res.slots[uid].node
            self.staleness.bound_directly(self._cache.pods[uid], node, now)
            self._parked.passed(uid)
            self._outbox.append(BindPod(ref(self._cache.pods[uid]), node, group.key))
        through += direct
        for uid in through:
            self.staleness.committed(uid, group.key)
        if through:
            res.committed.update(through)
            if res.committed_at is None:
                # The grace runs from the gang's commit: a member retried and let through
                # again later must not push the partial-gang check back each time.
                res.committed_at = now

    # ----- lost nodes ------------------------------------------------------------------

    def squeezed(self, name: str) -> None:
        """A pod was bound to `name` (by anyone): if that drove its free capacity below
        zero, slots there move."""
        if _repair.squeezed(self._cache, name):
            self.repair(name)

    def repair(self, name: str) -> None:
        """Move every slot off `name` that no longer fits there. Slots whose member has
        no bind waiting go first; the check is made again after each move, so no more
        slots move than the node's shortfall needs. A slot whose Binding is in flight
        stays: its pod is landing there (`_repair.slots_on`)."""
        if name not in self._cache.reserved_nodes:
            return
        for res, slot in _repair.slots_on(name, self._by_gang.values(), self._waiting,
                                          self._binding):
            if self._by_gang.get(res.gang) is not res or slot.pod.uid not in res.slots:
                continue  # released with a held reservation a moment ago
            why = _repair.lost(self._cache, name, slot.pod, held=res.held is not None)
            if why is None:
                continue
            if res.held is not None:
                self.release(
                    res, f"{why}; the capacity held for it there is given up and the gang "
                         f"is planned again")
            else:
                self._move_away(res, slot.pod, name, why)

    def _move_away(self, res: Reservation, pod: PodInfo, node: str, why: str) -> None:
        waits_here = self._waiting.get(pod.uid) == node
        moved = self._book.move_off(res, pod, node)
        if not waits_here:
            return
        if moved is not None:
            where = f"its slot moved to node {moved}"
        else:
            where = (f"no other node{res.within()} has {format_resources(pod.requests)} free, "
                     f"so the gang waits for room until its deadline")
        self.reject(
            pod.uid,
            f"gang {res.gang}: {why}; pod {pod.key} is not bound there: {where}; "
            f"kube-scheduler retries the pod",
        )

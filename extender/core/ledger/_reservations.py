"""Reservations: capacity held for gangs, one slot (node) per member, until the quorum is
bound, the deadline passes, or the reservation is released (architecture.md §2), and
what becomes of a slot whose node is lost (§11). The states are drawn in the package
docstring.

Reserve and Unreserve in kube-scheduler's sense: a slot is charged to its node in the
cache, so every other pod and gang is planned and filtered around it. A change of a
reservation tells the bind requests (`_binds.py`) what it means for them: a dropped slot
rejects its member's waiting bind, and a slot whose Binding is in flight hands its
charge to an assumption on that node; a release withdraws the gang's Bindings not yet
sent. A lost node (`_repair.py` says when) moves its slots at once and rejects the binds
that waited there. Which reserved members are bound, and when, is the commit's
(`_commit.py`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass, field

from extender.core.cache import Cache
from extender.core.cache.snapshot import FreeOverlay, Snapshot
from extender.core.cache.topology import Domain
from extender.core.ledger import _repair
from extender.core.ledger._binds import Binds
from extender.core.model.constraints import node_matches
from extender.core.model.resources import fits, format_resources
from extender.core.model.types import NodeInfo, PodInfo, Resources
from extender.core.model.vocabulary import ReservationView, SlotView
from extender.core.outbox import Outbox
from extender.core.parked import Parked, ref
from extender.core.planner import Plan, interchangeable, plan_gang


@dataclass(slots=True)
class Slot:
    node: str
    pod: PodInfo


@dataclass(slots=True)
class Reservation:
    gang: str
    group_uid: str
    created: float
    deadline: float
    slots: dict[str, Slot] = field(default_factory=dict)  # pod uid -> slot
    # Members let through the permit barrier by this reservation's commit, and when:
    # if the gang still ends below its quorum, these are the pods to evict.
    committed: set[str] = field(default_factory=set)
    committed_at: float | None = None
    # The topology domain the plan chose: a slot that moves stays inside its required
    # part, and inside the rest if it can (docs/topology.md).
    domain: Domain | None = None

    def within(self) -> str:
        """" in rack r2" when the gang's slots must stay in a domain, for messages."""
        d = self.domain
        if d is None or not d.required:
            return ""
        return f" in {Domain(d.keys[:d.required], d.values[:d.required]).describe()}"
    # Why its slots are held ahead of capacity ("starvation": the forward reservation of
    # the queue's head; "preemption": victims are leaving the nodes), None once every
    # slot's node has room. Held, it has no deadline: `timeout` starts at `promote`.
    held: str | None = None
    timeout: float = 0.0

    def slot_views(self) -> tuple[SlotView, ...]:
        return tuple(SlotView(ref(s.pod), s.node, dict(s.pod.requests))
                     for s in self.slots.values())

    def view(self) -> ReservationView:
        return ReservationView(self.gang, self.created, self.deadline, self.slot_views(),
                               self.domain.describe() if self.domain is not None else "",
                               self.held)


def plain_key(pod: PodInfo) -> str:
    """The reservation key of a plain pod's own reservation: never a PodGroup's key
    (those have no space)."""
    return f"pod {pod.key}"


class Reservations:
    """What the filter, bind, the queue pass, timeouts, preemption, the commit and the
    manager ask and tell about capacity held for gangs, one line each (`len`, `in`,
    `[gang]` and iteration go over the gangs holding a reservation):

    read:
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
    changed:
        reserve(key, owner_uid, plan, now, timeout, held)   reserve a whole plan
        promote(res, now)                  a held reservation has room: it starts now
        reserve_one(res, pod, node_names)  a slot for one member short of it
        move(res, pod, node_names)         a member's slot to another of these nodes
        retarget(res, pod, node)           a member's slot to kube-scheduler's choice
        unreserve(res, uid, failure, bound_here)   drop one slot
        release(res, why)                  the whole reservation ends, its binds rejected
        bound(gang)                        the quorum is bound: the reservation is done
    lost nodes:
        squeezed(name)                     a pod bound to the node: move slots if short
        repair(name)                       move every slot off the node that no longer fits
    """

    def __init__(self, cache: Cache, binds: Binds, parked: Parked, outbox: Outbox) -> None:
        self._cache = cache
        self._binds = binds
        self._parked = parked
        self._outbox = outbox
        self._by_gang: dict[str, Reservation] = {}  # gang -> its reservation
        self._without: Snapshot | None = None  # memo of `without_reservations`
        # priority -> slots of pods with it: whether a reservation could be preempted,
        # without walking them (`lowest_priority`).
        self._priorities: dict[int, int] = {}
        self._held: dict[str, Reservation] = {}  # the held ones, so a pass need not look

    # ----- reading ------------------------------------------------------------------------

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

    # ----- Reserve ------------------------------------------------------------------------

    def reserve(self, key: str, owner_uid: str, plan: Plan, now: float, timeout: float,
                held: str | None = None) -> Reservation:
        """Reserve `plan` for the gang `key` (a PodGroup's key and uid; or a plain
        preemptor's `plain_key` and its pod's uid). `held`: the plan's nodes are not free
        yet (see `Reservation.held`)."""
        deadline = float("inf") if held else now + timeout
        res = Reservation(key, owner_uid, created=now, deadline=deadline, held=held,
                          timeout=timeout, domain=plan.domain)
        for uid, node in plan.assignments.items():
            self._add(res, uid, node, self._cache.pods[uid])
        self._by_gang[key] = res
        if held:
            self._held[key] = res
        return res

    def _add(self, res: Reservation, uid: str, node: str, pod: PodInfo) -> Slot:
        slot = res.slots[uid] = Slot(node, pod)
        self._cache.reserve(node, pod, held=res.held is not None)
        self._without = None
        self._priorities[pod.priority] = self._priorities.get(pod.priority, 0) + 1
        return slot

    def _remove(self, res: Reservation, uid: str, freed: bool = True) -> Slot | None:
        slot = res.slots.pop(uid, None)
        if slot is not None:
            self._cache.unreserve(slot.node, slot.pod, freed=freed, held=res.held is not None)
            self._without = None
            left = self._priorities.get(slot.pod.priority, 0) - 1
            if left > 0:
                self._priorities[slot.pod.priority] = left
            else:
                self._priorities.pop(slot.pod.priority, None)
        return slot

    def lowest_priority(self) -> int | None:
        """The lowest priority of a pod any slot is held for, None without slots."""
        return min(self._priorities, default=None)

    # ----- held reservations ----------------------------------------------------------------

    def held(self) -> list[Reservation]:
        return list(self._held.values())

    def has_room(self, res: Reservation) -> bool:
        """Every slot's node has room for what is charged there: free capacity is not
        below zero on any resource the slots ask for."""
        free = self._cache.free
        for slot in res.slots.values():
            f = free.get(slot.node)
            if f is None:
                return False
            for r, q in slot.pod.requests.items():
                if q > 0 and f.get(r, 0) < 0:
                    return False
        return True

    def promote(self, res: Reservation, now: float) -> None:
        """A held reservation whose nodes have room becomes a normal one; its deadline
        starts now."""
        for slot in res.slots.values():
            self._cache.unhold(slot.node, slot.pod)
        res.held = None
        self._held.pop(res.gang, None)
        res.created = now
        res.deadline = now + res.timeout

    def held_idle(self) -> Resources:
        """Capacity already free on held slots' nodes that nothing else may use while
        the rest of the hold frees up: per node, what the holds charge there less what
        is still taken, clamped to [0, held]. The cost of holding capacity ahead."""
        out: Resources = {}
        for node, held in self._cache.held.items():
            free = self._cache.free.get(node, {})
            for r, q in held.items():
                idle = min(max(q + free.get(r, 0), 0), q)
                if idle:
                    out[r] = out.get(r, 0) + idle
        return out

    def reserve_one(self, res: Reservation, pod: PodInfo, node_names: list[str]) -> Slot | None:
        """A slot for one member among `node_names`, in what is free now (the reservation
        fell short: a member was replaced, a node vanished, or minMember grew). Inside
        the gang's domain, if it has one: a slot outside would split the gang."""
        tiers = ([node_names] if res.domain is None
                 else res.domain.narrowed(node_names, self._cache.nodes))
        for names in tiers:
            result = plan_gang([pod], 1, self._cache.snapshot, allowed={pod.uid: set(names)})
            if isinstance(result, Plan):
                return self._add(res, pod.uid, result.assignments[pod.uid], pod)
        return None

    def move(self, res: Reservation, pod: PodInfo, node_names: list[str]) -> str | None:
        """Move a member's slot to another of `node_names` (kube-scheduler excluded the
        reserved node for a reason the extender does not model, e.g. host ports).
        A member with a spread constraint first takes the slot of an interchangeable
        member that has not come to filter yet (`_swap`); the slots of members whose
        bind is in progress are never swapped."""
        if pod.spread_constraints:
            swapped = self._swap(res, pod, node_names, self._binds.in_progress())
            if swapped is not None:
                return swapped
        old = self._remove(res, pod.uid)
        assert old is not None
        slot = self.reserve_one(res, pod, node_names)
        if slot is None:
            self._add(res, pod.uid, old.node, old.pod)
            return None
        return slot.node

    def _swap(self, res: Reservation, pod: PodInfo, node_names: list[str],
              busy: Container[str]) -> str | None:
        """Exchange `pod`'s slot with one of an interchangeable member whose node is in
        `node_names` and whose bind is not in progress. kube-scheduler counts a spread
        among the members assumed so far, so it may exclude the domain of `pod`'s own
        slot now and accept it later for another member: the plan's spread stays the
        same, only who takes which slot changes (planner/relations.py has the argument)."""
        names = set(node_names)
        mine = res.slots[pod.uid]
        for uid, other in res.slots.items():
            if (uid != pod.uid and other.node in names and uid not in busy
                    and interchangeable(pod, other.pod)):
                theirs = other.node
                self._remove(res, pod.uid, freed=False)
                self._remove(res, uid, freed=False)
                self._add(res, pod.uid, theirs, pod)
                self._add(res, uid, mine.node, other.pod)
                return theirs
        return None

    def _move_off(self, res: Reservation, pod: PodInfo, node: str) -> str | None:
        """Move a member's slot off `node`, which can no longer take it, to any other node
        that fits now; None: none does, and the slot is dropped (the reservation falls
        short until a replacement slot is found or its deadline passes)."""
        self._remove(res, pod.uid)
        others = [n for n in self._cache.nodes if n != node]
        slot = self.reserve_one(res, pod, others) if others else None
        return slot.node if slot is not None else None

    def retarget(self, res: Reservation, pod: PodInfo, node: str) -> bool:
        """Move a member's slot to the node kube-scheduler chose, if it fits there."""
        old = self._remove(res, pod.uid)
        assert old is not None
        info = self._cache.nodes.get(node)
        inside = info is not None and (
            res.domain is None or res.domain.contains(info.labels, res.domain.required))
        if info is not None and inside and node_matches(pod, info) is None and fits(
            pod.requests, self._cache.free.get(node, {})
        ) and (pod.claims is None or self._devices_fit(info, pod)):
            self._add(res, pod.uid, node, pod)
            return True
        self._add(res, pod.uid, old.node, old.pod)
        return False

    def _devices_fit(self, node: NodeInfo, pod: PodInfo) -> bool:
        """Whether `pod`'s claims can have devices on `node` that no other gang's slot
        holds (kube-scheduler's DynamicResources plugin sees those as free)."""
        devices = self._cache.snapshot.devices
        return devices is None or devices.refusal(node, pod) is None

    # ----- Unreserve ----------------------------------------------------------------------

    def unreserve(
        self, res: Reservation, uid: str, failure: str | None, bound_here: bool = False
    ) -> None:
        """Drop one slot; with `failure`, the member's waiting bind is rejected with it.
        `bound_here`: the member is now bound to the slot's node, so its capacity stays
        taken and waiting gangs need not be planned again on its account.

        A slot whose Binding is in flight gives its charge to an assumption on the
        Binding's node instead of freeing it: that pod may land there whatever happens
        to its gang, so its requests stay taken until the Binding's answer
        (`Binds.finished`). Freed at once, a plain pod's bind would be let onto the same
        capacity, and both would land."""
        slot = res.slots.get(uid)
        node = None if slot is None or bound_here else self._binds.charged_node(uid)
        if slot is None or node is None:
            self._remove(res, uid, freed=not bound_here)
        else:
            # Not `freed` when the charge moves to an assumption on the same node: no
            # capacity came back, so waiting gangs need not be planned again for it.
            self._remove(res, uid, freed=slot.node != node)
            self._binds.assume(uid, node, slot.pod)
        if failure is not None:
            self._binds.reject(uid, f"gang {res.gang}: {failure}")

    def release(self, res: Reservation, why: str) -> None:
        """Release the whole reservation; every waiting bind of the gang is rejected with
        "gang <key>: <why>", its Bindings not yet sent are withdrawn, and plain pods
        turned away for it are woken."""
        self._pop(res.gang)
        self._binds.withdraw(res.gang, why, res.slots)
        for uid in list(res.slots):
            self.unreserve(res, uid, why)
        for uid in list(self._binds.waiting):
            pod = self._cache.pods.get(uid)
            if pod is not None and pod.gang == res.gang:
                self._binds.reject(uid, f"gang {res.gang}: {why}")
        wake = self._parked.wake_plain(res.gang)
        if wake is not None:
            self._outbox.append(wake)

    def bound(self, gang: str) -> Reservation | None:
        """The gang's quorum is bound: its reservation has done its job."""
        res = self._pop(gang)
        if res is not None:
            for uid in list(res.slots):
                self.unreserve(res, uid, "quorum is bound")
        return res

    def _pop(self, gang: str) -> Reservation | None:
        """Take the gang's reservation out of the book; its slots stay charged until
        each is unreserved."""
        self._held.pop(gang, None)
        return self._by_gang.pop(gang, None)

    def expired(self, now: float) -> list[Reservation]:
        return [r for r in self._by_gang.values() if r.deadline <= now]

    # ----- views of other gangs' capacity ---------------------------------------------------

    def gangs_by_node(self) -> dict[str, list[str]]:
        """Node -> gangs with a slot there, sorted, from one pass over every slot (asked
        per rejected node, it walked every slot once per node: docs/performance.md)."""
        by_node: dict[str, set[str]] = {}
        for r in self._by_gang.values():
            for s in r.slots.values():
                by_node.setdefault(s.node, set()).add(r.gang)
        return {node: sorted(gangs) for node, gangs in by_node.items()}

    def without_reservations(self) -> Snapshot:
        """The cluster as if no reservation held any capacity, to tell "does not fit"
        from "waits behind another gang". Kept while a queue pass runs (it explains
        many gangs against the same reservations) until a slot changes; every pass
        starts afresh (`new_pass`), since capacity may have moved in between."""
        if self._without is None:
            free = self._cache.free
            over: dict[str, Resources] = {}
            for r in self._by_gang.values():
                for s in r.slots.values():
                    base = over.get(s.node)
                    if base is None:
                        base = over[s.node] = dict(free.get(s.node, {}))
                    for k, v in s.pod.requests.items():
                        base[k] = base.get(k, 0) + v
            self._without = self._cache.snapshot.with_free(FreeOverlay(free, over))
        return self._without

    def new_pass(self) -> None:
        self._without = None

    def slot_count(self) -> int:
        return sum(len(r.slots) for r in self._by_gang.values())

    def views(self) -> tuple[ReservationView, ...]:
        return tuple(r.view() for r in self._by_gang.values())

    # ----- lost nodes ---------------------------------------------------------------------

    def squeezed(self, name: str) -> None:
        """A pod was bound to `name` (by anyone): if that drove its free capacity below
        zero, slots there move."""
        if _repair.squeezed(self._cache, name):
            self.repair(name)

    def repair(self, name: str) -> None:
        """Move every slot off `name` that no longer fits there. Slots whose member has
        no bind waiting go first; the check is made again after each move, so no more
        slots move than the node's shortfall needs. A slot whose Binding is in flight
        stays: its pod is landing there (`slots_on`)."""
        if name not in self._cache.reserved_nodes:
            return
        binds = self._binds
        for res, slot in slots_on(name, self._by_gang.values(), binds.waiting,
                                  binds.in_flight):
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
        waits_here = self._binds.waiting.get(pod.uid) == node
        moved = self._move_off(res, pod, node)
        if not waits_here:
            return
        if moved is not None:
            where = f"its slot moved to node {moved}"
        else:
            where = (f"no other node{res.within()} has {format_resources(pod.requests)} free, "
                     f"so the gang waits for room until its deadline")
        self._binds.reject(
            pod.uid,
            f"gang {res.gang}: {why}; pod {pod.key} is not bound there: {where}; "
            f"kube-scheduler retries the pod",
        )


def slots_on(name: str, reservations: Iterable[Reservation], waiting: Container[str],
             in_flight: Container[str]) -> list[tuple[Reservation, Slot]]:
    """The slots on `name` that can give way, in the order they do: those whose member
    has no bind waiting first (moving them rejects nothing), then the youngest
    reservation's. A slot whose member's Binding is `in_flight` cannot: that pod lands
    on `name` whatever the book says, so moving its slot would only hide its charge
    there, and a member still waiting on the node would be let through onto it."""
    slots = [(res, slot) for res in reservations
             for slot in res.slots.values()
             if slot.node == name and slot.pod.uid not in in_flight]
    slots.sort(key=lambda rs: (rs[1].pod.uid in waiting, -rs[0].created, rs[0].gang,
                               rs[1].pod.name))
    return slots

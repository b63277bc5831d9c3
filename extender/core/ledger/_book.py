"""The ledger's book of reservations: capacity held for a gang, one slot (node) per
member, until its quorum is bound, its deadline passes, or it is released
(architecture.md §2).

Reserve and Unreserve in kube-scheduler's sense: a slot is charged to its node in the
cache, so every other pod and gang is planned and filtered around it. The book knows
slots only, never a bind request: what a dropped slot means for a waiting bind is the
ledger's to say (`_ledger.py`). The states are drawn in the package's docstring.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from extender.core.cache import Cache
from extender.core.cache.snapshot import FreeOverlay, Snapshot
from extender.core.cache.topology import Domain
from extender.core.model.constraints import node_matches
from extender.core.model.resources import fits
from extender.core.model.types import NodeInfo, PodInfo, Resources
from extender.core.model.vocabulary import ReservationView, SlotView
from extender.core.parked import ref
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


class Book:
    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        # gang -> its reservation; the ledger reads it directly (`Ledger.get`)
        self.by_gang: dict[str, Reservation] = {}
        self._without: Snapshot | None = None  # memo of `without_reservations`
        # priority -> slots of pods with it: whether a reservation could be preempted,
        # without walking them (`lowest_priority`).
        self._priorities: dict[int, int] = {}
        self._held: dict[str, Reservation] = {}  # the held ones, so a pass need not look

    # ----- Reserve ------------------------------------------------------------------------

    def reserve_key(self, key: str, owner_uid: str, plan: Plan, now: float, timeout: float,
                    held: str | None = None) -> Reservation:
        deadline = float("inf") if held else now + timeout
        res = Reservation(key, owner_uid, created=now, deadline=deadline, held=held,
                          timeout=timeout, domain=plan.domain)
        for uid, node in plan.assignments.items():
            self._add(res, uid, node, self._cache.pods[uid])
        self.by_gang[key] = res
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

    def move(self, res: Reservation, pod: PodInfo, node_names: list[str],
             busy: Container[str]) -> str | None:
        """Move a member's slot to another of `node_names` (kube-scheduler excluded the
        reserved node for a reason the extender does not model, e.g. host ports).
        A member with a spread constraint first takes the slot of an interchangeable
        member that has not come to filter yet (`_swap`); `busy`: members whose bind is
        in progress, whose slots stay."""
        if pod.spread_constraints:
            swapped = self._swap(res, pod, node_names, busy)
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

    def move_off(self, res: Reservation, pod: PodInfo, node: str) -> str | None:
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

    def unreserve(self, res: Reservation, uid: str, bound_here: bool = False) -> Slot | None:
        """Drop one slot. `bound_here`: the member is now bound to the slot's node, so
        its capacity stays taken and waiting gangs need not be planned again on its
        account."""
        return self._remove(res, uid, freed=not bound_here)

    def pop(self, gang: str) -> Reservation | None:
        """Take the gang's reservation out of the book; its slots stay charged until
        each is unreserved."""
        self._held.pop(gang, None)
        return self.by_gang.pop(gang, None)

    def expired(self, now: float) -> list[Reservation]:
        return [r for r in self.by_gang.values() if r.deadline <= now]

    # ----- views of other gangs' capacity ---------------------------------------------------

    def gangs_by_node(self) -> dict[str, list[str]]:
        """Node -> gangs with a slot there, sorted, from one pass over every slot (asked
        per rejected node, it walked every slot once per node: docs/performance.md)."""
        by_node: dict[str, set[str]] = {}
        for r in self.by_gang.values():
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
            for r in self.by_gang.values():
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
        return sum(len(r.slots) for r in self.by_gang.values())

    def views(self) -> tuple[ReservationView, ...]:
        return tuple(r.view() for r in self.by_gang.values())

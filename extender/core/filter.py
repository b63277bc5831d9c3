"""The filter verb: which of kube-scheduler's feasible nodes may take a pod (architecture.md §7).

From memory only: this runs on kube-scheduler's serial loop. A gang member goes to its
reserved slot, or a pass of the gang queue is run to reserve one, or it is turned away
with the reason (`FailedAndUnresolvableNodes`: kube-scheduler's own preemption cannot
help a gang). A member of a gang still being created may be told to wait for the rest.
Plain pods and elastic extras may take any node except where a reservation leaves too
little.
"""

from __future__ import annotations

from extender.core.explain import Explanations
from extender.core.ledger import Ledger, Reservation
from extender.core.model import messages
from extender.core.model.resources import fits, format_resources
from extender.core.model.sources import missing_group_message
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import FilterResult, Reason
from extender.core.node_claims import fresh_conflicts, nominated_short
from extender.core.planner import extra_nodes
from extender.core.preemption.leaving import Leaving
from extender.core.queue.gang_queue import GangQueue
from extender.core.queue.waiting import Waiting
from extender.core.view import ClusterView


def reject(node_names: list[str], message: str) -> FilterResult:
    return FilterResult([], dict.fromkeys(node_names, message))


def _no_room(node_names: list[str], res: Reservation, pod: PodInfo, offers: str,
             then: str) -> FilterResult:
    """No node of the reservation's domain can take a member now: one sentence, naming
    the member's requests, whether it is a replacement or its slot was just lost."""
    return reject(node_names, f"gang {res.gang}: no node{res.within()} {offers} {pod.key} "
                              f"({format_resources(pod.requests)}){then}")


class Filter:
    def __init__(
        self,
        view: ClusterView,
        ledger: Ledger,
        queue: GangQueue,
        waiting: Waiting,
        explanations: Explanations,
        leaving: Leaving,
    ) -> None:
        # Of the view, the cache and the three settings the filter obeys (the queue pass
        # plans, not the filter). The ledger and the waiting gangs are used part by part
        # (`ledger.binds`, `waiting.parked`, ...), so they are kept whole and their parts
        # reached where used: one reference per collaborator, as the gang queue keeps them.
        self._cache = view.cache
        self._assembly_limit = view.config.assembly_wait_seconds
        self._assembly_gap = view.config.assembly_gap_seconds
        self._direct_commit = view.config.direct_commit
        self._ledger = ledger
        self._queue = queue
        self._waiting = waiting
        self._explanations = explanations
        self._leaving = leaving

    def filter(
        self, pod: PodInfo, node_names: list[str], now: float, waited: float
    ) -> FilterResult:
        """`pod` as the cache knows it, unbound."""
        gang = pod.gang
        if gang is None:
            return self._single(pod, node_names, now)
        result = self._member(pod, gang, node_names, now, waited)
        if result.wait:
            return result
        if result.nodes:
            self._waiting.parked.passed(pod.uid)
        else:
            self._waiting.parked.turned_away(pod.uid)
        return result

    def _member(
        self, pod: PodInfo, gang: str, node_names: list[str], now: float, waited: float
    ) -> FilterResult:
        group = self._cache.groups.get(gang)
        if group is None:
            return reject(node_names, missing_group_message(gang, pod))
        if self._leaving.gang_leaving(gang):
            return reject(node_names, self._leaving.why(gang))
        tally = self._cache.tally(group)
        bound, present = tally.bound_or_succeeded, tally.present_or_succeeded
        if bound >= group.min_member:
            # Quorum is bound: elastic extras are placed one by one like plain pods, in
            # the domain of the gang's topology while it has room.
            return self._extra(pod, group, node_names, now)
        backoffs = self._waiting.backoffs
        if backoffs.failed(gang):
            return reject(node_names, self._explanations.message(gang))
        reservations = self._ledger.reservations
        res = reservations.get(gang)
        if res is None:
            backing_off = backoffs.backing_off(gang, now)
            if present < group.min_member:
                if not backing_off:
                    wait = self._assembly_wait(gang, group.min_member - present, waited, now)
                    if wait > 0:
                        return FilterResult([], {}, wait=wait)
                    if waited > 0:
                        self._waiting.arrivals.give_up(gang)  # created too slowly: not again
                msg = messages.members_exist(gang, present, group.min_member)
                self._explanations.set(gang, Reason.WAITING_FOR_MEMBERS, msg, now)
                return reject(node_names, msg)
            if backing_off:
                return reject(node_names, self._explanations.message(gang))
            self._queue.quorum_present(gang, now)
            self._queue.run(now, scheduling=pod.uid)
            res = reservations.get(gang)
            if res is None:
                return reject(node_names, self._explanations.message(gang))
        if res.held is not None:
            # Its nodes are not free yet: the slots stay where they are (moving one to a
            # node kube-scheduler finds feasible now would give up the hold), and the
            # members are woken when the hold becomes a reservation.
            return reject(node_names, self._explanations.message(gang))
        return self._reserved(res, group, pod, node_names, now)

    def _assembly_wait(self, gang: str, missing: int, waited: float, now: float) -> float:
        """Seconds the filter call of an incomplete gang's member may wait for the next
        member, 0 to answer now. Waiting holds kube-scheduler's serial loop, so only
        while the gang is visibly being created (a member arrived within the gap) and at
        a rate that brings the `missing` ones within the budget left: a gang created
        slowly, e.g. by an operator at 20 requests per second, is turned away at once,
        as without the wait."""
        budget = self._assembly_limit - waited
        arrival = self._waiting.arrivals.get(gang)
        if budget <= 0 or arrival is None:
            return 0.0
        left = arrival.last + self._assembly_gap - now
        eta = arrival.seconds_to(missing)
        if left <= 0 or (eta is not None and arrival.last + eta - now > budget):
            return 0.0
        return min(left, budget)

    def _reserved(
        self, res: Reservation, group: GroupInfo, pod: PodInfo, node_names: list[str],
        now: float,
    ) -> FilterResult:
        binds = self._ledger.binds
        bind_node = binds.node_of(pod.uid)
        if bind_node is None:
            result = self._slot(res, group, pod, node_names, now)
            if isinstance(result, FilterResult):
                return result
            bind_node = result
        # Its bind is in progress (the commit binds it, or kube-scheduler asks again,
        # e.g. after a restart): that bind decides the node, so the slot must not move.
        if bind_node in node_names:
            return FilterResult([bind_node], {})
        if pod.uid in binds.in_flight:
            return reject(
                node_names,
                f"gang {res.gang}: the extender is committing the gang; pod {pod.key} is "
                f"being bound to node {bind_node} (not among the {len(node_names)} node(s) "
                f"kube-scheduler passed), and kube-scheduler drops the pod once it is bound",
            )
        return reject(
            node_names,
            f"gang {res.gang}: the bind of pod {pod.key} to node {bind_node} is held "
            f"until the gang is complete",
        )

    def _slot(
        self, res: Reservation, group: GroupInfo, pod: PodInfo, node_names: list[str],
        now: float,
    ) -> FilterResult | str:
        """The answer for a member with no bind in progress; or the node the gang's
        commit, run here because this member may complete it (a replacement's new slot,
        a retry after a failed Binding), has just started binding it to."""
        binds = self._ledger.binds
        slot = res.slots.get(pod.uid)
        if slot is None:
            if binds.assembled(group) + binds.open_slots(res.slots) >= group.min_member:
                return reject(
                    node_names,
                    f"gang {res.gang}: a quorum of {group.min_member} is being placed; "
                    f"pod {pod.key} waits until it is bound",
                )
            slot = self._ledger.reservations.reserve_one(res, pod, node_names)
            if slot is None:
                return _no_room(node_names, res, pod, "can take replacement member",
                                "; reservation expires at its deadline")
        if self._direct_commit and not pod.binds_via_scheduler:
            # Only a member the commit binds itself (`Ledger._direct`) can be the one that
            # completes its gang here, so any other filter call costs nothing.
            self._ledger.commit(group, now)
        committed = binds.node_of(pod.uid)
        if committed is not None:
            return committed
        # The commit's check of the members' nodes may have moved or dropped this slot.
        slot = res.slots.get(pod.uid)
        if slot is None:
            return _no_room(node_names, res, pod, "has room for pod",
                            " now; the gang waits for room until its deadline")
        # Nodes left out of the reply are filtered out too; naming each of thousands
        # of them would only cost time on the scheduler's serial loop.
        if slot.node in node_names:
            return FilterResult([slot.node], {})
        moved = self._ledger.reservations.move(res, pod, node_names)
        if moved is None:
            return reject(
                node_names,
                f"gang {res.gang}: node {slot.node} reserved for pod {pod.key} is no longer "
                f"feasible and no other node{res.within()} has {format_resources(pod.requests)} "
                f"free",
            )
        return FilterResult([moved], {})

    def _extra(self, pod: PodInfo, group: GroupInfo, node_names: list[str], now: float
               ) -> FilterResult:
        result = self._single(pod, node_names, now)
        nodes, why = extra_nodes(group, self._cache.members(group), result.nodes,
                                 self._cache.nodes)
        if why:
            return reject(node_names, why)
        return FilterResult(nodes, result.unresolvable) if nodes != result.nodes else result

    def _single(self, pod: PodInfo, node_names: list[str], now: float) -> FilterResult:
        """Plain pods and elastic extras: any node kube-scheduler found feasible, except
        where reserved capacity leaves too little. Only nodes with reservations, nodes a
        direct commit bound pods on a moment ago (`Staleness.fresh_nodes`) and nodes with
        capacity nominated to a pod can disagree with kube-scheduler's own checks, so
        only those are examined (`core/node_claims.py`)."""
        reservations = self._ledger.reservations
        own = reservations.of(pod) if pod.gang is None else None
        if own is not None:
            # A plain pod that preempted: its own slot, once its victims are gone.
            slot = own.slots.get(pod.uid)
            if own.held is not None and slot is not None:
                return reject(node_names, f"pod {pod.key}: capacity is held for it on node "
                                          f"{slot.node} until the pods it preempted are gone")
            if slot is not None and slot.node in node_names:
                return FilterResult([slot.node], {})
        nodes = self._cache.nodes
        free = self._cache.free
        failed: dict[str, str] = {}
        # Set operations and comprehensions keep this linear pass in C: at thousands of
        # nodes a Python loop over every name would dominate the scheduler's cycle.
        by_node: dict[str, list[str]] | None = None
        names = set(node_names)
        examined = self._cache.reserved_nodes.keys() & names
        fresh = self._ledger.staleness.fresh_nodes(now)  # empty unless --direct-commit is on
        if fresh:
            examined |= fresh & names
        if self._cache.nominated:  # nearly always empty
            examined |= self._cache.nominated.keys() & names
        for name in examined:
            room = free.get(name)
            if room is None:
                continue  # deleted a moment ago: "not yet known" below
            if not fits(pod.requests, room):
                if by_node is None:
                    by_node = reservations.gangs_by_node()
                held_by = by_node.get(name, ())
                failed[name] = (
                    messages.capacity_held(name, held_by, pod.key, pod.requests) if held_by
                    else f"node {name} is full: gang members bound there a moment ago "
                         f"leave too little for pod {pod.key}, which needs "
                         f"{format_resources(pod.requests)}")
            else:
                why = nominated_short(pod, name, self._cache)
                if why is not None:
                    failed[name] = why
        if pod.claims is not None:
            # kube-scheduler's DynamicResources plugin sees devices a slot holds as
            # free: only nodes with reservations can disagree with it.
            devices = self._cache.snapshot.devices
            for name in examined:
                node = nodes.get(name)
                if devices is None or node is None or name in failed:
                    continue
                why = devices.refusal(node, pod)
                if why is not None:
                    held_by = reservations.gangs_by_node().get(name, ())
                    failed[name] = (f"node {name}: the devices pod {pod.key} asks for are "
                                    f"held for gang(s) {', '.join(held_by)}: {why}"
                                    if held_by else f"node {name}: {why}")
        if fresh:
            # kube-scheduler's InterPodAffinity and PodTopologySpread filters ran
            # without the fresh pods too.
            for name, why in fresh_conflicts(pod, names, self._cache,
                                             self._ledger.staleness, now).items():
                failed.setdefault(name, why)
        reserved_out = bool(failed)
        for name in [n for n in node_names if n not in nodes]:
            failed[name] = f"node {name} is not yet known to gang-extender"
        passed = [n for n in node_names if n not in failed] if failed else list(node_names)
        if not passed and reserved_out:
            self._waiting.parked.plain_turned_away(pod)
        else:
            self._waiting.parked.plain_passed(pod.uid)
        return FilterResult(passed, failed)

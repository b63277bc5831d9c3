"""The gang state machine: filter, prioritize and bind decisions, deadlines, backoff.

Pure: it is fed plain data (`on_pod`, `on_node`, `on_group`), asked for decisions
with the current time passed in, and leaves the I/O it wants done (bindings, failing
held binds, wake-up patches, events) as actions in `outbox` for the adapters.
Everything runs on one thread (the server's event loop), so no locks are needed.

Invariant behind "never a partial bind": a gang member's Binding is created only in
`_commit`, which runs when bound + being-bound + held members of the gang reach
`minMember`, and then releases every held member at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from extender.core.arrivals import Arrivals
from extender.core.cache import Cache
from extender.core.constraints import node_matches
from extender.core.planner import Plan, Shortfall, min_resources_shortfall, plan_gang
from extender.core.queue import Backoff, BackoffPolicy, queue_sort_key
from extender.core.resources import fits, format_resources
from extender.core.types import GroupInfo, NodeInfo, PodInfo, Resources

# Reasons shown in PodGroup conditions and rejection messages (README documents them).
WAITING_FOR_MEMBERS = "WaitingForMembers"
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
WAITING_BEHIND_OLDER_GANG = "WaitingBehindOlderGang"
RESERVED = "Reserved"
BACKING_OFF = "BackingOff"
TIMED_OUT = "TimedOut"
BOUND = "Bound"
FAILED = "Failed"
POD_GROUP_NOT_FOUND = "PodGroupNotFound"


# Deleted pod uids are remembered against late filter calls: at most this many (a few MB),
# and none longer than this (a late call trails the DELETE by kube-scheduler's informer
# lag, seconds), so the memo stops growing once the cluster's churn fills the window.
_DELETED_REMEMBERED = 50_000
_DELETED_TTL_SECONDS = 600.0

# A pod first seen this long after its creationTimestamp (second resolution, the API
# server's clock) was not just created: listed after a restart, not arriving.
_ARRIVAL_MAX_AGE_SECONDS = 10.0


# ----- actions for the adapters ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BindPod:
    """Create the Binding for a pod now (the gang's quorum is assembled)."""

    uid: str
    namespace: str
    name: str
    node: str
    gang: str | None


@dataclass(frozen=True, slots=True)
class FailHeld:
    """Answer a held bind request with this error."""

    uid: str
    message: str


@dataclass(frozen=True, slots=True)
class WakePods:
    """Touch these pending pods so kube-scheduler retries them at once (design 3.8)."""

    reason: str
    pods: tuple[tuple[str, str, str], ...]  # (namespace, name, uid)
    gang: str | None = None


@dataclass(frozen=True, slots=True)
class GangEvent:
    """A transition users should see as an Event and in metrics."""

    gang: str
    reason: str
    message: str
    warning: bool = False
    # For Bound: seconds from "quorum present" to "quorum bound".
    seconds: float | None = None


Action = BindPod | FailHeld | WakePods | GangEvent


# ----- state ---------------------------------------------------------------------------


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


@dataclass(slots=True)
class GangStatus:
    reason: str
    message: str
    since: float


@dataclass(frozen=True, slots=True)
class FilterResult:
    """`wait` > 0: no answer yet; the gang is still being created, ask again after its
    next member arrives or `wait` seconds, passing the time waited so far."""

    nodes: list[str]
    unresolvable: dict[str, str]
    error: str = ""
    wait: float = 0.0


@dataclass(frozen=True, slots=True)
class BindDecision:
    """`bound`: already bound there, answer success. `bind`: create the Binding now.
    `hold`: wait for the gang (the adapter waits until `deadline` at most).
    `error`: answer with `message`."""

    kind: str
    message: str = ""
    deadline: float = 0.0


@dataclass(frozen=True, slots=True)
class Config:
    default_timeout_seconds: float = 60.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    scheduler_name: str = "gang-scheduler"
    # Assembly wait: a member whose gang is still being created may wait in filter for
    # the rest instead of being turned away into kube-scheduler's pod backoff, while its
    # gang's newest member arrived less than `assembly_gap_seconds` ago and the rate
    # they arrive at brings the rest within `assembly_wait_seconds` in all
    # (`_assembly_wait`). 0 turns it off.
    assembly_wait_seconds: float = 0.5
    assembly_gap_seconds: float = 0.2


class _Overlay(Mapping[str, Resources]):
    """`free` with some nodes replaced, without copying every node."""

    def __init__(self, base: Mapping[str, Resources], over: dict[str, Resources]) -> None:
        self._base = base
        self._over = over

    def __getitem__(self, key: str) -> Resources:
        if key in self._over:
            return self._over[key]
        return self._base[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

    def __contains__(self, key: object) -> bool:
        return key in self._over or key in self._base


class GangFramework:
    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.cache = Cache()
        self.reservations: dict[str, Reservation] = {}
        self.held: dict[str, str] = {}  # pod uid -> node, bind request waiting
        self.binding: dict[str, str] = {}  # pod uid -> node, Binding POST in flight
        self.backoff: dict[str, Backoff] = {}
        self.status: dict[str, GangStatus] = {}
        self.outbox: list[Action] = []
        # gang -> ((capacity epoch, members epoch, minMember), shortfall) of its last failed plan
        self._last_failure: dict[str, tuple[tuple[int, int, int, int], Shortfall]] = {}
        self._quorum_since: dict[str, float] = {}
        # Gangs whose pending members were woken when the gang became complete but could
        # not be placed: kube-scheduler does not reliably retry a member it parked with
        # "2 of 3 members exist" when the last one appears, so it would keep that stale
        # reason (and wait up to 5 minutes). Once per completion.
        self._told_complete: set[str] = set()
        # Plain pods turned away only because capacity was held for a gang: woken when a
        # hold is released, since kube-scheduler is not told about that.
        self._rejected_for_holds: dict[str, tuple[str, str, str]] = {}
        # Pending gang members this extender turned away (filter with no node, a bind
        # refused or failed) and that have not passed filter, been held or bound since:
        # kube-scheduler may have parked them, so only these (and pods whose PodScheduled
        # condition says the same, e.g. after a restart) need a wake-up patch when their
        # gang is reserved or completed. The others are still in kube-scheduler's queue
        # and reach filter anyway; patching them was one wasted API write each. Only
        # uids in `cache.pods` are kept, and `on_pod_deleted` drops them, so it cannot
        # outgrow the cache.
        self._rejected_members: set[str] = set()
        # Uid of the member whose filter call is running `evaluate` (see _possibly_parked).
        self._scheduling: str | None = None
        self._evaluated_version: tuple[int, int] | None = None
        self._deleted: dict[str, float] = {}  # recently deleted pod uids -> when, oldest first
        # Plain pods and extras whose Binding is in flight: uid -> (node, pod), charged.
        self._in_flight: dict[str, tuple[str, PodInfo]] = {}
        self._without_holds_memo: _Overlay | None = None  # only during `evaluate`
        self._members_version = 0
        self.arrivals = Arrivals()

    # ----- watch input -----------------------------------------------------------------

    def on_node(self, node: NodeInfo) -> None:
        self.cache.upsert_node(node)

    def on_node_deleted(self, name: str) -> None:
        for res in list(self.reservations.values()):
            for uid, slot in list(res.slots.items()):
                if slot.node == name:
                    self._drop_slot(res, uid, f"node {name} was deleted")
        self.cache.remove_node(name)

    def on_pod(self, pod: PodInfo, now: float) -> None:
        old = self.cache.pods.get(pod.uid)
        if old is not None and old.node_name and not pod.node_name:
            # A stale copy (e.g. the filter request's informer copy) must never undo a
            # binding we have already seen.
            pod = dataclasses.replace(pod, node_name=old.node_name)
        gang = self._gang_key(pod)
        old_gang = self._gang_key(old) if old is not None else None
        if old_gang is not None and old_gang != gang:
            # Relabelled out of its gang: it no longer holds that gang's slot or bind.
            old_res = self.reservations.get(old_gang)
            if old_res is not None and pod.uid in old_res.slots:
                self._drop_slot(old_res, pod.uid, f"pod {pod.key} left gang {old_gang}")
            self._fail_held(pod.uid, f"pod {pod.key} left gang {old_gang}")
        res = self.reservations.get(gang) if gang else None
        gone = pod.terminal or pod.deleting or pod.gated
        if res is not None and pod.uid in res.slots and (pod.node_name or gone):
            self._drop_slot(
                res,
                pod.uid,
                f"pod {pod.key} is being deleted" if gone else None,
                bound_here=not gone and res.slots[pod.uid].node == pod.node_name,
            )
        if gone and pod.uid in self.held:
            self._fail_held(pod.uid, f"pod {pod.key} is finished or being deleted")
        if pod.node_name or gone or gang is None:
            self._rejected_members.discard(pod.uid)  # nothing left to wake it for
        if gang is not None and not (pod.node_name or gone) and (
            (old is None and now - pod.creation < _ARRIVAL_MAX_AGE_SECONDS)
            or (old is not None and old.gated)
        ):
            # Created just now, or its scheduling gates were lifted: the gang is arriving.
            # (A pod first seen in the list after a restart is not an arrival.)
            self.arrivals.member_arrived(gang, now)
        self.cache.upsert_pod(pod)
        self._members_version += 1
        if gang is not None:
            self._check_quorum_bound(gang, now)

    def on_pod_deleted(self, uid: str, now: float | None = None) -> None:
        # Remembered so a filter call that arrives after the DELETE (kube-scheduler's
        # informer lags too) cannot bring the pod back as a phantom member.
        self._deleted.pop(uid, None)
        self._deleted[uid] = now if now is not None else float("-inf")
        while len(self._deleted) > _DELETED_REMEMBERED or (
            now is not None and now - next(iter(self._deleted.values())) > _DELETED_TTL_SECONDS
        ):
            del self._deleted[next(iter(self._deleted))]
        pod = self.cache.pods.get(uid)
        if pod is None:
            return
        gang = self._gang_key(pod)
        res = self.reservations.get(gang) if gang else None
        if res is not None and uid in res.slots:
            self._drop_slot(res, uid, f"pod {pod.key} was deleted")
        if uid in self.held:
            self._fail_held(uid, f"pod {pod.key} was deleted")
        self._rejected_for_holds.pop(uid, None)
        self._rejected_members.discard(uid)
        self.cache.remove_pod(uid)
        self._members_version += 1

    def on_group(self, group: GroupInfo, now: float) -> None:
        old = self.cache.groups.get(group.key)
        bo = self.backoff.get(group.key)
        if bo is not None and (
            bo.group_uid != group.uid
            or (old is not None and (old.min_member, old.schedule_timeout_seconds)
                != (group.min_member, group.schedule_timeout_seconds))
        ):
            # A recreated or re-specified group starts over (its Failed state included).
            del self.backoff[group.key]
        res = self.reservations.get(group.key)
        if res is not None and res.group_uid != group.uid:
            self._release(res, f"PodGroup {group.key} was recreated")
        self.cache.upsert_group(group)
        self._members_version += 1
        # A lower minMember may complete a gang whose binds are held already.
        self._maybe_commit(group.key)
        self._check_quorum_bound(group.key, now)

    def on_group_deleted(self, key: str) -> None:
        res = self.reservations.get(key)
        if res is not None:
            self._release(res, f"PodGroup {key} was deleted")
        self.backoff.pop(key, None)
        self.status.pop(key, None)
        self._last_failure.pop(key, None)
        self._quorum_since.pop(key, None)
        self._told_complete.discard(key)
        self.arrivals.forget(key)
        self.cache.remove_group(key)
        self._members_version += 1

    # ----- filter ----------------------------------------------------------------------

    def filter(
        self, pod: PodInfo, node_names: list[str], now: float, waited: float = 0.0
    ) -> FilterResult:
        """Which of `node_names` (kube-scheduler's feasible nodes) may take `pod`; or,
        for a member of a gang still being created, how long to wait before asking
        again (`FilterResult.wait`, with `waited` the time this call has waited)."""
        known = self.cache.pods.get(pod.uid)
        if known is None:
            if pod.uid in self._deleted:
                return self._reject(node_names, f"pod {pod.key} (uid {pod.uid}) was deleted")
            self.on_pod(pod, now)  # the watch has not delivered it yet
        else:
            pod = known
        if pod.node_name:
            return self._reject(
                node_names, f"pod {pod.key} is already bound to node {pod.node_name}"
            )
        gang = self._gang_key(pod)
        if gang is None:
            return self._filter_single(pod, node_names, gang=None)
        result = self._filter_member(pod, gang, node_names, now, waited)
        if result.wait:
            return result
        if result.nodes:
            self._rejected_members.discard(pod.uid)
        else:
            self._note_turned_away(pod.uid)
        return result

    def _filter_member(
        self, pod: PodInfo, gang: str, node_names: list[str], now: float, waited: float
    ) -> FilterResult:
        """`filter` for a cached, unbound member of `gang`."""
        group = self.cache.groups.get(gang)
        if group is None:
            return self._reject(
                node_names,
                f"gang {gang}: PodGroup {gang} not found; create it or fix the "
                f"scheduling.x-k8s.io/pod-group label of pod {pod.key}",
            )
        _, bound, present = self._counts(group)
        if bound >= group.min_member:
            # Quorum is bound: elastic extras are placed one by one like plain pods.
            return self._filter_single(pod, node_names, gang=gang)
        bo = self.backoff.get(gang)
        if bo is not None and bo.failed:
            return self._reject(node_names, self._status_message(gang))
        res = self.reservations.get(gang)
        if res is None:
            if present < group.min_member:
                if bo is None or bo.until <= now:
                    wait = self._assembly_wait(gang, group.min_member - present, waited, now)
                    if wait > 0:
                        return FilterResult([], {}, wait=wait)
                    if waited > 0:
                        self.arrivals.give_up(gang)  # created too slowly: not again
                msg = f"gang {gang}: {present} of {group.min_member} members exist"
                self._set_status(gang, WAITING_FOR_MEMBERS, msg, now)
                return self._reject(node_names, msg)
            if bo is not None and bo.until > now:
                return self._reject(node_names, self._status_message(gang))
            self._quorum_since.setdefault(gang, now)
            self._scheduling = pod.uid
            try:
                self.evaluate(now)
            finally:
                self._scheduling = None
            res = self.reservations.get(gang)
            if res is None:
                return self._reject(node_names, self._status_message(gang))
        return self._filter_reserved(res, group, pod, node_names, now)

    def _assembly_wait(self, gang: str, missing: int, waited: float, now: float) -> float:
        """Seconds the filter call of an incomplete gang's member may wait for the next
        member, 0 to answer now. Waiting holds kube-scheduler's serial loop, so only
        while the gang is visibly being created (a member arrived within the gap) and at
        a rate that brings the `missing` ones within the budget left: a gang created
        slowly, e.g. by an operator at 20 requests per second, is turned away at once,
        as without the wait."""
        budget = self.config.assembly_wait_seconds - waited
        arrival = self.arrivals.get(gang)
        if budget <= 0 or arrival is None:
            return 0.0
        left = arrival.last + self.config.assembly_gap_seconds - now
        eta = arrival.seconds_to(missing)
        if left <= 0 or (eta is not None and arrival.last + eta - now > budget):
            return 0.0
        return min(left, budget)

    def _filter_reserved(
        self, res: Reservation, group: GroupInfo, pod: PodInfo, node_names: list[str], now: float
    ) -> FilterResult:
        held = self.held.get(pod.uid) or self.binding.get(pod.uid)
        if held is not None:
            # Its bind is already waiting (e.g. a restarted kube-scheduler asks again):
            # that bind decides the node, so the slot must not move away from it.
            if held in node_names:
                return FilterResult([held], {})
            return self._reject(
                node_names,
                f"gang {res.gang}: the bind of pod {pod.key} to node {held} is held until "
                f"the gang is complete",
            )
        slot = res.slots.get(pod.uid)
        if slot is None:
            assembled = self._assembled(group)
            if assembled + self._open_slots(res) >= group.min_member:
                return self._reject(
                    node_names,
                    f"gang {res.gang}: a quorum of {group.min_member} is being placed; "
                    f"pod {pod.key} waits until it is bound",
                )
            # The reservation fell short (a member was replaced, a node vanished, or
            # minMember grew): plan this pod alone into what is free.
            slot = self._plan_single_slot(res, pod, node_names)
            if slot is None:
                return self._reject(
                    node_names,
                    f"gang {res.gang}: no node can take replacement member {pod.key} "
                    f"({format_resources(pod.requests)}); reservation expires at its deadline",
                )
        # Nodes left out of the reply are filtered out too; naming each of thousands
        # of them would only cost time on the scheduler's serial loop.
        if slot.node in node_names:
            return FilterResult([slot.node], {})
        moved = self._move_slot(res, pod, node_names)
        if moved is None:
            return self._reject(
                node_names,
                f"gang {res.gang}: node {slot.node} reserved for pod {pod.key} is no longer "
                f"feasible and no other node has {format_resources(pod.requests)} free",
            )
        return FilterResult([moved], {})

    def _filter_single(self, pod: PodInfo, node_names: list[str], gang: str | None) -> FilterResult:
        """Plain pods and elastic extras: any node kube-scheduler found feasible, except
        where capacity held for gangs leaves too little. Only nodes with holds can
        disagree with kube-scheduler's own fit check, so only those are examined."""
        nodes = self.cache.nodes
        free = self.cache.free
        failed: dict[str, str] = {}
        # Set operations and comprehensions keep this linear pass in C: at thousands of
        # nodes a Python loop over every name would dominate the scheduler's cycle.
        holders: dict[str, list[str]] | None = None
        for name in self.cache.held_nodes.keys() & set(node_names):
            if not fits(pod.requests, free[name]):
                if holders is None:
                    holders = self._holders_by_node()
                failed[name] = (
                    f"capacity on node {name} is held for gang(s) "
                    f"{', '.join(holders.get(name, ()))}; pod {pod.key} needs "
                    f"{format_resources(pod.requests)}"
                )
        held_out = bool(failed)
        unknown = [n for n in node_names if n not in nodes]
        for name in unknown:
            failed[name] = f"node {name} is not yet known to gang-extender"
        passed = [n for n in node_names if n not in failed] if failed else list(node_names)
        if not passed and held_out:
            self._rejected_for_holds[pod.uid] = (pod.namespace, pod.name, pod.uid)
        else:
            self._rejected_for_holds.pop(pod.uid, None)
        return FilterResult(passed, failed)

    # ----- prioritize ------------------------------------------------------------------

    def prioritize(self, pod: PodInfo, node_names: list[str]) -> list[tuple[str, int]]:
        """Steer members to their slot (10), everything else neutral (0)."""
        gang = self._gang_key(self.cache.pods.get(pod.uid, pod))
        res = self.reservations.get(gang) if gang else None
        slot = res.slots.get(pod.uid) if res else None
        target = slot.node if slot else None
        return [(n, 10 if n == target else 0) for n in node_names]

    # ----- bind ------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        """Bind `uid` to `node` now, hold it for its gang, or refuse. A refused member
        goes back to kube-scheduler's queue because of us, so it may need a wake-up."""
        decision = self._bind(namespace, name, uid, node, now)
        if decision.kind == "error":
            self._note_turned_away(uid)
        return decision

    def _bind(self, namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        pod = self.cache.pods.get(uid)
        if pod is None:
            return BindDecision("error", f"pod {namespace}/{name} (uid {uid}) is not known")
        if (pod.namespace, pod.name) != (namespace, name):
            return BindDecision(
                "error", f"uid {uid} belongs to pod {pod.key}, not {namespace}/{name}"
            )
        if pod.node_name:
            if pod.node_name == node:
                return BindDecision("bound")
            return BindDecision(
                "error", f"pod {pod.key} is already bound to node {pod.node_name}, not {node}"
            )
        if node not in self.cache.nodes:
            return BindDecision("error", f"node {node} is not known (pod {pod.key})")
        if pod.deleting or pod.terminal:
            return BindDecision("error", f"pod {pod.key} is finished or being deleted")
        waiting = self.binding.get(uid) or self.held.get(uid)
        if waiting is not None and waiting != node:
            return BindDecision(
                "error",
                f"pod {pod.key}: a bind to node {waiting} is already in progress, not to {node}",
            )
        if uid in self.binding:
            return BindDecision("hold", deadline=now)  # the in-flight Binding answers it
        gang = self._gang_key(pod)
        if gang is None:
            return self._bind_single(pod, node)
        group = self.cache.groups.get(gang)
        if group is None:
            return BindDecision("error", f"gang {gang}: PodGroup not found (pod {pod.key})")
        if self._counts(group)[1] >= group.min_member:
            return self._bind_single(pod, node)
        res = self.reservations.get(gang)
        slot = res.slots.get(uid) if res else None
        if res is None or slot is None:
            return BindDecision(
                "error",
                f"gang {gang}: no reservation holds a slot for pod {pod.key} (it timed out, "
                f"or the extender restarted); kube-scheduler will retry the pod",
            )
        if slot.node != node and not self._retarget_slot(res, pod, node):
            return BindDecision(
                "error",
                f"gang {gang}: pod {pod.key} was reserved node {slot.node}; node {node} "
                f"lacks {format_resources(pod.requests)}",
            )
        self.held[uid] = node
        self._rejected_members.discard(uid)
        self._maybe_commit(gang)
        return BindDecision("hold", deadline=res.deadline)

    def _bind_single(self, pod: PodInfo, node: str) -> BindDecision:
        """Plain pods and elastic extras. Their filter could not know which node
        kube-scheduler would pick, and several may pass a node before the first binds, so
        holds are checked again here, and the placement is charged at once so the next
        bind and every plan see it (design 5: placements not yet bound count)."""
        free = self.cache.free.get(node, {})
        if node in self.cache.held_nodes and not fits(pod.requests, free):
            return BindDecision(
                "error",
                f"capacity on node {node} is held for gang(s) "
                f"{', '.join(self._holders_by_node().get(node, []))}; pod {pod.key} needs "
                f"{format_resources(pod.requests)}; kube-scheduler will retry",
            )
        self.binding[pod.uid] = node
        self._rejected_members.discard(pod.uid)
        self._in_flight[pod.uid] = (node, pod)
        self.cache.assume(node, pod)
        return BindDecision("bind")

    def bind_finished(self, uid: str, node: str, error: str | None, now: float) -> None:
        """The Binding POST for `uid` returned."""
        self.binding.pop(uid, None)
        assumed = self._in_flight.pop(uid, None)
        if assumed is not None:
            self.cache.forget(assumed[0], assumed[1], freed=error is not None)
        if error is not None:
            return  # kube-scheduler re-queues the pod; its slot stays until the deadline
        pod = self.cache.pods.get(uid)
        if pod is not None and not pod.node_name:
            self.on_pod(dataclasses.replace(pod, node_name=node), now)

    def hold_expired(self, uid: str) -> None:
        """The adapter stopped waiting (its hold limit is below the HTTP timeout): the
        bind fails, so kube-scheduler re-queues the pod."""
        if self.held.pop(uid, None) is not None:
            self._note_turned_away(uid)

    # ----- time ------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Deadlines, backoffs ending and capacity freed: called a few times a second."""
        for res in list(self.reservations.values()):
            if res.deadline <= now and not self._binding_in_flight(res.gang):
                self._expire(res, now)
        self.arrivals.prune(now)
        self.evaluate(now)

    def evaluate(self, now: float) -> None:
        """Grant reservations in gang order to every waiting gang that fits now.

        An older gang that does not fit does not block a younger one that does (no
        head-of-line blocking), but it is planned first, so the younger one can only
        take capacity the older cannot use.
        """
        version = (self.cache.capacity_epoch, self._members_version)
        backoff_ended = any(
            not b.failed and 0 < b.until <= now for b in self.backoff.values()
        )
        if version == self._evaluated_version and not backoff_ended:
            return
        self._without_holds_memo = None
        waiting: list[tuple[tuple[int, float, str], GroupInfo, list[PodInfo]]] = []
        for key, group in self.cache.groups.items():
            if key in self.reservations:
                continue
            bo = self.backoff.get(key)
            if bo is not None and (bo.failed or bo.until > now):
                continue
            if bo is not None and bo.until:
                bo.until = 0.0  # backoff over: eligible again
            members, bound, present = self._counts(group)
            if bound >= group.min_member:
                continue
            if present < group.min_member:
                self._told_complete.discard(key)
                if members:
                    self._set_status(
                        key,
                        WAITING_FOR_MEMBERS,
                        f"gang {key}: {present} of {group.min_member} members exist",
                        now,
                    )
                continue
            waiting.append((queue_sort_key(group, members), group, members))
        waiting.sort(key=lambda w: w[0])
        granted: list[str] = []
        for _, group, members in waiting:
            key = group.key
            self._quorum_since.setdefault(key, now)
            last = self._last_failure.get(key)
            if last is not None and last[0] == self._failure_signature(group):
                continue
            result = self._plan(group, members)
            if isinstance(result, Plan):
                self._reserve(group, result, now)
                self._without_holds_memo = None  # holds changed
                granted.append(key)
            else:
                self._explain_shortfall(group, members, result, granted, now)
                self._last_failure[key] = (self._failure_signature(group), result)
                if key not in self._told_complete:
                    self._told_complete.add(key)
                    pending = self._possibly_parked(members)
                    if pending:
                        self.outbox.append(WakePods(
                            f"gang {key} complete: {self.status[key].reason}", pending, key
                        ))
        self._without_holds_memo = None
        self._evaluated_version = (self.cache.capacity_epoch, self._members_version)

    # ----- views -----------------------------------------------------------------------

    def queue(self, now: float) -> list[dict[str, object]]:
        """Gangs not yet bound, in the order capacity is granted."""
        rows = []
        for key, group in self.cache.groups.items():
            members, bound, present = self._counts(group)
            if bound >= group.min_member or not members:
                continue  # running or finished, or no pods yet
            st = self.status.get(key)
            rows.append(
                (
                    queue_sort_key(group, members),
                    {
                        "gang": key,
                        "minMember": group.min_member,
                        "members": present,
                        "bound": bound,
                        "reason": st.reason if st else "",
                        "message": st.message if st else "",
                    },
                )
            )
        rows.sort(key=lambda r: r[0])
        return [r[1] for r in rows]

    def debug(self, now: float) -> dict[str, object]:
        return {
            "queue": self.queue(now),
            "reservations": [
                {
                    "gang": r.gang,
                    "created": r.created,
                    "deadline": r.deadline,
                    "secondsLeft": round(r.deadline - now, 3),
                    "slots": [
                        {"pod": s.pod.key, "node": s.node, "requests": dict(s.pod.requests)}
                        for s in r.slots.values()
                    ],
                }
                for r in self.reservations.values()
            ],
            "heldBinds": [
                {"pod": self._pod_key(uid), "node": node} for uid, node in self.held.items()
            ],
            "bindingsInFlight": [
                {"pod": self._pod_key(uid), "node": node} for uid, node in self.binding.items()
            ],
            "backoff": [
                {
                    "gang": key,
                    "attempts": b.attempts,
                    "secondsLeft": max(0.0, round(b.until - now, 3)),
                    "failed": b.failed,
                }
                for key, b in self.backoff.items()
                if b.attempts
            ],
        }

    def gang_status(self, key: str) -> GangStatus | None:
        return self.status.get(key)

    # ----- internals -------------------------------------------------------------------

    def _gang_key(self, pod: PodInfo) -> str | None:
        group = pod.group
        return f"{pod.namespace}/{group}" if group else None

    def _pod_key(self, uid: str) -> str:
        pod = self.cache.pods.get(uid)
        return pod.key if pod else uid

    def _counts(self, group: GroupInfo) -> tuple[list[PodInfo], int, int]:
        """(members, bound, present): succeeded pods count as bound and present, since
        they ran as part of a formed quorum; failed ones do not."""
        members, bound, done = self.cache.summary(group)
        return list(members), bound + done, len(members) + done

    def _assembled(self, group: GroupInfo) -> int:
        """Members bound (or succeeded), being bound, or whose bind is held."""
        count = self.cache.succeeded(group)
        for m in self.cache.members(group):
            if m.node_name or m.uid in self.binding or m.uid in self.held:
                count += 1
        return count

    def _open_slots(self, res: Reservation) -> int:
        return sum(
            1 for uid in res.slots if uid not in self.held and uid not in self.binding
        )

    def _binding_in_flight(self, gang: str) -> bool:
        for uid in self.binding:
            pod = self.cache.pods.get(uid)
            if pod is not None and self._gang_key(pod) == gang:
                return True
        return False

    def _failure_signature(self, group: GroupInfo) -> tuple[int, int, int, int]:
        """What a failed plan depends on: while it is unchanged, planning the gang again
        would fail the same way. "Waiting behind older gang X" also depends on which
        capacity is held, so it is re-checked whenever a slot is released."""
        st = self.status.get(group.key)
        behind = st is not None and st.reason == WAITING_BEHIND_OLDER_GANG
        return (
            self.cache.capacity_epoch,
            self.cache.members_epoch.get(group.key, 0),
            group.min_member,
            self.cache.release_epoch if behind else -1,
        )

    def _plan(self, group: GroupInfo, members: list[PodInfo]) -> Plan | Shortfall:
        unbound = [m for m in members if not m.node_name]
        unbound.sort(key=lambda p: (p.creation, p.name))
        need = group.min_member - (len(members) - len(unbound)) - self.cache.succeeded(group)
        if group.min_resources:
            # scheduler-plugins' aggregate pre-check, in the PodGroup's own terms; the
            # node-by-node plan below is what actually proves a fit.
            total: Resources = {}
            for free in self.cache.free.values():
                for k, v in free.items():
                    if v > 0:
                        total[k] = total.get(k, 0) + v
            missing = min_resources_shortfall(total, group.min_resources)
            if missing is not None:
                return Shortfall(need, 0, missing, None)
        return plan_gang(unbound, need, self.cache.nodes, self.cache.free, self.cache.pods_on_node,
                         index=self.cache.fit_index)

    def _possibly_parked(self, members: Iterable[PodInfo]) -> tuple[tuple[str, str, str], ...]:
        """(namespace, name, uid) of the pending members kube-scheduler may have parked
        because of this extender, the only ones a wake-up patch helps (design 3.8):
        turned away by us since they last passed filter, or marked PodScheduled=False.
        Both are needed: the condition survives a restart of the extender, but arrives
        after the rejection, so a reservation a few milliseconds later would miss it.
        The pod whose filter call is evaluating is in kube-scheduler's scheduling cycle
        right now, not parked, so it is left out."""
        return tuple(
            (m.namespace, m.name, m.uid)
            for m in members
            if not m.node_name
            and m.uid not in self.held
            and m.uid != self._scheduling
            and (m.uid in self._rejected_members or m.unschedulable)
        )

    def _reserve(self, group: GroupInfo, plan: Plan, now: float) -> None:
        timeout = group.schedule_timeout_seconds or self.config.default_timeout_seconds
        res = Reservation(group.key, group.uid, created=now, deadline=now + timeout)
        for uid, node in plan.assignments.items():
            pod = self.cache.pods[uid]
            res.slots[uid] = Slot(node, pod)
            self.cache.hold(node, pod)
        self.reservations[group.key] = res
        self._last_failure.pop(group.key, None)
        nodes = sorted({s.node for s in res.slots.values()})
        msg = (
            f"gang {group.key}: reserved {len(res.slots)} slot(s) on {len(nodes)} node(s) "
            f"for {timeout:g}s"
        )
        self._set_status(group.key, RESERVED, msg, now)
        self.outbox.append(GangEvent(group.key, RESERVED, msg))
        pending = self._possibly_parked(self.cache.members(group))
        if pending:
            self.outbox.append(WakePods(f"gang {group.key} reserved", pending, group.key))

    def _explain_shortfall(
        self,
        group: GroupInfo,
        members: list[PodInfo],
        shortfall: Shortfall,
        granted_now: list[str],
        now: float,
    ) -> None:
        """Tell apart "does not fit in this cluster now" from "would fit, but capacity is
        held for a gang ahead of it" (design 3.7)."""
        holders = [k for k in self.reservations if k != group.key]
        if holders:
            unbound = sorted((m for m in members if not m.node_name), key=lambda p: p.name)
            need = group.min_member - (len(members) - len(unbound)) - self.cache.succeeded(group)
            without = plan_gang(
                unbound,
                need,
                self.cache.nodes,
                self._without_holds(),
                self.cache.pods_on_node,
                explain=False,
            )
            if isinstance(without, Plan):
                ahead = sorted(holders, key=lambda k: (k not in granted_now, k))
                # "older" only when the holder really is ahead in gang order; a younger
                # gang may hold capacity it got while this one was incomplete.
                mine = queue_sort_key(group, members)
                holder = self.cache.groups.get(ahead[0])
                older = holder is not None and queue_sort_key(
                    holder, self.cache.members(holder)) < mine
                msg = (
                    f"gang {group.key}: waiting behind {'older ' if older else ''}gang "
                    f"{ahead[0]}"
                    + (f" (+{len(ahead) - 1} more)" if len(ahead) > 1 else "")
                    + ("" if older else " which reserved the capacity first")
                    + f"; {shortfall.message}"
                )
                self._set_status(group.key, WAITING_BEHIND_OLDER_GANG, msg, now)
                return
        self._set_status(
            group.key, INSUFFICIENT_CAPACITY, f"gang {group.key}: {shortfall.message}", now
        )

    def _without_holds(self) -> _Overlay:
        """Free capacity as if no reservation held any. Built once per evaluation and
        shared by every gang explained in it (rebuilding it per gang walked every held
        slot each time: a quarter of all planning time with hundreds of gangs waiting);
        `evaluate` drops it whenever a reservation is made."""
        if self._without_holds_memo is None:
            over: dict[str, Resources] = {}
            for r in self.reservations.values():
                for s in r.slots.values():
                    base = over.get(s.node)
                    if base is None:
                        base = over[s.node] = dict(self.cache.free.get(s.node, {}))
                    for k, v in s.pod.requests.items():
                        base[k] = base.get(k, 0) + v
            self._without_holds_memo = _Overlay(self.cache.free, over)
        return self._without_holds_memo

    def _plan_single_slot(
        self, res: Reservation, pod: PodInfo, node_names: list[str]
    ) -> Slot | None:
        result = plan_gang(
            [pod],
            1,
            self.cache.nodes,
            self.cache.free,
            self.cache.pods_on_node,
            allowed={pod.uid: set(node_names)},
        )
        if not isinstance(result, Plan):
            return None
        node = result.assignments[pod.uid]
        slot = res.slots[pod.uid] = Slot(node, pod)
        self.cache.hold(node, pod)
        return slot

    def _move_slot(self, res: Reservation, pod: PodInfo, node_names: list[str]) -> str | None:
        """Move a member's slot to another feasible node (kube-scheduler excluded the
        planned one for a reason the extender does not model, e.g. host ports)."""
        old = res.slots.pop(pod.uid)
        self.cache.unhold(old.node, old.pod)
        slot = self._plan_single_slot(res, pod, node_names)
        if slot is None:
            res.slots[pod.uid] = old
            self.cache.hold(old.node, old.pod)
            return None
        return slot.node

    def _retarget_slot(self, res: Reservation, pod: PodInfo, node: str) -> bool:
        old = res.slots.pop(pod.uid)
        self.cache.unhold(old.node, old.pod)
        info = self.cache.nodes.get(node)
        if info is not None and node_matches(pod, info) is None and fits(
            pod.requests, self.cache.free.get(node, {})
        ):
            res.slots[pod.uid] = Slot(node, pod)
            self.cache.hold(node, pod)
            return True
        res.slots[pod.uid] = old
        self.cache.hold(old.node, old.pod)
        return False

    def _drop_slot(
        self, res: Reservation, uid: str, failure: str | None, bound_here: bool = False
    ) -> None:
        """`bound_here`: the slot's pod is now bound to the slot's node, so its capacity
        stays taken and waiting gangs need not be planned again on its account."""
        slot = res.slots.pop(uid, None)
        if slot is not None:
            self.cache.unhold(slot.node, slot.pod, freed=not bound_here)
        if failure is not None and uid in self.held:
            self._fail_held(uid, f"gang {res.gang}: {failure}")

    def _fail_held(self, uid: str, message: str) -> None:
        if self.held.pop(uid, None) is not None:
            self.outbox.append(FailHeld(uid, message))
            self._note_turned_away(uid)  # the failed bind sends it back to the queue

    def _note_turned_away(self, uid: str) -> None:
        """Remember a pending gang member this extender refused (filter with no node, a
        failed or refused bind): kube-scheduler may park it until an event, so it is
        woken when its gang is reserved or completed (`_possibly_parked`). Only pods in
        the cache are kept, so `on_pod_deleted` is sure to drop every entry."""
        pod = self.cache.pods.get(uid)
        if pod is not None and not pod.node_name and self._gang_key(pod) is not None:
            self._rejected_members.add(uid)

    def _maybe_commit(self, gang: str) -> None:
        group = self.cache.groups.get(gang)
        res = self.reservations.get(gang)
        if group is None or res is None:
            return
        if self._assembled(group) < group.min_member:
            return
        for uid in [u for u in self.held if u in res.slots]:
            node = self.held.pop(uid)
            pod = self.cache.pods[uid]
            self.binding[uid] = node
            self.outbox.append(BindPod(uid, pod.namespace, pod.name, node, gang))

    def _check_quorum_bound(self, gang: str, now: float) -> None:
        group = self.cache.groups.get(gang)
        if group is None:
            return
        if self._counts(group)[1] < group.min_member:
            return
        res = self.reservations.pop(gang, None)
        if res is None:
            return
        for uid in list(res.slots):
            self._drop_slot(res, uid, "quorum is bound")
        self.backoff.pop(gang, None)
        self._last_failure.pop(gang, None)
        self._told_complete.discard(gang)
        since = self._quorum_since.pop(gang, None)
        seconds = None if since is None else max(0.0, now - since)
        msg = f"gang {gang}: quorum of {group.min_member} bound"
        self._set_status(gang, BOUND, msg, now)
        self.outbox.append(GangEvent(gang, BOUND, msg, seconds=seconds))

    def _release(self, res: Reservation, why: str) -> None:
        """`why` without the gang prefix: held binds are answered "gang <key>: <why>"."""
        self.reservations.pop(res.gang, None)
        for uid in list(res.slots):
            self._drop_slot(res, uid, why)
        for uid in [u for u, _ in list(self.held.items()) if self._gang_of_uid(u) == res.gang]:
            self._fail_held(uid, f"gang {res.gang}: {why}")
        if self._rejected_for_holds:
            pods = tuple(self._rejected_for_holds.values())
            self._rejected_for_holds.clear()
            self.outbox.append(WakePods(f"capacity held for gang {res.gang} released", pods))

    def _gang_of_uid(self, uid: str) -> str | None:
        pod = self.cache.pods.get(uid)
        return self._gang_key(pod) if pod else None

    def _expire(self, res: Reservation, now: float) -> None:
        group = self.cache.groups.get(res.gang)
        assembled = self._assembled(group) if group else 0
        need = group.min_member if group else 0
        bo = self.backoff.setdefault(res.gang, Backoff(group_uid=res.group_uid))
        bo.attempts += 1
        policy = self.config.backoff
        waited = now - res.created
        if policy.exhausted(bo.attempts):
            bo.failed = True
            reason = FAILED
            body = (
                f"timed out {bo.attempts} time(s) with {assembled} of {need} members ready; "
                f"retry limit {policy.retry_limit} reached, the group is Failed"
            )
        else:
            delay = policy.delay(bo.attempts)
            bo.until = now + delay
            reason = BACKING_OFF
            body = (
                f"timed out after {waited:.0f}s with {assembled} of {need} members ready "
                f"(attempt {bo.attempts}); backing off {delay:g}s"
            )
        msg = f"gang {res.gang}: {body}"
        self._release(res, body)
        self._quorum_since.pop(res.gang, None)
        self._set_status(res.gang, reason, msg, now)
        self.outbox.append(GangEvent(res.gang, TIMED_OUT, msg, warning=True))

    def _status_message(self, gang: str) -> str:
        st = self.status.get(gang)
        return st.message if st else f"gang {gang}: waiting to be planned"

    def _set_status(self, gang: str, reason: str, message: str, now: float) -> None:
        cur = self.status.get(gang)
        if cur is None or cur.reason != reason or cur.message != message:
            self.status[gang] = GangStatus(reason, message, now)

    def _holders_by_node(self) -> dict[str, list[str]]:
        """Node -> gangs holding capacity there, sorted, from one pass over every slot.
        (Asking per rejected node walked every slot once per node: with thousands of
        slots held, a plain pod's filter took tens of milliseconds.)"""
        by_node: dict[str, set[str]] = {}
        for r in self.reservations.values():
            for s in r.slots.values():
                by_node.setdefault(s.node, set()).add(r.gang)
        return {node: sorted(gangs) for node, gangs in by_node.items()}

    def _reject(self, node_names: list[str], message: str) -> FilterResult:
        return FilterResult([], dict.fromkeys(node_names, message))

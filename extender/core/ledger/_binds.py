"""Bind requests: kube-scheduler's bind requests waiting at the permit barrier for their
gang's quorum, and the Bindings decided and not yet answered (architecture.md §7, §11).
Both machines are drawn in the package docstring.

A Binding keeps its pod's requests charged to its node from its decision to its answer:
by the pod's slot while its reservation lasts (`_reservations.py`), otherwise by an
assumption here (kube-scheduler's assumed pods), which the answer ends. A Binding whose
every try lost its answer stays charged until the pod is seen (`settle`).

This knows no reservation: a reservation's changes tell it what they mean for a bind
(`Reservations.unreserve`, `release`), and the commit (`_commit.py`) decides which
waiting binds are let through.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping

from extender.core.cache import Cache
from extender.core.ledger import _repair
from extender.core.ledger._staleness import Staleness
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import BindPod, RejectWaitingBind, WaitingBindView
from extender.core.outbox import Outbox
from extender.core.parked import Parked, ref


class Binds:
    """What the bind verb, the filter, the commit, reservations, timeouts and the manager
    ask and tell about bind requests, one line each:

    read:
        waiting                            pod uid -> node of each bind at the barrier
        in_flight                          pod uid -> node of each Binding not answered
        node_of(uid)                       the node of the pod's bind, in flight or waiting
        in_progress()                      uids of every bind waiting or in flight
        assembled(group)                   members bound, binding or waiting
        open_slots(slots)                  slots whose member has no bind in progress
        binding_in_flight(gang)            a Binding of the gang is in flight
        charged_node(uid)                  the node a Binding charges with no assumption yet
        views(deadline)                    every bind in progress, for reporting
        unknown_before(began)              Bindings of unknown outcome a list will settle
    changed:
        wait(uid, node)                    a member's bind waits at the barrier
        reject(uid, message)               a waiting bind is answered with an error
        let_through(decided)               the commit's Bindings are in flight
        bind_now(pod, node)                a plain pod or an extra: no barrier
        assume(uid, node, pod)             a Binding's pod charged to its node until answered
        withdraw(gang, why, also)          the gang's Bindings not yet sent are not sent
        post_due(uid, node)                may this Binding be posted now? None, or why not
        finished(uid, error, unknown_since)   a Binding POST returned
        settle(uid)                        a Binding of unknown outcome is seen decided
    """

    def __init__(self, cache: Cache, parked: Parked, outbox: Outbox,
                 staleness: Staleness) -> None:
        self._cache = cache
        self._parked = parked
        self._outbox = outbox
        self._staleness = staleness
        self._waiting: dict[str, str] = {}  # pod uid -> node: bind request held open
        self._binding: dict[str, str] = {}  # pod uid -> node: Binding POST in flight
        # Pods whose Binding is in flight and who hold no slot, charged to their node
        # from the moment the Binding is decided until its answer (kube-scheduler's
        # assumed pods): plain pods and extras (`bind_now`), and members whose slot was
        # dropped while their Binding was in flight (`Reservations.unreserve`).
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

    # ----- reading ------------------------------------------------------------------------

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

    def charged_node(self, uid: str) -> str | None:
        """The node a Binding of the pod charges, in flight or of unknown outcome, that
        no assumption carries yet: a slot dropped now hands its charge there (`assume`)."""
        if uid in self._assumed:
            return None
        return self._binding.get(uid) or self._unknown.get(uid, ("", 0.0))[0] or None

    def views(self, deadline: Callable[[str | None], float | None]) -> list[WaitingBindView]:
        """Every bind in progress of a known pod, with its reservation's `deadline` while
        it waits."""
        out = []
        binds = [(u, n, False) for u, n in self._waiting.items()]
        binds += [(u, n, True) for u, n in self._binding.items()]
        for uid, node, in_flight in binds:
            pod = self._cache.pods.get(uid)
            if pod is None:
                continue
            out.append(WaitingBindView(pod.key, uid, node, pod.gang, in_flight,
                                       None if in_flight else deadline(pod.gang)))
        return out

    def unknown_before(self, began: float) -> list[str]:
        """Uids of the Bindings whose outcome became unknown by `began`: a list begun
        then shows whether each took effect."""
        return [uid for uid, (_, at) in self._unknown.items() if at <= began]

    # ----- changing -----------------------------------------------------------------------

    def wait(self, uid: str, node: str) -> None:
        """A member's bind request waits at the barrier (the commit may let it through at
        once). Waiting, the member is not parked; rejected, it is turned away again."""
        self._waiting[uid] = node
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

    def let_through(self, decided: Iterable[tuple[str, str]]) -> None:
        """The commit's Bindings, pod uid and node, all decided at once: each is in
        flight now, a waiting one no longer waits."""
        for uid, node in decided:
            self._waiting.pop(uid, None)
            self._binding[uid] = node

    def bind_now(self, pod: PodInfo, node: str) -> None:
        """A plain pod or an elastic extra: no barrier. Charged at once so the next bind
        and every plan see it (architecture.md §8: placements not yet bound count). A
        new decision for a pod whose earlier Binding's outcome was unknown replaces that
        charge: the pod is still unbound as far as a caught-up watch tells, which it
        would not be had that Binding landed."""
        self.settle(pod.uid)
        self._binding[pod.uid] = node
        self._parked.passed(pod.uid)
        self.assume(pod.uid, node, pod)
        self._outbox.append(BindPod(ref(pod), node, pod.gang))

    def assume(self, uid: str, node: str, pod: PodInfo) -> None:
        """Charge `pod` to `node` until its Binding's answer (`finished`), or, for a
        Binding whose outcome is unknown, until the pod is seen (`settle`). A dropped
        slot hands its charge here without ending that wait: were it ended, the
        assumption would outlive every event that could end it, and the node would stay
        short of the pod's requests for good (a gang released, timed out or recreated
        after its member's Binding ended unknown)."""
        self._assumed[uid] = (node, pod)
        self._cache.assume(node, pod)

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

    def post_due(self, uid: str, node: str) -> str | None:
        """Whether the Binding of `uid` to `node` may be posted now: None, or why not.
        Asked right before every POST of it (the first, one held for kube-scheduler's
        bind request, one queued behind a big commit, a retry after 429 or 5xx), since
        each may come well after the commit decided it: the gang may have been released
        since, the pod deleted, a watch broken (or another try's answer lost, which the
        adapter tells as a broken watch before the next post asks: the API server may be
        going away, and a post sent into that may land late), or the node taken by a
        pod bound there meanwhile (a `spec.nodeName` pod, another scheduler's). A post
        refused here ends as a failed Binding (`finished`): a member keeps its slot, or
        it moves off a node that lost its room, and is bound by the gang's next commit."""
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
        if self._staleness.is_behind():
            return (f"a watch of the API is broken, or an answer of the API server was "
                    f"lost, and not yet caught up, so node {node}'s free capacity is not "
                    f"known; pod {pod.key} is bound by its gang's next commit")
        short = (_repair.overcommitted(self._cache, node, pod)
                 or _repair.nominated_away(self._cache, node, pod))
        if short is not None:
            return f"pod {pod.key} is not bound to node {node}: {short}"
        return None

    def finished(self, uid: str, error: str | None, unknown_since: float | None = None
                 ) -> str | None:
        """The Binding POST for `uid` returned. A gang member's that failed keeps its
        slot and is not bound again until something asks (kube-scheduler's retry of the
        pod at the barrier, or the gang's next commit), never in a loop; it may have been
        parked, so it is remembered for a wake-up. Returns the node of a refused Binding:
        the caller moves its slots if that node was found short (`post_due`;
        `Reservations.squeezed`), since nothing else moves a slot whose Binding was in
        flight.

        `unknown_since`: it failed so that it may still have taken effect (its last try
        lost its answer and the pod could not be read back): no longer in flight, but its
        charge stays until the pod is seen (`_unknown`, `settle`)."""
        node = self._binding.pop(uid, None)
        self._withdrawn.pop(uid, None)
        if error is not None:
            self._staleness.landed(uid)
            self._parked.turned_away(uid)
        if unknown_since is not None and node is not None:
            self._unknown[uid] = (node, unknown_since)
            return None
        assumed = self._assumed.pop(uid, None)
        if assumed is not None:
            self._cache.forget(assumed[0], assumed[1], freed=error is not None)
        return node if error is not None else None

    def settle(self, uid: str) -> None:
        """The pod of a Binding whose outcome was unknown is seen: bound (the bound pod
        carries the charge now), gone, or unbound in a list begun after the outcome. Its
        assumption, if it had one, ends; a slot ends as slots do."""
        if self._unknown.pop(uid, None) is None:
            return
        assumed = self._assumed.pop(uid, None)
        if assumed is not None:
            self._cache.forget(assumed[0], assumed[1], freed=True)

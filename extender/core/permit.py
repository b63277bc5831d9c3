"""The permit barrier: bind requests wait here until their gang's quorum is assembled.

kube-scheduler's Permit extension point, built from the extender's bind verb: a gang
member's bind request is held open (it *waits*) until bound + binding + waiting members
of the gang reach `minMember`; then every waiting member of the gang is let through at
once (the *commit*, `core/commit.py`). This is the invariant behind "never a partial
bind": a member's Binding is created only by `let_through` (or, once the quorum is
bound, one by one like a plain pod). The states of one bind request are drawn in
docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.cache import Cache
from extender.core.outbox import Outbox
from extender.core.parked import Parked, ref
from extender.core.types import GroupInfo, PodInfo
from extender.core.vocabulary import BindPod, RejectWaitingBind


class Permit:
    def __init__(self, cache: Cache, outbox: Outbox, parked: Parked) -> None:
        self._cache = cache
        self._outbox = outbox
        self._parked = parked
        self._waiting: dict[str, str] = {}  # pod uid -> node: bind request held open
        self._binding: dict[str, str] = {}  # pod uid -> node: Binding POST in flight
        # Plain pods and extras whose Binding is in flight, charged to their node from
        # the moment the bind is accepted (kube-scheduler's assumed pods).
        self._assumed: dict[str, tuple[str, PodInfo]] = {}

    # ----- reading ------------------------------------------------------------------

    @property
    def waiting(self) -> Mapping[str, str]:
        return self._waiting

    @property
    def in_flight(self) -> Mapping[str, str]:
        return self._binding

    def node_of(self, uid: str) -> str | None:
        """The node of the pod's bind in progress: in flight, or waiting."""
        return self._binding.get(uid) or self._waiting.get(uid)

    def binding(self, uid: str) -> bool:
        return uid in self._binding

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

    # ----- changing -----------------------------------------------------------------

    def wait(self, uid: str, node: str) -> None:
        self._waiting[uid] = node
        self._parked.passed(uid)

    def reject(self, uid: str, message: str) -> None:
        """Answer a waiting bind with an error; kube-scheduler re-queues the pod, and it
        may park it, so it is remembered for a wake-up."""
        if self._waiting.pop(uid, None) is not None:
            self._outbox.append(RejectWaitingBind(uid, message))
            self._parked.turned_away(uid)

    def let_through(self, gang: str, slots: Mapping[str, object]) -> list[str]:
        """Every waiting member with a slot gets its Binding: the commit
        (`core/commit.py`) found the quorum assembled and every node still fitting."""
        through = [u for u in self._waiting if u in slots]
        for uid in through:
            node = self._waiting.pop(uid)
            self._binding[uid] = node
            self._outbox.append(BindPod(ref(self._cache.pods[uid]), node, gang))
        return through

    def bind_now(self, pod: PodInfo, node: str) -> None:
        """A plain pod or an elastic extra: no barrier. Charged at once so the next bind
        and every plan see it (architecture.md §5: placements not yet bound count)."""
        self._binding[pod.uid] = node
        self._parked.passed(pod.uid)
        self._assumed[pod.uid] = (node, pod)
        self._cache.assume(node, pod)
        self._outbox.append(BindPod(ref(pod), node, pod.gang))

    def finished(self, uid: str, error: str | None) -> None:
        """The Binding POST for `uid` returned."""
        self._binding.pop(uid, None)
        assumed = self._assumed.pop(uid, None)
        if assumed is not None:
            self._cache.forget(assumed[0], assumed[1], freed=error is not None)

    def wait_expired(self, uid: str) -> bool:
        """The adapter stopped waiting for this bind; returns whether it was waiting."""
        if self._waiting.pop(uid, None) is not None:
            self._parked.turned_away(uid)
            return True
        return False

    def view(self) -> list[tuple[str, str, bool]]:
        """(uid, node, in flight) of every bind in progress."""
        return [(u, n, False) for u, n in self._waiting.items()] + [
            (u, n, True) for u, n in self._binding.items()
        ]

"""Pods kube-scheduler may have parked because of this extender, and only those.

kube-scheduler retries a pod the extender rejected only after a cluster event or its
5-minute flush (architecture.md §6). When a gang becomes placeable for a reason the cluster does
not announce (a reservation made or released, a backoff over), the pods that were turned
away must be woken with a patch. Patching every pending member instead was one wasted
API write each: members never turned away are still in kube-scheduler's queue.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import PodRef, WakePods


def ref(pod: PodInfo) -> PodRef:
    return PodRef(pod.namespace, pod.name, pod.uid)


class Parked:
    def __init__(self, pods: Mapping[str, PodInfo]) -> None:
        self._pods = pods  # the cache's pods: only uids found there are kept
        # Pending gang members turned away (filter with no node, a bind refused or
        # rejected) that have not passed filter, waited at the permit or been bound
        # since. `drop` drops deleted pods, so this never outgrows the cache.
        self._members: set[str] = set()
        # Plain pods turned away only because capacity was reserved for a gang: woken
        # when a reservation is released, which kube-scheduler is not told about.
        self._plain: dict[str, PodRef] = {}

    def turned_away(self, uid: str) -> None:
        pod = self._pods.get(uid)
        if pod is not None and not pod.node_name and pod.gang is not None:
            self._members.add(uid)

    def passed(self, uid: str) -> None:
        """The member got a node, waits at the permit, or has nothing left to wake for."""
        self._members.discard(uid)

    def plain_turned_away(self, pod: PodInfo) -> None:
        self._plain[pod.uid] = ref(pod)

    def plain_passed(self, uid: str) -> None:
        self._plain.pop(uid, None)

    def drop(self, uid: str) -> None:
        self._members.discard(uid)
        self._plain.pop(uid, None)

    def members(
        self, members: Iterable[PodInfo], waiting: Container[str], scheduling: str | None
    ) -> tuple[PodRef, ...]:
        """The pending members a wake-up patch helps: turned away by us since they last
        passed filter, or marked PodScheduled=False. Both are needed: the condition
        survives a restart of the extender, but arrives after the rejection, so a
        reservation a few milliseconds later would miss it. `waiting` (at the permit)
        and `scheduling` (in kube-scheduler's cycle right now) are not parked."""
        return tuple(
            ref(m)
            for m in members
            if not m.node_name
            and m.uid not in waiting
            and m.uid != scheduling
            and (m.uid in self._members or m.unschedulable)
        )

    def wake_plain(self, gang: str) -> WakePods | None:
        """Plain pods to wake because `gang`'s reservation was released."""
        if not self._plain:
            return None
        pods = tuple(self._plain.values())
        self._plain.clear()
        return WakePods(f"capacity held for gang {gang} released", pods)

"""Reserved nodes that are lost, and the slots re-planned off them at once.

The extender shares its nodes with the default scheduler, DaemonSets, other schedulers
and pods created with `spec.nodeName` (architecture.md §8). Any of them can take a node
a reservation counted on, and so can a cordon, a NoSchedule or NoExecute taint, a
deletion or a smaller allocatable. A slot on such a node is moved to one that still
fits, the moment the cache learns of it (not at the member's next filter call): a
member bound there would be rejected by the kubelet, and a gang with one member
rejected is broken. A member whose bind already waits on the lost node has that bind
rejected with the reason, and kube-scheduler retries it onto the new slot. The same
check runs once more at the commit (`core/commit.py`).

A held slot (`Reservation.held`) is charged ahead of capacity on purpose: pods still
run or leave there, and free capacity is below zero until they are gone. That is not a
loss: the shortfall of a node is counted without what held slots charge there. A held
reservation whose node is lost for another reason (deleted, cordoned, tainted) is
released whole, and the gang queue plans it again.
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.constraints import node_matches
from extender.core.permit import Permit
from extender.core.reservations import Reservation, Reservations, Slot
from extender.core.resources import format_resources
from extender.core.types import PodInfo


class Repair:
    def __init__(self, cache: Cache, reservations: Reservations, permit: Permit) -> None:
        self._cache = cache
        self._reservations = reservations
        self._permit = permit

    def lost(self, node: str, pod: PodInfo, held: bool = False) -> str | None:
        """Why `pod` can no longer be bound on `node`, where its slot is charged, or
        None if it still can. A `held` slot waits for capacity by design: only the node
        itself can be lost to it."""
        info = self._cache.nodes.get(node)
        if info is None:
            return f"node {node} was deleted"
        why = node_matches(pod, info)
        if why is not None:
            return f"node {node}: {why}"
        if held:
            return None
        free = self._cache.free.get(node, {})
        ahead = self._cache.held.get(node)
        if ahead:
            free = {r: v + ahead.get(r, 0) for r, v in free.items()}
        short = {r: -v for r, v in free.items() if v < 0 and pod.requests.get(r, 0) > 0}
        if short:
            return (f"node {node} is short of {format_resources(short, skip_pods=False)} "
                    f"(pods bound there since the plan)")
        return None

    def squeezed(self, name: str) -> None:
        """A pod was bound to `name` (by anyone): if that drove its free capacity below
        zero, slots there move. O(1) when it did not, which is every watch event of a
        pod bound where nothing is reserved or that still fits."""
        if name in self._cache.reserved_nodes and any(
            v < 0 for v in self._cache.free.get(name, {}).values()
        ):
            self.node(name)

    def node(self, name: str) -> None:
        """Move every slot off `name` that no longer fits there. Slots whose member has
        no bind waiting go first (moving them rejects nothing); the check is made again
        after each move, so no more slots move than the node's shortfall needs."""
        if name not in self._cache.reserved_nodes:
            return
        for res, slot in self._slots_on(name):
            if self._reservations.get(res.gang) is not res or slot.pod.uid not in res.slots:
                continue  # released with a held reservation a moment ago
            why = self.lost(name, slot.pod, held=res.held is not None)
            if why is None:
                continue
            if res.held is not None:
                self._reservations.release(
                    res, f"{why}; the capacity held for it there is given up and the gang "
                         f"is planned again")
            else:
                self._move_away(res, slot.pod, name, why)

    def _slots_on(self, name: str) -> list[tuple[Reservation, Slot]]:
        slots = [(res, slot) for res in self._reservations.values()
                 for slot in res.slots.values() if slot.node == name]
        waiting = self._permit.waiting
        slots.sort(key=lambda rs: (rs[1].pod.uid in waiting, -rs[0].created, rs[0].gang,
                                   rs[1].pod.name))
        return slots

    def _move_away(self, res: Reservation, pod: PodInfo, node: str, why: str) -> None:
        waits_here = self._permit.waiting.get(pod.uid) == node
        moved = self._reservations.move_off(res, pod, node)
        if not waits_here:
            return
        if moved is not None:
            where = f"its slot moved to node {moved}"
        else:
            where = (f"no other node{res.within()} has {format_resources(pod.requests)} free, "
                     f"so the gang waits for room until its deadline")
        self._permit.reject(
            pod.uid,
            f"gang {res.gang}: {why}; pod {pod.key} is not bound there: {where}; "
            f"kube-scheduler retries the pod",
        )

"""The starvation guard: a bound on how long the gang at the head of the queue waits.

Without it, an older gang that does not fit lets younger ones take whatever frees up,
with no limit (architecture.md §3.5): a stream of small gangs can keep a big one waiting
forever. Once the *head* of the queue (the first gang in gang order that waits for
capacity) has waited `starvation_after_seconds`, the capacity of its best plan is held
for it as it frees up: a *forward reservation*, whose slots are charged to nodes still
taken by running pods (`Reservation.held`). Nothing else the extender places takes that
capacity as it frees; younger gangs and plain pods keep using capacity outside the plan
(backfill). When every node of the plan has room, the hold becomes a normal reservation
(`GangQueue`), and its members are woken.

The bound: the head waits at most `starvation_after_seconds` plus the longest remaining
run of the pods on its plan's nodes when the hold is made (plus a tick and
kube-scheduler's retry of its members). It holds as long as those pods finish and
nothing outside the extender binds onto those nodes (pods of other schedulers, §8).

The best plan is made as if the pods the gang scheduler placed, and pods being deleted,
were gone (they finish or leave); pods of other schedulers (DaemonSets, services) are
taken to stay. Among nodes that fit equally, those with the most of the gang's
resources free now come first, so the hold waits for as little as it can. A gang that
must stay in one topology domain is planned by the same `plan_group` as in the queue,
so its hold is inside one domain (docs/topology.md), its nodes in that same order.

At most one forward reservation exists. A gang that moves ahead of its holder in gang
order (a higher priority) and then starves takes it over; the holder goes back to the
queue, still counting its wait.

The wait outlives the process: the status writer keeps it in the PodGroup's
`status.waitingForCapacitySince`, and a restarted extender, or a standby that takes
over, counts from there (`restore`), so failovers cannot keep postponing the bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from extender.core.cache import Cache
from extender.core.config import Config
from extender.core.planner import GangPlanner, Plan
from extender.core.queue.order import queue_sort_key
from extender.core.reservations import Reservation, Reservations
from extender.core.snapshot import Snapshot
from extender.core.types import GroupInfo, PodInfo, Resources

_Signature = tuple[int, int, int]


class Starvation:
    def __init__(
        self, config: Config, cache: Cache, reservations: Reservations, planner: GangPlanner
    ) -> None:
        self._after = config.starvation_after_seconds
        self._scheduler = config.scheduler_name
        self._cache = cache
        self._reservations = reservations
        self._plan = planner
        # gang -> when it first failed to be planned (it waits for capacity since).
        self._since: dict[str, float] = {}
        # gang -> when its status says it began waiting (`restore`), taken by `waiting`.
        self._recorded: dict[str, float] = {}
        self._holder: str | None = None
        # gang -> what its last failed forward plan depended on: no plan even then.
        self._no_plan: dict[str, _Signature] = {}
        self._due: float | None = None  # when the current head starves
        # The holder whose forward reservation the last guard took over, if it did.
        self.taken_over: str | None = None

    # ----- told by the gang queue ---------------------------------------------------------

    def waiting(self, gang: str, now: float) -> None:
        """A plan of the gang failed: it waits for capacity (since the first time, or
        since its status says it began, if that is earlier)."""
        if gang not in self._since:
            self._since[gang] = min(self._recorded.pop(gang, now), now)

    def placed(self, gang: str) -> None:
        """The gang got a reservation, was bound, or starts over: its wait is over."""
        self._since.pop(gang, None)
        self._recorded.pop(gang, None)
        self._no_plan.pop(gang, None)

    def restore(self, old: GroupInfo | None, new: GroupInfo) -> None:
        """Take the wait the group's status records (`waiting_since`) when it is news:
        the group seen for the first time (a restart) or its recorded wait changed (the
        leader's writes, seen by a standby that may lead next). An unchanged record is
        never taken again: after the gang was placed, its status still shows the old
        wait until the next write. A record the status drops is dropped here too."""
        if old is not None and old.uid == new.uid and old.waiting_since == new.waiting_since:
            return
        if new.waiting_since:
            self._recorded[new.key] = new.waiting_since
        else:
            self._recorded.pop(new.key, None)

    def since(self, gang: str) -> float | None:
        """When the gang began waiting for capacity, for the status that keeps it."""
        return self._since.get(gang)

    def forget(self, gang: str) -> None:
        self.placed(gang)
        if self._holder == gang:
            self._holder = None

    def waited(self, gang: str, now: float) -> float | None:
        since = self._since.get(gang)
        return None if since is None else now - since

    def holder(self) -> str | None:
        """The gang whose forward reservation is still held, if any."""
        if self._holder is not None:
            res = self._reservations.get(self._holder)
            if res is None or res.held != "starvation":
                self._holder = None
        return self._holder

    def due(self, now: float) -> bool:
        """The head starves by now: a pass must run even if nothing else changed."""
        return self._due is not None and now >= self._due

    # ----- the guard -----------------------------------------------------------------------

    def guard(
        self, group: GroupInfo, members: Sequence[PodInfo], now: float, timeout: float
    ) -> Reservation | None:
        """`group` is the head of the queue and waits: its forward reservation, if it
        has starved and its plan exists; None otherwise."""
        self._due = None
        self.taken_over = None
        since = self._since.get(group.key)
        if self._after is None or since is None:
            return None
        if now < since + self._after:
            self._due = since + self._after
            return None
        holder = self.holder()
        if holder == group.key:
            return None
        if holder is not None:
            held = self._cache.groups.get(holder)
            if held is not None and queue_sort_key(held, self._cache.members(held)) <= (
                queue_sort_key(group, list(members))
            ):
                return None  # the holder is ahead of it in gang order
        signature = self._signature(group)
        if self._no_plan.get(group.key) == signature:
            return None
        taken_over = self._reservations.get(holder)
        result = self._plan(group, members, self._cache.succeeded(group),
                            self._forward_view(members, taken_over))
        if not isinstance(result, Plan):
            self._no_plan[group.key] = signature
            return None
        if taken_over is not None:
            self._reservations.release(
                taken_over, f"gang {group.key}, ahead of it in the queue, has starved and "
                            f"takes over the capacity held for the head of the queue")
            self.taken_over = taken_over.gang
        self._holder = group.key
        return self._reservations.reserve(group, result, now, timeout, held="starvation")

    def _signature(self, group: GroupInfo) -> _Signature:
        return (self._cache.capacity_epoch, self._cache.members_epoch.get(group.key, 0),
                group.min_member)

    def _forward_view(self, members: Sequence[PodInfo], taken_over: Reservation | None
                      ) -> Snapshot:
        """Free capacity once the pods that finish or leave are gone (and the hold this
        one takes over), nodes with the most of the gang's resources free now first
        (see the module's docstring)."""
        cache = self._cache
        wanted = {r for m in members if not m.node_name for r, q in m.requests.items() if q}
        released: dict[str, list[PodInfo]] = {}
        for slot in (taken_over.slots.values() if taken_over is not None else ()):
            released.setdefault(slot.node, []).append(slot.pod)
        free: dict[str, Resources] = {}
        score: dict[str, float] = {}
        for name, node in cache.nodes.items():
            now_free = cache.free.get(name)
            if now_free is None:
                continue
            later = dict(now_free)
            leaving = [p for p in cache.bound_on(name)
                       if p.scheduler_name == self._scheduler or p.deleting]
            for p in leaving + released.get(name, []):
                for r, q in p.requests.items():
                    later[r] = later.get(r, 0) + q
            free[name] = later
            score[name] = sum(max(now_free.get(r, 0), 0) / a for r in wanted
                              if (a := node.allocatable.get(r, 0)) > 0)
        order = sorted(free, key=lambda n: -score[n])
        # The nodes too, in that order: a gang planned inside one topology domain takes
        # the domain's nodes in the order of `nodes` (its domains are grouped from them),
        # not of `free`, and its hold must wait for as little as any other's.
        snap = cache.snapshot
        return Snapshot({n: cache.nodes[n] for n in order}, {n: free[n] for n in order},
                        snap.pods_on_node, repellers=snap.repellers)

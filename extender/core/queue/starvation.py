"""The starvation guard: a bound on how long a gang that can be placed waits for capacity.

Without it, an older gang that does not fit lets younger ones take whatever frees up,
with no limit (architecture.md §3): a stream of small gangs can keep a big one waiting
forever. Once a gang that waits for capacity has waited `starvation_after_seconds`, the
capacity of its best plan is held for it as it frees up: a *forward reservation*, whose
slots are charged to nodes still taken by running pods (`Reservation.held`). Nothing
else the extender places takes that capacity as it frees; younger gangs and plain pods
keep using capacity outside the plan (backfill). When every node of the plan has room,
the hold becomes a normal reservation (`GangQueue`), and its members are woken.

The bound: a starving gang waits at most `starvation_after_seconds` plus the longest
remaining run of the pods on its plan's nodes when the hold is made (plus a tick and
kube-scheduler's retry of its members). It holds as long as those pods finish and
nothing outside the extender binds onto those nodes (pods of other schedulers,
architecture.md §11).

The best plan is made as if the pods the gang scheduler placed, and pods being deleted,
were gone (they finish or leave); pods of other schedulers (DaemonSets, services) are
taken to stay. Among nodes that fit equally, those with the most of the gang's
resources free now come first, so the hold waits for as little as it can. A gang that
must stay in one topology domain is planned by the same `plan_group` as in the queue,
so its hold is inside one domain (docs/topology.md), its nodes in that same order.

Every starving gang is guarded, in gang order, not only the head of the queue: a gang
that can never be placed (`queue/unplaceable.py`) is skipped, so it cannot hold the
guard for nothing, and a gang waiting in another node pool or topology domain than an
older holder is not kept from its own hold. Holds never share a node, since a hold
becomes a reservation only once every node of its plan has room, and a second hold on
one of them would push that back: a starving gang is planned without the nodes of the
holders ahead of it in gang order. A holder behind it whose nodes its plan takes is
taken over: released, back to the queue, still counting its wait. So the oldest
starving gang that can be placed always gets its hold, and the bound above applies to
each hold from when it is made.

A CompositePodGroup waits, starves and holds as one unit (`guard_composite`): one wait
(the composite's key), one forward plan of at least minGroupCount children, a hold for
each child in it made together, and a holder taken over with all its siblings' holds
(`_take_over`), so no part of a composite ever holds alone. A composite none of whose
children has a pod of ours left (they name another scheduler now) no longer waits here:
its wait and its holds end as a deleted composite's (`GangQueue.composite_left`), and
pods of ours brought back later start a new wait. So do a gang's own wait and hold (a
plain gang's, a basic composite's child's) once none of its pods is ours
(`GangQueue.gang_left`).

The wait outlives the process: the status writer keeps it in the PodGroup's
`status.waitingForCapacitySince` (an upstream PodGroup's, and a CompositePodGroup's, the
one wait of its children, in a condition of ours: `WAITING_FOR_CAPACITY`), and a
restarted extender, or a standby that takes over, counts from there (`restore`), so
failovers cannot keep postponing the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from extender.core.cache.snapshot import Snapshot
from extender.core.ledger import Ledger, Reservation
from extender.core.model.order import inherited_priority, queue_sort_key
from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo, Resources
from extender.core.planner import Plan, Shortfall
from extender.core.planner.composite_plan import Child, plan_composite
from extender.core.view import ClusterView

# What a failed forward plan depended on: capacity (and reserved slots, which it counts
# as taken until they are bound), the gang, and the holders.
_Signature = tuple[int, int, int, int, tuple[str, ...]]
STARVATION = "starvation"  # `Reservation.held` of a forward reservation


class Starvation:
    def __init__(self, view: ClusterView, ledger: Ledger) -> None:
        self._after = view.config.starvation_after_seconds
        self._scheduler = view.config.scheduler_name
        self._cache = view.cache
        self._reservations = ledger.reservations
        self._plan = view.planner
        # gang -> when it first failed to be planned (it waits for capacity since).
        self._since: dict[str, float] = {}
        # gang -> when its status says it began waiting (`restore`), taken by `waiting`.
        self._recorded: dict[str, float] = {}
        # gang -> what its last failed forward plan depended on: no plan even then.
        self._no_plan: dict[str, _Signature] = {}
        self._due: float | None = None  # when the next waiting gang starves
        # Per node, what the pods that finish or leave give back; once per pass.
        self._leaving: dict[str, Resources] | None = None
        # Those of them with claims (DRA): their devices come back too; once per pass.
        self._leaving_claims: list[PodInfo] = []
        # Kept while a pass runs and free capacity does not change: the forward free
        # capacity of every node, the nodes in order for each set of wanted resources,
        # and the holders' places in gang order. Many gangs may starve at once, and each
        # one's view differs from these only by the nodes it may not or may take.
        self._base: tuple[tuple[int, int], dict[str, Resources]] | None = None
        self._orders: dict[frozenset[str], list[str]] = {}
        self._keys: dict[str, tuple[int, float, str]] = {}
        # The holders whose forward reservations the last guard took over.
        self.taken_over: list[str] = []
        self.took_over = False  # any guard of this pass took one over

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

    def set_aside(self, gang: str) -> None:
        """The gang can never be placed as the cluster is, or waits for a pod its
        members' affinity selects: it does not wait for capacity (a node that would fit
        it, or the pod, starts its wait afresh)."""
        self._since.pop(gang, None)
        self._no_plan.pop(gang, None)

    def restore(self, old: GroupInfo | CompositeInfo | None,
                new: GroupInfo | CompositeInfo) -> None:
        """Take the wait the group's status records (`waiting_since`; a composite's, in
        its condition `WAITING_FOR_CAPACITY`, the wait of all its children) when it is news:
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

    def drop(self, gang: str) -> None:
        self.placed(gang)

    def waited(self, gang: str, now: float) -> float | None:
        since = self._since.get(gang)
        return None if since is None else now - since

    def holders(self) -> list[Reservation]:
        """The forward reservations still held."""
        return [r for r in self._reservations.held() if r.held == STARVATION]

    def due(self, now: float) -> bool:
        """A waiting gang starves by now: a pass must run even if nothing else changed."""
        return self._due is not None and now >= self._due

    def new_pass(self) -> None:
        self._due = None
        self._leaving = None
        self._base = None
        self._keys.clear()
        self.took_over = False

    # ----- the guard -----------------------------------------------------------------------

    def _starved(self, key: str, now: float) -> bool:
        """Whether the wait of `key` (a gang's, or a composite's for all its children)
        has lasted the starvation limit; one still short of it sets when the pass should
        look again (`_due`), so a starving gang is guarded on time without a pass per
        tick."""
        since = self._since.get(key)
        if self._after is None or since is None:
            return False
        due = since + self._after
        if now < due:
            self._due = due if self._due is None else min(self._due, due)
            return False
        return True

    def _sides(self, mine: tuple[int, float, str], own: Callable[[str], bool]
               ) -> tuple[list[Reservation], list[Reservation]] | None:
        """The holders ahead of a starving gang in gang order (`mine`, its place),
        whose nodes it leaves alone, and those behind it, which it may take over; None
        when one of the holders is its own (`own`: it holds already)."""
        ahead: list[Reservation] = []
        behind: list[Reservation] = []
        for res in self.holders():
            if own(res.gang):
                return None
            theirs = self._sort_key(res.gang)
            (ahead if theirs is not None and theirs <= mine else behind).append(res)
        return ahead, behind

    def guard(
        self, group: GroupInfo, members: Sequence[PodInfo], now: float, timeout: float
    ) -> Reservation | None:
        """`group` waits for capacity and could be placed on the cluster's nodes: its
        forward reservation, if it has starved and has a plan on nodes no holder ahead
        of it holds; None otherwise. Holders behind it on those nodes are taken over
        (`taken_over`)."""
        self.taken_over = []
        key = group.key
        if not self._starved(key, now):
            return None
        sides = self._sides(self._key_of(group, list(members)), lambda gang: gang == key)
        if sides is None:
            return None
        ahead, behind = sides
        cache = self._cache
        signature = (cache.capacity_epoch, cache.unreserve_epoch, cache.members_epoch.get(key, 0),
                     group.min_member, tuple(sorted(r.gang for r in ahead + behind)))
        if self._no_plan.get(key) == signature:
            return None
        taken = {s.node for r in ahead for s in r.slots.values()}
        result = self._plan(group, members, self._cache.succeeded(group),
                            self._forward_view(members, behind, taken), explain=False)
        if not isinstance(result, Plan):
            self._no_plan[key] = signature
            return None
        self._take_over(f"gang {key}", behind, set(result.assignments.values()))
        return self._reservations.reserve(group.key, group.uid, result, now, timeout,
                                          held=STARVATION)

    def guard_composite(
        self, composite: CompositeInfo, children: Sequence[tuple[GroupInfo, Sequence[PodInfo]]],
        now: float, timeout: float,
    ) -> list[tuple[GroupInfo, Reservation]] | None:
        """`guard` for the complete `children` of a CompositePodGroup, as one unit: the
        wait is the composite's (`waiting(composite.key)`), its place in gang order its
        first child's, its forward plan that of at least minGroupCount children together
        (`plan_composite`, first pass), and a hold is made for each child that fits, or
        none. Each child held, with its hold; None otherwise."""
        self.taken_over = []
        key = composite.key
        if not self._starved(key, now):
            return None
        # Some of its children hold already: that hold is the composite's.
        sides = self._sides(min(self._key_of(g, list(ms)) for g, ms in children),
                            lambda gang: self._parent(gang) == key)
        if sides is None:
            return None
        ahead, behind = sides
        cache = self._cache
        signature = (cache.capacity_epoch, cache.unreserve_epoch,
                     sum(cache.members_epoch.get(g.key, 0) for g, _ in children),
                     sum(g.min_member for g, _ in children),
                     tuple(sorted(r.gang for r in ahead + behind)))
        if self._no_plan.get(key) == signature:
            return None
        taken = {s.node for r in ahead for s in r.slots.values()}
        everyone = [m for _, ms in children for m in ms]
        kids = [Child(g, ms, cache.succeeded(g)) for g, ms in children]
        out = plan_composite(composite, kids, self._forward_view(everyone, behind, taken),
                             self._quiet, budget=0)
        if not out.placed:
            self._no_plan[key] = signature
            return None
        self._take_over(f"CompositePodGroup {composite.namespace}/{composite.name}", behind,
                        {n for p in out.plans.values() for n in p.assignments.values()})
        return [(g, self._reservations.reserve(g.key, g.uid, out.plans[g.key], now, timeout,
                                         held=STARVATION))
                for g, _ in children if g.key in out.plans]

    def _take_over(self, who: str, behind: Sequence[Reservation], nodes: set[str]) -> None:
        """Release the holds of `behind` on any of `nodes`, each with the holds of its
        composite siblings: a composite holds as one unit, never in part."""
        lost = {r.gang for r in behind if any(s.node in nodes for s in r.slots.values())}
        parents = {p for g in lost if (p := self._parent(g))}
        for res in self.holders():
            if res.gang in lost or self._parent(res.gang) in parents:
                self._reservations.release(
                    res, f"{who}, ahead of it in the queue, has starved and takes over the "
                         f"capacity held for it")
                self.taken_over.append(res.gang)
        self.took_over = self.took_over or bool(self.taken_over)

    def _parent(self, gang: str) -> str:
        """The composite whose children `gang` holds with, "" if none (a child of a
        composite with a basic policy holds on its own)."""
        group = self._cache.groups.get(gang)
        if group is None or not group.parent:
            return ""
        composite = self._cache.composites.get(group.parent)
        return group.parent if composite is not None and composite.min_group_count else ""

    def _quiet(self, group: GroupInfo, members: Sequence[PodInfo], succeeded: int,
               snapshot: Snapshot, /, explain: bool = True) -> Plan | Shortfall:
        return self._plan(group, members, succeeded, snapshot, explain=False)

    def _key_of(self, group: GroupInfo, members: list[PodInfo]) -> tuple[int, float, str]:
        """Its place in gang order, as the queue reads it (`GangQueue._sort_key`)."""
        parent = self._cache.composites.get(group.parent) if group.parent else None
        return queue_sort_key(group, members, inherited_priority(group, parent))

    def _sort_key(self, gang: str) -> tuple[int, float, str] | None:
        key = self._keys.get(gang)
        if key is None:
            group = self._cache.groups.get(gang)
            if group is None:
                return None
            key = self._keys[gang] = self._key_of(group, self._cache.members(group))
        return key

    def _leaving_now(self) -> dict[str, Resources]:
        """Per node, what the pods the gang scheduler placed and the pods being deleted
        give back when they are gone; pods do not come or go during a pass."""
        if self._leaving is None:
            out: dict[str, Resources] = {}
            self._leaving_claims = []
            for name in self._cache.nodes:
                for p in self._cache.bound_on(name):
                    if p.scheduler_name == self._scheduler or p.deleting:
                        if p.claims is not None:
                            self._leaving_claims.append(p)
                        add = out.setdefault(name, {})
                        for r, q in p.requests.items():
                            add[r] = add.get(r, 0) + q
            self._leaving = out
        return self._leaving

    def _forward_view(self, members: Sequence[PodInfo], released: Sequence[Reservation],
                      taken: set[str]) -> Snapshot:
        """Free capacity once the pods that finish or leave are gone (and the holds of
        `released`), without the `taken` nodes (held for gangs ahead), nodes with the
        most of the gang's resources free now first (see the module's docstring)."""
        cache = self._cache
        wanted = frozenset(r for m in members if not m.node_name
                           for r, q in m.requests.items() if q)
        base, order = self._forward_base(wanted)
        back: dict[str, list[Resources]] = {}
        for res in released:
            for slot in res.slots.values():
                back.setdefault(slot.node, []).append(slot.pod.requests)
        free: dict[str, Resources] = {}
        for name in order:
            if name in taken:
                continue
            extra = back.get(name)
            if extra is None:
                free[name] = base[name]  # shared, read only: plans copy what they use
                continue
            later = dict(base[name])
            for requests in extra:
                for r, q in requests.items():
                    later[r] = later.get(r, 0) + q
            free[name] = later
        # The nodes too, in that order: a gang planned inside one topology domain takes
        # the domain's nodes in the order of `nodes` (its domains are grouped from them),
        # not of `free`, and its hold must wait for as little as any other's.
        snap = cache.snapshot
        # The devices (DRA) of the leaving pods and of `released` come back as their
        # capacity does, so a gang asking for devices holds the nodes whose devices it
        # will get; its slots then hold those devices as they come free (they are
        # chosen for slots in the order the slots were made, older holds first).
        devices = snap.devices
        if devices is not None:
            self._leaving_now()
            devices = devices.without([*self._leaving_claims,
                                       *(s.pod for r in released for s in r.slots.values())])
        return Snapshot({n: cache.nodes[n] for n in free}, free, snap.pods_on_node,
                        repellers=snap.repellers, devices=devices)

    def _forward_base(self, wanted: frozenset[str]) -> tuple[dict[str, Resources], list[str]]:
        """Every node's free capacity once the leaving pods are gone, and the nodes with
        the most of `wanted` free now first; made again when free capacity changed."""
        cache = self._cache
        version = (cache.free_epoch, cache.node_epoch)
        if self._base is None or self._base[0] != version:
            leaving = self._leaving_now()
            base: dict[str, Resources] = {}
            for name in cache.nodes:
                now_free = cache.free.get(name)
                if now_free is None:
                    continue
                extra = leaving.get(name)
                if extra:
                    now_free = dict(now_free)
                    for r, q in extra.items():
                        now_free[r] = now_free.get(r, 0) + q
                base[name] = now_free
            self._base = (version, base)
            self._orders = {}
        order = self._orders.get(wanted)
        if order is None:
            score: dict[str, float] = {}
            for name in self._base[1]:
                alloc, now = cache.nodes[name].allocatable, cache.free[name]
                score[name] = sum(max(now.get(r, 0), 0) / a for r in wanted
                                  if (a := alloc.get(r, 0)) > 0)
            order = self._orders[wanted] = sorted(score, key=lambda n: -score[n])
        return self._base[1], order

"""Whole-gang preemption: a gang, or a plain pod of the gang scheduler, that cannot be
planned evicts lower-priority units so that its whole plan fits, and the capacity they
free is held for it until it is bound.

The gang queue asks in its pass on the tick, never on kube-scheduler's loop (a search
plans the preemptor a handful of times): for every gang that failed to plan, and for
plain pods of the gang scheduler that kube-scheduler marked unschedulable (they never
reach the extender's filter when no node fits them). A search whose inputs did not
change since it found nothing is not made again.

Rules: a preemptor with `preemptionPolicy: Never` (a gang: any member, or an upstream
PodGroup's own; a composite, or a child of one: the CompositePodGroup's own too) never
evicts;
only units of strictly lower priority are victims, chosen by `victims.select` (the
rule is in its docstring and docs/preemption.md). A gang that must stay
in one topology domain evicts only inside one domain (`preemption/domain_victims.py`).

A CompositePodGroup whose complete children do not fit together preempts as one unit
(`composite`): the victims are chosen for a plan of at least minGroupCount of its
children together, evicted in one preemption, and each child that fits holds its part;
a refused eviction releases all of their holds (`eviction_refused`), and the queue makes
them reservations together (`GangQueue._held_together`).

What it does: the preemptor's plan is reserved at once, held (`Reservation.held` is
"preemption"): its slots are charged on the victims' nodes while they still run, so
nothing else is placed in what they free. A reservation victim is released; each
other victim is evicted whole (`EvictPods`, `leaving.py` follows the answers). A
`Preempting` report tells both sides (status, Events, metrics). Once the victims are
gone, the hold becomes a reservation (`GangQueue`) and the preemptor is placed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domain, word
from extender.core.explain import Explanations
from extender.core.ledger import Reservation, Reservations, plain_key
from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo
from extender.core.model.vocabulary import GANG, RESERVATION, GroupRef, Preempting, Reason, Victim
from extender.core.outbox import Outbox
from extender.core.parked import ref
from extender.core.planner import Plan, Shortfall, plan_gang
from extender.core.planner.composite_plan import Child, CompositePlan, plan_composite
from extender.core.planner.domains import topology_of
from extender.core.preemption.budgets import Budgets
from extender.core.preemption.domain_victims import select_in_domains
from extender.core.preemption.leaving import Leaving
from extender.core.preemption.victims import (
    COMPOSITE_UNIT,
    Unit,
    already_leaving,
    candidates,
    select,
    view_without,
)
from extender.core.view import ClusterView

_Signature = tuple[int, int, int, int, int, int]
_SHOWN = 5  # victims named in a message; the rest are counted


def _group_ref(group: GroupInfo) -> GroupRef:
    return GroupRef(group.namespace, group.name, group.uid, group.source)


def _required(d: Domain) -> str:
    """"rack r2": the part of the domain the preemptor's slots must stay in, or all of
    it if none is required (a preferred domain it was placed in)."""
    n = d.required or len(d.keys)
    return Domain(d.keys[:n], d.values[:n]).describe()


class Preemptions:
    def __init__(
        self,
        view: ClusterView,
        reservations: Reservations,
        budgets: Budgets,
        explanations: Explanations,
        outbox: Outbox,
    ) -> None:
        self._on = view.config.preemption
        self._scheduler = view.config.scheduler_name
        self._cache = view.cache
        self._reservations = reservations
        self._budgets = budgets
        self._explanations = explanations
        self._outbox = outbox
        self._plan = view.planner
        self.leaving = Leaving(outbox)
        # preemptor -> (what its last fruitless search depended on, what it said).
        self._searched: dict[str, tuple[_Signature, str]] = {}
        self._plain: dict[str, PodInfo] = {}  # plain pods that may preempt, by uid
        # A reservation was released or a hold given up: the queue must pass again.
        self.released = False
        # A composite that preempted -> its children holding its victims' capacity:
        # a refused eviction releases all of their holds (`eviction_refused`).
        self._composites: dict[str, tuple[str, ...]] = {}
        # ... and the words of its preemption, for a child of it complete only after
        # (`composite_preempting`).
        self._composite_words: dict[str, str] = {}

    def new_pass(self) -> None:
        """The queue starts a pass, which sees every release so far: only one made
        during the pass asks for another."""
        self.released = False

    # ----- the pods that may preempt ------------------------------------------------------

    def pod_changed(self, pod: PodInfo) -> None:
        """Keep the pending plain pods of the gang scheduler that kube-scheduler found
        no node for (PodScheduled=False): they may preempt."""
        if (self._on and pod.gang is None and not pod.node_name and pod.unschedulable
                and pod.scheduler_name == self._scheduler and not pod.deleting
                and not pod.gated and not pod.terminal
                and pod.preemption_policy != "Never"):
            self._plain[pod.uid] = pod
        else:
            self._plain.pop(pod.uid, None)
        if pod.deleting or pod.terminal:
            self.leaving.gone(pod.uid)

    def pod_deleted(self, uid: str) -> None:
        pod = self._plain.pop(uid, None)
        if pod is not None:
            self._searched.pop(plain_key(pod), None)
        self.leaving.gone(uid)

    def drop(self, key: str) -> None:
        """The gang (or the composite) is gone."""
        self._searched.pop(key, None)
        self._composite_words.pop(key, None)

    def composite_preempting(self, key: str) -> str | None:
        """What the composite `key`'s last preemption said (its victims, the nodes they
        free), for its children that did not take part in it: a child complete only
        after, which waits for it (`composite_unit.not_planned`). None if it made none
        (or its eviction was refused)."""
        return self._composite_words.get(key)

    def plain_waiting(self) -> list[PodInfo]:
        """Plain preemptors, highest priority first, then oldest."""
        return sorted(self._plain.values(), key=lambda p: (-p.priority, p.creation, p.key))

    def plain_due(self) -> bool:
        """A plain preemptor has not been searched for since the cluster changed."""
        for pod in self._plain.values():
            if not self.could_preempt(pod.priority):
                continue
            key = plain_key(pod)
            memo = self._searched.get(key)
            if (memo is None or memo[0] != self._signature(key)) and (
                    self._reservations.of(pod) is None):
                return True
        return False

    # ----- searching ------------------------------------------------------------------------

    def gang(self, group: GroupInfo, members: Sequence[PodInfo], priority: int, now: float,
             timeout: float) -> Reservation | None:
        """`group` (at `priority`, `gang_priority` of its members) failed to plan: evict
        lower-priority units for it, if that lets its whole plan fit. Returns its held
        reservation."""
        succeeded = self._cache.succeeded(group)

        def plan(view: Snapshot) -> Plan | Shortfall:
            # Only whether it fits: a failed plan's explanation would be most of the
            # search's cost (docs/topology.md, "The search's cost across many domains").
            return self._plan(group, members, succeeded, view, explain=False)

        if not self.could_preempt(priority):
            return None
        parent = self._cache.composites.get(group.parent) if group.parent else None
        never = (group.preemption_policy == "Never"
                 or any(m.preemption_policy == "Never" for m in members)
                 or (parent is not None and parent.preemption_policy == "Never"))
        topo = topology_of(group, [m for m in members if not m.node_name])
        keys = topo.required if topo is not None else ()
        return self._search(group.key, f"gang {group.key}", priority, never, plan, now,
                            timeout, group, None, keys)

    def composite(self, composite: CompositeInfo,
                  children: Sequence[tuple[GroupInfo, Sequence[PodInfo]]], priority: int,
                  now: float, timeout: float) -> list[tuple[GroupInfo, Reservation]] | None:
        """The complete `children` of `composite` (at `priority`, the highest of theirs)
        were not planned together: evict lower-priority units for them all at once, if
        that lets at least minGroupCount of them fit (`plan_composite`, its first pass
        only: a search over choices on every try would multiply the tries' cost), and
        hold the plan of each child that fits. Never some children's victims without
        the others': a composite placed in part is what it must not be. Returns each
        held child and its reservation."""
        if not self.could_preempt(priority):
            return None
        kids = [Child(g, m, self._cache.succeeded(g)) for g, m in children]

        def placed(view: Snapshot) -> CompositePlan:
            return plan_composite(composite, kids, view, self._quiet, budget=0)

        def plan(view: Snapshot) -> Plan | Shortfall:
            out = placed(view)
            if not out.placed:
                return Shortfall(0, 0, "", None)
            return Plan({u: n for p in out.plans.values() for u, n in p.assignments.items()})

        never = (composite.preemption_policy == "Never"
                 or any(g.preemption_policy == "Never" for g, _ in children)
                 or any(m.preemption_policy == "Never" for _, ms in children for m in ms))
        keys = [g.key for g, _ in children]
        found = self._find(composite.key, priority, never, plan, now, children=keys)
        if found is None:
            return None
        chosen, _ = found
        out = placed(view_without(self._cache.snapshot,
                                  [already_leaving(self._cache), *chosen]))
        if not out.placed:
            return None  # cannot be: the search's last try was this very plan
        name = f"CompositePodGroup {composite.namespace}/{composite.name}"
        views = self._evict(composite.key, name, priority, chosen, now)
        held = [(g, self._reservations.reserve(g.key, g.uid, out.plans[g.key], now, timeout,
                                         held="preemption"))
                for g, _ in children if g.key in out.plans]
        self._composites[composite.key] = tuple(g.key for g, _ in held)
        msg = self._words(name, priority, chosen, [r for _, r in held])
        self._composite_words[composite.key] = msg
        for g, _ in children:
            if g.key in out.plans:
                self._explanations.set(g.key, Reason.PREEMPTING, f"gang {g.key}: {msg}", now)
            else:
                self._explanations.set(
                    g.key, Reason.INSUFFICIENT_CAPACITY,
                    f"gang {g.key}: {msg}, for its other groups; this one is placed on its "
                    f"own once they are, when it fits", now)
        first = held[0][0]
        self._outbox.append(Preempting(
            name, _group_ref(first), None, priority, msg, tuple(views),
            tuple(v for _, r in held for v in r.slot_views())))
        return held

    def _quiet(self, group: GroupInfo, members: Sequence[PodInfo], succeeded: int,
               snapshot: Snapshot, /, explain: bool = True) -> Plan | Shortfall:
        """The planner, only asked whether a plan fits (a failed plan's explanation
        would be most of a try's cost)."""
        return self._plan(group, members, succeeded, snapshot, explain=False)

    def pod(self, pod: PodInfo, now: float, timeout: float) -> Reservation | None:
        """A plain preemptor (`plain_waiting`)."""
        def plan(view: Snapshot) -> Plan | Shortfall:
            return plan_gang([pod], 1, view, explain=False)

        if isinstance(plan(self._cache.snapshot), Plan):
            return None  # it fits as it is: kube-scheduler will place it
        return self._search(plain_key(pod), f"pod {pod.key}", pod.priority, False, plan,
                            now, timeout, None, pod)

    def _search(
        self, key: str, name: str, priority: int, never: bool,
        plan: Callable[[Snapshot], Plan | Shortfall], now: float, timeout: float,
        group: GroupInfo | None, pod: PodInfo | None, keys: tuple[str, ...] = (),
    ) -> Reservation | None:
        """`keys`: the topology keys whose one domain the preemptor must stay in (none:
        victims anywhere)."""
        found = self._find(key, priority, never, plan, now, keys)
        if found is None:
            return None
        return self._preempt(key, name, priority, found[0], found[1], now, timeout, group, pod)

    def _find(
        self, key: str, priority: int, never: bool,
        plan: Callable[[Snapshot], Plan | Shortfall], now: float, keys: tuple[str, ...] = (),
        children: Sequence[str] = (),
    ) -> tuple[list[Unit], Plan] | None:
        """The victims the preemptor `key` needs and its plan once they are gone; None
        if there are none to evict, or none will do (then why, on its status, or on
        each of `children`: a composite's, whose members the signature follows too)."""
        if not self.could_preempt(priority):
            return None  # nobody below it: equal priority never preempts
        told = tuple(children) or (key,)
        signature = self._signature(key, children)
        memo = self._searched.get(key)
        if memo is not None and memo[0] == signature:
            if memo[1]:
                for k in told:
                    self._note(k, memo[1], now)
            return None
        self._searched[key] = (signature, "")
        if never:
            note = "it does not preempt lower-priority work (preemptionPolicy: Never)"
            self._searched[key] = (signature, note)
            for k in told:
                self._note(k, note, now)
            return None
        exclude: dict[str, object] = {key: True}
        exclude.update(dict.fromkeys(children, True))
        exclude.update(self.leaving.excluded(now, self._budgets.epoch))
        units, protected = candidates(self._cache, self._reservations, self._budgets,
                                      priority, exclude, self.leaving)
        chosen, result = self._choose(units, plan, keys)
        if chosen == []:
            return None  # pods leaving already make room: it is planned once they are gone
        if chosen is None or not isinstance(result, Plan):
            note = ""
            if keys and units:
                w = word(keys[-1])
                note = (f"it evicts only inside the one {w} it needs, and no {w} has "
                        f"lower-priority work whose eviction makes room")
            if protected:
                more = f" (+{len(protected) - 1} more)" if len(protected) > 1 else ""
                note = (f"lower-priority work that could make room is protected, so it "
                        f"waits: {protected[0]}{more}")
                for k in told:
                    self._note(k, note, now)
            self._searched[key] = (signature, note)
            return None
        return chosen, result

    def _choose(self, units: list[Unit], plan: Callable[[Snapshot], Plan | Shortfall],
                keys: tuple[str, ...]) -> tuple[list[Unit] | None, Plan | Shortfall | None]:
        """The victims and the preemptor's plan once they are gone: [] if the pods
        leaving already make room, None if no set does."""
        snapshot = self._cache.snapshot
        leaving = already_leaving(self._cache)
        if not keys:
            chosen = select(units, lambda v: isinstance(
                plan(view_without(snapshot, [leaving, *v])), Plan))
            result = plan(view_without(snapshot, [leaving, *chosen])) if chosen else None
            return chosen, result
        if isinstance(plan(view_without(snapshot, [leaving])), Plan):
            return [], None
        domains = snapshot.topology()
        choice = select_in_domains(units, domains.groups(keys), domains.of_node(keys),
                                   snapshot, leaving, plan)
        return (None, None) if choice is None else (choice.victims, choice.plan)

    def could_preempt(self, priority: int) -> bool:
        """Whether anything runs or is reserved below `priority`: O(1), so a pass can
        tell at once that a failed gang has nobody to preempt (the common case: one
        priority for everyone)."""
        if not self._on:
            return False
        running = self._cache.lowest_running_priority()
        reserved = self._reservations.lowest_priority()
        return ((running is not None and running < priority)
                or (reserved is not None and reserved < priority))

    def _signature(self, key: str, children: Sequence[str] = ()) -> _Signature:
        c = self._cache
        members = (sum(c.members_epoch.get(k, 0) for k in children) if children
                   else c.members_epoch.get(key, 0))
        return (c.capacity_epoch, c.charge_epoch, members,
                c.unreserve_epoch, self._budgets.epoch, len(self.leaving))

    def _note(self, key: str, note: str, now: float) -> None:
        """Add to the gang's word on why it waits (a plain pod has no status)."""
        st = self._explanations.get(key)
        if st is not None and note not in st.message:
            self._explanations.set(key, st.reason, f"{st.message}; {note}", now)

    # ----- preempting -------------------------------------------------------------------------

    def _preempt(
        self, key: str, name: str, priority: int, chosen: list[Unit], plan: Plan,
        now: float, timeout: float, group: GroupInfo | None, pod: PodInfo | None,
    ) -> Reservation:
        views = self._evict(key, name, priority, chosen, now)
        if group is not None:
            owner = group.uid
        else:
            assert pod is not None
            owner = pod.uid
        res = self._reservations.reserve(key, owner, plan, now, timeout, held="preemption")
        msg = self._words(name, priority, chosen, [res])
        if group is not None:
            self._explanations.set(key, Reason.PREEMPTING, msg, now)
        self._outbox.append(Preempting(
            name, _group_ref(group) if group is not None else None,
            ref(pod) if pod is not None else None, priority, msg, tuple(views),
            res.slot_views()))
        return res

    @staticmethod
    def _words(name: str, priority: int, chosen: Sequence[Unit],
               held: Sequence[Reservation]) -> str:
        nodes = sorted({s.node for res in held for s in res.slots.values()})
        shown = ", ".join(f"{u.name} (priority {u.priority}"
                          + (f", {len(u.pods)} pod(s))" if u.pods else ")")
                          for u in chosen[:_SHOWN])
        more = f" (+{len(chosen) - _SHOWN} more)" if len(chosen) > _SHOWN else ""
        domain = held[0].domain if held else None
        where = f" in {_required(domain)}" if domain is not None else ""
        return (f"{name} (priority {priority}) preempts {len(chosen)} lower-priority "
                f"unit(s): {shown}{more}; the capacity they free on node(s) "
                f"{', '.join(nodes)}{where} is held for it until they are gone")

    def _evict(self, key: str, name: str, priority: int, chosen: Sequence[Unit],
               now: float) -> list[Victim]:
        """Each victim released or evicted whole for the preemptor `key`; as reported."""
        views = []
        why = f"preempted by {name} (priority {priority})"
        for unit in chosen:
            if unit.kind == COMPOSITE_UNIT:
                views += self._evict_composite(key, unit, why, now)
                continue
            vgroup = self._cache.groups.get(unit.key) if unit.kind != "pod" else None
            gref = _group_ref(vgroup) if vgroup is not None else None
            views.append(Victim(unit.name, unit.kind, unit.priority, gref,
                                tuple(ref(p) for p in unit.pods)))
            if unit.kind == RESERVATION:
                res = self._reservations.get(unit.key)
                if res is not None:
                    self._reservations.release(res, why)
                self.released = True
            else:
                self.leaving.evict(unit, key, f"{unit.name}: {why}, which needs its capacity")
            if unit.kind in (GANG, RESERVATION):
                what = (f"its {len(unit.pods)} bound member(s) are evicted"
                        if unit.kind == GANG else "its reservation is released")
                self._explanations.set(
                    unit.key, Reason.PREEMPTED,
                    f"gang {unit.key} (priority {unit.priority}): {why}: {what}; it is "
                    f"placed again whole when there is room", now)
        return views

    def _evict_composite(self, key: str, unit: Unit, why: str, now: float) -> list[Victim]:
        """Every child of the composite `unit` at once: each reservation released and
        every bound member evicted, in one eviction unit (a refusal after any of them
        went has the rest of all of them go: `Leaving`). Reported child by child, as a
        gang or a reservation, so each PodGroup says it was preempted."""
        for gang in unit.releases:
            res = self._reservations.get(gang)
            if res is not None:
                self._reservations.release(res, f"{unit.name}: {why}")
            self.released = True
        if unit.pods:
            self.leaving.evict(unit, key, f"{unit.name}: {why}, which needs its capacity")
        views = []
        for gang in unit.children:
            pods = tuple(ref(p) for p in unit.pods if p.gang == gang)
            if not pods and gang not in unit.releases:
                continue  # nothing of it placed: it only waits with the others again
            group = self._cache.groups.get(gang)
            kind = GANG if pods else RESERVATION
            child = f"gang {gang}" if pods else f"reservation of gang {gang}"
            views.append(Victim(f"{child} (of {unit.name})", kind, unit.priority,
                                _group_ref(group) if group is not None else None, pods))
            what = (f"its {len(pods)} bound member(s) are evicted" if pods
                    else "its reservation is released")
            self._explanations.set(
                gang, Reason.PREEMPTED,
                f"gang {gang} (priority {unit.priority}): {why}, with every group of "
                f"{unit.name}: {what}; they are placed again together when there is room",
                now)
        return views

    # ----- the Eviction API's answers ----------------------------------------------------------

    def eviction_done(self, uid: str) -> None:
        self.leaving.done(uid)

    def eviction_refused(self, uid: str, reason: str, now: float) -> None:
        given_up = self.leaving.refused(uid, now, self._budgets.epoch)
        if given_up is None:
            return
        # A composite's children hold together: all of their holds go, or none would
        # ever be placed (`composite`).
        holders = self._composites.pop(given_up.preemptor, None) or (given_up.preemptor,)
        self._composite_words.pop(given_up.preemptor, None)
        held = [r for k in holders
                if (r := self._reservations.get(k)) is not None and r.held == "preemption"]
        if not held:
            return
        name = given_up.unit.name
        for res in held:
            self._reservations.release(
                res, f"the eviction of {name} was refused ({reason}); it chooses other "
                     f"victims, or waits")
        self._searched.pop(given_up.preemptor, None)
        self.released = True
        for res in held:
            st = self._explanations.get(res.gang)
            if st is not None:
                self._explanations.set(
                    res.gang, Reason.INSUFFICIENT_CAPACITY,
                    f"gang {res.gang}: the eviction of {name} was refused ({reason}); "
                    f"it chooses other victims, or waits", now)
        if given_up.unit.kind == GANG:
            self._explanations.set(
                given_up.unit.key, Reason.BOUND,
                f"gang {given_up.unit.key}: not preempted after all, its eviction was "
                f"refused ({reason})", now)
        elif given_up.unit.kind == COMPOSITE_UNIT:
            for gang in {p.gang for p in given_up.unit.pods if p.gang is not None}:
                self._explanations.set(
                    gang, Reason.BOUND,
                    f"gang {gang}: not preempted after all, the eviction of "
                    f"{given_up.unit.name} was refused ({reason})", now)

    def tick(self, now: float) -> None:
        self.leaving.retry(now)

"""The gang queue's pass: grant reservations, in gang order, to every waiting gang that
fits now (architecture.md §3).

An older gang that does not fit does not block a younger one that does (no head-of-line
blocking), but it is planned first, so the younger one can only take capacity the older
cannot use. Without a limit, that lets a stream of small gangs starve a big one: a
gang that has waited too long gets the capacity of its best plan held as it frees up
(`queue/starvation.py`), unless it can never be placed on the cluster's nodes at all
(`queue/unplaceable.py`) or waits for a pod its members' pod affinity selects: no
capacity, held or freed by victims, places that one before the pod runs. A pass is
skipped when nothing it depends on moved since the last one; a failed gang is planned
again only when what its failure depends on moved (for a gang that waits for a pod: a
pod its affinity selects bound, its members, the nodes).

A gang whose plan fails is told why here, where it was judged: the pass plans it again
without other gangs' reservations to tell "waiting behind" from "short of capacity", and
a gang short of capacity asks provisioning (`core/provisioning.py`) whether it waits for
nodes the cluster autoscaler adds; `core/explain.py` only puts that into words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.core.explain import Behind, Explanations, shortfall_words
from extender.core.ledger import Ledger, Reservation
from extender.core.model import messages
from extender.core.model.constraints import term_matches
from extender.core.model.order import QueueKey, inherited_priority, queue_sort_key
from extender.core.model.types import CompositeInfo, GroupInfo, PodInfo
from extender.core.model.vocabulary import (
    GangHeld,
    GangReserved,
    GroupRef,
    QueueRow,
    Reason,
    WakePods,
)
from extender.core.outbox import Outbox
from extender.core.parked import ref
from extender.core.planner import Plan, Shortfall, plan_group
from extender.core.planner.composite_plan import Child, plan_composite
from extender.core.planner.relations import Term
from extender.core.preemption.preemptor import Preemptions
from extender.core.provisioning import Provisioning
from extender.core.queue.composite_unit import (
    child_words,
    holding,
    not_planned,
    short_words,
    unit_of,
)
from extender.core.queue.starvation import Starvation
from extender.core.queue.unplaceable import Unplaceable, message
from extender.core.queue.waiting import Waiting
from extender.core.view import ClusterView

_FailureSignature = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Remedies:
    """Where a gang the free capacity does not place may still get capacity: victims
    evicted for it (`preemptions`), or nodes the cluster autoscaler adds for it
    (`provisioning`). The pass turns to both for the same gangs, the ones it could not
    place, so they travel as one collaborator, as `ClusterView`'s three do."""

    preemptions: Preemptions
    provisioning: Provisioning


class GangQueue:
    def __init__(
        self,
        view: ClusterView,
        ledger: Ledger,
        waiting: Waiting,
        explanations: Explanations,
        outbox: Outbox,
        remedies: Remedies,
    ) -> None:
        self._config = view.config
        self._cache = cache = view.cache
        # Used part by part (`ledger.reservations`, `waiting.backoffs`, ...): kept whole,
        # their parts reached where used, as the filter keeps them.
        self._ledger = ledger
        self._waiting = waiting
        self._explanations = explanations
        self._outbox = outbox
        self._plan = planner = view.planner
        # The starvation guard and the set-aside gangs are the queue pass's own: nothing
        # else decides with them (the gang manager restores and reads the guard).
        self.starvation = Starvation(view, ledger)
        self._preemptions = remedies.preemptions
        self._provisioning = remedies.provisioning
        self._unplaceable = Unplaceable(cache, planner)
        # A filter-path pass left a failed gang's preemption search to the tick's pass.
        self._search_owed = False
        # gang -> (what its last failed plan depended on, then): unchanged, planning it
        # again would fail the same way.
        self._last_failure: dict[str, _FailureSignature] = {}
        # gang -> its members' required pod affinity terms, while its last plan failed:
        # a pod one of them selects, bound, may place it (it joins a domain the gang may
        # take), though no capacity freed. Only such a pod plans it again, not every pod.
        self._affinity: dict[str, tuple[Term, ...]] = {}
        self._quorum_since: dict[str, float] = {}
        # Gangs whose parked members were woken when the gang became complete but could
        # not be placed: kube-scheduler does not reliably retry a member it parked with
        # "2 of 3 members exist" when the last one appears, so it would keep that stale
        # reason (and wait up to 5 minutes). Once per completion.
        self._told_complete: set[str] = set()
        self._members_version = 0
        self._passed_at: tuple[int, int] | None = None

    # ----- told by the gang manager ------------------------------------------------------

    def members_changed(self, pod: PodInfo | None = None) -> None:
        """A pod or group changed; `pod`: the pod's new copy. One bound that a waiting
        gang's pod affinity selects has that gang planned again."""
        self._members_version += 1
        if pod is None or not self._affinity or not pod.takes_capacity:
            return
        for gang, terms in list(self._affinity.items()):
            if any(term_matches(t, ns, pod) for ns, t in terms):
                del self._affinity[gang]
                self._last_failure.pop(gang, None)

    def quorum_present(self, gang: str, now: float) -> None:
        self._quorum_since.setdefault(gang, now)

    def quorum_seconds(self, gang: str, now: float) -> float | None:
        """Time from the quorum being present to now, once; None if never seen."""
        since = self._quorum_since.pop(gang, None)
        return None if since is None else max(0.0, now - since)

    def start_over(self, gang: str) -> None:
        """The gang was bound or timed out: its next attempt starts from nothing."""
        self._last_failure.pop(gang, None)
        self._affinity.pop(gang, None)
        self._told_complete.discard(gang)
        self.starvation.placed(gang)
        self._unplaceable.drop(gang)

    def drop(self, gang: str) -> None:
        self.start_over(gang)
        self._quorum_since.pop(gang, None)
        self.starvation.drop(gang)
        self._preemptions.drop(gang)

    def gang_left(self, group: GroupInfo) -> None:
        """No pod of ours is left in the gang: they were all deleted, or the pods that
        replaced them name another scheduler (a pod's schedulerName cannot change). Its
        wait for capacity ends as a deleted gang's does; kept, it went on counting while
        the gang had nothing here to wait for, and pods of ours created later starved
        at once, the guard holding capacity for them before --starvation-after. Its
        reservation ends too, whatever it is (a hold, or capacity reserved for a plan):
        every slot in it went with its pod, so nothing waits for it and nothing is
        rejected. Kept, it stayed a reservation of nothing (a hold became one at the
        next pass) until its deadline, timed out, and counted against the gang's
        backoff (architecture.md §4), so its pods of ours created later (a job
        recreating its workers) waited out a backoff they had not earned. A Binding in
        flight for a pod that left keeps its charge: its slot handed it to an
        assumption on the node as the pod left (`Reservations.unreserve`). A gang whose
        commit bound members still has those pods, and is not here: at its deadline it
        is evicted whole (§11).

        A child of a CompositePodGroup with a gang policy has no wait or hold of its
        own, and is reserved with its siblings until the composite is placed (the
        composite waits, holds and is reserved for all its children together, and
        ends it all once none has a pod of ours: `composite_left`); a child planned on
        its own after that (`composite_unit.unit_of`) has its reservation ended here.
        Every gang, a child of either policy too, says then what a PodGroup without
        pods says (`Explanations.members_left`)."""
        self._explanations.members_left(group.key)
        parent = self._cache.composites.get(group.parent) if group.parent else None
        together = parent is not None and parent.min_group_count > 0
        res = self._ledger.reservations.get(group.key)
        if res is not None and (not together or unit_of(group, self._cache) is None):
            self._ledger.reservations.release(res, "no pod of it is ours any more")
        if not together:
            self.drop(group.key)

    def composite_left(self, key: str) -> None:
        """No pod of ours is left in any child of the CompositePodGroup `key`: they name
        another scheduler now (a pod's schedulerName cannot change, so ours were
        deleted), or are all gone. Its wait for capacity ends as a deleted composite's
        does; kept, it went on counting while the composite was not ours, and pods of
        ours brought back later starved at once, the guard holding capacity for them
        before --starvation-after. Its children's reservations end too, holds and
        reserved plans alike (a composite with a gang policy's: a "basic" one's children
        are reserved on their own, `gang_left`): every slot in them went with its pod,
        and kept, each stayed a reservation of nothing (a hold became one at the next
        pass), blocking those children until it timed out and counting that timeout
        against their backoff."""
        composite = self._cache.composites.get(key)
        if composite is not None and composite.min_group_count:  # else each child's own
            reservations = self._ledger.reservations
            for child in self._cache.children(key):
                res = reservations.get(child.key)
                if res is not None:
                    reservations.release(res, f"CompositePodGroup {composite.namespace}/"
                                              f"{composite.name} has no pod of ours left")
        self.drop(key)

    # ----- the pass ------------------------------------------------------------------------

    def run(self, now: float, scheduling: str | None = None) -> None:
        """`scheduling`: the member whose filter call runs this pass; it is in
        kube-scheduler's scheduling cycle, so it needs no wake-up."""
        version = (self._cache.capacity_epoch, self._members_version)
        tick = scheduling is None
        reservations, backoffs = self._ledger.reservations, self._waiting.backoffs
        if (version == self._passed_at and not backoffs.any_ended(now)
                and not self.starvation.due(now)
                and not (tick and (self._search_owed or self._preemptions.plain_due()))):
            return
        self._preemptions.new_pass()
        self.starvation.new_pass()
        if tick:
            self._search_owed = False
        reservations.new_pass()
        # 0. Holds whose nodes have room now become reservations; a composite's
        # children's holds all at once (`_held_together`).
        holds = reservations.held()
        for res in holds:
            together = self._held_together(res, holds)
            if res is together[0] and all(reservations.has_room(r) for r in together):
                for r in together:
                    self._promote(r, now, scheduling)
        # 1. The gangs that wait: complete, not reserved, not bound, not backing off.
        for key in backoffs.ended(now):
            if key in self._cache.groups and key not in reservations:
                backoffs.clear_ended(key, now)  # eligible again
        waiting: list[tuple[QueueKey, GroupInfo, list[PodInfo], str | None]] = []
        # Children of a composite, planned as one unit in their eldest's place (step 4).
        units: dict[str, list[tuple[QueueKey, GroupInfo, list[PodInfo]]]] = {}
        for key, group in self._cache.short_of_quorum():  # not every group ever created
            if key in reservations or backoffs.blocks(key, now):
                continue
            pods, _, done = self._cache.summary(group)
            present = len(pods) + done
            if present < group.min_member:
                self._told_complete.discard(key)
                if pods:
                    self._explanations.set(
                        key, Reason.WAITING_FOR_MEMBERS,
                        messages.members_exist(key, present, group.min_member), now)
                continue
            members = list(pods)
            unit = unit_of(group, self._cache)
            if unit is not None:
                units.setdefault(unit, []).append((self._sort_key(group, members), group,
                                                   members))
                continue
            waiting.append((self._sort_key(group, members), group, members, None))
        for unit, children in units.items():
            first = min(children, key=lambda c: c[0])
            waiting.append((*first, unit))
        # 2. In gang order.
        waiting.sort(key=lambda w: w[0])
        granted: list[str] = []
        for sort_key, group, members, unit in waiting:
            key = group.key
            self._quorum_since.setdefault(key, now)
            if self._composite_leaving(group, units.get(unit or "", []), now):
                continue
            if unit is not None:
                # 4'. A composite's children: planned together, reserved together or not
                # at all (`queue/composite_unit.py`); victims evicted or capacity held for
                # them as one unit too (`_composite_remedies`).
                self._composite(unit, units[unit], now, scheduling, granted)
                continue
            # 3. Unchanged since its last failed plan: it would fail the same way.
            if self._last_failure.get(key) != self._failure_signature(group):
                # 4. Plan the whole gang; reserve, or say why not.
                result = self._plan(group, members, self._cache.succeeded(group),
                                    self._cache.snapshot)
                if isinstance(result, Plan):
                    self._affinity.pop(key, None)
                    self._reserve(group, result, now, scheduling)
                    granted.append(key)
                    continue
                never = self._unplaceable.check(group, members)
                if never is not None:
                    self._affinity.pop(key, None)
                    if never.awaits:  # nodes alone would not place it: it asks for none
                        self._explanations.set(key, Reason.UNPLACEABLE, message(group, never),
                                               now)
                    else:
                        self._unless_asked(group, members, Reason.UNPLACEABLE,
                                           message(group, never), now, unplaceable=True)
                    self.starvation.set_aside(key)
                else:
                    terms = tuple(dict.fromkeys((m.namespace, t) for m in members
                                                for t in m.required_affinity))
                    if terms:
                        self._affinity[key] = terms
                    self._short(group, members, sort_key, result, granted, now)
                    if result.awaits:
                        self.starvation.set_aside(key)  # it waits for a pod, not capacity
                    else:
                        self.starvation.waiting(key, now)
                self._last_failure[key] = self._failure_signature(group)
                # 5. Complete but not placeable: wake its parked members once.
                if key not in self._told_complete:
                    self._told_complete.add(key)
                    parked = self._waiting.parked.members(members, self._ledger.binds.waiting,
                                                          scheduling)
                    st = self._explanations.get(key)
                    if parked and st is not None:
                        self._outbox.append(WakePods(f"gang {key} complete: {st.reason}",
                                                     parked, key))
            if self._unplaceable.set_aside(key) or self._awaits_pod(key):
                continue  # no victims or held capacity would place it
            timeout = self._config.timeout_for(group.schedule_timeout_seconds)
            # 6. Evict lower-priority work for it: on the tick only, never on
            # kube-scheduler's loop (a search plans it a handful of times).
            priority = sort_key.priority
            if not self._preemptions.could_preempt(priority):
                pass  # nobody below it: nothing to search, now or on the tick
            elif tick:
                if self._preemptions.gang(group, members, priority, now, timeout) is not None:
                    self._last_failure.pop(key, None)
                    granted.append(key)
                    continue
            else:
                self._search_owed = True
            # 7. Starved: capacity held for it as it frees up, on nodes no older
            # holder holds.
            held = self.starvation.guard(group, members, now, timeout)
            if held is not None:
                self._held(group, held, now)
                granted.append(key)
        # 8. Plain pods of the gang scheduler that no node fits may preempt too.
        if tick:
            for pod in self._preemptions.plain_waiting():
                if reservations.of(pod) is None:
                    self._preemptions.pod(pod, now, self._config.default_timeout_seconds)
        reservations.new_pass()
        # A gang whose hold was taken over, or whose reservation was preempted, waits
        # again: the next pass plans it.
        again = self.starvation.took_over or self._preemptions.released
        self._passed_at = None if again else (self._cache.capacity_epoch,
                                              self._members_version)

    def _composite_leaving(self, group: GroupInfo,
                           children: list[tuple[QueueKey, GroupInfo, list[PodInfo]]],
                           now: float) -> bool:
        """Whether `group` (with its siblings planned with it, `children`) waits because
        its composite is being preempted whole. Its siblings being evicted still count
        as placed until they are gone (`composite_unit.placed`), so a child planned in
        the pass that chose them, or while they terminate, would be planned alone,
        reserved and bound beside them, and left running alone once they went: a
        composite below minGroupCount. Checked here, not at the filter, because a
        direct commit binds with no filter call; keyed by the composite, so a child
        created after the victims were chosen waits too."""
        if not group.parent or not self._preemptions.leaving.gang_leaving(group.parent):
            return False
        name = group.parent.split(":", 1)[-1]
        for g in [group, *(c[1] for c in children if c[1] is not group)]:
            self._explanations.set(
                g.key, Reason.PREEMPTED,
                f"gang {g.key}: its CompositePodGroup {name} is being preempted, the "
                f"members of its placed groups evicted; it is planned with the composite "
                f"again once they are gone", now)
        return True

    def _composite(self, key: str, children: list[tuple[QueueKey, GroupInfo, list[PodInfo]]],
                   now: float, scheduling: str | None, granted: list[str]) -> None:
        """Step 4 for a composite's complete children: plan them together
        (`plan_composite`: largest first, then a bounded search over choices of them);
        reserve every one that fits if at least minGroupCount do, else none, and tell
        each why. One deadline for all: the earliest any of them asks for, so none of them is
        left reserved after the others timed out."""
        children = sorted(children, key=lambda c: c[1].name)
        groups = [g for _, g, _ in children]
        composite = self._cache.composites.get(key)
        why = not_planned(key, composite, groups, holding(
            key, self._cache, self._ledger.reservations, self._preemptions))
        if why is not None or composite is None:
            reason, msg = why or (Reason.WAITING_FOR_MEMBERS, "")
            for g in groups:
                self._explanations.set(g.key, reason, f"gang {g.key}: {msg}", now)
            return
        result = plan_composite(
            composite, [Child(g, m, self._cache.succeeded(g)) for _, g, m in children],
            self._cache.snapshot, self._plan)
        timeout = min(self._config.timeout_for(g.schedule_timeout_seconds) for g in groups)
        if not result.placed:
            msg = short_words(key, composite, list(result.plans), len(groups), result.where,
                              result.searched, result.tried)
            for g in groups:
                own = result.short.get(g.key)
                self._explanations.set(
                    g.key, Reason.INSUFFICIENT_CAPACITY,
                    f"gang {g.key}: {msg}" + (f"; this one: {child_words(own)}" if own else ""),
                    now)
            if not any(s.awaits or s.invalid for s in result.short.values()):
                self._composite_remedies(composite, children, now, timeout,
                                         scheduling is None, granted)
            return
        self.starvation.placed(key)
        reserve = self._ledger.reservations.reserve
        reserved = [(g, reserve(g.key, g.uid, result.plans[g.key], now, timeout))
                    for g in groups if g.key in result.plans]
        for g, res in reserved:  # all reserved before the first commit looks at them
            self._announce(g, res, now, scheduling)
            granted.append(g.key)
        for g in groups:
            own = result.short.get(g.key)
            if own is not None:  # placed later, on its own (`composite.unit_of`)
                self._explanations.set(g.key, Reason.INSUFFICIENT_CAPACITY,
                                       f"gang {g.key}: {child_words(own)}", now)

    def _composite_remedies(
        self, composite: CompositeInfo, children: list[tuple[QueueKey, GroupInfo, list[PodInfo]]],
        now: float, timeout: float, tick: bool, granted: list[str],
    ) -> None:
        """Steps 6 and 7 for a composite whose complete children do not fit together:
        lower-priority work evicted for all the children it needs at once
        (`Preemptions.composite`), else, once it has starved, the capacity of its
        forward plan held for them as one unit (`Starvation.guard_composite`). Its
        wait is the composite's, from its first failed plan."""
        self.starvation.waiting(composite.key, now)
        kids = [(g, m) for _, g, m in children]
        priority = min(c[0] for c in children).priority
        if self._preemptions.could_preempt(priority):
            if tick:
                held = self._preemptions.composite(composite, kids, priority, now, timeout)
                if held is not None:
                    self.starvation.placed(composite.key)
                    granted.extend(g.key for g, _ in held)
                    return
            else:
                self._search_owed = True
        holds = self.starvation.guard_composite(composite, kids, now, timeout)
        for g, res in holds or ():
            self._held(g, res, now, waited_as=composite.key)
            granted.append(g.key)

    def _held_together(self, res: Reservation, held: Sequence[Reservation]) -> list[Reservation]:
        """`res` and the holds of its composite siblings, if it is a child of a
        composite with a gang policy: they become reservations together, or a child
        would wait, reserved, for siblings whose victims are still leaving, and its
        reservation could end first."""
        group = self._cache.groups.get(res.gang)
        parent = group.parent if group is not None else ""
        composite = self._cache.composites.get(parent) if parent else None
        if composite is None or composite.min_group_count == 0:
            return [res]
        out = []
        for r in held:
            g = self._cache.groups.get(r.gang)
            if g is not None and g.parent == parent:
                out.append(r)
        return out or [res]

    def _short(self, group: GroupInfo, members: list[PodInfo], sort_key: QueueKey,
               shortfall: Shortfall, granted_now: Sequence[str], now: float) -> None:
        """Step 4's plan failed: the gang's reason (architecture.md §5). Short of
        capacity only if it would not fit without the other gangs' reservations either
        (then it is waiting behind the first of them, in this pass's grants first)."""
        behind = None
        reservations = self._ledger.reservations
        holders = ([k for k in reservations if k != group.key]
                   if not (shortfall.invalid or shortfall.awaits) else [])
        if holders:
            without = plan_group(group, members, self._cache.succeeded(group),
                                 reservations.without_reservations(), explain=False)
            if isinstance(without, Plan):
                ahead = sorted(holders, key=lambda k: (k not in granted_now, k))
                # "older" only when the holder really is ahead in gang order; a younger
                # gang may hold capacity it got while this one was incomplete.
                holder = self._cache.groups.get(ahead[0])
                older = holder is not None and queue_sort_key(
                    holder, self._cache.members(holder)) < sort_key
                behind = Behind(ahead, older)
        reason, msg = shortfall_words(group.key, shortfall, behind)
        if reason == Reason.INSUFFICIENT_CAPACITY:
            self._unless_asked(group, members, reason, msg, now)
        else:
            self._explanations.set(group.key, reason, msg, now)

    def _unless_asked(self, group: GroupInfo, members: list[PodInfo], reason: Reason,
                      msg: str, now: float, unplaceable: bool = False) -> None:
        """`reason` and `msg`, unless the gang asks the autoscaler for what it lacks:
        then what it waits for (`Provisioning.waiting`) is its status."""
        waits = self._provisioning.waiting(group, members, msg, now, unplaceable)
        if waits is not None:
            self._explanations.set(group.key, Reason.WAITING_FOR_PROVISIONING, waits, now)
        else:
            self._explanations.set(group.key, reason, msg, now)

    def _failure_signature(self, group: GroupInfo) -> _FailureSignature:
        """What a failed plan depends on. "Waiting behind older gang X" also depends on
        which capacity is reserved, so it is re-checked whenever a slot is released."""
        if self._unplaceable.set_aside(group.key):
            # Only other nodes can change that: not planned again on every pod that
            # finishes (the test compares with all of the nodes' allocatable).
            return (self._cache.node_epoch, self._cache.members_epoch.get(group.key, 0),
                    group.min_member, -2)
        if self._awaits_pod(group.key):
            # Nor is a gang that waits for a pod: capacity freed does not bring it; the
            # pod bound does (`members_changed` forgets this signature then).
            return (self._cache.node_epoch, self._cache.members_epoch.get(group.key, 0),
                    group.min_member, -3)
        st = self._explanations.get(group.key)
        behind = st is not None and st.reason == Reason.WAITING_BEHIND_OLDER_GANG
        return (
            self._cache.capacity_epoch,
            self._cache.members_epoch.get(group.key, 0),
            group.min_member,
            self._cache.unreserve_epoch if behind else -1,
        )

    def _awaits_pod(self, gang: str) -> bool:
        """The gang's last plan failed for want of a pod its members' affinity selects."""
        st = self._explanations.get(gang)
        return st is not None and st.reason == Reason.WAITING_FOR_POD_AFFINITY

    def _reserve(self, group: GroupInfo, plan: Plan, now: float, scheduling: str | None) -> None:
        timeout = self._config.timeout_for(group.schedule_timeout_seconds)
        res = self._ledger.reservations.reserve(group.key, group.uid, plan, now, timeout)
        self._announce(group, res, now, scheduling)

    def _promote(self, res: Reservation, now: float, scheduling: str | None) -> None:
        group = self._cache.groups.get(res.gang)
        self._ledger.reservations.promote(res, now)
        if group is not None:
            if group.parent:
                # A composite's holds become reservations together: its wait is over, as
                # when it is reserved without starving (`_composite`). Kept, it would
                # make the composite starve at once the next time it waits.
                self.starvation.placed(group.parent)
            self._announce(group, res, now, scheduling)
            return
        # A plain preemptor: kube-scheduler parked it (no node fitted), wake it.
        pods = tuple(ref(s.pod) for s in res.slots.values() if s.pod.uid != scheduling)
        if pods:
            self._outbox.append(WakePods(f"capacity held for {res.gang} is free", pods))

    def _held(self, group: GroupInfo, res: Reservation, now: float,
              waited_as: str = "") -> None:
        """`waited_as`: the key whose wait it is (a composite's, for its children)."""
        self._last_failure.pop(group.key, None)
        for lost in self.starvation.taken_over:
            self._explanations.set(
                lost, Reason.INSUFFICIENT_CAPACITY,
                f"gang {lost}: the capacity held for it was taken over by gang {group.key}, "
                f"ahead of it in the queue; it waits again", now)
        nodes = sorted({s.node for s in res.slots.values()})
        waited = self.starvation.waited(waited_as or group.key, now) or 0.0
        busy = [n for n in nodes if any(v < 0 for v in self._cache.free.get(n, {}).values())]
        where = f" in {res.domain.describe()}" if res.domain is not None else ""
        msg = (
            f"gang {group.key}: waited {waited:.0f}s for capacity (--starvation-after "
            f"{self._config.starvation_after_seconds:g}s); {len(res.slots)} slot(s) held for "
            f"it on node(s) {', '.join(nodes)}{where}, "
            + (f"freeing as the pods on {', '.join(busy)} finish; " if busy else "")
            + "younger gangs and pods use only capacity elsewhere"
        )
        self._explanations.set(group.key, Reason.CAPACITY_HELD, msg, now)
        self._outbox.append(GangHeld(GroupRef(group.namespace, group.name, group.uid,
                                              group.source), msg,
                                     res.slot_views(), waited))

    def _announce(self, group: GroupInfo, res: Reservation, now: float,
                  scheduling: str | None) -> None:
        """A reservation is made (or a hold became one): say so, wake the members."""
        self._last_failure.pop(group.key, None)
        self.starvation.placed(group.key)
        nodes = {s.node for s in res.slots.values()}
        where = f" in {res.domain.describe()}" if res.domain is not None else ""
        msg = (
            f"gang {group.key}: reserved {len(res.slots)} slot(s) on {len(nodes)} node(s)"
            f"{where} for {res.timeout:g}s"
            f"{self._config.timeout_capped(group.schedule_timeout_seconds)}"
            + self._cache.devices.planned_words(self._cache.nodes,
                                                [s.pod for s in res.slots.values()])
        )
        self._explanations.set(group.key, Reason.RESERVED, msg, now)
        gref = GroupRef(group.namespace, group.name, group.uid, group.source)
        self._outbox.append(GangReserved(gref, msg, res.slot_views(), res.created,
                                         res.deadline))
        # Members the commit binds now need no wake-up patch: only those kube-scheduler
        # must still place (volumes, claims) do (architecture.md §7).
        self._ledger.commit(group, now)
        parked = self._waiting.parked.members(self._cache.members(group),
                                              self._ledger.binds.in_progress(), scheduling)
        if parked:
            self._outbox.append(WakePods(f"gang {group.key} reserved", parked, group.key))

    def _sort_key(self, group: GroupInfo, members: list[PodInfo]) -> QueueKey:
        """Its place in the queue; where its members have no priority, an upstream
        PodGroup's own spec.priority holds, else a child of a CompositePodGroup inherits
        the composite's (`order.gang_priority`)."""
        parent = self._cache.composites.get(group.parent) if group.parent else None
        return queue_sort_key(group, members, inherited_priority(group, parent))

    # ----- view ------------------------------------------------------------------------------

    def rows(self) -> list[QueueRow]:
        """Gangs not yet bound, in the order capacity is granted."""
        rows = []
        for key, group in self._cache.groups.items():
            members, bound, present = self._cache.quorum_counts(group)
            if bound >= group.min_member or not members:
                continue  # running or finished, or no pods yet
            rows.append((self._sort_key(group, members),
                         QueueRow(key, group.min_member, present, bound,
                                  self._explanations.get(key))))
        rows.sort(key=lambda r: r[0])
        return [r[1] for r in rows]

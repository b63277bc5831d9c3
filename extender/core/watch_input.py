"""What the watches of pods and pod groups mean for the core: the gang manager's watch
input, kept apart so that the one door (manager.py) stays a list of doors.

A pod event can touch nearly every part: the cache's capacity, the ledger's slots and
waiting binds, preemptions, parked members, the arrival clock, the queue, and for a Kueue
pod group the group derived from its pods. A pod group event restores what its status
kept over a restart (backoff, starvation clock) and may complete a gang whose binds wait.
A JobSet's pod joins the gang its JobSet's split gives it (`sources.jobset_resolve`),
decided here as the pod comes in and again for all of them when the split changes.
Both run on the server's one event loop, like the manager that hands them over.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Set

from extender.core.cache.jobset_pods import JobSetPods
from extender.core.model import messages
from extender.core.model.sources import JOBSET, jobset_resolve, kueue_group
from extender.core.model.types import (
    KUEUE,
    NOT_A_MEMBER,
    CompositeInfo,
    GroupInfo,
    PodInfo,
    gang_key,
)
from extender.core.model.vocabulary import WakePods
from extender.core.planner.warmup import Warmup
from extender.core.wiring import Core

# A pod first seen this long after its creationTimestamp (second resolution, the API
# server's clock) was not just created: listed after a restart, not arriving.
_ARRIVAL_MAX_AGE_SECONDS = 10.0
KUEUE_PREFIX = KUEUE + ":"  # of a Kueue pod group's gang key (types.gang_key)


class WatchInput:
    def __init__(self, core: Core) -> None:
        self._core = core
        self._cache = core.cache
        self._ledger = core.ledger
        self._reservations = core.ledger.reservations
        self._binds = core.ledger.binds
        self._warmup = Warmup()
        # Pods a filter call told of before the watch delivered them: uid -> when. Only
        # a relist can tell the rest of the core that such a pod is gone, if it went
        # while the watch was down (`pods_listed`).
        self._unlisted: dict[str, float] = {}
        self._jobset_pods = JobSetPods()

    def on_pod_from_filter(self, pod: PodInfo, now: float) -> None:
        """A pod a filter call asks about, which the watch has not delivered yet."""
        self.on_pod(pod, now)
        self._unlisted[pod.uid] = now

    def pods_listed(self, listed: Set[str], began: float, now: float) -> None:
        """A list of every pod, begun at `began`, showed `listed` (uids): any other pod
        the cache holds is gone, however the core learned of it, unless it was learned
        after the list began (a filter call's pod created during the list, which the
        list may not show). Without this a pod created and deleted while the watch was
        down, learned from a filter call, held a slot for good, and its gang waited for
        a bind that never came."""
        gone = [uid for uid in self._cache.pods
                if uid not in listed and self._unlisted.get(uid, -math.inf) < began]
        for uid in gone:
            self.on_pod_deleted(uid, now)
        # A Binding whose outcome was unknown before the list began: had it taken effect,
        # the list would have shown the pod bound, and `on_pod` settled it then.
        for uid in self._binds.unknown_before(began):
            self._binds.settle(uid)

    def on_pod(self, pod: PodInfo, now: float) -> None:
        c = self._core
        if self._unlisted:
            self._unlisted.pop(pod.uid, None)
        if pod.gang is not None and pod.scheduler_name != c.config.scheduler_name:
            # Another scheduler's gang (Volcano's, Coscheduling's, the default scheduler's
            # under Kueue): its capacity once bound, never a member planned or reported here.
            pod = dataclasses.replace(pod, membership=NOT_A_MEMBER)
        elif pod.membership is not None and pod.membership.jobset is not None:
            pod = self._resolved(pod)
        self._jobset_pods.seen(pod)
        if pod.node_name:  # the watch delivered it bound: fresh only a moment more
            self._ledger.staleness.seen_bound(pod.uid, now)
        if pod.node_name or pod.terminal or pod.deleting:
            self._ledger.staleness.landed(pod.uid)
            self._binds.settle(pod.uid)
        old = self._cache.pods.get(pod.uid)
        if old is not None and old.node_name and not pod.node_name:
            # A stale copy (e.g. the filter request's informer copy) must never undo a
            # binding already seen.
            pod = dataclasses.replace(pod, node_name=old.node_name)
        gang = pod.gang
        old_gang = old.gang if old is not None else None
        if old_gang is not None and old_gang != gang:
            self._left(pod, old_gang)
        pending = not (pod.node_name or pod.terminal or pod.deleting or pod.gated)
        if gang is not None and pending and (
            (old is None and now - pod.creation < _ARRIVAL_MAX_AGE_SECONDS)
            or (old is not None and (old.gated or old_gang != gang))
        ):
            # Created just now, its scheduling gates lifted, or labelled into the gang
            # (by a controller that labels the pods it made, or moved from another
            # gang): the gang is arriving. A relabel is seen as it happens (the pod was
            # known before), so however old the pod, it joins the gang now.
            c.arrivals.member_arrived(gang, pod.uid, now)
        self.pod_changed(pod, old, now)

    def _left(self, pod: PodInfo, old_gang: str) -> float | None:
        """Relabelled out of its gang (or moved by its JobSet's split): it no longer has
        that gang's slot or bind, nor counts as its arrival. Returns when it had arrived
        there (None: not seen arriving)."""
        left = f"pod {pod.key} left gang {old_gang}"
        old_res = self._reservations.get(old_gang)
        if old_res is not None and pod.uid in old_res.slots:
            self._reservations.unreserve(old_res, pod.uid, left)
        self._binds.reject(pod.uid, left)
        return self._core.arrivals.member_left(old_gang, pod.uid)

    def _resolved(self, pod: PodInfo) -> PodInfo:
        """`pod` in the gang its JobSet's split gives it, as the JobSet's gang in the
        cache says (the set's gang while the JobSet is not known)."""
        m = pod.membership
        if m is None or m.jobset is None:
            return pod
        group = self._cache.groups.get(gang_key(JOBSET, pod.namespace, m.jobset.set_gang))
        resolved = jobset_resolve(m, group.jobset_split if group is not None else None)
        return pod if resolved is m else dataclasses.replace(pod, membership=resolved)

    def _split_changed(self, group: GroupInfo, now: float) -> None:
        """A JobSet's split, read for the first time or changed: each of its pods moves
        to the gang it now gives, as a relabelled pod does (its tallies move, it leaves
        its old gang's slot and waiting bind)."""
        for uid in self._jobset_pods.of(group.key):
            old = self._cache.pods.get(uid)
            if old is None:
                continue
            pod = self._resolved(old)
            if pod is old or pod.gang == old.gang:
                continue
            arrived = self._left(pod, old.gang) if old.gang is not None else None
            if arrived is not None and pod.gang is not None:
                # Our own split moved it, not its creator: it arrived when it did.
                self._core.arrivals.member_arrived(pod.gang, pod.uid, arrived)
            self.pod_changed(pod, old, now)

    def pod_changed(self, pod: PodInfo, old: PodInfo | None, now: float) -> None:
        """What every new copy of a pod means, from the watch (`on_pod`) or from a
        Binding this process made (`GangManager.binding_finished`)."""
        c, gang = self._core, pod.gang
        old_gang = old.gang if old is not None else None
        res = self._reservations.of(pod)
        gone = pod.terminal or pod.deleting or pod.gated
        if res is not None and pod.uid in res.slots and (pod.node_name or gone):
            self._reservations.unreserve(
                res, pod.uid, f"pod {pod.key} is being deleted" if gone else None,
                bound_here=not gone and res.slots[pod.uid].node == pod.node_name,
            )
            if gang is None:  # a plain preemptor's own reservation has done its job
                self._reservations.bound(res.gang)
        c.preemptions.pod_changed(pod)
        if gone:
            self._binds.reject(pod.uid, messages.pod_gone(pod.key))
        if pod.node_name or gone or gang is None:
            c.parked.passed(pod.uid)  # nothing left to wake it for
        nominated = self._cache.nominated_to(pod.uid)
        self._cache.upsert_pod(pod)
        if old is None and gang is not None and not pod.node_name:
            group = self._cache.groups.get(gang)
            if group is not None:  # a new member: its plan's indexes, built now
                self._warmup.member(group, pod, self._cache.snapshot)
        if pod.takes_capacity:
            # Bound by anyone onto a node with reservations: slots it squeezes out move now.
            self._reservations.squeezed(pod.node_name)
        if nominated and self._cache.nominated_to(pod.uid) != nominated:
            self._nomination_ended(now)
        c.queue.members_changed(pod)  # a gang waiting for this pod (its affinity) plans
        if old_gang != gang:
            self._derive_group(old_gang, now)
            self._left_gang(old_gang)
        self._derive_group(gang, now)
        if gang is not None:
            c.timeouts.check_quorum_bound(gang, now)
        c.disruptions.pod_changed(pod, old, now)

    def on_pod_deleted(self, uid: str, now: float | None = None) -> None:
        c = self._core
        self._unlisted.pop(uid, None)
        self._jobset_pods.drop(uid)
        c.tombstones.add(uid, now)
        self._ledger.staleness.landed(uid)
        self._binds.settle(uid)
        pod = self._cache.pods.get(uid)
        if pod is None:
            return
        res = self._reservations.of(pod)
        if res is not None and uid in res.slots:
            self._reservations.unreserve(res, uid, messages.pod_deleted(pod.key))
            if pod.gang is None:
                self._reservations.bound(res.gang)
        c.preemptions.pod_deleted(uid)
        self._binds.reject(uid, messages.pod_deleted(pod.key))
        c.parked.drop(uid)
        if pod.gang is not None:
            # Gone, it no longer says its gang is being created: the assembly wait would
            # hold a member's filter call on it, and connections be opened ahead for a
            # commit that is not coming, until the gang's clock aged out.
            c.arrivals.member_left(pod.gang, uid)
        nominated = self._cache.nominated_to(uid)
        self._cache.remove_pod(uid)
        if nominated:
            self._nomination_ended(now if now is not None else 0.0)
        c.queue.members_changed()
        c.disruptions.pod_deleted(pod, now if now is not None else 0.0)
        self._derive_group(pod.gang, now if now is not None else 0.0)
        self._left_gang(pod.gang)

    def _left_gang(self, gang: str | None) -> None:
        """A pod left `gang` (deleted, relabelled out, moved by its JobSet's split): if
        that was its last pod of ours, the gang is no longer waiting here (its pods name
        another scheduler now, or are all gone), and its wait ends
        (`GangQueue.gang_left`); and if it was the last in every child of its
        CompositePodGroup, the composite's (`GangQueue.composite_left`). Walks the
        composite's children only when `gang` has no pod left, which is rare."""
        group = self._cache.groups.get(gang) if gang is not None else None
        if group is None or self._cache.has_pods(group.key):
            return
        queue = self._core.queue
        queue.gang_left(group)
        if not group.parent:
            return
        if any(self._cache.has_pods(g.key) for g in self._cache.children(group.parent)):
            return
        queue.composite_left(group.parent)

    def _nomination_ended(self, now: float) -> None:
        """Capacity nominated to a pod is no longer kept for it (bound, deleted, its
        nomination cleared or moved): the reserved gangs whose commit it held up commit
        now, and their members turned away meanwhile (a slot dropped for want of room)
        are woken, so that kube-scheduler brings them back for a slot at once rather than
        at its next flush or the gang's deadline (architecture.md §11). Nominations are
        rare and so are reservations: a walk of the reservations is cheap."""
        c = self._core
        for res in list(self._reservations.values()):
            group = self._cache.groups.get(res.gang)
            if group is None or res.held is not None:
                continue
            self._ledger.commit(group, now)
            slotless = [m for m in self._cache.members(group) if m.uid not in res.slots]
            parked = c.parked.members(slotless, self._binds.in_progress(), None)
            if parked:
                c.outbox.append(WakePods(
                    f"gang {group.key}: capacity nominated to another pod is free again",
                    parked, group.key))

    def _derive_group(self, gang: str | None, now: float) -> None:
        """A Kueue pod group has no object: its group follows its pods, created with the
        first of them, resized with their declared count, gone with the last
        (sources.kueue_group)."""
        if gang is None or not gang.startswith(KUEUE_PREFIX):
            return
        old = self._cache.groups.get(gang)
        new = kueue_group(gang, self._cache.gang_pods(gang), old)
        if new is None:
            if old is not None:
                self.on_group_deleted(gang)
        elif new != old:
            self.on_group(new, now)

    def on_group(self, group: GroupInfo | CompositeInfo, now: float) -> None:
        c = self._core
        if isinstance(group, CompositeInfo):
            # Its children are planned with it, and committed together
            # (`queue/composite_unit.py`): both look again at what it asks.
            c.starvation.restore(self._cache.composites.get(group.key), group)
            self._cache.upsert_composite(group)
            c.queue.members_changed()
            c.disruptions.group_changed(group.key, now)  # its mode: its children with it
            return
        old = self._cache.groups.get(group.key)
        if c.backoffs.group_changed(old, group):
            c.explanations.retry_limit_lifted(group.key)
        restored = (c.backoffs.restore(old, group) if group.key not in self._reservations
                    else None)  # a gang reserved here is past any backoff it recorded
        if restored is not None:
            c.timeouts.restored(group, restored, now)
        c.starvation.restore(old, group)
        res = self._reservations.get(group.key)
        if res is not None and res.group_uid != group.uid:
            self._reservations.release(res, f"PodGroup {group.key} was recreated")
        elif old is not None and old.uid != group.uid:
            self._binds.withdraw(group.key, f"PodGroup {group.key} was recreated")
        self._cache.upsert_group(group)
        if group.jobset_split is not None and (old is None
                                               or old.jobset_split != group.jobset_split):
            self._split_changed(group, now)
        c.queue.members_changed()
        # A lower minMember may complete a gang whose binds wait.
        self._ledger.commit(group, now)
        c.timeouts.check_quorum_bound(group.key, now)
        c.disruptions.group_changed(group.key, now)

    def on_group_deleted(self, key: str) -> None:
        c = self._core
        if self._cache.remove_composite(key) is not None:
            c.queue.members_changed()
            c.queue.drop(key)  # its wait for capacity and its preemption search
            c.disruptions.group_deleted(key)
            return
        res = self._reservations.get(key)
        if res is not None:
            self._reservations.release(res, f"PodGroup {key} was deleted")
        else:  # its quorum bound, members or extras may still be binding
            self._binds.withdraw(key, f"PodGroup {key} was deleted")
        c.backoffs.drop(key)
        c.provisioning.drop(key)
        c.explanations.drop(key)
        c.queue.drop(key)
        c.arrivals.drop(key)
        c.disruptions.group_deleted(key)
        self._cache.remove_group(key)
        c.queue.members_changed()

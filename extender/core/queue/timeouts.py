"""How a reservation ends for its gang: its quorum is bound, or its deadline passes
(architecture.md §4). The ledger keeps the reservation; this says what its end means
for the gang (backoff, status, the transition reported, a partial gang evicted).

At the deadline the reservation is released as a whole, every waiting bind of the gang is
rejected (kube-scheduler forgets and re-queues those pods), and the group backs off, or
is Failed at the retry limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.explain import Explanations
from extender.core.ledger import Ledger, Reservation
from extender.core.model import messages
from extender.core.model.types import GroupInfo, split_gang_key
from extender.core.model.vocabulary import EvictPods, GangBound, GangTimedOut, GroupRef, Reason
from extender.core.outbox import Outbox
from extender.core.parked import ref
from extender.core.queue.backoff import Backoff, Backoffs
from extender.core.queue.gang_queue import GangQueue
from extender.core.view import ClusterView

# After a commit, its Bindings (and kube-scheduler's retries of any that failed) get at
# least this long before the reservation may time out and the gang be called partial.
COMMIT_GRACE_SECONDS = 10.0


@dataclass(frozen=True, slots=True, eq=False)
class Timeouts:
    """Keeps nothing of its own (the ledger keeps the reservations, the backoffs the
    retries), so it is its collaborators alone: frozen, since the core is wired once
    (`Core.wire`), and compared by identity, as a part is."""

    view: ClusterView
    ledger: Ledger
    backoffs: Backoffs
    explanations: Explanations
    queue: GangQueue
    outbox: Outbox

    def expire(self, now: float) -> None:
        """Release every reservation past its deadline, unless its Bindings are in
        flight (their answers decide) or it committed a moment ago (failed Bindings get
        kube-scheduler's retry first)."""
        for res in self.ledger.reservations.expired(now):
            if self.ledger.binds.binding_in_flight(res.gang):
                continue
            if res.committed_at is not None and now < res.committed_at + COMMIT_GRACE_SECONDS:
                continue
            if res.gang not in self.view.cache.groups and res.gang.startswith("pod "):
                # A plain preemptor's own reservation: nothing to back off, it may
                # preempt again if it is still unschedulable.
                self.ledger.reservations.release(res, f"{res.gang} was not bound in time")
                continue
            self._time_out(res, now)

    def restored(self, group: GroupInfo, bo: Backoff, now: float) -> None:
        """A backoff carried over from the group's status (`Backoffs.restore`): the gang
        says why it waits, as it did when it timed out. Nothing to say when that backoff
        has ended: the next pass plans the gang."""
        if bo.failed:
            reason = Reason.FAILED
            body = (f"timed out {bo.attempts} time(s); retry limit "
                    f"{self.view.config.backoff.retry_limit} reached, the group is Failed")
        elif bo.until > now:
            reason = Reason.BACKING_OFF
            body = (f"timed out {bo.attempts} time(s); backing off {bo.until - now:.0f}s "
                    f"more (carried over from status.requeueState)")
        else:
            return
        self.explanations.set(group.key, reason, f"gang {group.key}: {body}", now)

    def check_quorum_bound(self, gang: str, now: float) -> None:
        group = self.view.cache.groups.get(gang)
        # This runs on every event of every member: the count is kept, not walked
        # (cache/tally.py), and only gangs with a reservation have anything to finish.
        if group is None or gang not in self.ledger.reservations:
            return
        if self.view.cache.tally(group).bound_or_succeeded < group.min_member:
            return
        if self.ledger.reservations.bound(gang) is None:
            return
        if self.backoffs.drop(gang):
            self.explanations.retry_limit_lifted(gang)
        self.queue.start_over(gang)
        seconds = self.queue.quorum_seconds(gang, now)
        msg = messages.quorum_bound(gang, group.min_member)
        self.explanations.set(gang, Reason.BOUND, msg, now)
        gref = GroupRef(group.namespace, group.name, group.uid, group.source)
        self.outbox.append(GangBound(gref, msg, seconds))

    def _time_out(self, res: Reservation, now: float) -> None:
        group = self.view.cache.groups.get(res.gang)
        assembled = self.ledger.binds.assembled(group) if group else 0
        need = group.min_member if group else 0
        source, namespace, name = split_gang_key(res.gang)
        gref = GroupRef(namespace, name, res.group_uid, source)
        bo = self.backoffs.timed_out(gref, now)
        policy = self.view.config.backoff
        if bo.failed:
            reason = Reason.FAILED
            body = (
                f"timed out {bo.attempts} time(s) with {assembled} of {need} members ready; "
                f"retry limit {policy.retry_limit} reached, the group is Failed"
            )
        else:
            reason = Reason.BACKING_OFF
            body = (
                f"timed out after {now - res.created:.0f}s with {assembled} of {need} members "
                f"ready (attempt {bo.attempts}); backing off {policy.delay(bo.attempts):g}s"
            )
        if group is not None:
            body += self.view.config.timeout_capped(group.schedule_timeout_seconds)
        members = self.view.cache.members(group) if group else []
        # Partial: its commit let members through, some were bound, the quorum never was
        # (a Binding failed for good, or a member vanished). Only what this commit bound
        # is evicted: never a gang this process did not place.
        partial = tuple(ref(m) for m in members if m.node_name and m.uid in res.committed)
        if partial:
            body += (f"; {len(partial)} member(s) bound by its commit are evicted so that "
                     f"the gang is placed again whole")
        msg = f"gang {res.gang}: {body}"
        slots, nodes = len(res.slots), len({s.node for s in res.slots.values()})
        self.ledger.reservations.release(res, body)
        self.queue.quorum_seconds(res.gang, now)  # the next attempt measures afresh
        self.explanations.set(res.gang, reason, msg, now)
        unbound = tuple(ref(m) for m in members if not m.node_name)
        self.outbox.append(GangTimedOut(gref, msg, bo.attempts, None if bo.failed else bo.until,
                                        slots, nodes, res.created, unbound, partial))
        if partial:
            self.outbox.append(EvictPods(res.gang, partial, msg))

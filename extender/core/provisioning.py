"""Gangs on autoscaled node pools: one ProvisioningRequest for a gang short of capacity.

The Cluster Autoscaler simulates kube-scheduler without extenders: it sees a gang's
pending members one by one, counts capacity reserved here as free, and so adds nodes
for some members or none. A ProvisioningRequest asks it for capacity for a set of pods
as a unit (`core/model/provisioning_request.py` has the contract). This part decides:

* **who asks**: a complete gang whose plan failed for lack of capacity (the
  `InsufficientCapacity` explanation: not set aside as `Unplaceable`, not waiting behind
  another gang's reservation), that no preemption or hold is about to serve (those put
  it in the ledger or change its reason before the tick looks), not backing off, and
  whose members consume no request of another controller (Kueue's admission check
  annotates the pods it made a request for: a second request would double the
  scale-up);
* **what it asks for**: only the members without room, shape by shape: the gang's
  needed members less those its own plan places on the free capacity it counts (room
  reserved or held for other gangs counted as taken; `planner.without_room`). The
  autoscaler books every pending pod that fits its nodes first (its filter-out-
  schedulable step, before the request's pods are even injected), seeing room held here
  for others as free, and only then fits the request's template pods on what is left;
  asked for the whole gang, it adds nodes for members that already have room. Asked for
  the rest, the templates find their room taken by the members and need exactly that
  many new nodes. All pending members consume it: the annotation only drops pods still
  left unbooked after that step, which ones the autoscaler decides;
* **when the count moves** while the request is live (a member found room, more lost
  it): kept unless it asks for too little, then deleted and asked again once gone;
* **one at a time**: one name per gang, its source included (`request_name`), created
  only when no request of the gang is live or still being deleted, so never two; a
  restart rebuilds all of it from the requests' watch (they carry the gang's key);
* **only ours**: a request is the gang's only when the watch shows it carrying our
  marker for that gang (`GANG_ANNOTATION`; the adapter adopts an existing object on a
  409 only on the same terms), and only such a request is ever deleted, by the uid it
  was seen with; one asked for and not seen yet is never deleted by name;
* **what ends it**: the gang bound or gone (deleted); `Failed`, `BookingExpired` or
  `CapacityRevoked` before it was placed: the gang backs off through the same backoff as
  a timeout (status `requeueState`, Events, metrics), the request is deleted, and the
  gang asks again after its backoff. The atomic class sets `Failed` only after about
  7 days; until then it keeps the request at `Provisioned=False` with a reason and
  retries, which the gang's status repeats ("waiting for the autoscaler: ...").

Nothing is bound early: the gang is still planned whole, in gang order, and placed when
its plan fits, which the provisioned nodes make it do (`scale_down.py` keeps them).
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.asking import Asking, foreign
from extender.core.explain import Explanations
from extender.core.ledger import Reservations
from extender.core.model.phase import rfc3339
from extender.core.model.provisioning_request import (
    BOOKING_EXPIRED,
    ENDED,
    FAILED,
    MAX_POD_SETS,
    PROVISIONED,
    RequestInfo,
    pod_sets,
    request_name,
    template_names,
)
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import (
    CreateRequest,
    DeleteRequest,
    GroupRef,
    PodRef,
    ProvisioningReport,
    Reason,
)
from extender.core.outbox import Outbox
from extender.core.queue.backoff import Backoffs
from extender.core.scale_down import ScaleDownGuard
from extender.core.view import ClusterView

# Reasons under which a gang may ask: short of capacity, or already waiting for a request;
# set aside as unplaceable only while `Asking.more_nodes_would_do`.
_ASKING = (Reason.INSUFFICIENT_CAPACITY, Reason.WAITING_FOR_PROVISIONING, Reason.UNPLACEABLE)
# A request asked for and not in the watch this long after: taken as not made.
ASK_SEEN_SECONDS = 60.0
_OUTCOMES = {PROVISIONED: "provisioned", FAILED: "failed",
             BOOKING_EXPIRED: "booking-expired", "CapacityRevoked": "capacity-revoked"}


@dataclass(frozen=True, slots=True)
class ProvisioningView:
    """A gang's request as the status and /debug show it."""

    namespace: str
    name: str
    state: str  # "Creating" until the watch shows it, then its conditions' state
    since: float
    asked: float
    waiting: str = ""  # the autoscaler's Provisioned=False "reason: message", if any


class Provisioning:
    def __init__(self, view: ClusterView, reservations: Reservations, backoffs: Backoffs,
                 explanations: Explanations, outbox: Outbox) -> None:
        self._config = view.config
        self._cache = view.cache
        self._reservations = reservations
        self._backoffs = backoffs
        self._explanations = explanations
        self._outbox = outbox
        self._served = False  # the API is served (the adapter's discovery says)
        self._asking = Asking(view.cache)
        self._requests: dict[str, RequestInfo] = {}  # gang -> its request, as watched
        self._asked: dict[str, tuple[str, float, int]] = {}  # gang -> (name, at, sets)
        self._deleting: dict[str, int] = {}  # request key -> its templates: asked to go
        self._short: set[str] = set()  # gangs last explained as short of capacity
        self._retry: set[str] = set()  # gangs backing off because their request ended
        self._guard = ScaleDownGuard(view.cache, reservations, outbox)
        # gang -> (its members' epoch, node epoch) when it last had nothing to ask for
        # (members missing, another controller's request, too many shapes): a tick
        # looks at it again only once one of them moved.
        self._unasked: dict[str, tuple[int, int]] = {}

    @property
    def on(self) -> bool:
        return self._config.provisioning and self.served

    @property
    def served(self) -> bool:
        return self._served

    @served.setter
    def served(self, served: bool) -> None:
        """The API became served: gangs explained as short of capacity (or set aside
        while it was not) did not ask then, and their plan is not made again until their
        members or the nodes change; they are looked at on the next tick instead."""
        if served and not self._served:
            for gang in self._cache.groups:
                st = self._explanations.get(gang)
                if st is not None and st.reason in (Reason.INSUFFICIENT_CAPACITY,
                                                    Reason.UNPLACEABLE):
                    self._short.add(gang)
        self._served = served

    # ----- told by the explanations and the gang manager -----------------------------------

    def waiting(self, group: GroupInfo, members: list[PodInfo], shortfall: str,
                now: float, unplaceable: bool = False) -> str | None:
        """The gang's plan failed for lack of capacity (the queue pass, `GangQueue`), or
        even on the nodes emptied (`unplaceable`): it may ask on the next tick. Returns
        what it waits for instead, if anything."""
        if not self.on or (unplaceable and not self._asking.more_nodes_would_do(group, members)):
            return None
        self._short.add(group.key)
        view = self.view(group.key)
        if view is not None:
            return self._waiting_message(group.key, view, shortfall)
        theirs = foreign(group, members)
        if theirs:
            return (f"{shortfall}; its pods consume ProvisioningRequest {group.namespace}/"
                    f"{theirs}, made by another controller (Kueue): the extender asks for "
                    f"no second one")
        return None

    def observed(self, req: RequestInfo, now: float) -> None:
        """A request appeared or changed in the watch."""
        if not req.gang:
            return  # not the extender's
        old = self._requests.get(req.gang)
        self._requests[req.gang] = req
        asked = self._asked.get(req.gang)
        if asked is not None and asked[0] == req.name:
            del self._asked[req.gang]
        if req.key in self._deleting or (old is not None and old.uid == req.uid
                                         and old.state == req.state
                                         and old.waiting == req.waiting):
            return
        group = self._cache.groups.get(req.gang)
        if group is None:
            return
        gref = GroupRef(group.namespace, group.name, group.uid, group.source)
        outcome = _OUTCOMES.get(req.state)
        if outcome is not None:
            self._outbox.append(ProvisioningReport(
                gref, req.key, outcome, f"gang {req.gang}: ProvisioningRequest {req.key} "
                f"is {req.state}" + (f": {req.message}" if req.message else "")))
        if req.state in ENDED:
            if req.gang not in self._reservations:
                self._ended(group, gref, req, now)
        else:
            self._explain(req.gang, now)

    def create_failed(self, gang: str, name: str, error: str, now: float) -> None:
        """The adapter could not make the request: the gang backs off and asks again."""
        asked = self._asked.get(gang)
        group = self._cache.groups.get(gang)
        if asked is None or asked[0] != name or group is None:
            return
        del self._asked[gang]
        namespace = group.namespace
        # Never seen in the watch (uid ""): nothing is asked to be deleted (`_delete`).
        # What the adapter made before it failed it removed itself; a request that was
        # made after all shows in the watch with our marker, and is handled from there.
        req = RequestInfo(namespace, name, "", gang, "", now, "NotCreated", now, error,
                          template_names(name, asked[2]))
        self._ended(group, GroupRef(namespace, group.name, group.uid, group.source), req, now)

    def deleted(self, key: str) -> None:
        """A request left the watch."""
        self._deleting.pop(key, None)
        for gang, req in list(self._requests.items()):
            if req.key == key:
                del self._requests[gang]

    def drop(self, gang: str) -> None:
        self._unasked.pop(gang, None)
        self._asking.drop(gang)
        self._short.discard(gang)
        self._retry.discard(gang)

    def _ended(self, group: GroupInfo, gref: GroupRef, req: RequestInfo, now: float) -> None:
        bo = self._backoffs.timed_out(gref, now)
        what = f"ProvisioningRequest {req.key} {req.state}" + (
            f" ({req.message})" if req.message else "")
        if bo.failed:
            reason = Reason.FAILED
            body = (f"{what} (attempt {bo.attempts}); retry limit "
                    f"{self._config.backoff.retry_limit} reached, the group is Failed")
        else:
            reason = Reason.BACKING_OFF
            body = (f"{what}; backing off {self._config.backoff.delay(bo.attempts):g}s, then "
                    f"asks again (attempt {bo.attempts})")
            self._retry.add(group.key)
        self._explanations.set(group.key, reason, f"gang {group.key}: {body}", now)
        if req.uid:
            self._delete(req, f"gang {group.key}: {body}")
        else:  # not made: an Event says why, beside the status
            self._outbox.append(ProvisioningReport(gref, req.key, "not-created",
                                                   f"gang {group.key}: {body}"))

    # ----- the tick ----------------------------------------------------------------------

    def tick(self, now: float) -> None:
        if not self._config.provisioning:
            # Off: nothing is asked, and the nodes a run with it on marked (our key
            # beside the annotation) are unmarked; no others.
            self._guard.tick(now, False)
            return
        if self.served:
            for gang in [*self._requests, *self._asked]:
                self._sweep(gang, now)
            for gang in sorted(self._short | self._retry):
                self._consider(gang, now)
        self._guard.tick(now, self.served)

    def _consider(self, gang: str, now: float) -> None:
        group = self._cache.groups.get(gang)
        st = self._explanations.get(gang)
        retry = gang in self._retry
        if (group is None or gang in self._reservations or st is None
                or not (st.reason in _ASKING or (retry and st.reason == Reason.BACKING_OFF))):
            self.drop(gang)  # placed, held, preempting, set aside, or gone
            return
        if self._backoffs.blocks(gang, now):
            return
        if self.view(gang) is not None:
            self._recheck(gang, group, now)
            return
        name = request_name(gang)
        if f"{group.namespace}/{name}" in self._deleting:
            return  # the last one is still going: never two of one name
        # Members and nodes as when it last found nothing to ask: the same answer.
        sig = (self._cache.members_epoch.get(gang, 0), self._cache.node_epoch)
        if self._unasked.get(gang) == sig:
            return
        self._unasked[gang] = sig
        members, _, present = self._cache.quorum_counts(group)
        pending = [m for m in members if not m.node_name]
        if present < group.min_member or not pending or foreign(group, members):
            return
        if st.reason == Reason.UNPLACEABLE and not self._asking.more_nodes_would_do(group, pending):
            self.drop(gang)
            return
        missing = self._asking.without_room(group, members)
        if not missing:
            return  # it fits now: the next pass places it
        sets = pod_sets(missing)
        if len(sets) > MAX_POD_SETS:
            self._explanations.set(gang, Reason.INSUFFICIENT_CAPACITY, (
                f"gang {gang}: short of capacity, and its {len(missing)} members without "
                f"room have {len(sets)} different shapes: more than the {MAX_POD_SETS} pod "
                f"sets a ProvisioningRequest may have, so none is asked for"), now)
            return
        del self._unasked[gang]
        self._retry.discard(gang)
        self._asked[gang] = (name, now, len(sets))
        self._asking.asked(gang, missing)
        gref = GroupRef(group.namespace, group.name, group.uid, group.source)
        # Every pending member consumes it, not only the ones counted: the autoscaler
        # packs pending pods onto the room it sees in an order of its own, and any member
        # left over without the annotations would get a scale-up of its own besides.
        annotate = tuple(PodRef(m.namespace, m.name, m.uid) for m in pending)
        self._outbox.append(CreateRequest(gref, gang, name, self._config.provisioning_class,
                                          sets, annotate))
        msg = (f"gang {gang}: asked the cluster autoscaler for {len(missing)} of its "
               f"{len(pending)} pending member(s), the ones without room, in "
               f"{len(sets)} pod set(s): ProvisioningRequest {group.namespace}/{name}")
        self._outbox.append(ProvisioningReport(gref, f"{group.namespace}/{name}", "requested",
                                               msg))
        self._explain(gang, now, retry=True)

    def _recheck(self, gang: str, group: GroupInfo, now: float) -> None:
        """Members or nodes moved while the gang's request is live: deleted if it asks for
        too little now (`Asking.too_little`), and asked again once it is gone (never two
        live requests)."""
        req = self._requests.get(gang)
        if req is None or req.state in ENDED or req.key in self._deleting:
            return  # still being created, or ending: looked at once it is watched
        why = self._asking.too_little(group, req)
        if why is not None:
            self._delete(req, why)
            self._explanations.set(gang, Reason.INSUFFICIENT_CAPACITY, why, now)

    def _sweep(self, gang: str, now: float) -> None:
        """Delete the request of a gang that is bound or gone; end one that ended while
        its gang was placed, or before its group was seen (a restart); give up on one
        asked for that never showed in the watch."""
        group = self._cache.groups.get(gang)
        req = self._requests.get(gang)
        if (req is not None and req.state in ENDED and req.key not in self._deleting
                and group is not None and gang not in self._reservations):
            gref = GroupRef(group.namespace, group.name, group.uid, group.source)
            self._ended(group, gref, req, now)
            return
        asked = self._asked.get(gang)
        if asked is not None and now - asked[1] > ASK_SEEN_SECONDS and group is not None:
            # Nothing is deleted: unseen, it may be ours behind a lagging watch. Asked
            # again, the adapter finds ours (our marker for this gang) and goes on.
            self.create_failed(gang, asked[0], (
                f"not seen in the watch {ASK_SEEN_SECONDS:g}s after it was asked for"), now)
            return
        if group is not None:
            bound = self._cache.tally(group).bound_or_succeeded
            if bound < group.min_member:
                return
        why = f"gang {gang} is {'bound' if group is not None else 'gone'}"
        # One asked for and not seen yet is not deleted: once the watch shows it (with
        # our marker), it is in `_requests` and this sweep deletes it then.
        self._asked.pop(gang, None)
        if req is not None and req.key not in self._deleting:
            self._delete(req, why)

    def _delete(self, req: RequestInfo, reason: str) -> None:
        """Only a request the watch showed carrying our marker (`observed` keeps no
        other), by the uid it had: never one merely asked for, nor one by name alone."""
        if not req.uid or not req.gang:
            return
        self._deleting[req.key] = len(req.templates)
        self._outbox.append(DeleteRequest(req.namespace, req.name, req.templates, reason,
                                          req.uid, req.gang))

    # ----- views -------------------------------------------------------------------------------

    def view(self, gang: str) -> ProvisioningView | None:
        """The gang's live request (created or asked for), None if it has none."""
        req = self._requests.get(gang)
        if req is not None and req.state not in ENDED and req.key not in self._deleting:
            return ProvisioningView(req.namespace, req.name, req.state, req.since, req.created,
                                    req.waiting)
        asked = self._asked.get(gang)
        group = self._cache.groups.get(gang)
        if asked is not None and group is not None:
            return ProvisioningView(group.namespace, asked[0], "Creating", asked[1], asked[1])
        return None

    def _explain(self, gang: str, now: float, retry: bool = False) -> None:
        view = self.view(gang)
        st = self._explanations.get(gang)
        if view is None or st is None or not (retry or st.reason in _ASKING):
            return
        short = (st.message.split("; waiting for ProvisioningRequest")[0]
                 if st.reason in _ASKING else
                 f"gang {gang}: still short of capacity after its backoff")
        self._explanations.set(gang, Reason.WAITING_FOR_PROVISIONING,
                               self._waiting_message(gang, view, short), now)

    @staticmethod
    def _waiting_message(gang: str, view: ProvisioningView, shortfall: str) -> str:
        return (f"{shortfall}; waiting for ProvisioningRequest {view.namespace}/{view.name} "
                f"({view.state} since {rfc3339(view.since)}, asked at "
                f"{rfc3339(view.asked)})" + (f"; waiting for the autoscaler: {view.waiting}"
                                              if view.waiting else ""))

"""The gang manager: the one door into the core, as scheduler-plugins' coscheduling
plugin is a thin layer over its PodGroupManager.

Adapters feed it watch events (`on_*`), ask it the verbs' questions (`filter`,
`prioritize`, `bind`), tell it the time (`tick`), and take the I/O it wants done as
typed actions (`take_actions`). Adapters that only look (status, Events, metrics,
`/debug`) take its read model instead (`reads`, core/reads.py): the door stays the
commands, a short list as Coscheduling's manager interface is. Pure: no I/O, no
clock, no threads; time comes in as `now`. Everything runs on the server's one event
loop, so nothing is locked. docs/architecture.md draws the parts behind it and the
paths of a filter and a bind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Set
from typing import Final

from extender.core.cache.devices import DeviceObject
from extender.core.filter import reject
from extender.core.model.provisioning_request import RequestInfo
from extender.core.model.types import BudgetInfo, CompositeInfo, GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import Action, BindDecision, FilterResult
from extender.core.reads import Reads
from extender.core.watch_input import WatchInput
from extender.core.wiring import Core


class GangManager:
    """The commands into the core, one line each. What the core holds is read through
    `reads` (`Reads`), never here.

    watch inputs, from the informers:
        on_node(node)                              a Node added or changed
        on_node_deleted(name)                      a Node gone
        on_pod(pod, now)                           a Pod added or changed
        on_pod_deleted(uid, now)                   a Pod gone
        on_group(group, now)                       a PodGroup (any source) added or changed
        on_group_deleted(key)                      a PodGroup gone
        on_budget(budget | key)                    a PodDisruptionBudget added, changed, gone
        on_devices(kind, key, obj | None)          a DRA slice, class, claim, template
        on_provisioning_request(request, now)      a ProvisioningRequest added or changed
        on_provisioning_request_deleted(key)       a ProvisioningRequest gone
        watch_broken(kind)                         a watch broke or an answer was lost: wait
        watch_listed(kind, now)                    listed again: the waiting commits go
        pods_listed(uids, began, now)              a full list of pods: the unseen are gone
    the verbs, from kube-scheduler's requests:
        filter(pod, node_names, now, waited)       which nodes may take the pod, or wait
        sample(uid, node_names)                    a filter call's nodes, for its Binding
        prioritize(pod, node_names)                steer members to their slot
        bind(namespace, name, uid, node, now)      bind now, wait for the gang, or refuse
        bind_wait_expired(uid, waited)             the adapter stopped waiting: why
    answers to the actions:
        post_due(uid, node)                        post this Binding now? None, or why not
        binding_finished(uid, node, error, now)    a Binding POST returned
        eviction_answered(uid, refused, now)       the Eviction API let a victim go, or not
        provisioning_served(served)                whether ProvisioningRequests are served
        provisioning_failed(gang, name, error, now)  a ProvisioningRequest not created
    time and output:
        tick(now)                                  deadlines, backoffs, lost nodes, the pass
        take_actions()                             the I/O asked for since the last call
    """

    def __init__(self, core: Core | None = None) -> None:
        self._core = core = core or Core.wire()
        self._cache = core.cache
        self._ledger = core.ledger
        self._reservations = core.ledger.reservations
        self._binds = core.ledger.binds
        self._watch = WatchInput(core)
        # What the readers take instead of the manager: the same parts, read only.
        self.reads: Final = Reads(core)

    # ----- watch input ------------------------------------------------------------------

    def on_node(self, node: NodeInfo) -> None:
        if self._cache.upsert_node(node):
            # Cordoned, tainted, relabelled or shrunk: slots that no longer fit move now.
            self._reservations.repair(node.name)
            self._core.disruptions.node_changed(node.name)  # not ready: members lost

    def on_node_deleted(self, name: str) -> None:
        self._cache.remove_node(name)
        self._reservations.repair(name)
        self._core.disruptions.node_changed(name)

    def on_pod(self, pod: PodInfo, now: float) -> None:
        self._watch.on_pod(pod, now)

    def on_pod_deleted(self, uid: str, now: float | None = None) -> None:
        self._watch.on_pod_deleted(uid, now)

    def on_group(self, group: GroupInfo | CompositeInfo, now: float) -> None:
        """A group object was added or changed: a gang's group, or a CompositePodGroup
        (the group of groups its children are planned with, `queue/composite_unit.py`);
        `on_group_deleted` takes either's key."""
        self._watch.on_group(group, now)

    def on_group_deleted(self, key: str) -> None:
        self._watch.on_group_deleted(key)

    def watch_broken(self, kind: str) -> None:
        """The list+watch of `kind` ("pods", "nodes") broke, or a Binding's try failed
        so that the API server's state is unknown (its answer lost, a 5xx), which says
        the watches may be behind before they know it themselves: no gang commits and no
        Binding is posted until the informer has caught the kind up (`Staleness.behind`,
        `watch_listed`). One command for both, since the core holds them alike."""
        self._ledger.staleness.behind(kind)

    def watch_listed(self, kind: str, now: float) -> None:
        """`kind` was listed again and its new watch has delivered (an event or a
        bookmark: what changed during the list has come): once no watch is behind, the
        commits held meanwhile are made, each checked against the cache as it is."""
        if self._ledger.staleness.caught_up(kind):
            for key in list(self._reservations):
                group = self._cache.groups.get(key)
                if group is not None:
                    self._ledger.commit(group, now)

    def pods_listed(self, uids: Set[str], began: float, now: float) -> None:
        """A list of every pod, begun at `began`, showed `uids`: the pods the cache
        holds otherwise, learned before it began (from a filter call), are gone."""
        self._watch.pods_listed(uids, began, now)

    def on_provisioning_request(self, request: RequestInfo, now: float) -> None:
        """A ProvisioningRequest (autoscaling.x-k8s.io/v1) was added or changed."""
        self._core.provisioning.observed(request, now)

    def on_provisioning_request_deleted(self, key: str) -> None:
        self._core.provisioning.deleted(key)

    def provisioning_failed(self, gang: str, name: str, error: str, now: float) -> None:
        """The adapter could not create the gang's ProvisioningRequest `name`."""
        self._core.provisioning.create_failed(gang, name, error, now)

    def provisioning_served(self, served: bool) -> None:
        """Whether the ProvisioningRequest API is served (the adapter's discovery)."""
        self._core.provisioning.served = served

    def on_budget(self, budget: BudgetInfo | str) -> None:
        """A PodDisruptionBudget (policy/v1) was added or changed, or (its key) deleted."""
        if isinstance(budget, str):
            self._core.budgets.remove(budget)
        else:
            self._core.budgets.upsert(budget)
        self._core.queue.members_changed()  # a preemptor may find victims now

    def on_devices(self, kind: str, key: str, obj: DeviceObject | None) -> None:
        """A ResourceSlice, DeviceClass, ResourceClaim or ResourceClaimTemplate
        (`resource.k8s.io/v1`, `kind` as `DEVICE_KINDS` names it) was added or changed
        (`obj`), or deleted (None). When what is free changed, waiting gangs are
        planned again; slots whose devices went (a slice gone) are not moved yet."""
        if self._cache.upsert_devices(kind, key, obj):
            self._core.queue.members_changed()

    # ----- the verbs --------------------------------------------------------------------

    def filter(
        self, pod: PodInfo, node_names: list[str], now: float, waited: float = 0.0
    ) -> FilterResult:
        """Which of `node_names` (kube-scheduler's feasible nodes) may take `pod`; or,
        for a member of a gang still being created, how long to wait before asking
        again (`FilterResult.wait`, with `waited` the time this call has waited)."""
        known = self._cache.pods.get(pod.uid)
        if known is None:
            if pod.uid in self._core.tombstones:
                return reject(node_names, f"pod {pod.key} (uid {pod.uid}) was deleted")
            self._watch.on_pod_from_filter(pod, now)  # the watch has not delivered it yet
            # As the cache holds it: a JobSet's pod in the gang its JobSet's split gives.
            pod = self._cache.pods.get(pod.uid, pod)
        else:
            pod = known
        if pod.node_name:
            if pod.node_name in node_names:
                # Bound a moment ago (the direct commit's Binding, which kube-scheduler's
                # informer has not delivered yet): its own node, so the cycle ends in a
                # bind answered with success, not in a failure kube-scheduler would
                # record on a bound pod (a FailedScheduling Event, PodScheduled=False).
                return FilterResult([pod.node_name], {})
            return reject(node_names, f"pod {pod.key} is already bound to node {pod.node_name}")
        return self._core.filter.filter(pod, node_names, now, waited)

    def sample(self, uid: str, node_names: list[str] | None) -> None:
        """The nodes of a member's filter call whose Binding the dispatcher holds for
        that call's bind request; None when the call ends (`Staleness.sample`)."""
        self._ledger.staleness.sample(uid, node_names)

    def prioritize(self, pod: PodInfo, node_names: list[str]) -> list[tuple[str, int]]:
        """Steer members to their slot (10), everything else neutral (0)."""
        known = self._cache.pods.get(pod.uid, pod)
        res = self._reservations.of(known)
        slot = res.slots.get(pod.uid) if res else None
        target = slot.node if slot else None
        return [(n, 10 if n == target else 0) for n in node_names]

    def bind(self, namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        return self._core.bind.bind(namespace, name, uid, node, now)

    def binding_finished(self, uid: str, node: str, error: str | None, now: float,
                         unknown: bool = False) -> None:
        """The Binding POST for `uid` returned (`error` None: it is bound). `unknown`:
        it failed, yet may have taken effect (its answer was lost and the pod could not be
        read back), so its capacity stays charged until the pod is seen."""
        refused_on = self._binds.finished(uid, error, now if unknown else None)
        if refused_on is not None:
            # Found short before its POST (`post_due`), its node's slots move: nothing
            # else moves a slot whose Binding was in flight.
            self._reservations.squeezed(refused_on)
        pod = self._cache.pods.get(uid)
        if error is None and pod is not None and not pod.node_name:
            # Not `on_pod`: another scheduler's pod, a stale copy, a relabel or an arrival
            # cannot be what a Binding of ours changed.
            self._watch.pod_changed(dataclasses.replace(pod, node_name=node), pod, now)

    def post_due(self, uid: str, node: str) -> str | None:
        """Asked right before every POST of a Binding the core decided (the first, a
        held or queued one, each retry): None to post it, else why not; the adapter then
        ends it with that error (`binding_finished`). The decision is the core's at that
        moment, not the commit's (`Binds.post_due`)."""
        return self._binds.post_due(uid, node)

    def eviction_answered(self, uid: str, refused: str | None, now: float) -> None:
        """The Eviction API answered for a victim of a preemption (`EvictPods`): it let
        the pod go (`refused` None), or refused (a PodDisruptionBudget, 429; or an
        error), and then other victims are chosen, or the rest of a gang already broken
        is evicted later (`core/preemption/leaving.py`)."""
        if refused is None:
            self._core.preemptions.eviction_done(uid)
        else:
            self._core.preemptions.eviction_refused(uid, refused, now)

    def bind_wait_expired(self, uid: str, waited: float) -> str:
        """The adapter stopped waiting for a bind's answer (its limit is below the HTTP
        timeout, so kube-scheduler never times out first): the message to answer with."""
        if uid in self._binds.in_flight:
            return f"binding of pod uid {uid} still in flight; kube-scheduler will retry"
        self._binds.reject(uid, None)  # nothing to answer: the adapter stopped waiting
        pod = self._cache.pods.get(uid)
        gang = pod.gang if pod else None
        group = self._cache.groups.get(gang) if gang else None
        have = self._binds.assembled(group) if group else 0
        need = group.min_member if group else 0
        return (
            f"gang {gang}: held the bind of pod {pod.key if pod else uid} for "
            f"{waited:.0f}s with {have} of {need} members ready; kube-scheduler will retry"
        )

    # ----- time and output ----------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Deadlines, backoffs ending and capacity freed: called a few times a second."""
        self._core.timeouts.expire(now)
        self._core.disruptions.tick(now)
        self._core.arrivals.prune(now)
        self._core.preemptions.tick(now)
        self._core.queue.run(now)
        self._core.provisioning.tick(now)

    def take_actions(self) -> list[Action]:
        """The I/O asked for since the last call, in order."""
        return self._core.outbox.take()

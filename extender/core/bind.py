"""The bind verb: bind a pod now, let it wait at the permit barrier, or refuse (architecture.md §7).

Every check of a bind request lives here, repeats included: a repeated request for the
same pod and node waits for the same answer; for another node, or a uid that belongs to
another pod, it is refused. Bind is idempotent: a pod already bound to that node is a
success.
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.ledger import Ledger
from extender.core.model import messages
from extender.core.model.resources import fits, format_resources
from extender.core.model.types import PodInfo, Resources
from extender.core.model.vocabulary import BindDecision, BindOutcome
from extender.core.node_claims import fresh_conflicts, nominated_short
from extender.core.parked import Parked
from extender.core.preemption.leaving import Leaving

# How long a bind request waits for a Binding already in flight: the API client gives
# up on a request after 30 s (extender.kube.client), so its answer comes before this.
BINDING_ANSWER_SECONDS = 60.0


def _error(message: str) -> BindDecision:
    return BindDecision(BindOutcome.ERROR, message)


def _free_of(pod: PodInfo, free: Resources) -> Resources:
    """What `free` has of the resources `pod` asks for, none below zero: for messages."""
    return {r: max(free.get(r, 0), 0) for r, q in pod.requests.items() if q > 0}


class Bind:
    def __init__(
        self,
        cache: Cache,
        ledger: Ledger,
        parked: Parked,
        leaving: Leaving,
    ) -> None:
        self._cache = cache
        self._ledger = ledger
        self._reservations = ledger.reservations
        self._binds = ledger.binds
        self._parked = parked
        self._leaving = leaving

    def bind(self, namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        """A refused member goes back to kube-scheduler's queue because of us, so it may
        need a wake-up later."""
        decision = self._decide(namespace, name, uid, node, now)
        if decision.outcome is BindOutcome.ERROR:
            self._parked.turned_away(uid)
        return decision

    def _decide(self, namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        pod = self._cache.pods.get(uid)
        if pod is None:
            return _error(f"pod {namespace}/{name} (uid {uid}) is not known")
        if (pod.namespace, pod.name) != (namespace, name):
            return _error(f"uid {uid} belongs to pod {pod.key}, not {namespace}/{name}")
        if pod.node_name:
            if pod.node_name == node:
                return BindDecision(BindOutcome.BOUND)
            return _error(f"pod {pod.key} is already bound to node {pod.node_name}, not {node}")
        if node not in self._cache.nodes:
            return _error(f"node {node} is not known (pod {pod.key})")
        if pod.deleting or pod.terminal:
            return _error(messages.pod_gone(pod.key))
        in_progress = self._binds.node_of(uid)
        if in_progress is not None and in_progress != node and uid in self._binds.in_flight:
            return _error(
                f"gang {pod.gang}: the extender is committing pod {pod.key} to node "
                f"{in_progress}, not {node}" if pod.gang else
                f"pod {pod.key}: a bind to node {in_progress} is already in flight, "
                f"not to {node}"
            )
        if in_progress is not None and in_progress != node:
            return _error(
                f"pod {pod.key}: a bind to node {in_progress} is already in progress, "
                f"not to {node}"
            )
        if uid in self._binds.in_flight:
            # The Binding in flight answers this request too.
            return BindDecision(BindOutcome.WAIT, deadline=now + BINDING_ANSWER_SECONDS)
        gang = pod.gang
        if gang is None:
            return self._bind_now(pod, node, now)
        group = self._cache.groups.get(gang)
        if group is None:
            return _error(f"gang {gang}: PodGroup not found (pod {pod.key})")
        if self._leaving.gang_leaving(gang):
            return _error(f"{self._leaving.why(gang)}; pod {pod.key} is not bound")
        if self._cache.tally(group).bound_or_succeeded >= group.min_member:
            return self._bind_now(pod, node, now)
        res = self._reservations.get(gang)
        slot = res.slots.get(uid) if res else None
        if res is not None and res.held is not None:
            return _error(
                f"gang {gang}: capacity is held for it but not free yet (pods are still "
                f"leaving its nodes); kube-scheduler will retry pod {pod.key}"
            )
        if res is None or slot is None:
            return _error(
                f"gang {gang}: no reservation holds a slot for pod {pod.key} (it timed out, "
                f"or the extender restarted); kube-scheduler will retry the pod"
            )
        if slot.node != node and not self._reservations.retarget(res, pod, node):
            return _error(
                f"gang {gang}: pod {pod.key} was reserved node {slot.node}; node {node} "
                f"lacks {format_resources(pod.requests)}"
            )
        self._binds.wait(uid, node)
        self._ledger.commit(group, now)  # this bind may be the one the quorum waited for
        return BindDecision(BindOutcome.WAIT, deadline=res.deadline)

    def _bind_now(self, pod: PodInfo, node: str, now: float) -> BindDecision:
        """Plain pods and elastic extras. Their filter could not know which node
        kube-scheduler would pick, and several may pass a node before the first binds,
        so reservations are checked again here; and the node itself, whatever is
        reserved there: kube-scheduler's own fit check is only as current as its watch,
        which lags seconds behind after kube-apiserver restarts (a spec.nodeName pod
        made meanwhile is unknown to it), and while the extender's own watch is broken
        (`Staleness.is_behind`) nothing is bound this way at all. So are the claims on
        the node its checks miss (`core/node_claims.py`): capacity nominated to another
        pod, and the required anti-affinity and spread of the pod against pods a direct
        commit bound there a moment ago."""
        if self._ledger.staleness.is_behind():
            return _error(f"pod {pod.key} is not bound to node {node} yet: gang-extender "
                          f"is listing pods and nodes again after its watch broke; "
                          f"kube-scheduler will retry")
        own = self._reservations.of(pod) if pod.gang is None else None
        slot = own.slots.get(pod.uid) if own is not None and own.held is None else None
        if own is not None and slot is not None and slot.node == node:
            self._reservations.bound(own.gang)  # a preemptor's own capacity: now its pod's
        free = self._cache.free.get(node, {})
        if not fits(pod.requests, free):
            held_for = self._reservations.gangs_by_node().get(node, [])
            gang = f"gang {pod.gang}: " if pod.gang else ""
            why = (messages.capacity_held(node, held_for, pod.key, pod.requests) if held_for
                   else f"{gang}node {node} has {format_resources(_free_of(pod, free))} free "
                        f"and pod {pod.key} needs {format_resources(pod.requests)} (pods "
                        f"bound there lately that kube-scheduler has not seen yet)")
            return _error(why + "; kube-scheduler will retry")
        claim = nominated_short(pod, node, self._cache) or fresh_conflicts(
            pod, [node], self._cache, self._ledger.staleness, now).get(node)
        if claim is not None:
            return _error(claim + "; kube-scheduler will retry")
        self._binds.bind_now(pod, node)
        return BindDecision(BindOutcome.WAIT, deadline=now + BINDING_ANSWER_SECONDS)

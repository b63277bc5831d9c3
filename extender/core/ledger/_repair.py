"""Reserved nodes that are lost: when a slot's node can no longer take its member.

The extender shares its nodes with the default scheduler, DaemonSets, other schedulers
and pods created with `spec.nodeName` (architecture.md §11). Any of them can take a node
a reservation counted on, and so can a cordon, a NoSchedule or NoExecute taint, a
deletion or a smaller allocatable. The ledger moves a slot off such a node the moment
the cache learns of it (not at the member's next filter call): a member bound there
would be rejected by the kubelet, and a gang with one member rejected is broken. The
same check runs once more at the commit.

A held slot (`Reservation.held`) is charged ahead of capacity on purpose: pods still
run or leave there, and free capacity is below zero until they are gone. That is not a
loss: the shortfall of a node is counted without what held slots charge there. A held
reservation whose node is lost for another reason (deleted, cordoned, tainted) is
released whole, and the gang queue plans it again.

Pure functions of the cache: what to do about a loss is the reservations' to say
(`Reservations.repair`, `_reservations.py`), and the order in which slots give way.
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.model.constraints import node_matches
from extender.core.model.resources import format_resources, sub
from extender.core.model.types import PodInfo, Resources


def lost(cache: Cache, node: str, pod: PodInfo, held: bool = False) -> str | None:
    """Why `pod` can no longer be bound on `node`, where its slot is charged, or None if
    it still can. A `held` slot waits for capacity by design: only the node itself can
    be lost to it."""
    info = cache.nodes.get(node)
    if info is None:
        return f"node {node} was deleted"
    why = node_matches(pod, info)
    if why is not None:
        return f"node {node}: {why}"
    if held:
        return None
    if not cache.nominated:  # as a rule nothing is nominated: a commit's members skip it
        return overcommitted(cache, node, pod)
    return overcommitted(cache, node, pod) or nominated_away(cache, node, pod)


def overcommitted(cache: Cache, node: str, pod: PodInfo) -> str | None:
    """Why `node`, where `pod` is charged already (a slot, or an assumed Binding), is
    short of what `pod` asks for, or None. Free capacity below zero on a resource the pod
    requests means something charged there since the pod's charge does not leave room
    for it; what held slots charge ahead of capacity does not count."""
    free = _free(cache, node)
    short = {r: -v for r, v in free.items() if v < 0 and pod.requests.get(r, 0) > 0}
    if short:
        return (f"node {node} is short of {format_resources(short, skip_pods=False)} "
                f"(pods bound there since the plan)")
    return None


def nominated_away(cache: Cache, node: str, pod: PodInfo) -> str | None:
    """Why `node`, where `pod` is charged already, must not take it because its room is
    nominated to another pod, or None. kube-scheduler's preemption nominates the pod it
    evicted victims for (`status.nominatedNodeName`) and keeps the capacity they free
    for it from pods of equal or lower priority until it is bound, deleted or its
    nomination is cleared; a commit that took it would leave that pod to preempt again,
    or nowhere to go. So the commit's check of each member's node counts those pods as
    kube-scheduler does (`Cache.nominated_on`); the planner does not (the rule depends on
    the priority of the pod being placed), and a member planned onto such capacity is
    moved at its commit, or waits while no other node has room."""
    nominated = cache.nominated_on(node, pod.priority, but=pod.uid)
    if not nominated:
        return None
    room = sub(_free(cache, node), cache.nominated_requests(node, pod.priority, pod.uid))
    short = {r: -v for r, v in room.items() if v < 0 and pod.requests.get(r, 0) > 0}
    if not short:
        return None
    names = ", ".join(p.key for p in nominated[:3]) + (
        f" and {len(nominated) - 3} more" if len(nominated) > 3 else "")
    return (f"node {node} is short of {format_resources(short, skip_pods=False)} for pod "
            f"{pod.key}: kube-scheduler's preemption keeps that capacity for pod(s) "
            f"{names} nominated there (priority {min(p.priority for p in nominated)} or "
            f"more, pod {pod.key} has {pod.priority})")


def _free(cache: Cache, node: str) -> Resources:
    """`node`'s free capacity with what held slots charge ahead of capacity given back."""
    free = cache.free.get(node, {})
    ahead = cache.held.get(node)
    if ahead:
        free = {r: v + ahead.get(r, 0) for r, v in free.items()}
    return free


def squeezed(cache: Cache, name: str) -> bool:
    """Whether slots on `name` may have to move: something is reserved there and its
    free capacity went below zero. O(1) when it did not, which is every watch event of
    a pod bound where nothing is reserved or that still fits."""
    return name in cache.reserved_nodes and any(
        v < 0 for v in cache.free.get(name, {}).values())

"""Gangs disrupted whole: a started gang whose disruption mode is "all" that loses a
member has its other members evicted too.

Why: a distributed job that lost one worker is hung. Its other workers keep their
nodes and wait for a peer that will not come back by itself; upstream's PodGroup says
such a group's pods "can only be disrupted together" (`spec.disruptionMode: {all: {}}`).
Evicting the rest (through the Eviction API, so PodDisruptionBudgets hold) lets the
owner (a Job, JobSet, MPIJob) restart the job, whose new pods are placed whole again.
The default, "single", keeps the old way: a replacement is placed beside the others.

* **Started**: the gang's quorum was bound (bound or succeeded members reach
  `minMember`), all its bound members on nodes present and ready. Before that, a lost
  member is the reservation's business (`queue/timeouts.py` evicts what a commit bound
  when the quorum never forms).
* **Lost**: a bound member of a started gang deleted, evicted or being deleted, failed,
  or on a node removed or not ready (the node controller's `not-ready` or `unreachable`
  taint). One that succeeded, or was relabelled out of the gang, is not lost.
* **Once**: the gang is then disrupted until its quorum is bound again by pods that
  were not its members then: the members evicted leave (`Leaving.disrupted` turns away
  the new pods' filter and bind calls until they are gone), the gang is not started
  nor disrupted again meanwhile, however many more events or relists come.
* **Over a restart**: the status writer records the disruption as the gang's
  `DisruptionTarget` condition (reason `MemberDisrupted`), read back as
  `GroupInfo.disrupted_since`. A new process carries it on: members bound and created
  before it (the old attempt's; one its eviction missed) are evicted once, and the
  gang waits for its new pods as above. A member lost while no extender was running
  goes unnoticed: nothing then says the gang had started.

Pure: time comes in as `now`; the evictions and the report go out as actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from extender.core.cache import Cache
from extender.core.cache.tally import is_member
from extender.core.model.types import DISRUPT_ALL, GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import EvictPods, GangDisrupted, GroupRef, PodRef
from extender.core.outbox import Outbox
from extender.core.parked import ref
from extender.core.preemption.leaving import Leaving

# The node lifecycle controller's taints for a node whose kubelet is not ready or not
# heard from: its pods are lost to their gang.
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def node_lost(node: NodeInfo | None) -> str:
    """Why a member on `node` is lost ("" if it is not): removed, or not ready."""
    if node is None:
        return "was removed"
    if any(t.key in NOT_READY_TAINTS for t in node.taints):
        return "is not ready"
    return ""


@dataclass(slots=True)
class _Disrupted:
    since: float
    # The old attempt's members still bound: the disruption ends only once none is.
    old: set[str] = field(default_factory=set)
    # Carried over a restart: the old attempt is told by creation (before `since`),
    # and each of its members found bound is evicted, once (`evicted`).
    carried: bool = False
    evicted: set[str] = field(default_factory=set)
    reported: bool = False  # a carried one is reported once, evicting or not


class Disruptions:
    """Which started "all" gangs run with which bound members, and which are disrupted.
    Each event looks at the pods it concerns only, so a big gang's pod events cost the
    same as a small one's; the gang's members are walked when it starts and when it is
    disrupted."""

    def __init__(self, cache: Cache, leaving: Leaving, outbox: Outbox) -> None:
        self._cache = cache
        self._leaving = leaving
        self._outbox = outbox
        # gang -> its bound members since it started: uid -> (pod, node)
        self._running: dict[str, dict[str, tuple[PodRef, str]]] = {}
        self._disrupted: dict[str, _Disrupted] = {}
        self._nodes: set[str] = set()  # nodes changed or removed since the last tick

    # ----- what the watches say --------------------------------------------------------------

    def pod_changed(self, pod: PodInfo, old: PodInfo | None, now: float) -> None:
        # `gang` is derived from the labels on each read, and every pod event of the
        # cluster comes here: read once each.
        gang = pod.gang
        was = old.gang if old is not None else None
        if was is not None and was != gang:
            self._look(was, (pod.uid,), now)
        if gang is not None:
            self._look(gang, (pod.uid,), now)

    def pod_deleted(self, pod: PodInfo, now: float) -> None:
        """`pod` (as the cache held it) is gone: a member that had succeeded is not lost."""
        if pod.gang is None:
            return
        running = self._running.get(pod.gang)
        if running is not None and pod.phase == "Succeeded":
            running.pop(pod.uid, None)
        self._look(pod.gang, (pod.uid,), now, gone=pod.uid)

    def group_changed(self, gang: str, now: float) -> None:
        """The gang's PodGroup was added or changed (its mode, a disruption recorded)."""
        self._look(gang, None, now)

    def node_changed(self, name: str) -> None:
        """A node was changed or removed: its members are looked at on the next tick."""
        if self._running:
            self._nodes.add(name)

    def group_deleted(self, gang: str) -> None:
        self._running.pop(gang, None)
        self._disrupted.pop(gang, None)

    def tick(self, now: float) -> None:
        if not self._nodes:
            return
        nodes, self._nodes = self._nodes, set()
        for gang, running in list(self._running.items()):
            uids = [uid for uid, (_, node) in running.items() if node in nodes]
            if uids:
                self._look(gang, uids, now)

    # ----- the rule ----------------------------------------------------------------------------

    def _look(self, gang: str, uids: Sequence[str] | None, now: float, gone: str = "") -> None:
        """Look at `gang` after its pods `uids` (None: every one it runs with) or their
        nodes changed; `gone`: a pod deleted."""
        group = self._cache.groups.get(gang)
        if group is None or group.disruption_mode != DISRUPT_ALL:
            self._running.pop(gang, None)
            self._disrupted.pop(gang, None)
            return
        if self._leaving.preempted(gang):
            # Evicted whole by a preemption already: its members leaving are not losses;
            # it starts again once placed again.
            self._running.pop(gang, None)
            return
        d = self._disrupted.get(gang)
        if d is None and group.disrupted_since and gang not in self._running:
            d = self._disrupted[gang] = _Disrupted(group.disrupted_since, carried=True)
            uids = None  # the old attempt's members, bound or not yet listed
        if d is not None:
            self._while_disrupted(group, d, uids, gone)
            return
        running = self._running.get(gang)
        if running is None:
            self._start(group)
            return
        lost: list[tuple[PodRef, str]] = []
        for uid in list(running) if uids is None else uids:
            pod = None if uid == gone else self._cache.pods.get(uid)
            if uid not in running:
                if pod is not None and pod.gang == gang and pod.node_name and is_member(pod):
                    running[uid] = (ref(pod), pod.node_name)  # an extra, bound since
                continue
            why = self._lost(gang, pod, running[uid][1])
            if why is None:
                running.pop(uid)  # succeeded, or left the gang: not a loss
            elif why:
                lost.append((running[uid][0], why))
        if lost:
            self._disrupt(group, lost, now)

    def _start(self, group: GroupInfo) -> None:
        """The gang has started once its quorum is bound, on nodes present and ready."""
        if self._cache.tally(group).bound_or_succeeded < group.min_member:
            return
        bound = [m for m in self._cache.members(group) if m.node_name]
        if not any(node_lost(self._cache.nodes.get(m.node_name)) for m in bound):
            self._running[group.key] = {m.uid: (ref(m), m.node_name) for m in bound}

    def _lost(self, gang: str, pod: PodInfo | None, node: str) -> str | None:
        """Why a running member is lost; "" if it is not, None if it left without loss."""
        if pod is None:
            return "was deleted"
        if pod.gang != gang or pod.phase == "Succeeded":
            return None
        if pod.phase == "Failed":
            return "failed"
        if pod.deleting:
            return "is being deleted (evicted or deleted)"
        why = node_lost(self._cache.nodes.get(node))
        return f"is on node {node}, which {why}" if why else ""

    def _disrupt(self, group: GroupInfo, lost: list[tuple[PodRef, str]], now: float) -> None:
        gang = group.key
        del self._running[gang]
        # Every bound member goes, a lost one still bound (its node not ready) too: the
        # job restarts whole, and nobody else would end that one before the taint
        # manager's grace period.
        evicted = tuple(ref(m) for m in self._cache.members(group) if m.node_name)
        self._disrupted[gang] = _Disrupted(now, {p.uid for p in evicted})
        what = "; ".join(f"member {p.key} {why}" for p, why in lost)
        msg = (f"gang {gang}: {what}, after the gang had started; its disruption mode is "
               f"all, so its {len(evicted)} bound member(s) left are evicted, and it is "
               f"placed again whole when its owner recreates its pods")
        self._leave(group, evicted, tuple(p for p, _ in lost), msg, now)

    def _while_disrupted(self, group: GroupInfo, d: _Disrupted, uids: Sequence[str] | None,
                         gone: str) -> None:
        pods = (self._cache.members(group) if uids is None
                else [p for u in uids if u != gone and (p := self._cache.pods.get(u))])
        if uids is not None:  # pods of `uids` no longer bound members have left
            d.old.difference_update(u for u in uids if u == gone or not any(
                p.uid == u and p.gang == group.key and p.node_name and is_member(p)
                for p in pods))
        if d.carried:
            # The old attempt's members, by creation: a pod made before the disruption.
            old = [p for p in pods if p.gang == group.key and p.node_name and is_member(p)
                   and p.creation < d.since and p.uid not in d.evicted]
            if old or not d.reported:
                # Reported even with nothing to evict: the status keeps saying it.
                d.reported = True
                d.old.update(p.uid for p in old)
                d.evicted.update(p.uid for p in old)
                evicted = tuple(ref(p) for p in old)
                what = (f"{len(evicted)} member(s) of that attempt still bound are evicted"
                        if evicted else "it waits for its new pods to be placed whole")
                msg = (f"gang {group.key}: disrupted whole (its disruption mode is all) "
                       f"before this extender started; {what}")
                self._leave(group, evicted, (), msg, d.since)
        if d.old or self._cache.tally(group).bound_or_succeeded < group.min_member:
            return
        # Placed again whole by its new pods: started again; its next loss is a new
        # disruption.
        del self._disrupted[group.key]
        self._start(group)

    def _leave(self, group: GroupInfo, evicted: tuple[PodRef, ...], lost: tuple[PodRef, ...],
               msg: str, since: float) -> None:
        self._leaving.disrupted(group.key, [p.uid for p in evicted])
        gref = GroupRef(group.namespace, group.name, group.uid, group.source)
        self._outbox.append(GangDisrupted(gref, msg, lost, evicted, since))
        if evicted:
            self._outbox.append(EvictPods(group.key, evicted, msg))

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
* **A CompositePodGroup whose disruption mode is all** (its own `spec.disruptionMode`)
  is one gang of gangs here: started once `minGroupCount` of its children (1 at least)
  have their quorum bound, on nodes present and ready; a member of any of its children
  lost then has every bound member of every child evicted, each child reported as a gang
  disrupted whole (`GangDisrupted.composite` names the composite, whose status says it
  too). A child whose own mode is all, inside a composite whose mode is single, is
  disrupted alone, as any gang.
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
from extender.core.model.types import (
    DISRUPT_ALL,
    CompositeInfo,
    GroupInfo,
    NodeInfo,
    PodInfo,
)
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


@dataclass(frozen=True, slots=True)
class _Unit:
    """What is disrupted whole: a gang of mode all, or a composite of mode all with its
    children (`composite` set). Built afresh on each look: the cache is the truth."""

    key: str  # the gang's key, or the composite's
    groups: tuple[GroupInfo, ...]  # the gang, or the composite's children by name
    composite: CompositeInfo | None = None

    def has(self, gang: str | None) -> bool:
        return any(g.key == gang for g in self.groups)

    @property
    def disrupted_since(self) -> float:
        """When it was disrupted whole, as the status recorded it (0: not)."""
        marks = [g.disrupted_since for g in self.groups if g.disrupted_since]
        if self.composite is not None and self.composite.disrupted_since:
            marks.append(self.composite.disrupted_since)
        return min(marks, default=0.0)


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
    """Which started "all" gangs (and composites) run with which bound members, and which
    are disrupted. Each event looks at the pods it concerns only, so a big gang's pod
    events cost the same as a small one's; the gang's members are walked when it starts
    and when it is disrupted."""

    def __init__(self, cache: Cache, leaving: Leaving, outbox: Outbox) -> None:
        self._cache = cache
        self._leaving = leaving
        self._outbox = outbox
        # unit -> its bound members since it started: uid -> (pod, node, its gang)
        self._running: dict[str, dict[str, tuple[PodRef, str, str]]] = {}
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
        if pod.phase == "Succeeded":
            unit = self._unit(pod.gang)
            running = self._running.get(unit.key if unit is not None else pod.gang)
            if running is not None:
                running.pop(pod.uid, None)
        self._look(pod.gang, (pod.uid,), now, gone=pod.uid)

    def group_changed(self, key: str, now: float) -> None:
        """A gang's PodGroup, or a CompositePodGroup, was added or changed (its mode, a
        disruption recorded)."""
        self._look(key, None, now)

    def node_changed(self, name: str) -> None:
        """A node was changed or removed: its members are looked at on the next tick."""
        if self._running:
            self._nodes.add(name)

    def group_deleted(self, key: str) -> None:
        """A gang's PodGroup or a CompositePodGroup was deleted: a composite's children,
        which remain, are looked at again as their own on their next event."""
        self._running.pop(key, None)
        self._disrupted.pop(key, None)

    def tick(self, now: float) -> None:
        if not self._nodes:
            return
        nodes, self._nodes = self._nodes, set()
        for key, running in list(self._running.items()):
            uids = [uid for uid, (_, node, _) in running.items() if node in nodes]
            if uids:
                self._look(key, uids, now)

    # ----- the rule ----------------------------------------------------------------------------

    def _unit(self, key: str) -> _Unit | None:
        """What `key` (a gang's, or a composite's) is disrupted with, None: nothing is
        disrupted whole. A child of a composite of mode all goes with its siblings; any
        other gang by its own mode."""
        composite = self._cache.composites.get(key)
        if composite is None:
            group = self._cache.groups.get(key)
            if group is None:
                return None
            composite = self._cache.composites.get(group.parent) if group.parent else None
            if composite is None or composite.disruption_mode != DISRUPT_ALL:
                return _Unit(key, (group,)) if group.disruption_mode == DISRUPT_ALL else None
        if composite.disruption_mode != DISRUPT_ALL:
            return None
        return _Unit(composite.key, tuple(self._cache.children(composite.key)), composite)

    def _look(self, key: str, uids: Sequence[str] | None, now: float, gone: str = "") -> None:
        """Look at what `key` (a gang or a composite) is disrupted with, after its pods
        `uids` (None: every one it runs with) or their nodes changed; `gone`: a pod
        deleted."""
        unit = self._unit(key)
        if unit is None or unit.key != key:
            # Not disrupted whole on its own (any more): what was kept under its key ends.
            self._running.pop(key, None)
            self._disrupted.pop(key, None)
            if unit is None:
                return
        if not unit.groups:
            return
        if any(self._leaving.preempted(g.key) for g in unit.groups):
            # Evicted whole by a preemption already: its members leaving are not losses;
            # it starts again once placed again.
            self._running.pop(unit.key, None)
            return
        d = self._disrupted.get(unit.key)
        if d is None and unit.disrupted_since and unit.key not in self._running:
            d = self._disrupted[unit.key] = _Disrupted(unit.disrupted_since, carried=True)
            uids = None  # the old attempt's members, bound or not yet listed
        if d is not None:
            self._while_disrupted(unit, d, uids, gone)
            return
        running = self._running.get(unit.key)
        if running is None:
            self._start(unit)
            return
        lost: list[tuple[PodRef, str, str]] = []
        for uid in list(running) if uids is None else uids:
            pod = None if uid == gone else self._cache.pods.get(uid)
            if uid not in running:
                if (pod is not None and pod.gang is not None and unit.has(pod.gang)
                        and pod.node_name and is_member(pod)):
                    # an extra, bound since
                    running[uid] = (ref(pod), pod.node_name, pod.gang)
                continue
            p, node, gang = running[uid]
            why = self._lost(unit, pod, node)
            if why is None:
                running.pop(uid)  # succeeded, or left the gang: not a loss
            elif why:
                lost.append((p, why, gang))
        if lost:
            self._disrupt(unit, lost, now)

    def _placed(self, unit: _Unit) -> bool:
        """A gang's quorum is bound; a composite's children at theirs number its
        `minGroupCount` (1 at least: a "basic" composite has started with its first)."""
        at_quorum = sum(1 for g in unit.groups
                        if self._cache.tally(g).bound_or_succeeded >= g.min_member)
        need = 1 if unit.composite is None else max(1, unit.composite.min_group_count)
        return at_quorum >= need

    def _bound(self, unit: _Unit) -> list[PodInfo]:
        return [m for g in unit.groups for m in self._cache.members(g) if m.node_name]

    def _start(self, unit: _Unit) -> None:
        """It has started once placed, its bound members on nodes present and ready."""
        if not self._placed(unit):
            return
        bound = self._bound(unit)
        if not any(node_lost(self._cache.nodes.get(m.node_name)) for m in bound):
            self._running[unit.key] = {m.uid: (ref(m), m.node_name, m.gang or "")
                                       for m in bound}

    def _lost(self, unit: _Unit, pod: PodInfo | None, node: str) -> str | None:
        """Why a running member is lost; "" if it is not, None if it left without loss."""
        if pod is None:
            return "was deleted"
        if not unit.has(pod.gang) or pod.phase == "Succeeded":
            return None
        if pod.phase == "Failed":
            return "failed"
        if pod.deleting:
            return "is being deleted (evicted or deleted)"
        why = node_lost(self._cache.nodes.get(node))
        return f"is on node {node}, which {why}" if why else ""

    def _disrupt(self, unit: _Unit, lost: list[tuple[PodRef, str, str]], now: float) -> None:
        del self._running[unit.key]
        # Every bound member goes, a lost one still bound (its node not ready) too: the
        # job restarts whole, and nobody else would end that one before the taint
        # manager's grace period.
        evicted = self._bound(unit)
        self._disrupted[unit.key] = _Disrupted(now, {p.uid for p in evicted})
        what = "; ".join(f"member {p.key} {why}" for p, why, _ in lost)
        c = unit.composite
        for g in unit.groups:
            mine = tuple(ref(p) for p in evicted if p.gang == g.key)
            lost_here = tuple(p for p, _, gang in lost if gang == g.key)
            if c is None:
                msg = (f"gang {g.key}: {what}, after the gang had started; its disruption "
                       f"mode is all, so its {len(mine)} bound member(s) left are evicted, "
                       f"and it is placed again whole when its owner recreates its pods")
            elif mine or lost_here:
                # Each child disrupted says so (its Event, its DisruptionTarget), naming
                # the loss wherever in the composite it was.
                msg = (f"gang {g.key}: part of CompositePodGroup {c.namespace}/{c.name}, "
                       f"whose disruption mode is all: {what}, after the composite had "
                       f"started; its {len(evicted)} bound member(s) left, {len(mine)} of "
                       f"this group, are evicted, and its groups are placed again together "
                       f"when their owner recreates their pods")
            else:
                continue  # a child with nothing bound: nothing of it is disrupted
            self._leave(g, c, mine, lost_here, msg, now)

    def _while_disrupted(self, unit: _Unit, d: _Disrupted, uids: Sequence[str] | None,
                         gone: str) -> None:
        pods = ([m for g in unit.groups for m in self._cache.members(g)] if uids is None
                else [p for u in uids if u != gone and (p := self._cache.pods.get(u))])
        if uids is not None:  # pods of `uids` no longer bound members have left
            d.old.difference_update(u for u in uids if u == gone or not any(
                p.uid == u and unit.has(p.gang) and p.node_name and is_member(p)
                for p in pods))
        if d.carried:
            # The old attempt's members, by creation: a pod made before the disruption.
            old = [p for p in pods if unit.has(p.gang) and p.node_name and is_member(p)
                   and p.creation < d.since and p.uid not in d.evicted]
            if old or not d.reported:
                # Reported even with nothing to evict: the status keeps saying it.
                d.reported = True
                d.old.update(p.uid for p in old)
                d.evicted.update(p.uid for p in old)
                c = unit.composite
                whose = ("its disruption mode" if c is None else
                         f"the disruption mode of its CompositePodGroup {c.namespace}/{c.name}")
                for g in unit.groups:
                    mine = tuple(ref(p) for p in old if p.gang == g.key)
                    if c is not None and not mine and old:
                        continue  # only the children with members of that attempt
                    what = (f"{len(mine)} member(s) of that attempt still bound are evicted"
                            if mine else "it waits for its new pods to be placed whole")
                    msg = (f"gang {g.key}: disrupted whole ({whose} is all) before this "
                           f"extender started; {what}")
                    self._leave(g, c, mine, (), msg, d.since)
        if d.old or not self._placed(unit):
            return
        # Placed again whole by its new pods: started again; its next loss is a new
        # disruption.
        del self._disrupted[unit.key]
        self._start(unit)

    def _leave(self, group: GroupInfo, composite: CompositeInfo | None,
               evicted: tuple[PodRef, ...], lost: tuple[PodRef, ...], msg: str,
               since: float) -> None:
        self._leaving.disrupted(group.key, [p.uid for p in evicted])
        gref = GroupRef(group.namespace, group.name, group.uid, group.source)
        self._outbox.append(GangDisrupted(gref, msg, lost, evicted, since,
                                          composite.name if composite is not None else ""))
        if evicted:
            self._outbox.append(EvictPods(group.key, evicted, msg))

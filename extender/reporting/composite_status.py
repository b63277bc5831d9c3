"""The status writer's part for CompositePodGroups (`scheduling.k8s.io/v1alpha3`, 1.37
alpha) whose children's pods are ours: the conditions upstream defines for the
composite (`core/model/upstream_status.composite_conditions` decides), set with a
strategic merge patch of its `status` subresource as an upstream PodGroup's are
(`reporting/upstream.py`, whose record keeping it shares).

Why the composite's own status: a leader and its workers are one job, and the
composite is the object its owner (a JobSet or LeaderWorkerSet controller, or a user
with kubectl) looks at to learn whether the job as a whole was placed, or is about to
be evicted whole; the children's conditions say it only group by group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from extender.core.model.phase import GroupStatus, Previous
from extender.core.model.types import CompositeInfo, GroupInfo, composite_key
from extender.core.model.upstream_status import (
    CompositeState,
    Disruption,
    composite_conditions,
    differs,
)
from extender.core.model.vocabulary import GANG, GangDisrupted, Preempting, Reason
from extender.core.reads import Reads
from extender.reporting import upstream
from extender.reporting.status_records import GroupRecord

VERSION = "scheduling.k8s.io/v1alpha3"

# A child's Scheduled reasons that say it was tried and waits (the composite is then
# `Unschedulable`); one that only waits for its pods says nothing yet, as upstream.
_WAITING = frozenset({
    Reason.INSUFFICIENT_CAPACITY, Reason.UNPLACEABLE, Reason.WAITING_BEHIND_OLDER_GANG,
    Reason.CAPACITY_HELD, Reason.BACKING_OFF, Reason.FAILED, Reason.RETRY_LIMIT_REACHED,
})


def path(composite: CompositeInfo) -> str:
    return (f"/apis/{VERSION}/namespaces/{composite.namespace}/compositepodgroups/"
            f"{composite.name}/status")


def key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return composite_key(str(meta.get("namespace", "")), str(meta.get("name", "")))


def state(composite: CompositeInfo,
          children: Sequence[tuple[GroupInfo, GroupStatus]],
          waiting_since: float | None = None) -> CompositeState:
    """What its children's statuses say of the composite (`CompositeState`);
    `waiting_since`, when it began waiting for capacity (None: it does not)."""
    if composite.error:
        return CompositeState(error=f"CompositePodGroup {composite.namespace}/"
                                    f"{composite.name}: {composite.error}")
    bound = [g.name for g, st in children if st.reason == Reason.BOUND]
    need = max(1, composite.min_group_count)
    if len(bound) >= need:
        return CompositeState(placed=(
            f"{len(bound)} of its {len(children)} groups have their quorum bound "
            f"({', '.join(bound)}); {need} at least (minGroupCount)"))
    waiting = next((st.message for _, st in children if st.reason in _WAITING), "")
    return CompositeState(waiting=waiting, waiting_since=waiting_since or 0.0)


def disrupted(report: GangDisrupted, before: Disruption | None) -> Disruption:
    """The composite disrupted whole, from one of its children's reports: every child's
    evicted members gathered, said with the words of the child that lost a member."""
    g = report.group
    key = composite_key(g.namespace, report.composite)
    pods = tuple(p.uid for p in report.evicted)
    if before is not None and before.since == report.since:
        pods = tuple(dict.fromkeys(before.pods + pods))
        if not report.lost:
            return Disruption(key, 0, pods, "", 0, lost=before.lost, since=before.since)
    msg = (f"CompositePodGroup {g.namespace}/{report.composite} is disrupted whole (its "
           f"disruption mode is all), every child group with it: {report.message}")
    return Disruption(key, 0, pods, "", 0, lost=msg, since=report.since)


def preempted(report: Preempting, reads: Reads) -> list[Disruption]:
    """The composites a preemption evicts: a composite with a gang policy is one victim,
    all its children together (core/preemption/victims.py), and upstream makes it a
    `DisruptionTarget` with reason `PreemptionByScheduler` as it does each child, so that
    its owner, who looks at the composite, learns the job as a whole is going. Its
    children's evicted members are gathered; a composite whose children only had their
    reservations released is not disrupted (nothing of it is evicted), as a child's."""
    pods: dict[str, list[str]] = {}
    found: dict[str, tuple[CompositeInfo, int]] = {}
    for v in report.victims:
        if v.kind != GANG or v.group is None or not v.pods:
            continue
        g = reads.group(v.group.key)
        c = reads.composite(g.parent) if g is not None and g.parent else None
        if c is None or not c.min_group_count:
            continue  # a child of a "basic" composite is a victim on its own
        pods.setdefault(c.key, []).extend(p.uid for p in v.pods)
        found[c.key] = (c, v.priority)
    out = []
    for key, (c, priority) in found.items():
        said = (f"CompositePodGroup {c.namespace}/{c.name} (priority {priority}): preempted "
                f"by {report.preemptor} (priority {report.priority}) with every child "
                f"group: their {len(pods[key])} bound member(s) are evicted; it is placed "
                f"again whole when there is room")
        out.append(Disruption(key, priority, tuple(pods[key]), report.preemptor,
                              report.priority, said=said))
    return out


def doc(rec: GroupRecord, st: CompositeState, disruption: Disruption | None, now: float
        ) -> dict[str, Any] | None:
    """The `status` of the patch to send, or None when the conditions already say it."""
    have = upstream.shown(rec)
    previous = Previous(conditions={
        t: (str(c.get("status", "")), str(c.get("lastTransitionTime", "")))
        for t, c in have.items()})
    conds = composite_conditions(st, disruption, previous, now, rec.generation)
    if not conds or not differs(conds, have):
        return None
    return {"conditions": [c.to_k8s() for c in conds]}

"""The status writer's part for upstream PodGroups (`scheduling.k8s.io` v1beta1 on 1.37,
v1alpha2 on 1.36) whose members name this scheduler: what the API shows of each, what
to set (`core/model/upstream_status.py` decides), and the patch that sets it.

Only conditions are written, with a strategic merge patch of the `status` subresource,
as kube-scheduler writes its own: the API merges the list by `type`, so a condition of
another type, or `resourceClaimStatuses`, someone else wrote is never overwritten, and
no read-modify-write is needed (no conflict to lose). A group any of whose pods name
another scheduler (the in-tree scheduler's own gangs) is never written
(`StatusWriter._recompute`, `labelled.LabelledPods`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import orjson

from extender.core.model.phase import GroupStatus, Previous
from extender.core.model.types import GroupInfo
from extender.core.model.upstream_status import (
    Disruption,
    conditions_by_type,
    differs,
    upstream_conditions,
)
from extender.core.reads import Reads
from extender.kube.source_kinds import group_api_version
from extender.reporting.status_records import EMPTY_JSON, GroupRecord, compact_json


@runtime_checkable
class UpstreamStatusApi(Protocol):
    """What writing an upstream PodGroup's conditions needs besides `merge_patch` (a
    client without it, a test's, writes none)."""

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> None: ...


def observe(rec: GroupRecord, obj: dict[str, Any]) -> None:
    """An upstream PodGroup as a watch event shows it."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    status = obj.get("status")
    rec.api_json = compact_json(status) if isinstance(status, dict) and status else EMPTY_JSON
    gen = meta.get("generation")
    rec.generation = gen if isinstance(gen, int) and not isinstance(gen, bool) else 0


def shown(rec: GroupRecord) -> dict[str, dict[str, Any]]:
    """type -> condition: as the API shows them, with what this process set last laid
    over them (a watch event may lag behind a write)."""
    out = conditions_by_type(orjson.loads(rec.api_json))
    if rec.api_written_json is not None:
        out.update(conditions_by_type(orjson.loads(rec.api_written_json)))
    return out


def doc(rec: GroupRecord, st: GroupStatus, disruption: Disruption | None, api_version: str,
        now: float) -> dict[str, Any] | None:
    """The `status` of the patch to send, or None when the conditions already say it."""
    have = shown(rec)
    previous = Previous(conditions={
        t: (str(c.get("status", "")), str(c.get("lastTransitionTime", "")))
        for t, c in have.items()})
    conds = upstream_conditions(st, disruption, api_version, previous, now, rec.generation)
    if not conds or not differs(conds, have):
        return None
    return {"conditions": [c.to_k8s() for c in conds]}


def evicted(reads: Reads, d: Disruption, rec: GroupRecord) -> bool:
    """Every member the preemption evicts is gone (or going), and the API shows (or this
    process set) DisruptionTarget True: from then on the gang placed again ends it. A
    member lost whole waits for its evicted pods to be deleted, not only going: one
    still terminating counts as running, and the status would say the gang placed."""
    gone = all((p := reads.pod(u)) is None or (not d.lost and (p.deleting or not p.node_name))
               for u in d.pods)
    return gone and shown(rec).get("DisruptionTarget", {}).get("status") == "True"


def written(rec: GroupRecord, status: dict[str, Any]) -> None:
    """`status` was set: remember its conditions over those set before."""
    merged = conditions_by_type(orjson.loads(rec.api_written_json or b"{}"))
    merged.update(conditions_by_type(status))
    rec.api_written_json = compact_json({"conditions": list(merged.values())})


def api_version(group: GroupInfo) -> str:
    """The version the group was read in (v1beta1 or v1alpha2): the one to write."""
    return group_api_version(group.source, group.key) or ""


def path(group: GroupInfo, api_version: str) -> str:
    return (f"/apis/{api_version}/namespaces/{group.namespace}/podgroups/{group.name}"
            f"/status")

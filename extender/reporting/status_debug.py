"""/debug/podgroups: what the status writer (`reporting/status.py`) computed for each
PodGroup, in queue order, and whether and when it was written."""

from __future__ import annotations

from typing import Any

from extender.core.model.phase import PENDING, SCHEDULING
from extender.reporting.status import StatusWriter


def _waiting(writer: StatusWriter, key: str) -> bool:
    rec = writer.groups.get(key)
    return rec is None or rec.current is None or rec.current.phase in (PENDING, SCHEDULING)


def status_debug(writer: StatusWriter, now: float) -> dict[str, Any]:
    """Every PodGroup in queue order with its computed status and write state."""
    reads = writer.reads
    waiting = [row.gang for row in reads.queue() if _waiting(writer, row.gang)]
    order = {gang: i for i, gang in enumerate(waiting)}
    groups = []
    for group in sorted(reads.groups(),
                        key=lambda g: (order.get(g.key, len(order)), g.key)):
        key = group.key
        rec = writer.groups.get(key)
        st = rec.current if rec is not None else None
        row: dict[str, Any] = {"gang": key, "source": group.source,
                               "minMember": group.min_member,
                               "queuePosition": order.get(key)}
        if st is not None:
            row.update(phase=st.phase, reason=st.reason, message=st.message,
                       members=st.members, bound=st.bound, running=st.running,
                       succeeded=st.succeeded, failed=st.failed,
                       scheduleStartTime=st.schedule_start_time,
                       occupiedBy=st.occupied_by)
        if rec is not None:
            # An upstream PodGroup's conditions count as its status (`reporting/upstream`).
            written = rec.written_json is not None or rec.api_written_json is not None
            row.update(
                statusWritten=written,
                lastWriteSecondsAgo=round(now - rec.written_at, 3) if written else None,
                writeErrors=rec.errors,
                pendingWrite=key in writer.dirty,
            )
        groups.append(row)
    return {
        "podGroups": groups,
        "statusWriter": {"pending": len(writer.dirty), "writes": writer.writes,
                         "errors": writer.write_errors},
    }

"""The debug routes, JSON for people and the e2e tests, built from read-only views:

* GET /debug/gangs: the gang queue, reservations, binds in progress, backoffs, the
  filter calls waiting for their gang, and whether this replica is active or on standby;
* GET /debug/podgroups: every PodGroup's computed status and its write state.

The JSON keys are documented in docs/observability.md and do not follow the code's names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import Response

from extender.core.model.phase import rfc3339
from extender.core.model.types import split_gang_key
from extender.core.model.vocabulary import QueueRow
from extender.core.reads import Reads
from extender.deprecated import with_old_keys
from extender.kube.recorder import EventRecorder
from extender.reporting.status import StatusWriter
from extender.reporting.status_debug import status_debug
from extender.scheduler.dispatch import Dispatcher


def _queue_row(row: QueueRow) -> dict[str, object]:
    st = row.status
    return {"gang": row.gang, "source": split_gang_key(row.gang)[0],
            "minMember": row.min_member, "members": row.members,
            "bound": row.bound, "reason": str(st.reason) if st else "",
            "message": st.message if st else ""}


def gangs_view(dispatcher: Dispatcher) -> dict[str, Any]:
    reads = dispatcher.manager.reads
    now = dispatcher.clock()
    binds = reads.binds_in_progress()
    return with_old_keys({
        "queue": [_queue_row(r) for r in reads.queue()],
        "reservations": [
            {"gang": r.gang, "created": r.created,
             "deadline": None if r.held else r.deadline,
             "secondsLeft": None if r.held else round(r.deadline - now, 3), "held": r.held,
             "domain": r.domain,
             "slots": [{"pod": s.pod.key, "node": s.node, "requests": dict(s.requests),
                        "devices": list(s.devices)}
                       for s in r.slots]}
            for r in reads.reservations()
        ],
        "waitingBinds": [{"pod": b.pod, "node": b.node} for b in binds if not b.in_flight],
        "bindingsInFlight": [{"pod": b.pod, "node": b.node} for b in binds if b.in_flight],
        "backoff": reads.backoffs(now),
        "filterWaits": dispatcher.filter_waits(),
        "leader": dispatcher.leader.view(),
    })


def install_gangs_route(app: FastAPI, dispatcher: Dispatcher) -> None:
    async def debug_gangs() -> Response:
        return Response(orjson.dumps(gangs_view(dispatcher)), media_type="application/json")

    app.add_api_route("/debug/gangs", debug_gangs, methods=["GET"])


def podgroups_view(writer: StatusWriter, recorder: EventRecorder | None,
                   reads: Reads, now: float) -> dict[str, Any]:
    """Every PodGroup in queue order with its computed status and write state, the
    reservations (nodes, slots, deadline), the binds waiting at the permit barrier and
    the event sink."""
    body = status_debug(writer, now)
    body["reservations"] = [
        {"gang": r.gang, "nodes": sorted({s.node for s in r.slots}), "domain": r.domain,
         "slots": [{"pod": s.pod.key, "node": s.node, "devices": list(s.devices)}
                   for s in r.slots],
         "created": rfc3339(r.created),
         "deadline": None if r.held else rfc3339(r.deadline),
         "secondsLeft": None if r.held else round(r.deadline - now, 3), "held": r.held}
        for r in reads.reservations()
    ]
    body["waitingBinds"] = [
        {"pod": b.pod, "gang": b.gang, "node": b.node,
         "deadline": rfc3339(b.deadline) if b.deadline is not None else None,
         "secondsLeft": round(b.deadline - now, 3) if b.deadline is not None else None}
        for b in reads.binds_in_progress() if not b.in_flight
    ]
    body["events"] = recorder.debug() if recorder is not None else None
    return with_old_keys(body)


def install_podgroups_route(app: FastAPI, writer: StatusWriter, recorder: EventRecorder | None,
                            clock: Callable[[], float]) -> None:
    async def debug_podgroups() -> Response:
        body = podgroups_view(writer, recorder, writer.reads, clock())
        return Response(orjson.dumps(body), media_type="application/json")

    app.add_api_route("/debug/podgroups", debug_podgroups, methods=["GET"])

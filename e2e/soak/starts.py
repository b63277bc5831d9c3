"""Gang start as kube-scheduler's own clock tells it: from the moment `minMember` members
existed (the soak's clock, taken right after the create call returned) to the
`minMember`-th member's `Scheduled` Event (events.k8s.io/v1 `eventTime`, microseconds,
recorded by kube-scheduler once the Binding was made).

Why beside the checker's figure: the checker times the quorum by its own watch, in the
soak's process, where the load, the neighbours, the hostile stream and the checker's
invariant checks share one interpreter. More objects (hostile mode) then delay the
checker's view of a bind, not only the bind. kube-scheduler's Event is written in the
binding cycle itself."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any


def scheduled_times(events: Iterable[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> the earliest `Scheduled` eventTime, in seconds since the epoch.
    Events without a readable time or object are left out."""
    out: dict[tuple[str, str], float] = {}
    for ev in events:
        if ev.get("reason") != "Scheduled":
            continue
        regarding = ev.get("regarding") or {}
        when = ev.get("eventTime") or ev.get("deprecatedFirstTimestamp")
        ns, name = regarding.get("namespace"), regarding.get("name")
        if not (isinstance(when, str) and isinstance(ns, str) and isinstance(name, str)):
            continue
        try:
            t = datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        key = (ns, name)
        out[key] = min(t, out.get(key, t))
    return out


def quorum_time(scheduled: dict[tuple[str, str], float], ns: str, pods: Iterable[str],
                min_member: int) -> float | None:
    """When the `min_member`-th of `pods` was scheduled; None if fewer were."""
    times = sorted(t for p in pods if (t := scheduled.get((ns, p))) is not None)
    return times[min_member - 1] if 0 < min_member <= len(times) else None


def list_scheduled(events_api: Any, namespaces: Iterable[str]) -> dict[tuple[str, str], float]:
    """Every `Scheduled` Event of `namespaces` (events.k8s.io/v1), page by page."""
    items: list[dict[str, Any]] = []
    for ns in namespaces:
        token = None
        while True:
            resp = events_api.list_namespaced_event(
                ns, field_selector="reason=Scheduled", limit=500, _continue=token,
                _preload_content=False)
            body = json.loads(resp.data)
            items += body.get("items", [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                break
    return scheduled_times(items)


__all__ = ["list_scheduled", "quorum_time", "scheduled_times"]

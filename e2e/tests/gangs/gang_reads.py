"""A gang's member made as the lifecycle tests make it, and what the tests read of a gang
afterwards: a pod's PodScheduled message, the binds the extender holds for it, one
condition of its PodGroup's status. The lifecycle, shared-nodes, status, metrics and
failure-path tests all use them, so they are a module of their own rather than a test
module the others import from."""

from __future__ import annotations

from typing import Any

from e2e.gang import GangStack
from e2e.harness.objects import GANG_SCHEDULER, create_pod
from e2e.harness.queries import get_pod


def member(ns: str, name: str, group: str, cpu: str) -> None:
    """A member of PodGroup `group` for the gang scheduler, sized by `cpu` alone, so that
    a test chooses what fits where by CPU."""
    create_pod(ns, name, cpu=cpu, memory="64Mi", scheduler_name=GANG_SCHEDULER, pod_group=group)


def held(gang: GangStack, prefix: str) -> int:
    """How many bind requests of pods named `prefix`* the extender holds at the barrier."""
    return sum(1 for h in gang.debug()["waitingBinds"] if h["pod"].startswith(prefix))


def message(ns: str, name: str) -> str:
    """The pod's PodScheduled message: what kube-scheduler says of why it waits."""
    pod = get_pod(ns, name) or {}
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message", ""))
    return ""


def scheduled(status: dict[str, Any], type_: str = "Scheduled") -> dict[str, Any]:
    """The condition `type_` of a PodGroup's status, or {} while it has none."""
    for c in status.get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}

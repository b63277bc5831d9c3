"""The pure decisions of the autoscaler stand-in (:mod:`e2e.integrations.autoscaler_standin`): how
many pool nodes a ProvisioningRequest needs, and which conditions it gets next. No I/O, no clock:
the loop reads the cluster, passes it in as plain values, and writes what comes out.

The arithmetic follows what the Cluster Autoscaler's own simulation does, as far as the
e2e tests can tell the difference (facts from its ``core/`` filter-out-schedulable step
and ``provisioningrequest/besteffortatomic``): pods already pending that fit the free room
of existing nodes take that room first; then every pod of the request is placed, first on
what room is left, then on new nodes of the pool's shape, first fit, all or nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from extender.core.model.quantity import parse_quantity

Resources = dict[str, Fraction]
"""Resource name -> amount (``pods`` counts one per pod)."""

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
SERVED_CLASSES = frozenset({ATOMIC, CHECK_CAPACITY})
NO_RETRY = "noRetry"
"""``spec.parameters`` key of the check-capacity class: fail at once rather than retry."""
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UPCOMING = ("kwok.x-k8s.io/node", "fake")
"""The annotation (and value) of the nodes the stand-in made."""
DONE = ("Provisioned", "Failed", "BookingExpired")
"""A request with one of these True is not looked at again (booking aside)."""


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What a pod (or a PodTemplate's pod) asks of a node: its containers' requests summed,
    one ``pods`` slot. Init containers, overhead and limits-as-requests are not counted
    (the tests' pods have none)."""
    out: Resources = {"pods": Fraction(1)}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[k] = out.get(k, Fraction(0)) + parse_quantity(v)
    return out


def quantities(raw: Mapping[str, Any]) -> Resources:
    """A node's ``allocatable`` (or any name -> quantity map) as numbers."""
    return {k: parse_quantity(v) for k, v in raw.items()}


def usable_node(node: Mapping[str, Any]) -> bool:
    """A node whose free room the simulation counts: Ready, not cordoned, no taint that
    keeps pods off (the PodTemplates here tolerate none). A node the stand-in made that
    still carries the ``not-ready`` taint admission gives every new node counts too: it is
    coming, as the autoscaler counts its upcoming nodes, so a second request in the same
    second does not pay for it again."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    made = (meta.get("annotations") or {}).get(UPCOMING[0]) == UPCOMING[1]
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    blocking = [t for t in spec.get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute")
                and not (made and t.get("key") == NOT_READY_TAINT)]
    return ready and not spec.get("unschedulable") and not blocking


def unschedulable(pod: Mapping[str, Any]) -> bool:
    """A pending pod the scheduler gave up on for now: the pods the autoscaler simulates."""
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable" for c in conds)


def fits(free: Mapping[str, Fraction], want: Mapping[str, Fraction]) -> bool:
    return all(free.get(k, Fraction(0)) >= v for k, v in want.items() if v > 0)


def take(free: Resources, want: Mapping[str, Fraction]) -> None:
    for k, v in want.items():
        free[k] = free.get(k, Fraction(0)) - v


def place(room: list[Resources], want: Mapping[str, Fraction]) -> bool:
    """First fit of ``want`` into ``room`` (changed in place); False when nothing holds it."""
    for free in room:
        if fits(free, want):
            take(free, want)
            return True
    return False


def free_room(allocatable: Resources, bound: Iterable[Mapping[str, Fraction]]) -> Resources:
    free = dict(allocatable)
    for p in bound:
        take(free, p)
    return free


def nodes_needed(room: Sequence[Mapping[str, Fraction]], pending: Iterable[Resources],
                 wanted: Iterable[Resources], shape: Mapping[str, Fraction]) -> int | None:
    """New nodes of ``shape`` the ``wanted`` pods need beyond the free ``room`` of the
    existing nodes, once the ``pending`` pods that fit there took their part (those that
    fit nowhere take nothing). None: a wanted pod fits not even on an empty new node."""
    free = [dict(r) for r in room]
    for p in pending:
        place(free, p)
    new: list[Resources] = []
    for w in wanted:
        if place(free, w):
            continue
        if not fits(shape, w):
            return None
        if not place(new, w):
            fresh = dict(shape)
            take(fresh, w)
            new.append(fresh)
    return len(new)


@dataclass(frozen=True)
class RequestCondition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class RequestAnswer:
    """What the loop does with one request: conditions to set (in order), nodes to add."""

    conditions: tuple[RequestCondition, ...] = ()
    scale_up: int = 0


def merge_conditions(current: Sequence[Mapping[str, Any]], new: Iterable[RequestCondition],
                     now: str) -> list[dict[str, Any]]:
    """The request's conditions with ``new`` set: one per type, in first-set order; a
    condition's ``lastTransitionTime`` moves only when its status changes (what the
    extender's "since when" reads)."""
    out = {str(c["type"]): dict(c) for c in current}
    for c in new:
        old = out.get(c.type)
        since = now if old is None or old.get("status") != c.status else \
            old.get("lastTransitionTime", now)
        out[c.type] = {"type": c.type, "status": c.status, "reason": c.reason,
                       "message": c.message, "lastTransitionTime": since}
    return list(out.values())


def served(cls: str, conds: Mapping[str, str]) -> bool:
    """A request this loop still decides on: a class it serves, not done."""
    return cls in SERVED_CLASSES and not any(conds.get(t) == "True" for t in DONE)


def decide(cls: str, conds: Mapping[str, str], needed: int | None, headroom: int,
           params: Mapping[str, Any] | None = None) -> RequestAnswer:
    """The next conditions of a served request whose pods need ``needed`` new nodes
    (None: they cannot be made at all) when the pool may grow by ``headroom``.

    As the autoscaler: Accepted first; capacity already there -> Provisioned
    (CapacityIsFound); the atomic class scales up only for all of it (Provisioned,
    CapacityIsProvisioned) or not at all (Provisioned=False, retried: it fails only after
    a week, which no test waits for); check-capacity never scales up and fails at once
    only with ``noRetry: "true"``."""
    out: list[RequestCondition] = []
    if conds.get("Accepted") != "True":
        out.append(RequestCondition("Accepted", "True", "Accepted", "accepted by the stand-in"))
    if needed == 0:
        out.append(RequestCondition("Provisioned", "True", "CapacityIsFound",
                             "the request's pods fit the existing nodes"))
        return RequestAnswer(tuple(out))
    short = ("a pod of the request fits no node of the pool" if needed is None else
             f"needs {needed} new nodes, the pool may add {max(headroom, 0)}")
    if cls == CHECK_CAPACITY:
        if str((params or {}).get(NO_RETRY, "")) == "true":
            out.append(RequestCondition("Failed", "True", "CapacityIsNotFound", short))
        else:
            out.append(RequestCondition("Provisioned", "False", "CapacityIsNotFound", short))
        return RequestAnswer(tuple(out))
    if needed is not None and needed <= headroom:
        out.append(RequestCondition("Provisioned", "True", "CapacityIsProvisioned",
                             f"added {needed} nodes"))
        return RequestAnswer(tuple(out), scale_up=needed)
    out.append(RequestCondition("Provisioned", "False", "CapacityIsNotFound", short))
    return RequestAnswer(tuple(out))


def retry_due(since: float, now: float, attempts: int, initial: float = 2.0,
              maximum: float = 4.0) -> bool:
    """A request left at Provisioned=False is looked at again after a backoff that doubles
    per attempt up to ``maximum`` (the e2e run of the real one: 2 s, then 4 s)."""
    return now - since >= min(initial * (1 << max(attempts - 1, 0)), maximum)


def booking_expired(provisioned_at: float, now: float, booking: float) -> bool:
    """A Provisioned request's booking ends ``booking`` seconds after it was provisioned."""
    return now - provisioned_at >= booking


def booked(count: int, consumers: int) -> int:
    """Pods a provisioned request still holds room for: its pods less the pods that
    already consume it (those are counted as themselves, bound or pending)."""
    return max(count - consumers, 0)

"""Kubernetes quantities and resource lists, in kube-scheduler's integer units.

Amounts are parsed exactly (as `Fraction`, `core/model/quantity.py`) and rounded up only once,
at the end, the way kube-scheduler sums `resource.Quantity` values exactly and then takes
`MilliValue()`/`Value()`: rounding each container separately could make a pod look
bigger than kube-scheduler thinks it is, and the two would then disagree on fits.

An amount beyond int64 in its unit is `SATURATED` ("more than any node has"): a request
or a minResources of that size never fits, a node's capacity is capped below it, and
messages say "beyond int64" instead of printing the number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

from extender.core.model.fields import not_an_object
from extender.core.model.quantity import INT64_MAX, SATURATED, parse_quantity, shorten
from extender.core.model.types import Resources

__all__ = [
    "SATURATED",
    "add",
    "fits",
    "format_resources",
    "parse_quantity",
    "parse_resource_list",
    "pod_requests",
    "shortfall",
    "sub",
    "to_units",
]

# For messages: bytes are written in the largest binary unit that divides them exactly.
_BINARY_UNITS: tuple[tuple[str, int], ...] = (
    ("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10),
)

# Pod-level requests (PodLevelResources) replace the aggregated container value only
# for these, as component-helpers' IsSupportedPodLevelResource.
_POD_LEVEL = ("cpu", "memory")
_HUGEPAGES = "hugepages-"
_MEMORY_LIKE = ("memory", "ephemeral-storage")
_MAX_NAME = 253 + 1 + 63  # a qualified name: DNS subdomain prefix, "/", name
TOO_LARGE = "beyond int64"  # how a message spells SATURATED: more than any node has


def to_units(name: str, q: Fraction | int) -> int:
    """Integer amount in kube-scheduler's unit for `name`: millicores for cpu
    (`MilliValue()`), the plain value for everything else (`Value()`); both round up,
    so a request is never understated. Beyond int64, where Kubernetes' own values
    overflow, it is `SATURATED`: more than any node has."""
    v = math.ceil(q * 1000) if name == "cpu" else math.ceil(q)
    return SATURATED if v > INT64_MAX else v


def parse_resource_list(d: Mapping[str, Any] | None, capacity: bool = False) -> Resources:
    """A ResourceList (`{"cpu": "500m", ...}`) in integer units. Negative amounts are
    rejected: the API server never stores them, so one means corrupt input.
    `capacity` (a node's): an amount beyond int64 is capped at INT64_MAX, just below
    `SATURATED`, so that a saturated request still fits no node."""
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise ValueError(f"resource list must be an object, got {type(d).__name__}")
    out: Resources = {}
    for name, raw in d.items():
        units = to_units(name, _quantity_for(name, raw))
        if units < 0:
            raise _negative(raw, name)
        out[name] = min(units, INT64_MAX) if capacity else units
    return out


def _quantity_for(name: str, raw: Any) -> Fraction:
    if len(name) > _MAX_NAME:
        # Resource names are qualified names; a custom resource's keys are not validated,
        # and every message about the gang would repeat a name of any length.
        raise ValueError(f"resource name {shorten(name)} is longer than {_MAX_NAME} characters")
    try:
        return parse_quantity(raw)
    except ValueError:
        raise ValueError(f"invalid quantity '{shorten(raw)}' for {shorten(name)}") from None


def _negative(raw: Any, name: str) -> ValueError:
    return ValueError(f"negative quantity '{shorten(raw)}' for {shorten(name)}")


def _exact_list(d: Any, where: str) -> dict[str, Fraction]:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise not_an_object(d, where)
    out: dict[str, Fraction] = {}
    for name, raw in d.items():
        q = _quantity_for(name, raw)
        if q < 0:
            raise _negative(raw, name)
        out[name] = q
    return out


def _container_requests(c: Any, where: str) -> dict[str, Fraction]:
    """A container's requests, defaulted from its limits as the API server does
    (idempotent on objects read back from the API, needed for hand-built ones)."""
    if not isinstance(c, Mapping):
        raise not_an_object(c, where)
    res = c.get("resources")
    if res is None:
        return {}
    if not isinstance(res, Mapping):
        raise ValueError(f"{where}.resources must be an object")
    reqs = _exact_list(res.get("requests"), f"{where}.resources.requests")
    limits = res.get("limits")
    if limits:
        for name, q in _exact_list(limits, f"{where}.resources.limits").items():
            reqs.setdefault(name, q)
    return reqs


def _containers(spec: Mapping[str, Any], key: str) -> list[Any]:
    v = spec.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"spec.{key} must be a list, got {type(v).__name__}")
    return v


def _add_exact(into: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for k, v in more.items():
        into[k] = into[k] + v if k in into else v


def _max_exact(into: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for k, v in more.items():
        if k not in into or v > into[k]:
            into[k] = v


def pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """What the pod takes from a node, as kube-scheduler's NodeResourcesFit sees it
    (component-helpers `PodRequests`, v1.36, without in-place resize status).

    Sidecars (init containers with `restartPolicy: Always`) keep running, so each
    one adds to the steady-state sum and to every later init step; a regular init
    container only needs its own requests plus the sidecars started before it. The
    pod needs the larger of the steady state and the worst init step, per resource,
    then pod-level requests replace cpu/memory/hugepages, then overhead is added.
    "pods" is always 1 (the scheduler counts pods, never a requested "pods").
    """
    if not isinstance(pod_spec, Mapping):
        raise ValueError(f"pod spec must be an object, got {type(pod_spec).__name__}")
    key = _one_container_key(pod_spec)
    if key is not None:
        return dict(_one_container(*key))
    return _pod_requests(pod_spec)


def _one_container_key(spec: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """(requests, limits) as tuples for the common pod: one container and nothing else
    that counts (no init containers, pod-level resources or overhead), every quantity a
    string; None otherwise (anything else, malformed input included, takes the general
    path, which says what is wrong)."""
    containers = spec.get("containers")
    if (type(containers) is not list or len(containers) != 1 or spec.get("initContainers")
            or spec.get("resources") is not None or spec.get("overhead") is not None):
        return None
    res = containers[0].get("resources") if type(containers[0]) is dict else None
    if type(res) is not dict:
        return None
    req, lim = res.get("requests"), res.get("limits")
    if (req is not None and type(req) is not dict) or (lim is not None and type(lim) is not dict):
        return None
    key = (tuple(req.items()) if req else (), tuple(lim.items()) if lim else ())
    # Strings only, as the API server sends them: 1 == 1.0 == True would share an entry;
    # short ones only, as the API server writes them: a memo keeps its keys alive.
    if all(type(v) is str and len(v) <= 64 for part in key for _, v in part):
        return key
    return None


@lru_cache(maxsize=1024)
def _one_container(requests: tuple[tuple[str, Any], ...], limits: tuple[tuple[str, Any], ...]
                   ) -> Resources:
    # Memoized: the pods of a cluster come in few shapes, and a pod's conversion, once
    # per watch event and per filter call, spent a third of its time here in Fraction
    # arithmetic (lab.experiments.pod_events). Pure, so the memo is invisible; callers
    # get a copy.
    resources: dict[str, Any] = {"requests": dict(requests)}
    if limits:
        resources["limits"] = dict(limits)
    return _pod_requests({"containers": [{"resources": resources}]})


def _pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    total: dict[str, Fraction] = {}
    for i, c in enumerate(_containers(pod_spec, "containers")):
        _add_exact(total, _container_requests(c, f"spec.containers[{i}]"))

    init_containers = _containers(pod_spec, "initContainers")
    if init_containers:
        sidecars: dict[str, Fraction] = {}
        init_max: dict[str, Fraction] = {}
        for i, c in enumerate(init_containers):
            reqs = _container_requests(c, f"spec.initContainers[{i}]")
            if c.get("restartPolicy") == "Always":
                _add_exact(total, reqs)
                _add_exact(sidecars, reqs)
                step = sidecars
            else:
                step = dict(reqs)
                _add_exact(step, sidecars)
            _max_exact(init_max, step)
        _max_exact(total, init_max)

    pod_res = pod_spec.get("resources")
    if pod_res is not None:
        if not isinstance(pod_res, Mapping):
            raise ValueError("spec.resources must be an object")
        pod_level = _exact_list(pod_res.get("requests"), "spec.resources.requests")
        for name, q in pod_level.items():
            if name in _POD_LEVEL or name.startswith(_HUGEPAGES):
                total[name] = q

    overhead = pod_spec.get("overhead")
    if overhead is not None:
        _add_exact(total, _exact_list(overhead, "spec.overhead"))

    out: Resources = {}
    for name, q in total.items():
        if name == "pods":
            continue
        units = to_units(name, q)
        if units > 0:
            out[name] = units
    out["pods"] = 1
    return out


# ----- arithmetic ---------------------------------------------------------------------


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """a + b per resource, as a new dict."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def sub(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """a - b per resource, as a new dict; may go negative (an over-committed node
    must stay visible as such, not be clamped into looking empty)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def fits(req: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Whether every requested amount is available. Zero requests fit anywhere, as in
    NodeResourcesFit, even for a resource the node does not have."""
    for k, v in req.items():  # noqa: SIM110 - a plain loop is cheaper on the filter path
        if v > 0 and v > free.get(k, 0):
            return False
    return True


def shortfall(req: Mapping[str, int], free: Mapping[str, int]) -> dict[str, int]:
    """How much of each resource is missing for `req` to fit (only those missing). A
    saturated request is missing whole, whatever `free` holds: summed over many nodes,
    free capacity may pass int64, but no node can give it."""
    out: dict[str, int] = {}
    for k, v in req.items():
        if v > 0:
            missing = SATURATED if v >= SATURATED else v - free.get(k, 0)
            if missing > 0:
                out[k] = missing
    return out


# ----- messages -----------------------------------------------------------------------


def _is_memory_like(name: str) -> bool:
    return name in _MEMORY_LIKE or name.startswith(_HUGEPAGES)


def format_amount(name: str, v: int) -> str:
    """One amount the way a manifest would spell it, so a user can compare the message
    with what they wrote: cpu as "500m"/"2", bytes in the largest exact binary unit; an
    amount beyond int64 as "beyond int64", never as its digits."""
    if v >= SATURATED:
        return TOO_LARGE
    if name == "cpu":
        return str(v // 1000) if v % 1000 == 0 else f"{v}m"
    if _is_memory_like(name) and v != 0:
        for suffix, shift in _BINARY_UNITS:
            if v % (1 << shift) == 0:
                return f"{v >> shift}{suffix}"
    return str(v)


def _order(name: str) -> tuple[int, str]:
    return ({"cpu": 0, "memory": 1}.get(name, 2), name)


def format_resources(r: Mapping[str, int], skip_pods: bool = True) -> str:
    """`{cpu: 1, memory: 316Mi, nvidia.com/gpu: 4}`: cpu and memory first, then by
    name. "pods" is skipped by default: every pod requests exactly one, so it only
    adds noise to a message about what did not fit."""
    parts = [
        f"{name}: {format_amount(name, v)}"
        for name, v in sorted(r.items(), key=lambda kv: _order(kv[0]))
        if not (skip_pods and name == "pods")
    ]
    return "{" + ", ".join(parts) + "}"

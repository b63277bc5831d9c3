"""Kubernetes JSON (as the API or a watch returns it) to the core's plain types.

Runs once per watch event, so the filter path never walks raw objects. Input is
untrusted: anything malformed raises `ValueError` naming the object and the field
("pod ml/trainer-0: invalid quantity 'abc' for cpu"), never another exception type,
so an adapter can log and skip one bad object without a catch-all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from extender.core.model.resources import parse_resource_list, pod_requests
from extender.core.model.types import (
    BudgetInfo,
    LabelSelector,
    NodeInfo,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from extender.core.sources import membership

__all__ = ["budget_from_k8s", "node_from_k8s", "parse_time", "pod_from_k8s"]

_EMPTY: Mapping[str, Any] = {}
_NODE_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_LABEL_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_T = TypeVar("_T")


# ----- typed accessors: wrong shapes become ValueError with the field path -----------


# Exact types first: parsed JSON is dicts and lists, and isinstance(v, Mapping) is slow.
def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if type(v) is dict:
        return v
    if v is None:
        return _EMPTY
    if not isinstance(v, Mapping):
        raise ValueError(f"{where} must be an object, got {type(v).__name__}")
    return v


def _list(v: Any, where: str) -> list[Any]:
    if type(v) is list:
        return v
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"{where} must be a list, got {type(v).__name__}")
    return v


def _str(v: Any, where: str, default: str = "") -> str:
    if type(v) is str:
        return v
    if v is None:
        return default
    if not isinstance(v, str):
        raise ValueError(f"{where} must be a string, got {type(v).__name__}")
    return v


# One copy of each value many objects repeat (namespace, node name, phase, scheduler
# name): 200,000 finished pods kept five of ~60 bytes each. Emptied past `_SHARED_MAX`.
_SHARED: dict[str, str] = {}
_SHARED_MAX = 8192


def _shared(v: str) -> str:
    if len(_SHARED) >= _SHARED_MAX and v not in _SHARED:
        _SHARED.clear()
    return _SHARED.setdefault(v, v)


def _int(v: Any, where: str, default: int) -> int:
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{where} must be an integer, got {v!r}")
    return v


def _str_map(v: Any, where: str) -> dict[str, str]:
    m = _obj(v, where)
    for k, val in m.items():
        if not isinstance(k, str) or not isinstance(val, str):
            raise ValueError(f"{where} must map strings to strings, got {k!r}: {val!r}")
    return dict(m)


def parse_time(v: Any, where: str = "timestamp") -> float:
    """RFC 3339 ("2026-11-22T07:14:48Z", fractional seconds and offsets allowed) to
    epoch seconds; absent is 0.0 (the oldest possible, so ordering stays total)."""
    if v is None or v == "":
        return 0.0
    if not isinstance(v, str):
        raise ValueError(f"{where} must be an RFC 3339 string, got {v!r}")
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        raise ValueError(f"{where}: invalid RFC 3339 time {v!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def _guarded(kind: str, obj: Any, build: Callable[[Mapping[str, Any], str], _T]) -> _T:
    """Run `build` with the object's name for messages, turning every failure into a
    ValueError prefixed with "<kind> <ns>/<name>: "."""
    ident = kind
    try:
        if type(obj) is not dict and not isinstance(obj, Mapping):
            raise ValueError(f"expected an object, got {type(obj).__name__}")
        meta = obj.get("metadata")
        if type(meta) is dict or isinstance(meta, Mapping):
            name, ns = meta.get("name"), meta.get("namespace")
            if isinstance(name, str):
                ident = f"{kind} {ns}/{name}" if isinstance(ns, str) and ns else f"{kind} {name}"
        return build(obj, ident)
    except ValueError as e:
        raise ValueError(f"{ident}: {e}") from None
    except (TypeError, AttributeError, KeyError, IndexError, OverflowError) as e:
        raise ValueError(f"{ident}: malformed object ({type(e).__name__}: {e})") from None


# ----- selectors ----------------------------------------------------------------------


def _requirement(v: Any, where: str, ops: frozenset[str]) -> Requirement:
    r = _obj(v, where)
    op = _str(r.get("operator"), f"{where}.operator")
    if op not in ops:
        raise ValueError(f"{where}.operator: unknown operator {op!r}")
    values = tuple(_str(x, f"{where}.values") for x in _list(r.get("values"), f"{where}.values"))
    return Requirement(_str(r.get("key"), f"{where}.key"), op, values)


def _node_selector_terms(v: Any, where: str) -> tuple[NodeSelectorTerm, ...]:
    terms = []
    for i, raw in enumerate(_list(_obj(v, where).get("nodeSelectorTerms"), where)):
        w = f"{where}.nodeSelectorTerms[{i}]"
        t = _obj(raw, w)
        terms.append(
            NodeSelectorTerm(
                tuple(
                    _requirement(x, f"{w}.matchExpressions[{j}]", _NODE_SELECTOR_OPS)
                    for j, x in enumerate(_list(t.get("matchExpressions"), w))
                ),
                tuple(
                    _requirement(x, f"{w}.matchFields[{j}]", _NODE_SELECTOR_OPS)
                    for j, x in enumerate(_list(t.get("matchFields"), w))
                ),
            )
        )
    return tuple(terms)


def _label_selector(v: Any, where: str) -> LabelSelector | None:
    if v is None:
        return None
    s = _obj(v, where)
    return LabelSelector(
        tuple(sorted(_str_map(s.get("matchLabels"), f"{where}.matchLabels").items())),
        tuple(
            _requirement(x, f"{where}.matchExpressions[{j}]", _LABEL_SELECTOR_OPS)
            for j, x in enumerate(_list(s.get("matchExpressions"), where))
        ),
    )


def _affinity_term(v: Any, where: str) -> PodAffinityTerm:
    # matchLabelKeys/mismatchLabelKeys need no handling: the API server merges them
    # into labelSelector when the pod is created.
    t = _obj(v, where)
    return PodAffinityTerm(
        selector=_label_selector(t.get("labelSelector"), f"{where}.labelSelector"),
        topology_key=_str(t.get("topologyKey"), f"{where}.topologyKey"),
        namespaces=tuple(_str(x, f"{where}.namespaces") for x in _list(t.get("namespaces"), where)),
        namespace_selector=_label_selector(
            t.get("namespaceSelector"), f"{where}.namespaceSelector"
        ),
    )


def _affinity_terms(affinity: Mapping[str, Any], kind: str) -> tuple[PodAffinityTerm, ...]:
    """The required terms of `kind` (podAffinity or podAntiAffinity)."""
    w = f"spec.affinity.{kind}.required"
    required = _obj(affinity.get(kind), f"spec.affinity.{kind}").get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    return tuple(_affinity_term(x, f"{w}[{i}]") for i, x in enumerate(_list(required, w)))


def _spread(spec: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    """DoNotSchedule constraints only: ScheduleAnyway ones never filter a node. As with
    affinity terms, matchLabelKeys is merged into labelSelector by the API server."""
    out = []
    for i, raw in enumerate(_list(spec.get("topologySpreadConstraints"),
                                     "spec.topologySpreadConstraints")):
        w = f"spec.topologySpreadConstraints[{i}]"
        c = _obj(raw, w)
        if _str(c.get("whenUnsatisfiable"), f"{w}.whenUnsatisfiable") != "DoNotSchedule":
            continue
        skew = _int(c.get("maxSkew"), f"{w}.maxSkew", 1)
        if skew < 1:
            raise ValueError(f"{w}.maxSkew must be >= 1, got {skew}")
        out.append(SpreadConstraint(
            max_skew=skew,
            topology_key=_str(c.get("topologyKey"), f"{w}.topologyKey"),
            selector=_label_selector(c.get("labelSelector"), f"{w}.labelSelector"),
            min_domains=max(1, _int(c.get("minDomains"), f"{w}.minDomains", 1)),
            node_affinity_policy=_str(c.get("nodeAffinityPolicy"),
                                      f"{w}.nodeAffinityPolicy", "Honor") or "Honor",
            node_taints_policy=_str(c.get("nodeTaintsPolicy"),
                                    f"{w}.nodeTaintsPolicy", "Ignore") or "Ignore",
        ))
    return tuple(out)


def _toleration(v: Any, where: str) -> Toleration:
    if type(v) is dict:
        fields = (v.get("key"), v.get("operator"), v.get("value"), v.get("effect"))
        if all(x is None or type(x) is str for x in fields):
            return _toleration_of(*fields)
    t = _obj(v, where)
    return Toleration(
        key=_str(t.get("key"), f"{where}.key"),
        operator=_str(t.get("operator"), f"{where}.operator") or "Equal",
        value=_str(t.get("value"), f"{where}.value"),
        effect=_str(t.get("effect"), f"{where}.effect"),
    )


@lru_cache(maxsize=1024)
def _toleration_of(key: str | None, operator: str | None, value: str | None,
                   effect: str | None) -> Toleration:
    # Memoized: every pod carries the API server's two default tolerations, and a
    # Toleration is immutable, so pods share them.
    return Toleration(key or "", operator or "Equal", value or "", effect or "")


# ----- pods ---------------------------------------------------------------------------


def _unschedulable(status: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler wrote PodScheduled=False after a failed attempt (reason
    Unschedulable, or SchedulerError when a plugin or extender call failed). The
    extender's own record of whom it rejected is lost on restart; this condition is
    what still tells it which pending members may be parked and need a wake-up.
    SchedulingGated does not count: a gated pod was never in the scheduling queue,
    and removing its gates queues it by itself."""
    for i, raw in enumerate(_list(status.get("conditions"), "status.conditions")):
        w = f"status.conditions[{i}]"
        cond = _obj(raw, w)
        if _str(cond.get("type"), f"{w}.type") != "PodScheduled":
            continue
        return (
            _str(cond.get("status"), f"{w}.status") == "False"
            and _str(cond.get("reason"), f"{w}.reason") != "SchedulingGated"
        )
    return False


def _build_pod(obj: Mapping[str, Any], _ident: str) -> PodInfo:
    meta = _obj(obj.get("metadata"), "metadata")
    spec = _obj(obj.get("spec"), "spec")
    status = _obj(obj.get("status"), "status")

    name = _str(meta.get("name"), "metadata.name")
    if not name:
        raise ValueError("metadata.name is missing")
    uid = _str(meta.get("uid"), "metadata.uid")
    if not uid:
        raise ValueError("metadata.uid is missing")

    affinity = _obj(spec.get("affinity"), "spec.affinity")
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    node_aff = _obj(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    req_node = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req_node is not None:
        required_node_affinity = _node_selector_terms(
            req_node, "spec.affinity.nodeAffinity.required"
        )

    labels = _str_map(meta.get("labels"), "metadata.labels")
    group = _obj(spec.get("schedulingGroup"), "spec.schedulingGroup")
    return PodInfo(
        uid=uid,
        namespace=_shared(_str(meta.get("namespace"), "metadata.namespace", "default")),
        name=name,
        requests=pod_requests(spec),
        labels=labels,
        priority=_int(spec.get("priority"), "spec.priority", 0),
        node_name=_shared(_str(spec.get("nodeName"), "spec.nodeName")),
        phase=_shared(_str(status.get("phase"), "status.phase", "Pending") or "Pending"),
        deleting=meta.get("deletionTimestamp") is not None,
        gated=bool(_list(spec.get("schedulingGates"), "spec.schedulingGates")),
        scheduler_name=_shared(_str(spec.get("schedulerName"), "spec.schedulerName",
                                    "default-scheduler") or "default-scheduler"),
        creation=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=required_node_affinity,
        tolerations=tuple(
            _toleration(x, f"spec.tolerations[{i}]")
            for i, x in enumerate(_list(spec.get("tolerations"), "spec.tolerations"))
        ),
        # Most pods have none of these: not looked for then (this runs per filter call).
        required_anti_affinity=_affinity_terms(affinity, "podAntiAffinity") if affinity else (),
        required_affinity=_affinity_terms(affinity, "podAffinity") if affinity else (),
        spread_constraints=_spread(spec) if "topologySpreadConstraints" in spec else (),
        unschedulable=_unschedulable(status),
        membership=membership(
            labels, _obj(meta.get("annotations"), "metadata.annotations"),
            _str(group.get("podGroupName"), "spec.schedulingGroup.podGroupName")),
        preemption_policy=_shared(_str(spec.get("preemptionPolicy"), "spec.preemptionPolicy",
                                       "PreemptLowerPriority") or "PreemptLowerPriority"),
    )


def pod_from_k8s(obj: Any) -> PodInfo:
    """A Pod object to `PodInfo`, requests computed as kube-scheduler does."""
    return _guarded("pod", obj, _build_pod)


# ----- nodes --------------------------------------------------------------------------


def _build_node(obj: Mapping[str, Any], _ident: str) -> NodeInfo:
    meta = _obj(obj.get("metadata"), "metadata")
    spec = _obj(obj.get("spec"), "spec")
    status = _obj(obj.get("status"), "status")
    name = _str(meta.get("name"), "metadata.name")
    if not name:
        raise ValueError("metadata.name is missing")
    # kube-scheduler uses allocatable; capacity only stands in for a node whose
    # kubelet has not reported allocatable yet.
    raw = status.get("allocatable") or status.get("capacity")
    taints = []
    for i, t in enumerate(_list(spec.get("taints"), "spec.taints")):
        w = f"spec.taints[{i}]"
        tm = _obj(t, w)
        taints.append(
            Taint(
                _str(tm.get("key"), f"{w}.key"),
                _str(tm.get("value"), f"{w}.value"),
                _str(tm.get("effect"), f"{w}.effect"),
            )
        )
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        raise ValueError(f"spec.unschedulable must be a boolean, got {unschedulable!r}")
    return NodeInfo(
        name=name,
        allocatable=parse_resource_list(_obj(raw, "status.allocatable"), capacity=True),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        taints=tuple(taints),
        unschedulable=bool(unschedulable),
    )


def node_from_k8s(obj: Any) -> NodeInfo:
    """A Node object to `NodeInfo`."""
    return _guarded("node", obj, _build_node)


# ----- PodDisruptionBudgets -----------------------------------------------------------


def _build_budget(obj: Mapping[str, Any], _ident: str) -> BudgetInfo:
    meta = _obj(obj.get("metadata"), "metadata")
    spec = _obj(obj.get("spec"), "spec")
    status = _obj(obj.get("status"), "status")
    name = _str(meta.get("name"), "metadata.name")
    if not name:
        raise ValueError("metadata.name is missing")
    return BudgetInfo(
        namespace=_str(meta.get("namespace"), "metadata.namespace", "default"),
        name=name,
        selector=_label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=max(0, _int(status.get("disruptionsAllowed"),
                                        "status.disruptionsAllowed", 0)),
    )


def budget_from_k8s(obj: Any) -> BudgetInfo:
    """A PodDisruptionBudget (policy/v1) to `BudgetInfo`. Without a status (the
    disruption controller has not looked yet) it allows no disruption, as the Eviction
    API would answer."""
    return _guarded("poddisruptionbudget", obj, _build_budget)

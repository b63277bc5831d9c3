"""Kubernetes JSON (as the API or a watch returns it) to the core's plain types.

Runs once per watch event, so the filter path never walks raw objects. Input is
untrusted: anything malformed raises `ValueError` naming the object and the field
("pod ml/trainer-0: invalid quantity 'abc' for cpu"), never another exception type,
so an adapter can log and skip one bad object without a catch-all.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from extender.core.model import fields, types
from extender.core.model.claims import PodClaims, read_pod_claims
from extender.core.model.fields import parse_time  # re-exported: adapters read times alike
from extender.core.model.provisioning_request import (
    CONSUME_ANNOTATION,
    DEPRECATED_CONSUME_ANNOTATION,
    SCALE_DOWN_DISABLED,
    SCALE_DOWN_OURS,
)
from extender.core.model.resources import parse_resource_list, pod_requests
from extender.core.model.sources import membership

__all__ = ["budget_from_k8s", "node_from_k8s", "node_selector_terms", "parse_time",
           "pod_from_k8s"]

_NODE_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_LABEL_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


# ----- selectors ----------------------------------------------------------------------


def _requirement(v: Any, where: str, ops: frozenset[str]) -> types.Requirement:
    r = fields.as_obj(v, where)
    op = fields.as_str(r.get("operator"), f"{where}.operator")
    if op not in ops:
        raise ValueError(f"{where}.operator: unknown operator {fields.shown(op)}")
    values = tuple(fields.as_str(x, f"{where}.values")
                   for x in fields.as_list(r.get("values"), f"{where}.values"))
    return types.Requirement(fields.as_str(r.get("key"), f"{where}.key"), op, values)


def _node_selector_terms(v: Any, where: str) -> tuple[types.NodeSelectorTerm, ...]:
    terms = []
    raws = fields.as_list(fields.as_obj(v, where).get("nodeSelectorTerms"), where)
    for i, raw in enumerate(raws):
        w = f"{where}.nodeSelectorTerms[{i}]"
        t = fields.as_obj(raw, w)
        terms.append(
            types.NodeSelectorTerm(
                tuple(
                    _requirement(x, f"{w}.matchExpressions[{j}]", _NODE_SELECTOR_OPS)
                    for j, x in enumerate(fields.as_list(t.get("matchExpressions"), w))
                ),
                tuple(
                    _requirement(x, f"{w}.matchFields[{j}]", _NODE_SELECTOR_OPS)
                    for j, x in enumerate(fields.as_list(t.get("matchFields"), w))
                ),
            )
        )
    return tuple(terms)


def node_selector_terms(v: Any, where: str) -> tuple[types.NodeSelectorTerm, ...]:
    """A NodeSelector's terms; public for the device model (ResourceSlice.spec.nodeSelector)."""
    return _node_selector_terms(v, where)


def _label_selector(v: Any, where: str) -> types.LabelSelector | None:
    if v is None:
        return None
    s = fields.as_obj(v, where)
    return types.LabelSelector(
        tuple(sorted(fields.as_str_map(s.get("matchLabels"), f"{where}.matchLabels").items())),
        tuple(
            _requirement(x, f"{where}.matchExpressions[{j}]", _LABEL_SELECTOR_OPS)
            for j, x in enumerate(fields.as_list(s.get("matchExpressions"), where))
        ),
    )


def _affinity_term(v: Any, where: str) -> types.PodAffinityTerm:
    # matchLabelKeys/mismatchLabelKeys need no handling: the API server merges them
    # into labelSelector when the pod is created.
    t = fields.as_obj(v, where)
    return types.PodAffinityTerm(
        selector=_label_selector(t.get("labelSelector"), f"{where}.labelSelector"),
        topology_key=fields.as_str(t.get("topologyKey"), f"{where}.topologyKey"),
        namespaces=tuple(fields.as_str(x, f"{where}.namespaces")
                         for x in fields.as_list(t.get("namespaces"), where)),
        namespace_selector=_label_selector(
            t.get("namespaceSelector"), f"{where}.namespaceSelector"
        ),
    )


def _affinity_terms(affinity: Mapping[str, Any], kind: str) -> tuple[types.PodAffinityTerm, ...]:
    """The required terms of `kind` (podAffinity or podAntiAffinity)."""
    w = f"spec.affinity.{kind}.required"
    required = fields.as_obj(affinity.get(kind), f"spec.affinity.{kind}").get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    return tuple(_affinity_term(x, f"{w}[{i}]") for i, x in enumerate(fields.as_list(required, w)))


def _spread(spec: Mapping[str, Any]) -> tuple[types.SpreadConstraint, ...]:
    """DoNotSchedule constraints only: ScheduleAnyway ones never filter a node. As with
    affinity terms, matchLabelKeys is merged into labelSelector by the API server."""
    out = []
    for i, raw in enumerate(fields.as_list(spec.get("topologySpreadConstraints"),
                                           "spec.topologySpreadConstraints")):
        w = f"spec.topologySpreadConstraints[{i}]"
        c = fields.as_obj(raw, w)
        if fields.as_str(c.get("whenUnsatisfiable"), f"{w}.whenUnsatisfiable") != "DoNotSchedule":
            continue
        skew = fields.as_int(c.get("maxSkew"), f"{w}.maxSkew", 1)
        if skew < 1:
            raise ValueError(f"{w}.maxSkew must be >= 1, got {skew}")
        out.append(types.SpreadConstraint(
            max_skew=skew,
            topology_key=fields.as_str(c.get("topologyKey"), f"{w}.topologyKey"),
            selector=_label_selector(c.get("labelSelector"), f"{w}.labelSelector"),
            min_domains=max(1, fields.as_int(c.get("minDomains"), f"{w}.minDomains", 1)),
            node_affinity_policy=fields.as_str(c.get("nodeAffinityPolicy"),
                                               f"{w}.nodeAffinityPolicy", "Honor") or "Honor",
            node_taints_policy=fields.as_str(c.get("nodeTaintsPolicy"),
                                             f"{w}.nodeTaintsPolicy", "Ignore") or "Ignore",
        ))
    return tuple(out)


def _toleration(v: Any, where: str) -> types.Toleration:
    if type(v) is dict:
        given = (v.get("key"), v.get("operator"), v.get("value"), v.get("effect"))
        if all(x is None or type(x) is str for x in given):
            return _toleration_of(*given)
    t = fields.as_obj(v, where)
    return types.Toleration(
        key=fields.as_str(t.get("key"), f"{where}.key"),
        operator=fields.as_str(t.get("operator"), f"{where}.operator") or "Equal",
        value=fields.as_str(t.get("value"), f"{where}.value"),
        effect=fields.as_str(t.get("effect"), f"{where}.effect"),
    )


@lru_cache(maxsize=1024)
def _toleration_of(key: str | None, operator: str | None, value: str | None,
                   effect: str | None) -> types.Toleration:
    # Memoized: every pod carries the API server's two default tolerations, and a
    # Toleration is immutable, so pods share them.
    return types.Toleration(key or "", operator or "Equal", value or "", effect or "")


# ----- pods ---------------------------------------------------------------------------


def _unschedulable(status: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler wrote PodScheduled=False after a failed attempt (reason
    Unschedulable, or SchedulerError when a plugin or extender call failed). The
    extender's own record of whom it rejected is lost on restart; this condition is
    what still tells it which pending members may be parked and need a wake-up.
    SchedulingGated does not count: a gated pod was never in the scheduling queue,
    and removing its gates queues it by itself."""
    for i, raw in enumerate(fields.as_list(status.get("conditions"), "status.conditions")):
        w = f"status.conditions[{i}]"
        cond = fields.as_obj(raw, w)
        if fields.as_str(cond.get("type"), f"{w}.type") != "PodScheduled":
            continue
        return (
            fields.as_str(cond.get("status"), f"{w}.status") == "False"
            and fields.as_str(cond.get("reason"), f"{w}.reason") != "SchedulingGated"
        )
    return False


def _consumes(annotations: Mapping[str, Any]) -> str:
    """The ProvisioningRequest a pod consumes: the autoscaler reads either key."""
    for key in (CONSUME_ANNOTATION, DEPRECATED_CONSUME_ANNOTATION):
        value = fields.as_str(annotations.get(key), f"metadata.annotations[{key}]")
        if value:
            return value
    return ""


def _build_pod(obj: Mapping[str, Any], _ident: str) -> types.PodInfo:
    meta, spec, status, name = fields.sections(obj)
    uid = fields.required_str(meta.get("uid"), "metadata.uid")

    affinity = fields.as_obj(spec.get("affinity"), "spec.affinity")
    required_node_affinity: tuple[types.NodeSelectorTerm, ...] | None = None
    node_aff = fields.as_obj(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    req_node = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req_node is not None:
        required_node_affinity = _node_selector_terms(
            req_node, "spec.affinity.nodeAffinity.required"
        )

    labels = fields.as_str_map(meta.get("labels"), "metadata.labels")
    annotations = fields.as_obj(meta.get("annotations"), "metadata.annotations")
    group = fields.as_obj(spec.get("schedulingGroup"), "spec.schedulingGroup")
    return types.PodInfo(
        uid=uid,
        namespace=fields.shared(fields.as_str(meta.get("namespace"), "metadata.namespace",
                                              "default")),
        name=name,
        requests=pod_requests(spec),
        labels=labels,
        priority=fields.as_int(spec.get("priority"), "spec.priority", 0),
        node_name=fields.shared(fields.as_str(spec.get("nodeName"), "spec.nodeName")),
        phase=fields.shared(fields.as_str(status.get("phase"), "status.phase", "Pending")
                            or "Pending"),
        deleting=meta.get("deletionTimestamp") is not None,
        gated=bool(fields.as_list(spec.get("schedulingGates"), "spec.schedulingGates")),
        scheduler_name=fields.shared(fields.as_str(spec.get("schedulerName"),
                                                   "spec.schedulerName", "default-scheduler")
                                     or "default-scheduler"),
        creation=fields.parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        node_selector=fields.as_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=required_node_affinity,
        tolerations=tuple(
            _toleration(x, f"spec.tolerations[{i}]")
            for i, x in enumerate(fields.as_list(spec.get("tolerations"), "spec.tolerations"))
        ),
        # Most pods have none of these: not looked for then (this runs per filter call).
        required_anti_affinity=_affinity_terms(affinity, "podAntiAffinity") if affinity else (),
        required_affinity=_affinity_terms(affinity, "podAffinity") if affinity else (),
        spread_constraints=_spread(spec) if "topologySpreadConstraints" in spec else (),
        unschedulable=_unschedulable(status),
        membership=membership(
            labels, annotations,
            fields.as_str(group.get("podGroupName"), "spec.schedulingGroup.podGroupName")),
        preemption_policy=fields.shared(fields.as_str(spec.get("preemptionPolicy"),
                                                      "spec.preemptionPolicy",
                                                      "PreemptLowerPriority")
                                        or "PreemptLowerPriority"),
        provisioning_request=_consumes(annotations),
        binds_via_scheduler=_binds_via_scheduler(spec),
        nominated_node=fields.shared(fields.as_str(status.get("nominatedNodeName"),
                                                   "status.nominatedNodeName")),
        # Looked for only when present: most pods have no claims (the filter path).
        claims=_claims(spec, status) if "resourceClaims" in spec else None,
    )


def _claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> PodClaims | None:
    claims = read_pod_claims(spec, status)
    return claims if claims.refs else None


# Volume sources whose claim kube-scheduler's VolumeBinding plugin may have to bind.
_CLAIM_VOLUMES = ("persistentVolumeClaim", "ephemeral")


def _binds_via_scheduler(spec: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler's own plugins must place the pod (`PodInfo.binds_via_scheduler`):
    a claim-backed volume, a resource claim, or a host port."""
    if fields.as_list(spec.get("resourceClaims"), "spec.resourceClaims"):
        return True
    for i, v in enumerate(fields.as_list(spec.get("volumes"), "spec.volumes")):
        vol = fields.as_obj(v, f"spec.volumes[{i}]")
        if any(k in vol for k in _CLAIM_VOLUMES):
            return True
    for kind in ("containers", "initContainers"):
        for i, c in enumerate(fields.as_list(spec.get(kind), f"spec.{kind}")):
            ports = fields.as_list(fields.as_obj(c, f"spec.{kind}[{i}]").get("ports"),
                                   f"spec.{kind}[{i}].ports")
            for j, port in enumerate(ports):
                w = f"spec.{kind}[{i}].ports[{j}]"
                if fields.as_int(fields.as_obj(port, w).get("hostPort"), f"{w}.hostPort", 0) > 0:
                    return True
    return False


def pod_from_k8s(obj: Any) -> types.PodInfo:
    """A Pod object to `PodInfo`, requests computed as kube-scheduler does."""
    return fields.guarded("pod", obj, _build_pod)


# ----- nodes --------------------------------------------------------------------------


def _build_node(obj: Mapping[str, Any], _ident: str) -> types.NodeInfo:
    meta, spec, status, name = fields.sections(obj)
    # kube-scheduler uses allocatable; capacity only stands in for a node whose
    # kubelet has not reported allocatable yet.
    raw = status.get("allocatable") or status.get("capacity")
    taints = []
    for i, t in enumerate(fields.as_list(spec.get("taints"), "spec.taints")):
        w = f"spec.taints[{i}]"
        tm = fields.as_obj(t, w)
        taints.append(
            types.Taint(
                fields.as_str(tm.get("key"), f"{w}.key"),
                fields.as_str(tm.get("value"), f"{w}.value"),
                fields.as_str(tm.get("effect"), f"{w}.effect"),
            )
        )
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        raise ValueError(f"spec.unschedulable must be a boolean, got "
                         f"{fields.shown(unschedulable)}")
    annotations = fields.as_str_map(meta.get("annotations"), "metadata.annotations")
    return types.NodeInfo(
        name=name,
        allocatable=parse_resource_list(fields.as_obj(raw, "status.allocatable"), capacity=True),
        labels=fields.as_str_map(meta.get("labels"), "metadata.labels"),
        taints=tuple(taints),
        unschedulable=bool(unschedulable),
        # Any value: an operator's annotation, "false" too, is theirs and left as it is
        # (the node admission policy refuses the extender any change of it).
        scale_down_disabled=SCALE_DOWN_DISABLED in annotations,
        scale_down_ours=SCALE_DOWN_OURS in annotations,
    )


def node_from_k8s(obj: Any) -> types.NodeInfo:
    """A Node object to `NodeInfo`."""
    return fields.guarded("node", obj, _build_node)


# ----- PodDisruptionBudgets -----------------------------------------------------------


def _build_budget(obj: Mapping[str, Any], _ident: str) -> types.BudgetInfo:
    meta, spec, status, name = fields.sections(obj)
    return types.BudgetInfo(
        namespace=fields.as_str(meta.get("namespace"), "metadata.namespace", "default"),
        name=name,
        selector=_label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=max(0, fields.as_int(status.get("disruptionsAllowed"),
                                                 "status.disruptionsAllowed", 0)),
    )


def budget_from_k8s(obj: Any) -> types.BudgetInfo:
    """A PodDisruptionBudget (policy/v1) to `BudgetInfo`. Without a status (the
    disruption controller has not looked yet) it allows no disruption, as the Eviction
    API would answer."""
    return fields.guarded("poddisruptionbudget", obj, _build_budget)

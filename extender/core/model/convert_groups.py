"""JSON to `GroupInfo` for the group objects of every source that has one: the
scheduler-plugins PodGroup, the upstream Workload API's and Volcano's (a Kueue group has
no object: `sources.py` derives it from its pods). The same rules for untrusted input as
`convert.py`: a `ValueError` naming the object and the field for anything malformed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from extender.core.model import fields
from extender.core.model.annotations import label_key_problem, topology_of
from extender.core.model.claims import read_pod_claims
from extender.core.model.resources import parse_resource_list
from extender.core.model.types import (
    BACKING_OFF,
    DISRUPT_ALL,
    DISRUPT_SINGLE,
    DISRUPTION_MODE,
    MEMBER_DISRUPTED,
    VOLCANO,
    WAITING_FOR_CAPACITY,
    WORKLOAD_API,
    CompositeInfo,
    GroupInfo,
    composite_key,
)

__all__ = ["composite_from_k8s", "group_from_k8s", "volcano_group_from_k8s",
           "workload_group_from_k8s"]

PREEMPT_LOWER, PREEMPT_NEVER = "PreemptLowerPriority", "Never"


def _build_group(obj: Mapping[str, Any], _ident: str) -> GroupInfo:
    meta = fields.as_obj(obj.get("metadata"), "metadata")
    spec = fields.as_obj(obj.get("spec"), "spec")
    name = fields.required_str(meta.get("name"), "metadata.name")
    min_member = fields.as_int(spec.get("minMember"), "spec.minMember", 1)
    if min_member < 0:
        raise ValueError(f"spec.minMember must be >= 1, got {min_member}")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None:
        timeout = fields.as_int(timeout, "spec.scheduleTimeoutSeconds", 0)
        if timeout < 0:
            raise ValueError(f"spec.scheduleTimeoutSeconds must be >= 0, got {timeout}")
    min_resources = parse_resource_list(fields.as_obj(spec.get("minResources"),
                                                      "spec.minResources"))
    annotations = fields.as_str_map(meta.get("annotations"), "metadata.annotations")
    required, preferred, error = topology_of(annotations)
    requeue_count, requeue_at = _requeue_state(obj.get("status"))
    return GroupInfo(
        namespace=fields.shared(fields.as_str(meta.get("namespace"), "metadata.namespace",
                                              "default")),
        name=name,
        # 0 and 1 mean the same thing: a bound member is already a quorum of one.
        min_member=max(min_member, 1),
        uid=fields.as_str(meta.get("uid"), "metadata.uid"),
        creation=fields.parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        min_resources=min_resources or None,
        # 0 would expire every reservation at once; treat it as "not set".
        schedule_timeout_seconds=timeout or None,
        topology_required=required,
        topology_preferred=preferred,
        topology_error=error,
        requeue_count=requeue_count,
        requeue_at=requeue_at,
        waiting_since=_waiting_since(obj.get("status")),
        disruption_mode=_annotated_disruption_mode(annotations),
        disrupted_since=_disrupted_since(obj.get("status")),
    )


def _annotated_disruption_mode(annotations: Mapping[str, str]) -> str:
    """The `gang-extender.x-k8s.io/disruption-mode` annotation of a PodGroup without a
    field for it (scheduler-plugins, Volcano): "single" when absent. Any other value is a
    user's mistake, refused with the allowed ones rather than guessed: read as "single",
    a typo of "all" would leave a hung job holding its nodes after a member was lost."""
    raw = annotations.get(DISRUPTION_MODE)
    if raw is None:
        return DISRUPT_SINGLE
    mode = raw.strip()
    if mode not in (DISRUPT_SINGLE, DISRUPT_ALL):
        raise ValueError(f"metadata.annotations[{DISRUPTION_MODE}]: {fields.shown(raw)} is not "
                         f"{DISRUPT_SINGLE!r} or {DISRUPT_ALL!r}")
    return mode


def _disrupted_since(status: Any) -> float:
    """When this extender evicted the gang whole (its `DisruptionTarget` condition, True
    with our reason `MemberDisrupted`), 0 if it did not: lenient, as `_requeue_state`,
    since only the extender writes it and an unreadable one only ends the record."""
    raw = status.get("conditions") if isinstance(status, Mapping) else None
    for c in raw if isinstance(raw, list) else ():
        if (isinstance(c, Mapping) and c.get("type") == "DisruptionTarget"
                and c.get("status") == "True" and c.get("reason") == MEMBER_DISRUPTED):
            try:
                return max(0.0, fields.parse_time(c.get("lastTransitionTime")))
            except ValueError:
                return 0.0
    return 0.0


def _requeue_state(status: Any) -> tuple[int, float]:
    """`status.requeueState` ({count, requeueAt}, Kueue's shape): (timeouts, when the
    backoff ends). Only the extender writes it, so one it cannot read is dropped (the
    backoff starts over, as it did before it was kept) instead of rejecting the group,
    which would make its gang unplaceable; the next status write replaces it."""
    state = status.get("requeueState") if isinstance(status, Mapping) else None
    if not isinstance(state, Mapping):
        return 0, 0.0
    count = state.get("count")
    if type(count) is not int or count < 1:
        return 0, 0.0
    try:
        return count, fields.parse_time(state.get("requeueAt"))
    except ValueError:
        return 0, 0.0


def _waiting_since(status: Any) -> float:
    """`status.waitingForCapacitySince`: lenient for the same reason as `_requeue_state`
    (an unreadable one only restarts the starvation guard's clock)."""
    if not isinstance(status, Mapping):
        return 0.0
    try:
        return max(0.0, fields.parse_time(status.get("waitingForCapacitySince")))
    except ValueError:
        return 0.0


def group_from_k8s(obj: Any) -> GroupInfo:
    """A PodGroup (scheduling.x-k8s.io/v1alpha1) to `GroupInfo`.

    minMember: absent or 0 becomes 1 (scheduler-plugins lets 0 through, and a group
    of "at least none" behaves exactly like one of at least one: each member may
    bind alone); negative is rejected. scheduleTimeoutSeconds: absent or 0 means
    "use the extender's default"; negative is rejected. An empty minResources is None.
    A malformed topology annotation does not reject the object (the gang would then be
    unknown and its members told "PodGroup not found"): it is carried as
    `topology_error`, and reported on the PodGroup. status.requeueState, the backoff
    the extender recorded, is read back for a restart (`_requeue_state`).
    """
    return fields.guarded("podgroup", obj, _build_group)


def _meta_fields(obj: Mapping[str, Any]) -> tuple[str, str, str, float]:
    meta = fields.as_obj(obj.get("metadata"), "metadata")
    name = fields.required_str(meta.get("name"), "metadata.name")
    return (fields.as_str(meta.get("namespace"), "metadata.namespace", "default"), name,
            fields.as_str(meta.get("uid"), "metadata.uid"),
            fields.parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


def _build_volcano(obj: Mapping[str, Any], _ident: str) -> GroupInfo:
    namespace, name, uid, creation = _meta_fields(obj)
    spec = fields.as_obj(obj.get("spec"), "spec")
    min_member = fields.as_int(spec.get("minMember"), "spec.minMember", 1)
    if min_member < 0:
        raise ValueError(f"spec.minMember must be >= 0, got {min_member}")
    min_resources = parse_resource_list(fields.as_obj(spec.get("minResources"),
                                                      "spec.minResources"))
    meta = fields.as_obj(obj.get("metadata"), "metadata")
    return GroupInfo(
        namespace=namespace, name=name, min_member=max(min_member, 1), uid=uid,
        creation=creation, min_resources=min_resources or None, source=VOLCANO,
        priority_class_name=fields.as_str(spec.get("priorityClassName"),
                                          "spec.priorityClassName") or None,
        disruption_mode=_annotated_disruption_mode(
            fields.as_str_map(meta.get("annotations"), "metadata.annotations")),
    )


def volcano_group_from_k8s(obj: Any) -> GroupInfo:
    """A Volcano PodGroup (scheduling.volcano.sh/v1beta1) to `GroupInfo`: minMember (0 or
    absent: 1), minResources, priorityClassName, and the disruption-mode annotation.
    queue and minTaskMember are Volcano's own and not read; Volcano has no schedule
    timeout, so the extender's default holds."""
    return fields.guarded("volcano podgroup", obj, _build_volcano)


def _build_workload(obj: Mapping[str, Any], _ident: str) -> GroupInfo:
    namespace, name, uid, creation = _meta_fields(obj)
    spec = fields.as_obj(obj.get("spec"), "spec")
    # "basic" (or no policy): each pod is scheduled on its own
    min_count = _gang_count(spec, "minCount", 1)
    required, error = _workload_topology(_topology_keys(spec))
    parent = fields.as_str(spec.get("parentCompositePodGroupName"),
                           "spec.parentCompositePodGroupName")
    claims = None
    if spec.get("resourceClaims"):
        claims = read_pod_claims(spec, fields.as_obj(obj.get("status"), "status"))
    requeue_count, requeue_at = _backing_off(obj.get("status"))
    priority = spec.get("priority")
    return GroupInfo(namespace=namespace, name=name, min_member=min_count, uid=uid,
                     creation=creation, source=WORKLOAD_API, topology_required=required,
                     claims=claims,
                     topology_error=error,
                     priority_class_name=fields.as_str(spec.get("priorityClassName"),
                                                       "spec.priorityClassName") or None,
                     disruption_mode=_workload_disruption_mode(spec.get("disruptionMode")),
                     disrupted_since=_disrupted_since(obj.get("status")),
                     parent=composite_key(namespace, parent) if parent else "",
                     waiting_since=_waiting_condition(obj.get("status")),
                     requeue_count=requeue_count, requeue_at=requeue_at,
                     priority=(None if priority is None
                               else fields.as_int(priority, "spec.priority", 0)),
                     preemption_policy=_preemption_policy(spec.get("preemptionPolicy")))


def _workload_disruption_mode(raw: Any) -> str:
    """spec.disruptionMode of an upstream PodGroup: v1beta1 (and v1alpha3) a one-of
    object, `{"all": {}}` or `{"single": {}}`; v1alpha2 a string, "PodGroup" (all) or
    "Pod" (single). Absent: single, the API's default."""
    w = "spec.disruptionMode"
    if raw is None:
        return DISRUPT_SINGLE
    if isinstance(raw, str):
        modes = {"Pod": DISRUPT_SINGLE, "PodGroup": DISRUPT_ALL}
        if raw not in modes:
            raise ValueError(f"{w}: {fields.shown(raw)} is not 'Pod' or 'PodGroup'")
        return modes[raw]
    members = [k for k, v in fields.as_obj(raw, w).items() if v is not None]
    if members == [DISRUPT_ALL]:
        return DISRUPT_ALL
    if members in ([DISRUPT_SINGLE], []):
        return DISRUPT_SINGLE
    raise ValueError(f"{w}: exactly one of 'single' or 'all' must be set, got {members}")


def _workload_topology(keys: list[str]) -> tuple[str, str]:
    """(the required key, why it cannot be used) from the topology constraints' keys.
    The API allows one constraint and validates its key as a label key; an API server
    that let a bad or a second one through is not second-guessed: the gang is not placed,
    and says why (`Reason.INVALID_TOPOLOGY`), as for a malformed annotation."""
    w = "spec.schedulingConstraints.topology"
    if not keys:
        return "", ""
    if len(keys) > 1:
        return "", (f"{w}: {len(keys)} constraints ({', '.join(map(repr, keys))}); only one "
                    f"is supported, as the API allows; the gang is not placed until it is "
                    f"fixed")
    problem = label_key_problem(keys[0])
    if problem is not None:
        return "", (f"{w}[0].key: {fields.shown(keys[0])} is not a node label key ({problem}); the "
                    f"gang is not placed until it is fixed")
    return keys[0], ""


def _gang_count(spec: Mapping[str, Any], field: str, default: int) -> int:
    """The count of spec.schedulingPolicy.gang (`field`), the one shape upstream PodGroups
    and CompositePodGroups share: `default` under a "basic" policy or none, and where a
    gang policy leaves it out (then below 1 is refused, as any count below 1)."""
    policy = fields.as_obj(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang = policy.get("gang")
    if gang is None:
        return default
    w = f"spec.schedulingPolicy.gang.{field}"
    count = fields.as_int(fields.as_obj(gang, "spec.schedulingPolicy.gang").get(field), w,
                          default)
    if count < 1:
        raise ValueError(f"{w} must be >= 1, got {count}")
    return count


def _topology_keys(spec: Mapping[str, Any]) -> list[str]:
    """The node label keys of spec.schedulingConstraints.topology, as upstream PodGroups
    and CompositePodGroups write them; what to make of them is each one's own."""
    w = "spec.schedulingConstraints.topology"
    constraints = fields.as_obj(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    return [fields.as_str(fields.as_obj(t, f"{w}[{i}]").get("key"), f"{w}[{i}].key")
            for i, t in enumerate(fields.as_list(constraints.get("topology"), w))]


def workload_group_from_k8s(obj: Any) -> GroupInfo:
    """An upstream PodGroup to `GroupInfo`, of either version, whose fields read here are
    the same: scheduling.k8s.io/v1beta1 (Kubernetes 1.37) and v1alpha2 (1.36).
    spec.schedulingPolicy.gang.minCount is the quorum (a "basic" policy: 1);
    spec.schedulingConstraints.topology[0].key is topology-required, exactly as the
    gang-extender.x-k8s.io/topology-required annotation of a scheduler-plugins PodGroup
    (docs/topology.md): every member of the quorum in one domain of that node label.
    spec.priorityClassName (1.37) is carried like Volcano's. The Workload a PodGroup
    was made from (v1beta1 spec.workloadRef, v1alpha2 spec.podGroupTemplateRef) is not
    read: the PodGroup already holds the policy copied from its template.
    spec.disruptionMode is the gang's disruption mode (`_workload_disruption_mode`).
    spec.parentCompositePodGroupName (1.37 alpha) links the group to its
    CompositePodGroup (`GroupInfo.parent`), which it is planned with.
    spec.resourceClaims and status.resourceClaimStatuses (1.37, DRAWorkloadResourceClaims)
    are the claims the members share (`GroupInfo.claims`), read as a pod's are: the
    same fields, one allocation for the gang. spec.priority (v1beta1) is the gang's where
    its pods have none (`GroupInfo.priority`). spec.preemptionPolicy (1.37,
    PodGroupPreemptionPolicy) is the gang's own (`_preemption_policy`), and our
    `WAITING_FOR_CAPACITY` condition is read back for a restart (`_waiting_condition`),
    as a composite's, and so is our `BACKING_OFF`, its backoff (`_backing_off`)."""
    return fields.guarded("podgroup.scheduling.k8s.io", obj, _build_workload)


def _build_composite(obj: Mapping[str, Any], _ident: str) -> CompositeInfo:
    meta = fields.as_obj(obj.get("metadata"), "metadata")
    name = fields.required_str(meta.get("name"), "metadata.name")
    spec = fields.as_obj(obj.get("spec"), "spec")
    count = _gang_count(spec, "minGroupCount", 0)  # "basic": the children on their own
    keys = _topology_keys(spec)
    w = "spec.schedulingConstraints.topology"
    required, error = "", ""
    if len(keys) > 1:
        error = f"{w}: {len(keys)} constraints; only one is supported, as the API allows"
    elif keys:
        problem = label_key_problem(keys[0])
        if problem is None:
            required = keys[0]
        else:
            error = f"{w}[0].key: {fields.shown(keys[0])} is not a node label key ({problem})"
    outer = fields.as_str(spec.get("parentCompositePodGroupName"),
                          "spec.parentCompositePodGroupName")
    if outer:
        error = (f"spec.parentCompositePodGroupName: {fields.shown(outer)}: a "
                 f"CompositePodGroup inside another is not supported by gang-extender (one "
                 f"level of composites only)")
    priority = spec.get("priority")
    return CompositeInfo(
        namespace=fields.as_str(meta.get("namespace"), "metadata.namespace", "default"),
        name=name, min_group_count=count, uid=fields.as_str(meta.get("uid"), "metadata.uid"),
        creation=fields.parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        topology_required=required, error=error,
        disruption_mode=_composite_disruption_mode(spec.get("disruptionMode")),
        priority=None if priority is None else fields.as_int(priority, "spec.priority", 0),
        disrupted_since=_disrupted_since(obj.get("status")),
        preemption_policy=_preemption_policy(spec.get("preemptionPolicy")),
        waiting_since=_waiting_condition(obj.get("status")))


def _waiting_condition(status: Any) -> float:
    """When the composite or upstream PodGroup began waiting for capacity: the
    lastTransitionTime of our `WAITING_FOR_CAPACITY` condition while it is True, 0
    otherwise; lenient as `_waiting_since` (an unreadable one only restarts the
    starvation guard's clock)."""
    raw = status.get("conditions") if isinstance(status, Mapping) else None
    for c in raw if isinstance(raw, list) else ():
        if (isinstance(c, Mapping) and c.get("type") == WAITING_FOR_CAPACITY
                and c.get("status") == "True"):
            try:
                return max(0.0, fields.parse_time(c.get("lastTransitionTime")))
            except ValueError:
                return 0.0
    return 0.0


# `upstream_status.backoff_message`'s head, and only that: a count from 1 without
# leading zeros, and the end as `rfc3339` writes it (whole seconds, UTC).
_BACKOFF_HEAD = re.compile(r"count=([1-9][0-9]{0,8})"
                           r"(?: requeueAt=([0-9]{4}-[0-9]{2}-[0-9]{2}"
                           r"T[0-9]{2}:[0-9]{2}:[0-9]{2}Z))?; ")


def _backing_off(status: Any) -> tuple[int, float]:
    """An upstream PodGroup's backoff from our `BACKING_OFF` condition while it is True:
    (timeouts, when the backoff ends, 0: not backing off), read from the head of its
    message (`upstream_status.backoff_message` says why there, and why so strict);
    lenient as `_requeue_state`: one it cannot read is dropped, the backoff starts over."""
    raw = status.get("conditions") if isinstance(status, Mapping) else None
    for c in raw if isinstance(raw, list) else ():
        if not (isinstance(c, Mapping) and c.get("type") == BACKING_OFF
                and c.get("status") == "True"):
            continue
        message = c.get("message")
        m = _BACKOFF_HEAD.match(message) if isinstance(message, str) else None
        if m is None:
            return 0, 0.0
        try:
            return int(m[1]), fields.parse_time(m[2])
        except ValueError:  # a date that does not exist (month 13)
            return 0, 0.0
    return 0, 0.0


def _preemption_policy(raw: Any) -> str:
    """spec.preemptionPolicy of a CompositePodGroup or a v1beta1 PodGroup (1.37,
    PodGroupPreemptionPolicy): a pod's two values; absent (the gate off, or no
    PriorityClass) is PreemptLowerPriority, as upstream defaults it."""
    value = fields.as_str(raw, "spec.preemptionPolicy") or PREEMPT_LOWER
    if value not in (PREEMPT_LOWER, PREEMPT_NEVER):
        raise ValueError(f"spec.preemptionPolicy: {fields.shown(value)} is not one of "
                         f"{PREEMPT_NEVER!r}, {PREEMPT_LOWER!r}")
    return value


def _composite_disruption_mode(raw: Any) -> str:
    """spec.disruptionMode of a CompositePodGroup (`CompositeDisruptionMode`, 1.37): the
    one-of object of a v1beta1 PodGroup's, `{"all": {}}` or `{"single": {}}`, never a
    string (v1alpha3 has no v1alpha2 spelling to carry)."""
    if isinstance(raw, str):
        raise ValueError(f"spec.disruptionMode: {fields.shown(raw)} is not an object with "
                         f"'single' or 'all'")
    return _workload_disruption_mode(raw)


def composite_from_k8s(obj: Any) -> CompositeInfo:
    """A CompositePodGroup (`composite.py`) to `CompositeInfo`: spec.schedulingPolicy.gang
    .minGroupCount (a "basic" policy: 0), spec.schedulingConstraints.topology[0].key, and
    a parent composite refused with its reason. Read here, beside the PodGroups it groups,
    whose policy and constraints have the same shape. spec.disruptionMode (`all`: its
    children are disrupted together), spec.priority (what admission resolved from
    spec.priorityClassName; the name itself is not resolved here), spec.preemptionPolicy
    (`_preemption_policy`), our `WAITING_FOR_CAPACITY` condition (`_waiting_condition`)
    and our
    `DisruptionTarget` condition read back for a restart, as a PodGroup's. workloadRef
    is not read: the children carry the policy copied from their templates."""
    return fields.guarded("compositepodgroup.scheduling.k8s.io", obj, _build_composite)

"""The ProvisioningRequest contract (`autoscaling.x-k8s.io/v1`), as plain data and pure
functions: what a request of ours is called, what its conditions mean, the pod sets it
asks for, and the actions the provisioning adapter carries out.

The contract, as the Cluster Autoscaler's API types, proposal and provisioning classes
state it (facts, not its code):

* a request names `podSets` (at most 32), each a PodTemplate of its namespace and a
  `count` (at least 1, at most 16,384), and a `provisioningClassName`; its spec is
  immutable: a changed request is a deleted one and a new one;
* the autoscaler sets the conditions: `Accepted`, then `Provisioned` (the atomic class
  scaled up for all of them) or `Failed`; a provisioned request books its capacity
  against other requests' scale-ups for about 10 minutes, then gets `BookingExpired`;
  `CapacityRevoked` means the provisioned capacity is gone;
* pods that consume a request carry both annotations `CONSUME_ANNOTATION` (its name)
  and `CLASS_ANNOTATION` (its class): the autoscaler leaves such pods out of its own
  scale-up loop, so a gang's members never cause a second, partial scale-up;
* the booking lives in the autoscaler's scale-up simulation only: its scale-down sees a
  new node with no pod as empty and removes it after `--scale-down-unneeded-time`
  (10 minutes by default) unless the node is annotated `SCALE_DOWN_DISABLED` = "true".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.model import fields
from extender.core.model.types import SCHEDULER_PLUGINS, PodInfo, split_gang_key
from extender.core.model.vocabulary import PodRef, PodSet

API_PATH = "/apis/autoscaling.x-k8s.io/v1"
RESOURCE = "provisioningrequests"
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY_CLASS = "check-capacity.autoscaling.x-k8s.io"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# The key before the API review; the autoscaler and older Kueue releases still honour it.
DEPRECATED_CONSUME_ANNOTATION = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
# Set beside SCALE_DOWN_DISABLED on the nodes the extender protects: only those it
# un-protects (an operator's own annotation is never touched).
SCALE_DOWN_OURS = "gang-extender.x-k8s.io/scale-down-disabled-for"
# Our marker, on the requests and PodTemplates the extender creates: the gang (its
# `gang_key`, source included) they ask for. Only an object seen carrying it for a gang
# is that gang's: adopted on a 409, deleted (with its uid as a precondition), and only
# such objects may the extender's account delete (deploy/admission/extender-deletes.yaml).
GANG_LABEL = "gang-extender.x-k8s.io/gang"
GANG_ANNOTATION = "gang-extender.x-k8s.io/gang"
# Set on a member together with the consume annotations: the gang they were set for. The
# pod admission policy checks it names the pod's own gang (a CEL policy cannot see the
# request itself; docs/security.md says what that leaves open).
CONSUMES_FOR = "gang-extender.x-k8s.io/provisioning-request-for"
MAX_POD_SETS = 32
MAX_POD_SET_COUNT = 16384
_MAX_NAME = 253
# A request's name leaves room for its PodTemplates' "-<n>" (n < MAX_POD_SETS).
MAX_REQUEST_NAME = _MAX_NAME - 4
# Spelt as the pod admission policy spells it (extender-pod-patches.yaml, plainName).
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

# Request states, from its conditions (`state`); the last four end it.
PENDING, ACCEPTED, PROVISIONED = "Pending", "Accepted", "Provisioned"
FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED = "Failed", "BookingExpired", "CapacityRevoked"
ENDED = (FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED)


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """One ProvisioningRequest as the watch shows it."""

    namespace: str
    name: str
    uid: str
    gang: str  # GANG_ANNOTATION: "" for a request the extender did not make
    class_name: str
    created: float
    state: str  # PENDING .. CAPACITY_REVOKED
    since: float  # when it entered `state` (its condition's lastTransitionTime)
    message: str = ""  # the autoscaler's message on that condition
    templates: tuple[str, ...] = ()  # its pod sets' PodTemplates, deleted with it
    count: int = 0  # the pods its pod sets ask for, all sets together
    # While it is neither provisioned nor ended: the autoscaler's `Provisioned=False`
    # reason and message ("CapacityIsNotFound: ..."), which it keeps retrying under.
    waiting: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def state(conditions: Sequence[tuple[str, str, float, str]]) -> tuple[str, float, str]:
    """(state, since, message) from (type, status, lastTransitionTime, message) tuples:
    an ending condition wins over Provisioned, which wins over Accepted."""
    true = {t: (at, msg) for t, s, at, msg in conditions if s == "True"}
    for name in (*ENDED, PROVISIONED, ACCEPTED):
        if name in true:
            return name, *true[name]
    return PENDING, 0.0, ""


def _build(obj: Mapping[str, Any], _ident: str) -> RequestInfo:
    meta, spec, status, name = fields.sections(obj)
    conds = []
    not_yet: tuple[str, str] | None = None  # Provisioned=False: (reason, message)
    for i, raw in enumerate(fields.as_list(status.get("conditions"), "status.conditions")):
        w = f"status.conditions[{i}]"
        c = fields.as_obj(raw, w)
        conds.append((fields.as_str(c.get("type"), f"{w}.type"),
                      fields.as_str(c.get("status"), f"{w}.status"),
                      fields.parse_time(c.get("lastTransitionTime"), f"{w}.lastTransitionTime"),
                      fields.as_str(c.get("message"), f"{w}.message")))
        if conds[-1][:2] == (PROVISIONED, "False"):
            not_yet = (fields.as_str(c.get("reason"), f"{w}.reason"), conds[-1][3])
    st, since, message = state(conds)
    templates = []
    count = 0
    for i, raw in enumerate(fields.as_list(spec.get("podSets"), "spec.podSets")):
        w = f"spec.podSets[{i}].podTemplateRef"
        pod_set = fields.as_obj(raw, f"spec.podSets[{i}]")
        ref = fields.as_obj(pod_set.get("podTemplateRef"), w)
        templates.append(fields.as_str(ref.get("name"), f"{w}.name"))
        n = pod_set.get("count", 0)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"spec.podSets[{i}].count is not a count: {fields.shown(n)}")
        count += n
    waiting = ""
    if st in (PENDING, ACCEPTED) and not_yet:
        waiting = ": ".join(x for x in not_yet if x) or "Provisioned=False"
    created = fields.parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    annotations = fields.as_str_map(meta.get("annotations"), "metadata.annotations")
    return RequestInfo(
        namespace=fields.as_str(meta.get("namespace"), "metadata.namespace", "default"),
        name=name, uid=fields.as_str(meta.get("uid"), "metadata.uid"),
        gang=annotations.get(GANG_ANNOTATION, ""),
        class_name=fields.as_str(spec.get("provisioningClassName"), "spec.provisioningClassName"),
        created=created, state=st, since=since or created, message=message,
        templates=tuple(t for t in templates if t), count=count, waiting=waiting,
    )


def request_from_k8s(obj: Any) -> RequestInfo:
    """A ProvisioningRequest object to `RequestInfo`; a wrong shape is a ValueError."""
    return fields.guarded("provisioningrequest", obj, _build)


def request_name(gang: str) -> str:
    """The request of a gang (its `gang_key`): one name, so a restarted extender finds it
    and never makes a second (the API refuses a second object of that name), and one per
    gang, source included, so two sources' groups of one name never share it:
    "<name>-capacity" for a scheduler-plugins PodGroup (the name it always had),
    "<name>-capacity.<source>" for the others. Injective: a name ends in "capacity" or in
    ".<source>", and a source has no dot. Its PodTemplates are this name and "-<n>".

    A name too long, or not a DNS subdomain (a Kueue group is named by a label value,
    which may hold "_" or capitals), becomes "<cleaned head>-<hash of the gang>-capacity"
    with the same suffix. The pod admission policy computes the plain form in CEL
    (deploy/admission/extender-pod-patches.yaml): keep the two in step."""
    source, _, name = split_gang_key(gang)
    suffix = "" if source == SCHEDULER_PLUGINS else f".{source}"
    plain = f"{name}-capacity{suffix}"
    if len(plain) <= MAX_REQUEST_NAME and DNS_SUBDOMAIN.fullmatch(plain):
        return plain
    digest = f"{_fnv1a(gang):016x}"[:10]
    room = MAX_REQUEST_NAME - len(f"-{digest}-capacity{suffix}")
    head = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:room].rstrip("-") or "g"
    return f"{head}-{digest}-capacity{suffix}"


def _fnv1a(text: str) -> int:
    """A stable 64-bit hash (FNV-1a): the same name on every run and every replica."""
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def template_names(name: str, sets: int) -> tuple[str, ...]:
    """The PodTemplates of request `name` with `sets` pod sets."""
    return tuple(f"{name}-{i}" for i in range(sets))


def _shape(pod: PodInfo) -> tuple[object, ...]:
    """What the autoscaler's simulation of a pod depends on among what the core reads:
    members alike in all of it share one PodTemplate."""
    return (tuple(sorted(pod.requests.items())), tuple(sorted(pod.node_selector.items())),
            pod.tolerations, pod.required_node_affinity, pod.required_anti_affinity,
            pod.required_affinity, pod.spread_constraints)


def pod_sets(members: Sequence[PodInfo]) -> tuple[PodSet, ...]:
    """Members grouped by shape, a set split where it exceeds the per-set limit. The
    caller checks the number of sets against MAX_POD_SETS."""
    groups: dict[tuple[object, ...], list[PodInfo]] = {}
    for m in sorted(members, key=lambda p: p.name):
        groups.setdefault(_shape(m), []).append(m)
    out: list[PodSet] = []
    for pods in groups.values():
        first = pods[0]
        ref = PodRef(first.namespace, first.name, first.uid)
        left = len(pods)
        while left > 0:
            out.append(PodSet(ref, min(left, MAX_POD_SET_COUNT)))
            left -= MAX_POD_SET_COUNT
    return tuple(out)


def tally(members: Sequence[PodInfo]) -> dict[tuple[object, ...], int]:
    """How many of `members` there are of each shape `pod_sets` groups by."""
    out: dict[tuple[object, ...], int] = {}
    for m in members:
        key = _shape(m)
        out[key] = out.get(key, 0) + 1
    return out


def pods_consuming(members: Sequence[PodInfo]) -> set[str]:
    """The requests that these members' consume annotations name."""
    return {p.provisioning_request for p in members if p.provisioning_request}

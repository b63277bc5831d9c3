"""The upstream CompositePodGroup (`scheduling.k8s.io/v1alpha3`, Kubernetes 1.37 alpha,
gate `CompositePodGroup`) as plain data: a group of PodGroups with a quorum of groups.

A composite's children are upstream PodGroups whose spec.parentCompositePodGroupName
names it (`GroupInfo.parent`); with a gang policy, at least `minGroupCount` of them, each
at its own quorum, must be placed together or none is (`queue/composite.py`). Its key
lives beside the gangs' keys (`COMPOSITE:<ns>/<name>`), so that the gang manager takes it
through the same watch input as the PodGroups (`GangManager.on_group`) and no gang can be
mistaken for it.

What is not modelled, and says so on the children rather than placing them in part: a
composite inside another composite (upstream allows four levels; the quorum of the
outer one would be a third level of all-or-nothing), and more than one topology
constraint, as for PodGroups."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.core.model.annotations import label_key_problem
from extender.core.model.fields import as_int, as_list, as_obj, as_str, guarded, parse_time
from extender.core.model.types import gang_key

COMPOSITE = "composite-podgroup"  # the key prefix of a CompositePodGroup, beside a source's


def composite_key(namespace: str, name: str) -> str:
    """The key of the composite `name` in `namespace`: what a child's `parent` holds."""
    return gang_key(COMPOSITE, namespace, name)


@dataclass(frozen=True, slots=True)
class CompositeInfo:
    """A CompositePodGroup: how many of its child groups must be placed together
    (`min_group_count`; 0 for a "basic" policy, whose children are each planned on
    their own), the node label whose one domain holds all of them ("": none), and why
    it cannot be honoured (`error`, "": it can); with an error its children wait."""

    namespace: str
    name: str
    min_group_count: int
    uid: str = ""
    creation: float = 0.0
    topology_required: str = ""
    error: str = ""

    @property
    def key(self) -> str:
        return composite_key(self.namespace, self.name)


def _build(obj: Mapping[str, Any], _ident: str) -> CompositeInfo:
    meta = as_obj(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name")
    if not name:
        raise ValueError("metadata.name is missing")
    spec = as_obj(obj.get("spec"), "spec")
    policy = as_obj(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    count = 0  # "basic": the children are scheduled independently
    gang = policy.get("gang")
    if gang is not None:
        w = "spec.schedulingPolicy.gang.minGroupCount"
        count = as_int(as_obj(gang, "spec.schedulingPolicy.gang").get("minGroupCount"), w, 0)
        if count < 1:
            raise ValueError(f"{w} must be >= 1, got {count}")
    w = "spec.schedulingConstraints.topology"
    topology = as_list(as_obj(spec.get("schedulingConstraints"),
                          "spec.schedulingConstraints").get("topology"), w)
    keys = [as_str(as_obj(t, f"{w}[{i}]").get("key"), f"{w}[{i}].key")
            for i, t in enumerate(topology)]
    required, error = "", ""
    if len(keys) > 1:
        error = f"{w}: {len(keys)} constraints; only one is supported, as the API allows"
    elif keys:
        problem = label_key_problem(keys[0])
        if problem is None:
            required = keys[0]
        else:
            error = f"{w}[0].key: {keys[0]!r} is not a node label key ({problem})"
    outer = as_str(spec.get("parentCompositePodGroupName"), "spec.parentCompositePodGroupName")
    if outer:
        error = (f"spec.parentCompositePodGroupName: {outer!r}: a CompositePodGroup inside "
                 f"another is not supported by gang-extender (one level of composites only)")
    return CompositeInfo(
        namespace=as_str(meta.get("namespace"), "metadata.namespace", "default"), name=name,
        min_group_count=count, uid=as_str(meta.get("uid"), "metadata.uid"),
        creation=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        topology_required=required, error=error)


def composite_from_k8s(obj: Any) -> CompositeInfo:
    """A CompositePodGroup to `CompositeInfo`: spec.schedulingPolicy.gang.minGroupCount
    (a "basic" policy: 0), spec.schedulingConstraints.topology[0].key, and a parent
    composite refused with its reason. workloadRef, disruptionMode and the priority
    fields are not read: the children carry their own."""
    return guarded("compositepodgroup.scheduling.k8s.io", obj, _build)

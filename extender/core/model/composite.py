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

from dataclasses import dataclass

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

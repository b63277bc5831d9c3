"""What the status writer keeps of the pods it watches beyond the gang manager's view:
who owns each member (for scheduler-plugins' `occupiedBy`), and which pods carry a
gang's keys (a scheduler-plugins PodGroup's label, an upstream PodGroup in
spec.schedulingGroup, a Volcano annotation, a JobSet's or Kueue's labels) but name
another scheduler.

The latter say whose a PodGroup is. In a shared cluster Coscheduling's gangs use the same
PodGroup kind and label as ours; the gang manager never counts their pods as members
(`GangManager.on_pod`), so without this the writer would see a group with no members,
and once its grace ran out say "0 of N members exist" on another scheduler's PodGroup,
and keep saying it while that scheduler ran the gang. A group with pods of another
scheduler labelled for it and no member of ours is left to its owner, even one that
writes no status at all. The same holds for an upstream PodGroup whose pods name the
in-tree scheduler (`GenericWorkload` on): its conditions are kube-scheduler's, and for a
Volcano PodGroup or a JobSet whose pods name Volcano's or the default scheduler: they
are not gangs of ours, waiting for members, in the gangs gauge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.keyed_sets import KeyedSets
from extender.core.model.sources import JOBSET, jobset_set_gang_of, membership
from extender.core.model.types import NOT_A_MEMBER, GroupInfo, PodInfo, gang_key


def _named(namespace: str, meta: Mapping[str, Any], spec: Any) -> str | None:
    """The group a pod of another scheduler names, by `core/model/sources.membership`,
    the rule the gang manager reads a member of ours with: a scheduler-plugins label, an
    upstream spec.schedulingGroup, a Volcano annotation, a JobSet's labels (the gang of
    its JobSet's attempt: `theirs` looks there for the JobSet's split gangs too) or a
    Kueue label. With the first two alone, a Volcano or JobSet gang whose pods name
    their own scheduler (every JobSet of the default scheduler) counted in the gangs
    gauge as one of ours waiting for its members."""
    labels, annotations = _strings(meta.get("labels")), meta.get("annotations")
    group = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    m = membership(labels, annotations if isinstance(annotations, Mapping) else {},
                   name if isinstance(name, str) else "")
    if m is None:
        return None
    return gang_key(m.source, namespace, m.jobset.set_gang if m.jobset else m.name)


def _strings(labels: Any) -> dict[str, str]:
    if not isinstance(labels, Mapping):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


class LabelledPods:
    def __init__(self) -> None:
        self.owners: dict[str, tuple[str, ...]] = {}  # member pod uid -> owner names
        self._foreign = KeyedSets()  # pod uids under the group their label names

    def observe(self, obj: Mapping[str, Any], pod: PodInfo | None) -> tuple[str, ...]:
        """A pod event, with the pod as the gang manager applied it (None: unknown).
        Returns the groups whose status may have changed with it."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        uid = str(meta.get("uid", ""))
        named = None
        if pod is not None and pod.membership == NOT_A_MEMBER:
            named = _named(pod.namespace, meta, obj.get("spec"))
        was = self._set_foreign(uid, named)
        gang = pod.gang if pod is not None else None
        refs = meta.get("ownerReferences")
        names = tuple(str(r.get("name", "")) for r in (refs if isinstance(refs, list) else ())
                      if isinstance(r, Mapping) and r.get("name"))
        if gang is not None and names:
            self.owners[uid] = names
        else:
            self.owners.pop(uid, None)
        return tuple(k for k in dict.fromkeys((gang, named, was)) if k is not None)

    def deleted(self, uid: str) -> str | None:
        """Returns the group a foreign pod's label named, which may be ours again."""
        self.owners.pop(uid, None)
        return self._set_foreign(uid, None)

    def foreign(self, key: str) -> bool:
        """Pods of another scheduler are labelled for this group."""
        return bool(self._foreign.under(key))

    def theirs(self, group: GroupInfo) -> bool:
        """Pods of another scheduler name `group`: for a gang a JobSet's split made, its
        JobSet's (their pods name the JobSet's attempt, `_named`)."""
        if self._foreign.under(group.key):
            return True
        if group.source != JOBSET:
            return False
        set_gang = jobset_set_gang_of(group.name)
        return set_gang is not None and bool(self._foreign.under(
            gang_key(JOBSET, group.namespace, set_gang)))

    def _set_foreign(self, uid: str, key: str | None) -> str | None:
        return self._foreign.drop(uid) if key is None else self._foreign.put(uid, key)

"""What the status writer keeps of the pods it watches beyond the gang manager's view:
who owns each member (for scheduler-plugins' `occupiedBy`), and which pods carry a
scheduler-plugins PodGroup's label, or name an upstream PodGroup in spec.schedulingGroup,
but name another scheduler.

The latter say whose a PodGroup is. In a shared cluster Coscheduling's gangs use the same
PodGroup kind and label as ours; the gang manager never counts their pods as members
(`GangManager.on_pod`), so without this the writer would see a group with no members,
and once its grace ran out say "0 of N members exist" on another scheduler's PodGroup,
and keep saying it while that scheduler ran the gang. A group with pods of another
scheduler labelled for it and no member of ours is left to its owner, even one that
writes no status at all. The same holds for an upstream PodGroup whose pods name the
in-tree scheduler (`GenericWorkload` on): its conditions are kube-scheduler's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.keyed_sets import KeyedSets
from extender.core.model.types import (
    GROUP_LABEL,
    NOT_A_MEMBER,
    SCHEDULER_PLUGINS,
    WORKLOAD_API,
    PodInfo,
    gang_key,
)


def _named(namespace: str, meta: Mapping[str, Any], spec: Any) -> str | None:
    """The group a pod of another scheduler names, by `core/model/sources.PRECEDENCE`: the
    scheduler-plugins label, else the upstream spec.schedulingGroup (the in-tree
    scheduler's gangs, whose status it writes itself)."""
    labels = meta.get("labels")
    label = labels.get(GROUP_LABEL) if isinstance(labels, Mapping) else None
    if isinstance(label, str) and label:
        return gang_key(SCHEDULER_PLUGINS, namespace, label)
    group = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    if isinstance(name, str) and name:
        return gang_key(WORKLOAD_API, namespace, name)
    return None


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

    def _set_foreign(self, uid: str, key: str | None) -> str | None:
        return self._foreign.drop(uid) if key is None else self._foreign.put(uid, key)

"""The pods of each JobSet attempt whose gang the JobSet's split decides.

A JobSet that splits itself per Job or per replicated Job says so on the JobSet alone:
its controller copies none of the JobSet's annotations to its pods. So a pod of it is
first put in the set's gang, or in the gang the split known then gives it
(`sources.jobset_resolve`), and when the JobSet is read later, or its split changes,
every pod of that attempt must be found again and moved, wherever it was put. They
are kept here by the set's gang key, so that walk visits that JobSet's pods only, never
every pod of the cluster each time a JobSet is read.
"""

from __future__ import annotations

from extender.core.keyed_sets import KeyedSets
from extender.core.model.sources import JOBSET
from extender.core.model.types import PodInfo, gang_key


class JobSetPods:
    def __init__(self) -> None:
        self._pods = KeyedSets()  # uids under their set's gang key

    def seen(self, pod: PodInfo) -> None:
        """A new copy of `pod`: kept under its JobSet's attempt, or forgotten if it no
        longer names one (relabelled, or another scheduler's)."""
        m = pod.membership
        keys = m.jobset if m is not None else None
        key = gang_key(JOBSET, pod.namespace, keys.set_gang) if keys is not None else None
        if key is None:
            self._pods.drop(pod.uid)
        else:
            self._pods.put(pod.uid, key)

    def drop(self, uid: str) -> None:
        self._pods.drop(uid)

    def of(self, set_key: str) -> list[str]:
        """Uids of the pods of the JobSet attempt whose gang key is `set_key`."""
        return sorted(self._pods.under(set_key))

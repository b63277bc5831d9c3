"""The group objects of the gang sources beyond scheduler-plugins, as informer kinds.

All are optional APIs, watched only while served (`informer.Kind.discover`):

* Volcano's PodGroup, `scheduling.volcano.sh/v1beta1`: a CRD that Volcano installs; a
  cluster without Volcano has no such API and gets no watch and no error;
* the upstream PodGroup, `scheduling.k8s.io/v1beta1` on Kubernetes 1.37 (beta, served
  with `--runtime-config=scheduling.k8s.io/v1beta1=true` and the GenericWorkload gate)
  and `scheduling.k8s.io/v1alpha2` on 1.36 (alpha, `...v1alpha2=true` and the same
  gate). One kind per version, each discovered on its own: no release serves both (1.37
  removed v1alpha2; 1.36 has no v1beta1 PodGroup), so a cluster gets exactly one watch,
  whichever its API server serves, and an upgrade from 1.36 to 1.37 moves from one to
  the other without a restart. The fields read are the same in both
  (`convert_groups.workload_group_from_k8s`), and both feed the same gangs
  (`workload-api:<ns>/<name>`).

* JobSet, `jobset.x-k8s.io/v1alpha2`: a CRD that the JobSet controller installs. A
  JobSet is a group object of its own (`convert_jobset.jobset_groups_from_k8s`): its
  gang, and one per Job of a replicated Job split per Job. They are named by its restart
  attempt too, so when the JobSet restarts, the old attempt's gangs are dropped as the
  new ones are read (`_jobset_apply`).

* CompositePodGroup, `scheduling.k8s.io/v1alpha3` on Kubernetes 1.37 (alpha: served with
  `--runtime-config=scheduling.k8s.io/v1alpha3=true` and the CompositePodGroup gate): not
  a gang but the group of gangs its children (v1beta1 PodGroups naming it in
  spec.parentCompositePodGroupName) are planned with (`CompositeInfo`). Its
  PodGroups are read in v1beta1 only, though v1alpha3 serves them too: one watch each.

Kueue's plain pod groups have no object; the gang manager derives them from the pods.
The extender never writes these objects. Of their status it writes only the conditions of
an upstream PodGroup whose pods name this scheduler, as kube-scheduler writes them on its
own gangs (`reporting/upstream.py`); Volcano's status is Volcano's (docs/integrations.md).
"""

from __future__ import annotations

from typing import Any

from extender.core.manager import GangManager
from extender.core.model.convert_groups import (
    composite_from_k8s,
    volcano_group_from_k8s,
    workload_group_from_k8s,
)
from extender.core.model.convert_jobset import jobset_groups_from_k8s
from extender.core.model.fields import as_int, as_obj, as_str
from extender.core.model.sources import JOBSET, jobset_gang_name
from extender.core.model.types import (
    SCHEDULER_PLUGINS,
    VOLCANO,
    WORKLOAD_API,
    composite_key,
    gang_key,
    split_gang_key,
)
from extender.kube.client import PODGROUP_PATH
from extender.kube.informer import Kind

VOLCANO_PATH = "/apis/scheduling.volcano.sh/v1beta1"
WORKLOAD_PATH = "/apis/scheduling.k8s.io/v1alpha2"  # Kubernetes 1.36
WORKLOAD_BETA_PATH = "/apis/scheduling.k8s.io/v1beta1"  # Kubernetes 1.37
JOBSET_PATH = "/apis/jobset.x-k8s.io/v1alpha2"
COMPOSITE_PATH = "/apis/scheduling.k8s.io/v1alpha3"  # Kubernetes 1.37, alpha

# apiVersion of each source's group object, for Events' involvedObject; Kueue has none.
# An upstream PodGroup's is the version it was read in (`group_api_version`).
GROUP_API_VERSIONS = {
    SCHEDULER_PLUGINS: PODGROUP_PATH.removeprefix("/apis/"),
    VOLCANO: VOLCANO_PATH.removeprefix("/apis/"),
    WORKLOAD_API: WORKLOAD_PATH.removeprefix("/apis/"),
}

# Gang key -> apiVersion of each upstream PodGroup in the cache, as it was read (a gang
# built without an informer, in tests, falls back to GROUP_API_VERSIONS).
_read_as: dict[str, str] = {}


def group_api_version(source: str, key: str) -> str | None:
    """The apiVersion to name the gang's group object by in Events (None: no object)."""
    return _read_as.get(key) or GROUP_API_VERSIONS.get(source)


def _key(source: str) -> Any:
    def key(obj: dict[str, Any]) -> str:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return gang_key(source, str(meta.get("namespace", "")), str(meta.get("name", "")))
    return key


def _apply_volcano(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_group(volcano_group_from_k8s(obj), now)


def _workload_kind(name: str, path: str) -> Kind:
    """The upstream PodGroups of one version; each remembers the version it was read in,
    for as long as it is in the cache."""
    version = path.removeprefix("/apis/")

    def apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
        group = workload_group_from_k8s(obj)
        manager.on_group(group, now)
        _read_as[group.key] = version

    def delete(manager: GangManager, key: str, now: float) -> None:
        _read_as.pop(key, None)
        manager.on_group_deleted(key)

    return Kind(name, f"{path}/podgroups", _key(WORKLOAD_API), apply, delete,
                discover=(path, "podgroups"))


def _delete(manager: GangManager, key: str, now: float) -> None:
    manager.on_group_deleted(key)


# JobSet namespace/name -> the gang keys read from it last (its own first), so a restart
# drops the old attempt's gangs (the informer keys objects by their first gang key, and
# sees a new one), and a deletion every gang of it.
_jobset_gangs: dict[str, list[str]] = {}


def _jobset_key(obj: dict[str, Any]) -> str:
    """The gang key of a JobSet's current attempt (`sources.jobset_gang_name`)."""
    meta = as_obj(obj.get("metadata"), "metadata")
    status = as_obj(obj.get("status"), "status")
    name = jobset_gang_name(as_str(meta.get("name"), "metadata.name"),
                            as_str(meta.get("uid"), "metadata.uid"),
                            as_int(status.get("restarts"), "status.restarts", 0))
    return gang_key(JOBSET, as_str(meta.get("namespace"), "metadata.namespace", "default"),
                    name)


def _jobset_apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    groups = jobset_groups_from_k8s(obj)
    meta = as_obj(obj.get("metadata"), "metadata")
    name = f"{groups[0].namespace}/{as_str(meta.get('name'), 'metadata.name')}"
    keys = [g.key for g in groups]
    for old in _jobset_gangs.get(name, ()):
        if old not in keys:
            # Restarted (or made again under its name, or split differently): its pods
            # of before are no members of the new gangs, and their gang, no longer
            # anyone's, goes.
            manager.on_group_deleted(old)
    _jobset_gangs[name] = keys
    for group in groups:
        manager.on_group(group, now)


def _jobset_name(key: str) -> str:
    """namespace/name of the JobSet a gang key of it names: its gang name up to the
    first dot (a JobSet's name is a DNS label, which has none)."""
    _, namespace, gang = split_gang_key(key)
    return f"{namespace}/{gang.partition('.')[0]}"


def jobset_gangs(key: str) -> list[str]:
    """The gang keys read last from the JobSet of which `key` is a gang key, its own
    first; [] when none was. A JobSet event changes all of them at once (its split
    moves pods between them without a pod event), so the status writer is told of each
    (`reporting/kinds.py`)."""
    return list(_jobset_gangs.get(_jobset_name(key), ()))


def jobset_deleted_gangs(key: str) -> list[str]:
    """The gangs the deletion of the JobSet object keyed `key` drops: all of the
    JobSet's when `key` is its current attempt's, else (a relist dropping an old
    attempt's key) that key alone."""
    keys = jobset_gangs(key)
    return keys if keys and keys[0] == key else [key]


def _jobset_delete(manager: GangManager, key: str, now: float) -> None:
    keys = jobset_deleted_gangs(key)
    if jobset_gangs(key)[:1] == [key]:  # not when a relist drops an old attempt's key
        del _jobset_gangs[_jobset_name(key)]
    for k in keys:
        manager.on_group_deleted(k)


VOLCANO_GROUPS = Kind("volcano-podgroups", f"{VOLCANO_PATH}/podgroups", _key(VOLCANO),
                      _apply_volcano, _delete, discover=(VOLCANO_PATH, "podgroups"))
WORKLOAD_GROUPS = _workload_kind("workload-podgroups", WORKLOAD_PATH)
WORKLOAD_BETA_GROUPS = _workload_kind("workload-podgroups-v1beta1", WORKLOAD_BETA_PATH)
JOBSETS = Kind("jobsets", f"{JOBSET_PATH}/jobsets", _jobset_key, _jobset_apply,
               _jobset_delete, discover=(JOBSET_PATH, "jobsets"))


def _composite_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return composite_key(str(meta.get("namespace", "")), str(meta.get("name", "")))


def _composite_apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_group(composite_from_k8s(obj), now)


COMPOSITES = Kind("compositepodgroups", f"{COMPOSITE_PATH}/compositepodgroups",
                  _composite_key, _composite_apply, _delete,
                  discover=(COMPOSITE_PATH, "compositepodgroups"))
# Every kind above, in the order the extender starts their watches.
SOURCE_GROUP_KINDS = (VOLCANO_GROUPS, WORKLOAD_BETA_GROUPS, WORKLOAD_GROUPS, JOBSETS,
                      COMPOSITES)

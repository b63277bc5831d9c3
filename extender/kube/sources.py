"""The group objects of the gang sources beyond scheduler-plugins, as informer kinds.

Both are optional APIs, watched only while served (`informer.Kind.discover`):

* Volcano's PodGroup, `scheduling.volcano.sh/v1beta1`: a CRD that Volcano installs; a
  cluster without Volcano has no such API and gets no watch and no error;
* the upstream PodGroup, `scheduling.k8s.io/v1alpha2` (Kubernetes 1.36 alpha): served
  only when the API server runs with `--runtime-config=scheduling.k8s.io/v1alpha2=true`
  and the GenericWorkload feature gate.

Kueue's plain pod groups have no object; the gang manager derives them from the pods.
The extender reads these objects and never writes them, nor their status: Volcano's
controllers and Kubernetes' own own it (docs/install.md).
"""

from __future__ import annotations

from typing import Any

from extender.core.convert_groups import volcano_group_from_k8s, workload_group_from_k8s
from extender.core.manager import GangManager
from extender.core.types import SCHEDULER_PLUGINS, VOLCANO, WORKLOAD_API, gang_key
from extender.kube.client import PODGROUP_PATH
from extender.kube.informer import Kind

VOLCANO_PATH = "/apis/scheduling.volcano.sh/v1beta1"
WORKLOAD_PATH = "/apis/scheduling.k8s.io/v1alpha2"

# apiVersion of each source's group object, for Events' involvedObject; Kueue has none.
GROUP_API_VERSIONS = {
    SCHEDULER_PLUGINS: PODGROUP_PATH.removeprefix("/apis/"),
    VOLCANO: VOLCANO_PATH.removeprefix("/apis/"),
    WORKLOAD_API: WORKLOAD_PATH.removeprefix("/apis/"),
}


def _key(source: str) -> Any:
    def key(obj: dict[str, Any]) -> str:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return gang_key(source, str(meta.get("namespace", "")), str(meta.get("name", "")))
    return key


def _apply_volcano(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_group(volcano_group_from_k8s(obj), now)


def _apply_workload(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_group(workload_group_from_k8s(obj), now)


def _delete(manager: GangManager, key: str, now: float) -> None:
    manager.on_group_deleted(key)


VOLCANO_GROUPS = Kind("volcano-podgroups", f"{VOLCANO_PATH}/podgroups", _key(VOLCANO),
                      _apply_volcano, _delete, discover=(VOLCANO_PATH, "podgroups"))
WORKLOAD_GROUPS = Kind("workload-podgroups", f"{WORKLOAD_PATH}/podgroups",
                       _key(WORKLOAD_API), _apply_workload, _delete,
                       discover=(WORKLOAD_PATH, "podgroups"))

"""Dynamic Resource Allocation (`resource.k8s.io/v1`) as informer kinds: the devices
drivers publish (ResourceSlices), the DeviceClasses, and the claims and claim templates
pods ask through. The planner counts devices from them so that a gang of members with
claims is planned only where kube-scheduler's DynamicResources plugin will find their
devices (docs/devices.md).

Optional APIs, watched only while served (`informer.Kind.discover`): a cluster without
`resource.k8s.io/v1` (before Kubernetes 1.34, or with the API turned off) gets no watch
and no error. The extender only reads them (RBAC: get, list, watch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extender.core.cache.devices import DeviceObject
from extender.core.devices.model import (
    claim_from_k8s,
    claim_template_from_k8s,
    device_class_from_k8s,
    resource_slice_from_k8s,
)
from extender.core.manager import GangManager
from extender.kube.informer import Kind

RESOURCE_PATH = "/apis/resource.k8s.io/v1"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _name(obj: dict[str, Any]) -> str:
    return str(_meta(obj).get("name", ""))


def _ns_name(obj: dict[str, Any]) -> str:
    return f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}"


def _kind(resource: str, key: Callable[[dict[str, Any]], str],
          convert: Callable[[Any], DeviceObject]) -> Kind:
    def apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
        manager.on_devices(resource, key(obj), convert(obj))

    def delete(manager: GangManager, k: str, now: float) -> None:
        manager.on_devices(resource, k, None)

    return Kind(resource, f"{RESOURCE_PATH}/{resource}", key, apply, delete,
                discover=(RESOURCE_PATH, resource))


RESOURCE_SLICES = _kind("resourceslices", _name, resource_slice_from_k8s)
DEVICE_CLASSES = _kind("deviceclasses", _name, device_class_from_k8s)
RESOURCE_CLAIMS = _kind("resourceclaims", _ns_name, claim_from_k8s)
CLAIM_TEMPLATES = _kind("resourceclaimtemplates", _ns_name, claim_template_from_k8s)
# Classes and templates first: a claim or slice read before them plans nothing wrong,
# but the first plans after a start are better with all four in.
DEVICE_KINDS = (DEVICE_CLASSES, CLAIM_TEMPLATES, RESOURCE_SLICES, RESOURCE_CLAIMS)

"""A stand-in for a Dynamic Resource Allocation driver (`resource.k8s.io/v1`): it
publishes devices for fake nodes, as a driver's kubelet plugin would, so that the stock
kube-scheduler's DynamicResources plugin allocates claims on them and the extender plans
gangs on them.

What it does not simulate: there is no kubelet plugin (no gRPC service on the node, no
NodePrepareResources or NodeUnprepareResources), no device is prepared or given to a
container, and no CDI spec is written; the fake kubelet (`e2e/harness/kubelet`) runs a
pod whose claims kube-scheduler allocated as it runs any pod. Devices carry no health or
taints unless a test sets them. What is real: the DeviceClass, the ResourceSlices (one
pool per node, generation 1), the ResourceClaimTemplates, the claims the control plane's
resourceclaim controller makes from them, claims made by name, and the allocation
kube-scheduler writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from e2e.harness.k8s import ApiException
from e2e.harness.target import kube

GROUP, VERSION = "resource.k8s.io", "v1"
DRIVER = "gpu.example.com"


def _create(plural: str, body: dict[str, Any], ns: str | None = None) -> None:
    custom = kube().custom
    if ns is None:
        custom.create_cluster_custom_object(GROUP, VERSION, plural, body, _preload_content=False)
    else:
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body,
                                               _preload_content=False)


def delete_cluster_object(plural: str, name: str) -> None:
    """Delete a cluster-scoped DRA object (a DeviceClass, a ResourceSlice), gone already
    being fine."""
    _delete(plural, name)


def _delete(plural: str, name: str) -> None:
    try:
        kube().custom.delete_cluster_custom_object(GROUP, VERSION, plural, name,
                                                   _preload_content=False)
    except ApiException as e:
        if e.status != 404:
            raise


class FakeDriver:
    """One driver's DeviceClass (named as the driver, selecting its devices) and the
    ResourceSlices it publishes; `close` deletes them (cluster-scoped: they outlive a
    test's namespace)."""

    def __init__(self, driver: str = DRIVER) -> None:
        self.driver = driver
        self.slices: list[str] = []
        _create("deviceclasses", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass",
            "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})

    def publish(self, node: str, count: int, attributes: Mapping[str, Any] | None = None,
                capacity: Mapping[str, str] | None = None) -> str:
        """A pool of `count` devices for `node` (gpu-0, gpu-1, ...), each with
        `attributes` (the API's typed form: {"model": {"string": "a100"}}) and `capacity`
        ({"memory": "80Gi"})."""
        name = f"{node}-{self.driver}"
        extra: dict[str, Any] = {}
        if attributes:
            extra["attributes"] = dict(attributes)
        if capacity:
            extra["capacity"] = {k: {"value": v} for k, v in capacity.items()}
        devices = [{"name": f"gpu-{i}", **extra} for i in range(count)]
        _create("resourceslices", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": self.driver, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}})
        self.slices.append(name)
        return name

    def close(self) -> None:
        for name in self.slices:
            _delete("resourceslices", name)
        self.slices.clear()
        _delete("deviceclasses", self.driver)


@contextmanager
def fake_driver(driver: str = DRIVER) -> Iterator[FakeDriver]:
    d = FakeDriver(driver)
    try:
        yield d
    finally:
        d.close()


def create_claim_template(ns: str, name: str, count: int, device_class: str = DRIVER,
                          selector: str = "") -> None:
    """A ResourceClaimTemplate asking for exactly `count` devices of `device_class`, that
    the CEL `selector` selects if one is given."""
    exactly: dict[str, Any] = {"deviceClassName": device_class,
                               "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    _create("resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}},
        ns)


def create_claim(ns: str, name: str, count: int, device_class: str = DRIVER) -> None:
    """A ResourceClaim of its own (not from a template) asking for exactly `count`
    devices of `device_class`: whichever pods name it share its one allocation."""
    _create("resourceclaims", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": device_class, "allocationMode": "ExactCount",
            "count": count}}]}}}, ns)


def claim_named(claim: str, name: str = "gpu") -> dict[str, Any]:
    """The pod spec fields (for `create_pod(spec_extra=...)`) naming the claim `claim`."""
    return {"resourceClaims": [{"name": name, "resourceClaimName": claim}]}


def claims_from(template: str, claim: str = "gpu") -> dict[str, Any]:
    """The pod spec fields (for `create_pod(spec_extra=...)`) of one claim per pod made
    from `template`."""
    return {"resourceClaims": [{"name": claim, "resourceClaimTemplateName": template}]}


def allocated_claims(ns: str) -> dict[str, list[str]]:
    """Claim name -> the devices ("pool/device") its allocation holds, for the allocated
    claims of `ns`."""
    raw = kube().custom.list_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims")
    out: dict[str, list[str]] = {}
    for c in raw.get("items", []):
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices")
                   or {}).get("results") or []
        if results:
            out[c["metadata"]["name"]] = [f"{r['pool']}/{r['device']}" for r in results]
    return out

"""The device model's converters (ResourceSlice, DeviceClass, ResourceClaim and its
template, a pod's claims) on valid objects changed in hostile ways
(tests/core/model/hostile.py says how): each gives a value or a `ValueError` naming the
object, never another exception, so the device informers log and skip the one object."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.core.devices.model import (
    claim_from_k8s,
    claim_template_from_k8s,
    device_class_from_k8s,
    pod_claims_from_k8s,
    resource_slice_from_k8s,
)
from tests.core.devices.samples import CLAIM, SLICE
from tests.core.model.hostile import (
    assert_named_or_value,
    every_replacement,
    hostile_settings,
    mutate,
)


def _slice() -> dict[str, Any]:
    """SLICE with every kind of attribute, and a version one."""
    obj = copy.deepcopy(SLICE)
    obj["spec"]["devices"][0]["attributes"].update({
        "driverVersion": {"version": "1.2.3-rc.1+build"}, "healthy": {"bool": True},
        "sizes": {"ints": [1, 2]}, "flags": {"bools": [True]},
        "compat": {"versions": ["1.0.0"]}})
    return obj


def _selector_slice() -> dict[str, Any]:
    obj = copy.deepcopy(SLICE)
    del obj["spec"]["nodeName"]
    obj["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["gpu"]}]}]}
    return obj


_CLASS: dict[str, Any] = {"metadata": {"name": "gpu"}, "spec": {"selectors": [
    {"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
_TEMPLATE: dict[str, Any] = {"metadata": {"name": "two-gpus", "namespace": "ml"},
                             "spec": {"spec": CLAIM["spec"]}}
_POD: dict[str, Any] = {
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "p-1"},
    "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"},
                                {"name": "nic", "resourceClaimName": "shared-nic"}]},
    "status": {"resourceClaimStatuses": [{"name": "gpu",
                                          "resourceClaimName": "trainer-0-gpu"}]}}

CASES: dict[str, tuple[Callable[[Any], Any], str, dict[str, Any]]] = {
    "slice": (resource_slice_from_k8s, "resourceslice", _slice()),
    "slice-selector": (resource_slice_from_k8s, "resourceslice", _selector_slice()),
    "class": (device_class_from_k8s, "deviceclass", _CLASS),
    "claim": (claim_from_k8s, "resourceclaim", CLAIM),
    "template": (claim_template_from_k8s, "resourceclaimtemplate", _TEMPLATE),
    "pod-claims": (pod_claims_from_k8s, "pod", _POD),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_valid_objects_convert(case: str) -> None:
    convert, _kind, obj = CASES[case]
    convert(copy.deepcopy(obj))


@pytest.mark.parametrize("case", sorted(CASES))
@hostile_settings()
@given(data=st.data())
def test_a_hostile_object_gives_a_value_or_an_error_naming_it(
    case: str, data: st.DataObject
) -> None:
    convert, kind, obj = CASES[case]
    assert_named_or_value(convert, mutate(data, obj, ("allNodes", "perDeviceNodeSelection",
                                                      "adminAccess", "count")), kind)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_field_deleted_or_replaced_by_each_hostile_value(case: str) -> None:
    convert, kind, obj = CASES[case]
    for path, changed in every_replacement(obj):
        try:
            assert_named_or_value(convert, changed, kind)
        except Exception as e:
            raise AssertionError(f"{case} at {path}: {type(e).__name__}: {e}") from e


def test_a_deep_boolean_attribute_is_named_not_a_recursion_error() -> None:
    """A plain repr of a list nested as deep as orjson decodes raised RecursionError."""
    obj = _slice()
    obj["spec"]["devices"][0]["attributes"]["healthy"] = {
        "bool": orjson.loads("[" * 1000 + "]" * 1000)}
    with pytest.raises(ValueError, match=r"^resourceslice node-1-gpu: spec.devices\[0\]"
                                         r".attributes\[healthy\].bool must be a boolean, "
                                         r"got \[\[\[\[\.\.\.\]\]\]\]$"):
        resource_slice_from_k8s(obj)

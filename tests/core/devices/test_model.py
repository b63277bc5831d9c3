"""The device model (extender/core/devices/model.py) reads the resource.k8s.io/v1 objects
as the API defines them, and a malformed one is a ValueError naming the object and the
field, never a crash."""

from __future__ import annotations

import contextlib
import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.devices.model import (
    ALL,
    EXACT_COUNT,
    AttributeValue,
    ClaimRef,
    claim_from_k8s,
    claim_template_from_k8s,
    device_class_from_k8s,
    pod_claims_from_k8s,
    resource_slice_from_k8s,
)
from tests.core.devices.samples import CLAIM, SLICE


def test_a_slice_is_read_with_names_qualified_by_the_driver() -> None:
    s = resource_slice_from_k8s(SLICE)
    assert (s.name, s.driver, s.pool, s.generation, s.slice_count) == (
        "node-1-gpu", "gpu.example.com", "node-1", 3, 1)
    assert (s.node_name, s.node_selector, s.all_nodes) == ("node-1", None, False)
    d0, d1 = s.devices
    assert d0.key == ("gpu.example.com", "node-1", "gpu-0")
    assert d0.attributes["gpu.example.com/model"] == AttributeValue("string", "a100")
    assert d0.attributes["numa.example.com/node"] == AttributeValue("int", 0)
    assert d0.attributes["gpu.example.com/links"].value == ("nvl-0", "nvl-1")
    assert d0.capacity == {"gpu.example.com/memory": Fraction(40 * 2**30)}
    assert [(t.key, t.effect) for t in d0.taints] == [("maintenance", "NoSchedule")]
    assert (d0.allow_multiple, d1.allow_multiple) == (False, True)
    # What a selector reads: grouped by domain, capacities as quantities.
    assert d0.cel["attributes"]["numa.example.com"] == {"node": 0}
    assert d0.cel["attributes"]["gpu.example.com"]["links"] == ["nvl-0", "nvl-1"]
    assert d0.cel["capacity"]["gpu.example.com"]["memory"] == {
        "__quantity__": f"{40 * 2**30}/1"}


def test_a_slice_for_a_node_selector_or_all_nodes() -> None:
    sel = copy.deepcopy(SLICE)
    del sel["spec"]["nodeName"]
    sel["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    s = resource_slice_from_k8s(sel)
    assert s.node_selector is not None and s.node_selector[0].match_expressions[0].key == "rack"
    del sel["spec"]["nodeSelector"]
    sel["spec"]["allNodes"] = True
    assert resource_slice_from_k8s(sel).all_nodes


def test_a_claim_is_read_with_its_alternatives_constraints_and_allocation() -> None:
    c = claim_from_k8s(CLAIM)
    gpus, nic = c.spec.requests
    assert [(a.name, a.device_class, a.count, a.mode) for a in gpus.alternatives] == [
        ("gpus", "gpu", 2, EXACT_COUNT)]
    assert gpus.alternatives[0].selectors == ("true",)
    assert [(a.name, a.device_class, a.mode) for a in nic.alternatives] == [
        ("nic/fast", "nic-fast", EXACT_COUNT), ("nic/any", "nic", ALL)]
    assert c.spec.constraints[0].requests == ("gpus",)
    assert c.spec.constraints[0].match_attribute == "numa.example.com/node"
    assert [a.key for a in c.allocated] == [("gpu.example.com", "node-1", "gpu-0")]
    assert c.allocation_nodes is not None and c.is_allocated
    assert c.reserved_for == ("p-1",)


def test_a_template_a_class_and_a_pods_claims() -> None:
    t = claim_template_from_k8s({"metadata": {"name": "two-gpus", "namespace": "ml"},
                                 "spec": {"spec": CLAIM["spec"]}})
    assert t.spec == claim_from_k8s(CLAIM).spec
    dc = device_class_from_k8s({"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}})
    assert dc.selectors == ('device.driver == "gpu.example.com"',)
    pc = pod_claims_from_k8s({
        "metadata": {"name": "trainer-0", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"},
                                    {"name": "shared", "resourceClaimName": "dataset"}]},
        "status": {"resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": "trainer-0-gpu-x7k2p"}]}})
    gpu, shared = pc.refs
    assert gpu == ClaimRef("gpu", None, "two-gpus")
    assert (pc.claim_name(gpu), pc.claim_name(shared)) == ("trainer-0-gpu-x7k2p", "dataset")
    unmade = pod_claims_from_k8s({"metadata": {"name": "p"}, "spec": {"resourceClaims": [
        {"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]}})
    assert unmade.claim_name(unmade.refs[0]) is None


def _set(obj: dict[str, Any], path: str | tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of `obj` with the field at `path` ("a.0.b", or a tuple of keys) replaced by
    `value`, or removed when `value` is KeyError."""
    out = copy.deepcopy(obj)
    node: Any = out
    keys = path if isinstance(path, tuple) else tuple(
        int(p) if p.isdigit() else p for p in path.split("."))
    *parts, last = keys
    for p in parts:
        node = node[p]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return out


@pytest.mark.parametrize(("path", "value", "message"), [
    ("spec.driver", "", "resourceslice node-1-gpu: spec.driver is missing"),
    ("spec.pool", "node-1", "spec.pool must be an object"),
    ("spec.allNodes", True, "exactly one of spec.nodeName"),
    ("spec.nodeName", KeyError, "exactly one of spec.nodeName"),
    ("spec.devices.0.capacity.memory.value", "lots", "spec.devices[0].capacity[memory]: "
                                                    "invalid quantity 'lots'"),
    ("spec.devices.0.capacity.memory", {}, "spec.devices[0].capacity[memory].value is missing"),
    ("spec.devices.0.attributes.model", {"string": "a", "int": 1}, "exactly one of"),
    ("spec.devices.0.attributes.model", {"version": "1.2"}, "invalid semantic version"),
    ("spec.devices.0.attributes.model", {"bool": "yes"}, "must be a boolean"),
    ("spec.devices.0.taints.0.effect", "Sometimes", "unknown effect"),
    ("spec.devices.1.name", "", "spec.devices[1].name is missing"),
])
def test_a_malformed_slice_is_a_clear_error(path: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        resource_slice_from_k8s(_set(SLICE, path, value))


@pytest.mark.parametrize(("path", "value", "message"), [
    ("spec.devices.requests.0.exactly.allocationMode", "Some", "unknown mode 'Some'"),
    ("spec.devices.requests.0.exactly.count", 0, "count must be at least 1"),
    ("spec.devices.requests.0.exactly.deviceClassName", "", "deviceClassName is missing"),
    ("spec.devices.requests.1.exactly", {"deviceClassName": "gpu"}, "exactly one of exactly"),
    ("spec.devices.requests.1.name", "gpus", "name is missing or repeated"),
    ("spec.devices.constraints.0.requests", ["tpu"], "no request named 'tpu'"),
    ("spec.devices.requests.0.exactly.selectors", [{"cel": {}}], "expression is missing"),
    ("status.reservedFor", "p-1", "status.reservedFor must be a list"),
])
def test_a_malformed_claim_is_a_clear_error(path: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"resourceclaim ml/trainer-0-gpu: .*{message}"):
        claim_from_k8s(_set(CLAIM, path, value))


def test_a_pod_claim_naming_both_or_neither_is_an_error() -> None:
    with pytest.raises(ValueError, match="exactly one of resourceClaimName"):
        pod_claims_from_k8s({"metadata": {"name": "p"}, "spec": {"resourceClaims": [
            {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}]}})


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=12)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(
        obj, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_mangled_object_is_read_or_refused_with_a_value_error(data: st.DataObject) -> None:
    for obj, read in ((SLICE, resource_slice_from_k8s), (CLAIM, claim_from_k8s)):
        path = data.draw(st.sampled_from(_paths(obj)))
        mangled = _set(obj, path, data.draw(_JSON))
        with contextlib.suppress(ValueError):
            read(mangled)

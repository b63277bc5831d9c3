"""The device allocation check (extender/core/devices/allocate.py) decides as
kube-scheduler's allocator on the API's documented rules, finds devices a greedy choice
misses, agrees with an exhaustive search, and stays bounded."""

from __future__ import annotations

import itertools
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cel_selectors import compile_selector
from extender.core.devices.allocate import MAX_CHOICES, Claim, Fit, NoFit, allocate
from extender.core.devices.model import (
    ClaimSpec,
    Device,
    DeviceClass,
    claim_from_k8s,
    device_class_from_k8s,
    resource_slice_from_k8s,
)

DRIVER = "gpu.example.com"
CLASSES = {
    "gpu": device_class_from_k8s({"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}),
    "nic": device_class_from_k8s({"metadata": {"name": "nic"}, "spec": {"selectors": [
        {"cel": {"expression": 'device.driver == "nic.example.com"'}}]}}),
}


def devices(*attrs: dict[str, Any], driver: str = DRIVER, taints: Any = None) -> list[Device]:
    """One slice of node-1, a device gpu-<i> per attribute dict ({"numa": 0, ...})."""
    devs = []
    for i, a in enumerate(attrs):
        d: dict[str, Any] = {"name": f"{driver.split('.')[0]}-{i}", "attributes": {}}
        for k, v in a.items():
            if k == "memory":
                d["capacity"] = {"memory": {"value": v}}
            elif isinstance(v, list):
                d["attributes"][k] = {"ints": v}
            else:
                d["attributes"][k] = {"string": v} if isinstance(v, str) else {"int": v}
        if taints:
            d["taints"] = taints
        devs.append(d)
    return list(resource_slice_from_k8s({
        "metadata": {"name": f"node-1-{driver}"},
        "spec": {"driver": driver, "pool": {"name": "node-1"}, "nodeName": "node-1",
                 "devices": devs}}).devices)


def claim(*requests: dict[str, Any], constraints: Any = None, name: str = "c",
          allocated: Any = None) -> Claim:
    spec = claim_from_k8s({"metadata": {"name": name, "namespace": "ml"}, "spec": {
        "devices": {"requests": list(requests), "constraints": constraints or []}}}).spec
    return Claim(f"ml/{name}", spec, tuple(allocated or ()))


def exactly(name: str = "gpus", count: int = 1, cls: str = "gpu", **more: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **more}}


def names(fit: Fit | NoFit) -> list[str]:
    assert isinstance(fit, Fit), fit
    return [d[2] for _, _, d in fit.chosen]


def run(claims: list[Claim], devs: list[Device], taken: Any = frozenset()) -> Fit | NoFit:
    return allocate(claims, devs, CLASSES, compile_selector, frozenset(taken))


def test_the_issues_node_holds_one_members_two_devices() -> None:
    node = devices({}, {})
    assert names(run([claim(exactly(count=2))], node)) == ["gpu-0", "gpu-1"]
    # Two members' claims (one claim each) do not fit a node of two devices ...
    two = run([claim(exactly(count=2), name="a"), claim(exactly(count=2), name="b")], node)
    assert isinstance(two, NoFit)
    assert two.message == "claim ml/b, request gpus: needs 2 × gpu, 0 free device(s) match"
    # ... nor does one when a device is taken (allocated or reserved).
    one = run([claim(exactly(count=2))], node, {node[0].key})
    assert isinstance(one, NoFit) and "needs 2 × gpu, 1 free device(s) match" in one.message


def test_selectors_on_an_attribute_and_a_capacity_choose_only_matching_devices() -> None:
    node = devices({"model": "t4", "memory": "16Gi"}, {"model": "a100", "memory": "40Gi"},
                   {"model": "a100", "memory": "80Gi"})
    by_model = exactly(selectors=[{"cel": {"expression":
                       f'device.attributes["{DRIVER}"].model == "a100"'}}])
    by_memory = exactly(selectors=[{"cel": {"expression":
                        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'}}])
    assert names(run([claim(by_model)], node)) == ["gpu-1"]
    assert names(run([claim(by_memory)], node)) == ["gpu-2"]


def test_all_takes_every_matching_device_and_fails_if_one_is_allocated() -> None:
    node = devices({}, {}, {}) + devices({}, driver="nic.example.com")
    every = claim({"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                               "allocationMode": "All"}})
    assert names(run([every], node)) == ["gpu-0", "gpu-1", "gpu-2"]
    partly = run([every], node, {node[1].key})
    assert isinstance(partly, NoFit) and "some are allocated" in partly.message
    none = run([every], devices({}, driver="nic.example.com"))
    assert isinstance(none, NoFit) and "no device matches" in none.message


def test_first_available_takes_the_first_alternative_that_satisfies_the_pod() -> None:
    node = devices({}, {})
    alternatives = {"name": "gpus", "firstAvailable": [
        {"name": "four", "deviceClassName": "gpu", "count": 4},
        {"name": "two", "deviceClassName": "gpu", "count": 2},
        {"name": "one", "deviceClassName": "gpu", "count": 1}]}
    fit = run([claim(alternatives)], node)
    assert isinstance(fit, Fit) and [r for _, r, _ in fit.chosen] == ["gpus/two", "gpus/two"]
    # "two" fits the request alone, but leaves nothing for the next claim: "one" is used.
    both = run([claim(alternatives, name="a"), claim(exactly(), name="b")], node)
    assert isinstance(both, Fit)
    assert [r for _, r, _ in both.chosen] == ["gpus/one", "gpus"]


def test_match_attribute_finds_devices_a_greedy_choice_misses() -> None:
    node = devices({"numa": 0}, {"numa": 1}, {"numa": 2}, {"numa": 1})
    same_numa = claim(exactly(count=2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert names(run([same_numa], node)) == ["gpu-1", "gpu-3"]
    # Across requests: a GPU and a second request's GPU on one NUMA node.
    two_requests = claim(exactly("a"), exactly("b"), constraints=[
        {"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}])
    assert names(run([two_requests], node, {node[0].key})) == ["gpu-1", "gpu-3"]
    # A device without the attribute cannot be used under the constraint.
    assert isinstance(run([same_numa], devices({}, {})), NoFit)


def test_match_attribute_on_list_attributes_needs_a_common_element() -> None:
    node = devices({"links": [1, 2]}, {"links": [3]}, {"links": [2, 3]})
    c = claim(exactly(count=2), constraints=[{"matchAttribute": f"{DRIVER}/links"}])
    assert names(run([c], node)) == ["gpu-0", "gpu-2"]
    three = claim(exactly(count=3), constraints=[{"matchAttribute": f"{DRIVER}/links"}])
    assert isinstance(run([three], node), NoFit)  # pairwise common, not common to all


def test_distinct_attribute_needs_pairwise_different_values() -> None:
    node = devices({"nic": 0}, {"nic": 0}, {"nic": 1})
    c = claim(exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/nic"}])
    assert names(run([c], node)) == ["gpu-0", "gpu-2"]


def test_tainted_devices_are_not_used_and_admin_access_uses_allocated_ones() -> None:
    tainted = devices({}, taints=[{"key": "broken", "effect": "NoExecute"}])
    assert isinstance(run([claim(exactly())], tainted), NoFit)
    harmless = devices({}, taints=[{"key": "note", "effect": "None"}])
    assert names(run([claim(exactly())], harmless)) == ["gpu-0"]
    node = devices({})
    admin = claim(exactly(adminAccess=True))
    assert names(run([admin], node, {node[0].key})) == ["gpu-0"]


def test_an_allocated_claim_fits_only_where_its_devices_are() -> None:
    node = devices({}, {})
    here = claim(exactly(), allocated=[node[1].key])
    assert run([here], node) == Fit(())
    elsewhere = claim(exactly(), allocated=[(DRIVER, "node-2", "gpu-0")])
    result = run([elsewhere], node)
    assert isinstance(result, NoFit) and "not a device of this node" in result.message


def test_an_unknown_class_and_a_failing_selector_are_named() -> None:
    node = devices({})
    unknown = run([claim(exactly(cls="tpu"))], node)
    assert isinstance(unknown, NoFit) and "device class 'tpu' does not exist" in unknown.message
    failing = run([claim(exactly(selectors=[{"cel": {"expression":
                  f'device.attributes["{DRIVER}"].model == "a100"'}}]))], node)
    assert isinstance(failing, NoFit) and "Key not found" in failing.message


def test_the_search_is_bounded() -> None:
    """40 devices on 5 NICs, 6 distinct NICs asked: impossible, and every 5-subset of
    distinct NICs is a dead end, so only the bound stops the search."""
    node = devices(*({"nic": i % 5} for i in range(40)))
    c = claim(exactly(count=6), constraints=[{"distinctAttribute": f"{DRIVER}/nic"}])
    t0 = time.perf_counter()
    result = run([c], node)
    elapsed = time.perf_counter() - t0
    assert isinstance(result, NoFit) and f"stopped after {MAX_CHOICES}" in result.message
    assert elapsed < 0.5, elapsed


@settings(max_examples=200, deadline=None)
@given(numas=st.lists(st.integers(0, 2), min_size=0, max_size=7),
       taken=st.sets(st.integers(0, 6)), count=st.integers(1, 4),
       constrained=st.booleans())
def test_agrees_with_an_exhaustive_search(numas: list[int], taken: set[int], count: int,
                                          constrained: bool) -> None:
    node = devices(*({"numa": n} for n in numas))
    taken_keys = {node[i].key for i in taken if i < len(node)}
    c = claim(exactly(count=count), constraints=(
        [{"matchAttribute": f"{DRIVER}/numa"}] if constrained else []))
    free = [d for d in node if d.key not in taken_keys]
    exists = any(not constrained or len({d.attributes[f"{DRIVER}/numa"].value for d in combo}) == 1
                 for combo in itertools.combinations(free, count))
    result = run([c], node, taken_keys)
    assert isinstance(result, Fit) is exists
    if isinstance(result, Fit):
        chosen = [d for d in node if d.key in result.devices()]
        assert len(chosen) == count and not result.devices() & taken_keys
        if constrained:
            assert len({d.attributes[f"{DRIVER}/numa"].value for d in chosen}) == 1


def test_a_claim_spec_without_requests_fits_anywhere() -> None:
    assert run([Claim("ml/empty", ClaimSpec(()))], []) == Fit(())


def test_classes_are_looked_up_by_name() -> None:
    assert isinstance(CLASSES["gpu"], DeviceClass)

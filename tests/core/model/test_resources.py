"""Quantities and pod requests. Expected values are worked out by hand from
component-helpers' PodRequests (v1.36), step by step in the comments."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.core.model import resources as resources_mod
from extender.core.model.resources import (
    add,
    fits,
    format_amount,
    format_resources,
    parse_quantity,
    parse_resource_list,
    pod_requests,
    shortfall,
    sub,
    to_units,
)

Ki, Mi, Gi = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("1", 1),
        ("100m", Fraction(1, 10)),
        ("1500m", Fraction(3, 2)),
        ("1.5", Fraction(3, 2)),
        ("5.", 5),
        (".5", Fraction(1, 2)),
        ("+2", 2),
        ("-2", -2),
        ("12n", Fraction(12, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("2k", 2000),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),  # exa, not an exponent
        ("1Ki", Ki),
        ("316Mi", 316 * Mi),
        ("1.5Gi", 3 * Gi // 2),
        ("1Ti", 1 << 40),
        ("1Pi", 1 << 50),
        ("1Ei", 1 << 60),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1.5e-3", Fraction(15, 10**4)),
        ("2e+2", 200),
        (7, 7),
        (0.1, Fraction(1, 10)),
        (2.5, Fraction(5, 2)),
    ],
)
def test_parse_quantity(text: str | int | float, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1e", "1K", "1 ", " 1", ".", "1.2.3", "Ki", "1Kii", "1mi", "--1", "1e1.5", "٣"],
)
def test_parse_quantity_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match=r"invalid quantity '.*'"):
        parse_quantity(text)


@pytest.mark.parametrize("bad", [True, None, float("nan"), float("inf"), [1], {"a": 1}])
def test_parse_quantity_rejects_non_quantities(bad: Any) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(bad)


def test_to_units_rounds_up_like_milli_value_and_value() -> None:
    assert to_units("cpu", parse_quantity("100m")) == 100
    assert to_units("cpu", parse_quantity("1")) == 1000
    assert to_units("cpu", parse_quantity("1n")) == 1  # MilliValue rounds up
    assert to_units("memory", parse_quantity("1.5")) == 2  # Value rounds up
    assert to_units("memory", parse_quantity("1Gi")) == Gi
    assert to_units("nvidia.com/gpu", parse_quantity("4")) == 4


def test_parse_resource_list() -> None:
    assert parse_resource_list(None) == {}
    assert parse_resource_list({"cpu": "8", "memory": "32Gi", "pods": "110"}) == {
        "cpu": 8000,
        "memory": 32 * Gi,
        "pods": 110,
    }
    with pytest.raises(ValueError, match="invalid quantity 'x' for memory"):
        parse_resource_list({"memory": "x"})
    with pytest.raises(ValueError, match="negative quantity '-1' for cpu"):
        parse_resource_list({"cpu": "-1"})
    with pytest.raises(ValueError, match="must be an object"):
        parse_resource_list(["cpu"])  # type: ignore[arg-type]


# ----- pod_requests --------------------------------------------------------------------


def c(requests: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "c", **kw}
    if requests is not None:
        out.setdefault("resources", {})["requests"] = requests
    return out


def sidecar(requests: dict[str, str]) -> dict[str, Any]:
    return c(requests, restartPolicy="Always")


def test_pod_requests_sums_containers_and_counts_one_pod() -> None:
    spec = {"containers": [c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "500m"}), c()]}
    assert pod_requests(spec) == {"cpu": 1500, "memory": Gi, "pods": 1}


def test_pod_requests_without_requests_is_just_a_pod() -> None:
    assert pod_requests({"containers": [c()]}) == {"pods": 1}
    assert pod_requests({}) == {"pods": 1}


def test_pod_requests_ignores_requested_pods_and_zero_amounts() -> None:
    spec = {"containers": [c({"pods": "5", "cpu": "0", "nvidia.com/gpu": "0", "memory": "1"})]}
    assert pod_requests(spec) == {"memory": 1, "pods": 1}


def test_pod_requests_defaults_requests_from_limits() -> None:
    # API server defaulting: a limit without a request is also the request.
    spec = {
        "containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4"}}},
        ]
    }
    assert pod_requests(spec) == {"cpu": 3000, "nvidia.com/gpu": 1, "pods": 1}


def test_pod_requests_rounds_the_exact_sum_once() -> None:
    # 0.1m + 0.1m = 0.2m -> MilliValue 1 (rounding each container first would give 2).
    spec = {"containers": [c({"cpu": "100u"}), c({"cpu": "100u"})]}
    assert pod_requests(spec)["cpu"] == 1


def test_pod_requests_regular_init_containers_take_the_max() -> None:
    # containers: cpu 1.5, memory 1Gi; init: cpu 2 then memory 3Gi (one at a time).
    # max per resource: cpu max(1.5, 2) = 2; memory max(1Gi, 3Gi) = 3Gi.
    spec = {
        "containers": [c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "500m"})],
        "initContainers": [c({"cpu": "2"}), c({"memory": "3Gi"})],
    }
    assert pod_requests(spec) == {"cpu": 2000, "memory": 3 * Gi, "pods": 1}


def test_pod_requests_sidecars_accumulate() -> None:
    # containers: cpu 1, memory 1Gi.
    # init, in order (running sidecar sum S, steady sum T, init max M):
    #   A sidecar cpu 500m mem 100Mi: T = 1.5 / 1Gi+100Mi; S = 0.5 / 100Mi; M = 0.5 / 100Mi
    #   B regular cpu 3:               step = 3.5 / 100Mi;    M = 3.5 / 100Mi
    #   C sidecar cpu 1 mem 200Mi:     T = 2.5 / 1Gi+300Mi; S = 1.5 / 300Mi; M = 3.5 / 300Mi
    #   D regular mem 2Gi:             step = 1.5 / 2Gi+300Mi; M = 3.5 / 2Gi+300Mi
    # result = max(T, M) = cpu 3.5, memory 2Gi+300Mi
    spec = {
        "containers": [c({"cpu": "1", "memory": "1Gi"})],
        "initContainers": [
            sidecar({"cpu": "500m", "memory": "100Mi"}),
            c({"cpu": "3"}),
            sidecar({"cpu": "1", "memory": "200Mi"}),
            c({"memory": "2Gi"}),
        ],
    }
    assert pod_requests(spec) == {"cpu": 3500, "memory": 2 * Gi + 300 * Mi, "pods": 1}


def test_pod_requests_sidecar_started_after_a_regular_init_does_not_count_for_it() -> None:
    # containers: cpu 1.5. init: regular cpu 2 (no sidecar running yet: step 2), then
    # sidecar cpu 1 (T = 1.5 + 1 = 2.5, step 1). max(T = 2.5, M = 2) = 2.5.
    spec = {
        "containers": [c({"cpu": "1500m"})],
        "initContainers": [c({"cpu": "2"}), sidecar({"cpu": "1"})],
    }
    assert pod_requests(spec) == {"cpu": 2500, "pods": 1}


def test_pod_requests_overhead_is_added_after_the_max() -> None:
    # max(container 1, init 2) = 2, + overhead 250m = 2.25; memory 1Gi + 120Mi.
    spec = {
        "containers": [c({"cpu": "1", "memory": "1Gi"})],
        "initContainers": [c({"cpu": "2"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert pod_requests(spec) == {"cpu": 2250, "memory": Gi + 120 * Mi, "pods": 1}


def test_pod_requests_pod_level_resources_override_cpu_memory_only() -> None:
    # Pod-level cpu/memory replace the aggregate (6 cpu from the init container
    # included); the gpu and ephemeral-storage stay from the containers; pod-level
    # ephemeral-storage is not a supported pod-level resource and is ignored;
    # overhead is added on top.
    spec = {
        "containers": [c({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"})],
        "initContainers": [c({"cpu": "6", "ephemeral-storage": "1Gi"})],
        "resources": {"requests": {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "5Gi"}},
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {
        "cpu": 4100,
        "memory": 8 * Gi,
        "nvidia.com/gpu": 2,
        "ephemeral-storage": Gi,
        "pods": 1,
    }


def test_pod_requests_pod_level_hugepages_are_supported() -> None:
    spec = {
        "containers": [c({"cpu": "1"})],
        "resources": {"requests": {"hugepages-2Mi": "4Mi"}},
    }
    assert pod_requests(spec) == {"cpu": 1000, "hugepages-2Mi": 4 * Mi, "pods": 1}


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"containers": "x"}, "spec.containers must be a list"),
        ({"containers": ["x"]}, r"spec.containers\[0\] must be an object"),
        ({"containers": [{"resources": []}]}, r"spec.containers\[0\].resources must be"),
        ({"containers": [c({"cpu": "abc"})]}, "invalid quantity 'abc' for cpu"),
        ({"initContainers": [c({"memory": "1Q"})]}, "invalid quantity '1Q' for memory"),
        ({"overhead": {"cpu": "-1"}}, "negative quantity '-1' for cpu"),
        ({"resources": "big"}, "spec.resources must be an object"),
    ],
)
def test_pod_requests_rejects_malformed_specs(spec: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pod_requests(spec)


# ----- arithmetic and formatting -------------------------------------------------------


def test_arithmetic() -> None:
    a = {"cpu": 1000, "memory": Gi}
    b = {"cpu": 500, "nvidia.com/gpu": 1}
    assert add(a, b) == {"cpu": 1500, "memory": Gi, "nvidia.com/gpu": 1}
    assert sub(a, b) == {"cpu": 500, "memory": Gi, "nvidia.com/gpu": -1}
    assert a == {"cpu": 1000, "memory": Gi}  # inputs untouched


def test_fits_and_shortfall() -> None:
    free = {"cpu": 1000, "memory": Gi, "pods": 1}
    assert fits({"cpu": 1000, "memory": Gi, "pods": 1}, free)
    assert not fits({"cpu": 1001}, free)
    assert not fits({"nvidia.com/gpu": 1}, free)  # absent means none free
    assert fits({"nvidia.com/gpu": 0}, free)  # zero requests always fit
    assert fits({}, {})
    assert shortfall({"cpu": 1500, "memory": Gi, "nvidia.com/gpu": 2}, free) == {
        "cpu": 500,
        "nvidia.com/gpu": 2,
    }
    assert shortfall({"cpu": 0, "memory": 1}, free) == {}


def test_format_resources() -> None:
    r = {"nvidia.com/gpu": 4, "memory": 316 * Mi, "cpu": 1000, "pods": 1}
    assert format_resources(r) == "{cpu: 1, memory: 316Mi, nvidia.com/gpu: 4}"
    assert (
        format_resources(r, skip_pods=False)
        == "{cpu: 1, memory: 316Mi, nvidia.com/gpu: 4, pods: 1}"
    )
    assert format_resources({"cpu": 500}) == "{cpu: 500m}"
    assert format_resources({"cpu": 2500}) == "{cpu: 2500m}"
    assert format_resources({"memory": 1536 * Mi}) == "{memory: 1536Mi}"
    assert format_resources({"memory": 3 * Gi}) == "{memory: 3Gi}"
    assert format_resources({"memory": 10**9}) == "{memory: 1000000000}"
    assert format_resources({"ephemeral-storage": 2 * Ki, "a/x": 1, "b": 2}) == (
        "{a/x: 1, b: 2, ephemeral-storage: 2Ki}"
    )
    assert format_resources({"hugepages-2Mi": 4 * Mi}) == "{hugepages-2Mi: 4Mi}"
    assert format_resources({}) == "{}"


@given(st.integers(min_value=0, max_value=(1 << 63) - 1),
       st.sampled_from(["cpu", "memory", "x/y"]))
def test_formatted_amounts_parse_back(v: int, name: str) -> None:
    assert to_units(name, parse_quantity(format_amount(name, v))) == v


@given(st.integers(min_value=1 << 63, max_value=1 << 70), st.sampled_from(["cpu", "memory"]))
def test_amounts_beyond_int64_are_named_not_spelled_out(v: int, name: str) -> None:
    assert format_amount(name, v) == "beyond int64"


_QUANTITIES = st.sampled_from(["100m", "1", "0.5", "64Mi", "1Gi", "2", "0", "1500m", "3e3"])
_RESOURCE_LISTS = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]),
                                  _QUANTITIES, max_size=3)


@given(_RESOURCE_LISTS, st.one_of(st.none(), _RESOURCE_LISTS))
def test_pod_requests_of_one_container_memoized_is_the_general_computation(
        requests: dict[str, str], limits: dict[str, str] | None) -> None:
    """The single-container memo (`_one_container`) answers what the general path does,
    and hands out copies: a caller changing its result changes nobody else's."""
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    spec = {"containers": [{"name": "c", "resources": resources}]}
    first = pod_requests(spec)
    assert first == resources_mod._pod_requests(spec)
    first["cpu"] = -1
    assert pod_requests(spec) == resources_mod._pod_requests(spec)


def test_pod_requests_memo_is_bypassed_by_what_it_cannot_key() -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        pod_requests({"containers": [{"resources": {"requests": {"cpu": True}}}]})
    assert pod_requests({"containers": [{"resources": {"requests": {"cpu": 1}}}]}) == {
        "cpu": 1000, "pods": 1}
    with pytest.raises(ValueError, match="invalid quantity"):  # True == 1: no shared entry
        pod_requests({"containers": [{"resources": {"requests": {"cpu": True}}}]})
    with pytest.raises(ValueError, match="invalid quantity"):
        pod_requests({"containers": [{"resources": {"requests": {"cpu": ["1"]}}}]})
    with pytest.raises(ValueError, match=r"spec.containers\[0\].resources must be an object"):
        pod_requests({"containers": [{"resources": ["x"]}]})

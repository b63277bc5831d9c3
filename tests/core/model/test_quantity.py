"""Quantities as Kubernetes holds them, at a cost linear in their text (issue 27: one
PodGroup's `minResources: {cpu: "1e30000000"}` stalled the extender for 33 s).

The expected values are facts about apimachinery's `resource.Quantity` (v0.36): its
tests' expectations for parsing, rounding and capping, restated here as numbers; the
property test compares the parser with the same rules applied to the exact value."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from fractions import Fraction
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.core.model.resources import (
    SATURATED,
    parse_quantity,
    parse_resource_list,
    pod_requests,
    to_units,
)

INT64_MAX = (1 << 63) - 1
N = Fraction(1, 10**9)  # one nano, the smallest amount Kubernetes keeps
Ki, Mi, Gi = 1 << 10, 1 << 20, 1 << 30

# ----- agreement with Kubernetes --------------------------------------------------------

# (text, the value a Quantity parsed from it holds), for values within int64.
KUBERNETES_VALUES: list[tuple[str, Fraction | int]] = [
    ("0", 0), ("0n", 0), ("0Ki", 0), ("0T", 0), ("-0", 0), ("0e99", 0),
    ("1", 1), ("8Ki", 8 * Ki), ("7Mi", 7 * Mi), ("6Gi", 6 * Gi), ("5Ti", 5 << 40),
    ("4Pi", 4 << 50), ("3Ei", 3 << 60), ("100Ti", 100 << 40),
    ("5n", 5 * N), ("4u", Fraction(4, 10**6)), ("3m", Fraction(3, 1000)), ("50k", 50_000),
    ("7M", 7 * 10**6), ("6G", 6 * 10**9), ("300T", 3 * 10**14), ("2P", 2 * 10**15),
    ("1E", 10**18),  # exa, not an exponent
    ("1E-3", Fraction(1, 1000)), ("1e3", 1000), ("1E18", 10**18), ("1.3E+6", 1_300_000),
    ("1.7E18", 17 * 10**17), ("100.035k", 100_035), ("0.0005k", Fraction(1, 2)),
    ("0.5e-2", Fraction(5, 1000)), ("6.987654321G", 6_987_654_321), ("1.01E", 101 * 10**16),
    # Rounded up, away from zero, to a whole nano.
    ("3.001n", 4 * N), ("1.1E-9", 2 * N), ("0.0000000001", N), ("0.0000000005", N),
    ("0.5e-9", N), ("0.9n", N), ("0.00000012345", 124 * N), ("0.00000012354", 124 * N),
    ("-3.001n", -4 * N), ("1e-30", N),
    # Binary amounts: fractions allowed, capped at 2^63-1.
    ("100.035Ki", Fraction(10243584, 100)), ("0.5Mi", Mi // 2),
    ("0.05Gi", Fraction(536870912, 10)), ("0.000000000001Ki", 2 * N),
    ("9Ei", INT64_MAX), ("9223372036854775807Ki", INT64_MAX),
    # Spellings Kubernetes accepts.
    (".001", Fraction(1, 1000)), (".0001k", Fraction(1, 10)), ("1.", 1), ("1.G", 10**9),
    ("+2", 2), ("1e+000003", 1000),
    # The edges of int64.
    ("999999999999999999.1", Fraction(9999999999999999991, 10)),
    ("9223372036854775807", INT64_MAX), ("9223372036854775806.1", INT64_MAX - Fraction(9, 10)),
    ("9223372036854775807000m", INT64_MAX), ("-9223372036854775807", -INT64_MAX),
]

# Values Kubernetes holds exactly, or misreads, but that no int64 holds in any unit
# kube-scheduler counts in: more than any node has.
BEYOND_INT64 = [
    "12E", "10E", "9223372036854775808", "9223372036854775807.1", "9223372036854775808000m",
    "9999999999999999999", "1e19", "1e400", "1e30000000",
    "1e2147483648",  # Kubernetes truncates the exponent to int32 and reads 1e-2147483648
    "1e-2147483648",  # Kubernetes negates the scale in int32 and reads a huge number
]

# Rejected by `ParseQuantity`, and here (the last: an exponent beyond int64).
INVALID = ["1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
           " 1", "1 ", "", "1e", "1Ki3", "1e1.5", "1e99999999999999999999"]


@pytest.mark.parametrize(("text", "value"), KUBERNETES_VALUES)
def test_values_are_those_kubernetes_holds(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text) == value
    if not text.startswith("-"):
        assert parse_quantity("-" + text.lstrip("+")) == -value


@pytest.mark.parametrize("text", BEYOND_INT64)
def test_values_beyond_int64_saturate(text: str) -> None:
    assert parse_quantity(text) == SATURATED
    assert parse_quantity("-" + text) == -SATURATED
    assert to_units("cpu", parse_quantity(text)) == SATURATED
    assert to_units("memory", parse_quantity(text)) == SATURATED


@pytest.mark.parametrize("text", INVALID)
def test_what_kubernetes_rejects_is_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "milli_value", "value"),
    [("1n", 1, 1), ("1u", 1, 1), ("1m", 1, 1), ("1", 1000, 1), ("9.01", 9010, 10),
     ("100Ki", 102_400_000, 102_400), ("1.5Gi", 1_610_612_736_000, 1_610_612_736),
     ("9223372036854775807", SATURATED, INT64_MAX), ("16Ei", SATURATED, INT64_MAX)],
)
def test_units_are_milli_value_and_value(text: str, milli_value: int, value: int) -> None:
    """cpu in `MilliValue()`, the rest in `Value()`, both rounded up; what overflows
    int64 in Kubernetes saturates here."""
    assert to_units("cpu", parse_quantity(text)) == milli_value
    assert to_units("memory", parse_quantity(text)) == value


_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DIGITS = st.text("0000000123456789", max_size=30)


def kubernetes_rules(negative: bool, whole: str, frac: str, suffix: str, e: int) -> Fraction:
    """apimachinery's rules applied to the exact value, the slow way: round the
    magnitude up to a nano, cap a binary amount at 2^63-1; beyond int64, saturate."""
    exact = Fraction(int(whole + frac or "0"), 10 ** len(frac))
    if suffix in _BINARY:
        exact *= 1 << _BINARY[suffix]
    else:
        exact *= Fraction(10) ** (e if suffix == "e" else _DECIMAL[suffix])
    value = Fraction(math.ceil(exact * 10**9), 10**9)
    if suffix in _BINARY:
        value = min(value, Fraction(INT64_MAX))
    elif value > INT64_MAX:
        value = Fraction(SATURATED)
    return -value if negative else value


@given(st.booleans(), _DIGITS, st.one_of(st.none(), _DIGITS),
       st.sampled_from([*_DECIMAL, *_BINARY, "e"]), st.integers(-45, 45))
def test_agrees_with_kubernetes_rules_on_every_value(
        negative: bool, whole: str, frac: str | None, suffix: str, e: int) -> None:
    if not whole and not frac:
        whole = "0"
    text = ("-" if negative else "") + whole + ("" if frac is None else "." + frac)
    text += f"e{e}" if suffix == "e" else suffix
    assert parse_quantity(text) == kubernetes_rules(negative, whole, frac or "", suffix, e)


@given(st.integers(-(1 << 70), 1 << 70))
def test_integers_agree_with_their_text(n: int) -> None:
    assert parse_quantity(n) == parse_quantity(str(n))


def test_json_numbers_follow_the_same_rules() -> None:
    assert parse_quantity(1e300) == SATURATED
    assert parse_quantity(-1e300) == -SATURATED
    assert parse_quantity(1e-300) == N
    assert parse_quantity(1 << 64) == SATURATED
    assert parse_quantity(0.1) == Fraction(1, 10)


# ----- cost linear in the text ------------------------------------------------------------


def _seconds(f: Callable[[], object]) -> float:
    t = time.perf_counter()
    with contextlib.suppress(ValueError):
        f()
    return time.perf_counter() - t


def _best(texts: list[str]) -> float:
    """The fastest parse of these (distinct texts, so that no memo answers)."""
    return min(_seconds(partial(parse_quantity, s)) for s in texts)


def _within(texts: list[str], bound: float) -> float:
    """The first parse of these that stays within `bound`, else the last one timed;
    a run far beyond the bound is no noise, and is not repeated."""
    t = math.inf
    for s in texts:
        t = _seconds(partial(parse_quantity, s))
        if t <= bound or t > 100 * bound:
            break
    return t


def test_a_huge_exponent_costs_what_an_ordinary_quantity_does() -> None:
    """The issue's PodGroup: "1e30000000" took 33 s of CPU. Bound: 50 parses of an
    ordinary quantity, measured here (a generous margin for a busy machine)."""
    ordinary = _best([f"{i}500m" for i in range(1, 30)])
    for hostile in ("1e3000000{}", "1e-3000000{}"):
        t = _within([hostile.format(k) for k in range(5)], 50 * ordinary + 1e-4)
        assert t <= 50 * ordinary + 1e-4, (hostile, t, ordinary)


SHAPES: dict[str, Callable[[int, int], str]] = {
    "long integer": lambda k, n: f"{k}" + "0" * n,
    "long fraction": lambda k, n: "0." + "0" * n + f"{k}",
    "long binary fraction": lambda k, n: f"{k}." + "3" * n + "Ki",
    "exponent with leading zeros": lambda k, n: f"{k}e" + "0" * n + "3",
    "digits then a bad character": lambda k, n: f"{k}" * n + "x",
    "fraction then a second point": lambda k, n: f"{k}." + f"{k}" * n + ".",
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("n", "factor"), [(1000, 32), (10_000, 1000)])
def test_cost_grows_linearly_with_the_length(shape: str, n: int, factor: int) -> None:
    """A text `factor` times longer costs at most 16 x `factor` times more (a quadratic
    parse: `factor` squared; the margin is for a busy machine and for 10 MB, which no
    processor cache holds); 10 MB of digits are read in a few passes."""
    make = SHAPES[shape]
    small = _best([make(k, n) for k in range(1, 8)])
    big = [make(k, n * factor) for k in range(1, 4)]
    bound = 16 * factor * small + 1e-3
    assert _within(big, bound) <= bound, (shape, small)


def test_long_texts_keep_their_meaning() -> None:
    zeros = "0" * 10_000_000
    assert parse_quantity("1" + zeros) == SATURATED
    assert parse_quantity("0." + zeros + "1") == N
    assert parse_quantity("1e" + zeros + "3") == 1000
    assert parse_quantity("0." + zeros + "1Ki") == N
    assert parse_quantity("1." + zeros) == 1
    with pytest.raises(ValueError, match=r"invalid quantity '1111.*\(10000001 characters\)'"):
        parse_quantity("1" * 10_000_000 + "x")  # the message does not hold the text


# ----- saturated amounts: more than any node has ---------------------------------------------


def test_a_saturated_request_or_minimum_is_one_sentinel() -> None:
    assert parse_resource_list({"cpu": "1e30000000", "memory": "1e30000000"}) == {
        "cpu": SATURATED, "memory": SATURATED}
    # Each container fits int64, their sum does not.
    spec = {"containers": [{"resources": {"requests": {"memory": "5E"}}}] * 2}
    assert pod_requests(spec)["memory"] == SATURATED
    # Within int64 as a plain value, beyond it in millicores.
    assert pod_requests({"containers": [{"resources": {"requests": {
        "cpu": "9223372036854775807"}}}]})["cpu"] == SATURATED


def test_a_node_capacity_beyond_int64_is_capped_below_any_saturated_request() -> None:
    assert parse_resource_list({"cpu": "1e30000000"}, capacity=True) == {"cpu": INT64_MAX}
    assert parse_resource_list({"memory": "16Ei"}, capacity=True) == {"memory": INT64_MAX}


def test_a_resource_name_longer_than_a_qualified_name_is_rejected_in_short() -> None:
    name = "example.com/" + "x" * 1_000_000
    with pytest.raises(ValueError, match=r"resource name example\.com/x+\.\.\.\(1000012 "
                                         r"characters\) is longer than 317 characters"):
        parse_resource_list({name: "1"})
    assert parse_resource_list({"a" * 253 + "/" + "b" * 63: "1"}) == {"a" * 253 + "/" + "b" * 63: 1}


def test_negative_hostile_amounts_are_rejected_with_a_short_message() -> None:
    with pytest.raises(ValueError, match="negative quantity '-1e30000000' for cpu"):
        parse_resource_list({"cpu": "-1e30000000"})
    with pytest.raises(ValueError) as err:
        parse_resource_list({"cpu": "-" + "9" * 1_000_000})
    assert len(str(err.value)) < 100

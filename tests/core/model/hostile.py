"""Hostile mutations of valid Kubernetes objects, for the converters' property tests
(test_convert_hostile.py here, tests/core/devices/test_model_hostile.py,
tests/wire/test_wire_hostile.py).

Every converter promises one thing about input it cannot read: a `ValueError` whose
message names the object ("podgroup ml/trainer: spec.minMember must be ..."), never any
other exception, so that the informer can log and skip one object and the HTTP verbs
can answer with an error. Random JSON rarely gets past the first field a converter
reads; a valid object changed in one to three places reaches every field, and so does
what a careless or hostile user can write: any key deleted, any value replaced by one
of another JSON type, numbers and quantities at the edges of what Kubernetes reads,
unicode and megabyte strings, a list entry repeated, and values nested as deep as a
JSON decoder lets through (orjson, which reads every list page, watch line and request
body, accepts 1,024 levels).

The settings are the house style of the repo's other property tests (derandomized, so
CI sees the same examples every run, no example database); `HOSTILE_EXAMPLES=5000`
runs a longer campaign, `HOSTILE_RANDOM=1` new examples.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = ["DEEP", "assert_named_or_value", "every_replacement", "hostile_settings", "killers",
           "mutate", "paths"]

# As deep as orjson decodes (it refuses 1,025 levels): what the informer and the HTTP
# verbs can hand a converter.
DEEP = 1000
# A log line, not a copy of the object: values in messages are cut (`fields.shown`).
MAX_MESSAGE = 2000


def hostile_settings(examples: int = 200) -> settings:
    """Modest and derandomized by default: each test takes a few seconds."""
    many = os.environ.get("HOSTILE_EXAMPLES")
    return settings(
        max_examples=int(many) if many else examples,
        # A conversion is microseconds; a second means a stall (a quantity or a regex
        # whose cost grows with its text), which is a failure of its own.
        deadline=1000,
        derandomize=not os.environ.get("HOSTILE_RANDOM"),
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture],
    )


def _nested_list(depth: int) -> list[Any]:
    v: list[Any] = []
    for _ in range(depth - 1):
        v = [v]
    return v


def _nested_dict(depth: int) -> dict[str, Any]:
    v: dict[str, Any] = {}
    for _ in range(depth - 1):
        v = {"a": v}
    return v


# Quantities and numbers at the edges of what `resource.Quantity` and int64 read.
QUANTITIES = ["1e400", "-1", "NaN", "nan", "Inf", "0.000000001m", "9999999999999Ei",
              "1e9223372036854775807", "1e-9223372036854775808", "1e30000000", "+.5", ".",
              "1E", "1e", "0x10", "1_000", " 1", "1\n", "１２", "-0", "1.5Gi", "100m",
              "9" * 400, "0." + "0" * 400 + "1", "1" + "0" * 5000 + "m"]
# Times a status or metadata may hold, valid or not.
TIMES = ["2026-13-01T00:00:00Z", "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59",
         "2026-11-29T12:00:00.123456789Z", "2026-11-29", "yesterday", "T"]
STRINGS = ["", " ", "\x00", "\ud800", "é/ü", "🙂" * 3, "a/b/c", "In", "Exists", "Never",
           "PreemptLowerPriority", "DoNotSchedule", "True", "False", "All", "ExactCount",
           "InOrder", "Ready", "Complete", "per-job", "per-replicated-job", "off", "all",
           "single", "PodGroup", "Pod", "NoSchedule", "kubernetes.io/hostname",
           *QUANTITIES, *TIMES]

_scalars = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**400,
                     0.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf")]),
    st.integers(), st.floats(),
    st.sampled_from(STRINGS),
    st.text(max_size=8),
    st.sampled_from([1 << 16, 1 << 20]).map(lambda n: "x" * n),  # a megabyte string
)


def _hostile(original: Any) -> st.SearchStrategy[Any]:
    """A value to put where `original` was: of another JSON type, at an edge, the
    original wrapped or repeated, or nested as deep as a decoder lets through. Each
    family is drawn as often as the others (a plain `one_of` would favour the first)."""
    families: list[st.SearchStrategy[Any]] = [
        _scalars,
        st.sampled_from([[], {}, [None], {"": None}]),
        st.sampled_from([[original], {"x": original}, [original, original]]),
        st.sampled_from([_nested_list, _nested_dict]).map(lambda f: f(DEEP)),
        st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["", "a", "name", "key"]), inner,
                                       max_size=3), max_leaves=5),
    ]
    return st.sampled_from(families).flatmap(lambda s: s)


def killers() -> list[Any]:
    """One value of each kind that has broken a converter somewhere: every field of a
    valid object is replaced by each in turn (`every_replacement`)."""
    return [None, True, 2**64, 10**400, -1, float("nan"), "", "x" * (1 << 20), "1e400",
            "\ud800", [], {}, [None], {"": None}, _nested_list(DEEP), _nested_dict(DEEP)]


def every_replacement(valid: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, object): `valid` with one field deleted, or replaced by one of `killers`,
    for every field (the killers are shared: converters only read)."""
    values = (_DELETE, *killers())
    for path in paths(valid)[1:]:
        for value in values:
            obj = copy.deepcopy(valid)
            parent = _parent(obj, path)
            assert parent is not None
            if value is _DELETE:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            yield path, obj


_DELETE = object()


def paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `obj` (keys and list indices from the root), the root first."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths(v, (*prefix, i))
    return out


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    """The container holding `path`'s last step, or None when an earlier change moved
    it (deleted, or replaced by something else)."""
    at = obj
    for step in path[:-1]:
        inside = (step in at if isinstance(at, dict)
                  else isinstance(at, list) and isinstance(step, int) and step < len(at))
        if not inside:
            return None
        at = at[step]
    last = path[-1]
    if isinstance(at, dict) and last in at:
        return at
    if isinstance(at, list) and isinstance(last, int) and last < len(at):
        return at
    return None


def mutate(data: st.DataObject, valid: Any, extra_keys: tuple[str, ...] = ()) -> Any:
    """A copy of `valid` changed in one to three places, each deleted, replaced, or (a
    list entry) repeated; `extra_keys` are fields a converter reads that the valid
    object leaves out, which may be added to any object in it."""
    obj = copy.deepcopy(valid)
    places = paths(obj)[1:]
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        path = data.draw(st.sampled_from(places), label="path")
        parent = _parent(obj, path)
        if parent is None:
            continue
        last = path[-1]
        how = data.draw(st.sampled_from(["delete", "replace", "replace", "repeat", "add"]),
                        label="how")
        if how == "delete":
            del parent[last]
        elif how == "repeat" and isinstance(parent, list):
            parent.insert(last, parent[last])  # shared: converters only read
        elif how == "add" and isinstance(parent[last], dict) and extra_keys:
            key = data.draw(st.sampled_from(extra_keys), label="key")
            parent[last][key] = data.draw(_hostile(None), label="value")
        else:
            parent[last] = data.draw(_hostile(parent[last]), label="value")
    return obj


def assert_named_or_value(convert: Callable[[Any], Any], obj: Any, kind: str) -> None:
    """`convert(obj)` gives a value or a ValueError naming the object ("<kind> ...: ");
    any other exception fails the test as it is."""
    try:
        convert(obj)
    except ValueError as e:
        message = str(e)
        assert message.startswith(kind), f"the error does not name the {kind}: {message[:300]}"
        # The object's own name and namespace are kept whole: they are what names it.
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        names = sum(len(v) for v in (meta.get("name"), meta.get("namespace"))
                    if isinstance(v, str)) if isinstance(meta, dict) else 0
        assert len(message) - names <= MAX_MESSAGE, (
            f"a message of {len(message)} characters: {message[:300]}")

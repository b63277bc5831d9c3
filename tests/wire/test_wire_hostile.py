"""The extender's request bodies, as kube-scheduler sent them (the recorded samples
here), changed in hostile ways (tests/core/model/hostile.py says how) and encoded as
JSON: reading one, as the verbs do (`http._extender_args`, `http._binding_args`: JSON,
then the wire types, then the pod in core terms), gives its arguments or a
`ValueError` (pydantic's ValidationError and orjson's JSONDecodeError are ones), which
the verbs answer with an `Error`; any other exception would escape the verb as a 500."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.core.model.types import PodInfo
from extender.scheduler.http import _binding_args, _extender_args
from tests.core.model.hostile import every_replacement, hostile_settings, mutate
from tests.wire import sample

SAMPLES = [f"nodecachecapable-{mode}.{verb}.request.json"
           for mode in ("true", "false") for verb in ("filter", "prioritize", "bind")]


def _unknown(_uid: str) -> PodInfo | None:
    """No pod is known: every body's pod is converted, as one the watch has not
    delivered yet."""
    return None


def _reader(name: str) -> Callable[[bytes], Any]:
    if name.endswith(".bind.request.json"):
        return _binding_args
    return lambda raw: _extender_args(raw, _unknown)


def _encoded(body: Any) -> bytes:
    """JSON as a client may send it: NaN, 400-digit numbers and lone surrogates
    included, nested 1,000 deep (the encoder's recursion is C's, bounded by Python's
    limit, which the decoder under test does not use)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return json.dumps(body).encode()
    finally:
        sys.setrecursionlimit(limit)


def _read(name: str, body: Any) -> None:
    with contextlib.suppress(ValueError):
        _reader(name)(_encoded(body))


def _body(name: str) -> Any:
    """The sample, its Nodes cut to the first without its managedFields: the rest
    repeat the same shapes, and every field of them would multiply the examples."""
    body = sample(name)
    nodes = body.get("Nodes") if isinstance(body, dict) else None
    if nodes:
        nodes["items"] = nodes["items"][:1]
        nodes["items"][0]["metadata"].pop("managedFields", None)
    return body


@pytest.mark.parametrize("name", SAMPLES)
def test_the_recorded_bodies_are_read(name: str) -> None:
    _reader(name)(_encoded(sample(name)))


@pytest.mark.parametrize("name", SAMPLES)
@hostile_settings(100)
@given(data=st.data())
def test_a_hostile_body_gives_arguments_or_a_value_error(name: str, data: st.DataObject
                                                         ) -> None:
    _read(name, mutate(data, _body(name), ("NodeNames", "Nodes", "items", "priority")))


@pytest.mark.parametrize("name", SAMPLES)
def test_every_field_deleted_or_replaced_by_each_hostile_value(name: str) -> None:
    for path, changed in every_replacement(_body(name)):
        try:
            _read(name, changed)
        except Exception as e:
            raise AssertionError(f"{name} at {path}: {type(e).__name__}: {e}") from e


def test_a_pod_with_a_value_nested_as_deep_as_orjson_reads_is_a_named_error() -> None:
    """Its RecursionError (a repr in the error message) escaped the filter verb as a 500
    before `fields.shown`."""
    body = sample("nodecachecapable-true.filter.request.json")
    body["Pod"]["spec"]["priority"] = "DEEP"
    raw = _encoded(body).replace(b'"DEEP"', b"[" * 1000 + b"]" * 1000)
    with pytest.raises(ValueError, match=r"^pod default/gang-0: spec.priority must be an "
                                         r"integer, got \[\[\[\[\.\.\.\]\]\]\]$"):
        _extender_args(raw, _unknown)

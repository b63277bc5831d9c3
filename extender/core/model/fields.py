"""Typed reads of untrusted Kubernetes JSON, shared by every converter (`convert`,
`convert_groups`): a wrong shape becomes a `ValueError` naming the field, and
`guarded` prefixes it with the object ("pod ml/trainer-0: ..."), so an adapter can
skip one bad object without a catch-all. Values many objects repeat are kept once
(`shared`)."""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

__all__ = ["EMPTY", "as_int", "as_list", "as_obj", "as_str", "as_str_map", "guarded",
           "parse_time", "required_str", "sections", "shared", "shown"]

EMPTY: Mapping[str, Any] = {}
_T = TypeVar("_T")


# ----- values in messages -------------------------------------------------------------

# A plain repr is unsafe on untrusted input: a list nested 1,000 deep (orjson decodes
# 1,024 levels) makes it raise RecursionError, which escaped every converter in place of
# its ValueError, and a 10 MB string becomes a 10 MB log line. reprlib stops at a depth
# and a width instead.
class _Shown(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = self.maxlong = 40
        self.maxlist = self.maxdict = 4


_SHOWN = _Shown()
_SHOWN_MAX = 80


def shown(v: Any) -> str:
    """A value for an error message, as `repr` writes it when it is short, cut to a few
    dozen characters however long or deeply nested it is."""
    try:
        s = _SHOWN.repr(v)
    except ValueError:  # an int beyond the digits Python converts to text
        s = f"<{type(v).__name__}>"
    return s if len(s) <= _SHOWN_MAX else f"{s[:_SHOWN_MAX - 3]}..."


# ----- typed accessors: wrong shapes become ValueError with the field path -----------


# Exact types first: parsed JSON is dicts and lists, and isinstance(v, Mapping) is slow.
def not_an_object(v: Any, where: str) -> ValueError:
    """The one error for a field that must be a JSON object and is not."""
    return ValueError(f"{where} must be an object, got {type(v).__name__}")


def as_obj(v: Any, where: str) -> Mapping[str, Any]:
    if type(v) is dict:
        return v
    if v is None:
        return EMPTY
    if not isinstance(v, Mapping):
        raise not_an_object(v, where)
    return v


def as_list(v: Any, where: str) -> list[Any]:
    if type(v) is list:
        return v
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"{where} must be a list, got {type(v).__name__}")
    return v


def as_str(v: Any, where: str, default: str = "") -> str:
    if type(v) is str:
        return v
    if v is None:
        return default
    if not isinstance(v, str):
        raise ValueError(f"{where} must be a string, got {type(v).__name__}")
    return v


# One copy of each value many objects repeat (namespace, node name, phase, scheduler
# name): 200,000 finished pods kept five of ~60 bytes each. Emptied past `_SHARED_MAX`.
_SHARED: dict[str, str] = {}
_SHARED_MAX = 8192


def shared(v: str) -> str:
    if len(_SHARED) >= _SHARED_MAX and v not in _SHARED:
        _SHARED.clear()
    return _SHARED.setdefault(v, v)


def as_int(v: Any, where: str, default: int) -> int:
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{where} must be an integer, got {shown(v)}")
    return v


def as_str_map(v: Any, where: str) -> dict[str, str]:
    m = as_obj(v, where)
    for k, val in m.items():
        if not isinstance(k, str) or not isinstance(val, str):
            raise ValueError(f"{where} must map strings to strings, got {shown(k)}: {shown(val)}")
    return dict(m)


def parse_time(v: Any, where: str = "timestamp") -> float:
    """RFC 3339 ("2026-11-22T07:14:48Z", fractional seconds and offsets allowed) to
    epoch seconds; absent is 0.0 (the oldest possible, so ordering stays total)."""
    if v is None or v == "":
        return 0.0
    if not isinstance(v, str):
        raise ValueError(f"{where} must be an RFC 3339 string, got {shown(v)}")
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        raise ValueError(f"{where}: invalid RFC 3339 time {shown(v)}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def required_str(v: Any, where: str) -> str:
    """A string the object means nothing without (its name, a uid, a driver): absent and
    empty are one error, "<where> is missing"."""
    s = as_str(v, where)
    if not s:
        raise ValueError(f"{where} is missing")
    return s


def sections(
    obj: Mapping[str, Any],
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str]:
    """An object's metadata, spec and status (empty where absent) and its name, read in
    that order so the first malformed field is the one reported. A nameless object is
    refused: the cache keys every object by its name."""
    meta = as_obj(obj.get("metadata"), "metadata")
    spec = as_obj(obj.get("spec"), "spec")
    status = as_obj(obj.get("status"), "status")
    return meta, spec, status, required_str(meta.get("name"), "metadata.name")


def guarded(kind: str, obj: Any, build: Callable[[Mapping[str, Any], str], _T]) -> _T:
    """Run `build` with the object's name for messages, turning every failure into a
    ValueError prefixed with "<kind> <ns>/<name>: "."""
    ident = kind
    try:
        if type(obj) is not dict and not isinstance(obj, Mapping):
            raise ValueError(f"expected an object, got {type(obj).__name__}")
        meta = obj.get("metadata")
        if type(meta) is dict or isinstance(meta, Mapping):
            name, ns = meta.get("name"), meta.get("namespace")
            if isinstance(name, str):
                ident = f"{kind} {ns}/{name}" if isinstance(ns, str) and ns else f"{kind} {name}"
        return build(obj, ident)
    except ValueError as e:
        raise ValueError(f"{ident}: {e}") from None
    except (TypeError, AttributeError, KeyError, IndexError, OverflowError) as e:
        raise ValueError(f"{ident}: malformed object ({type(e).__name__}: {e})") from None

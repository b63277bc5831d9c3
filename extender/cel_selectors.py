"""DRA device selectors (CEL) evaluated as kube-scheduler evaluates them, so the planner
counts the devices a claim can really get: the `SelectorCompiler` the core's device model
(`extender/core/devices/model.py`) is given. It lives outside the core because the CEL
runtime is a native library; the core only sees `compile_selector` and the compiled
selectors' `matches`.

A DeviceClass and every request of a ResourceClaim may carry CEL expressions over one
`device`: `device.driver`, `device.attributes["<domain>"].<name>`,
`device.capacity["<domain>"].<name>` (a Kubernetes quantity) and
`device.allowMultipleAllocations`. Kubernetes evaluates them with cel-go and its own
libraries (quantities, semantic versions, `cel.bind`, optional fields `.?x`); this
module uses cel-expr-python, the Python binding of CEL's C++ runtime, the same language
with the same macros and extensions, and adds Kubernetes' quantity and semver functions.

Why this library (figures from `python lab/experiments/cel_candidates.py`, 2 shared cores, one
compile / one evaluation of a documented selector; docs/devices.md has the table):

* cel-expr-python 0.1.3: compile 23-80 µs, evaluate 5.5-7.5 µs; accepts all five
  documented shapes, `cel.bind` and `.?` included; bounds parse depth at 32.
* common-expression-language 0.10.0 (Rust): compile 14-26 µs, evaluate 0.3-5 µs, but
  refuses `.?family.orValue(...)` and `cel.bind`, both in the DRA API's documentation.
* cel-python 0.5.0 (pure Python): compile 97-245 µs, evaluate 100-380 µs, refuses the
  same two, and raises the interpreter's recursion limit process-wide when created.

None of the three exposes a cost limit, which kube-scheduler has (1,000,000 per
evaluation). What this module checks instead, once per expression when it is compiled,
before anything is evaluated (`_shape`):

* at most 10 Ki characters, Kubernetes' own limit (`CELSelectorExpressionMaxLength`);
* nesting at most 32 deep (the library refuses deeper; it never overflows the stack);
* no comprehension (`all`, `exists`, `exists_one`, `map`, `filter`, `cel.bind`) inside
  another, and at most `MAX_COMPREHENSIONS` of them: nested loops multiply, and nested
  binds double a value per level (`cel.bind(a, l, cel.bind(b, a + a, ...))`);
* an estimate of the steps, nodes plus each loop's body times its range (a literal's
  length, and `ATTRIBUTE_VALUES` for each other node of the range, as a list can only
  come from a device's attributes) at most `MAX_ESTIMATED_STEPS`.

The worst an accepted expression was measured to cost is in tests/test_cel_selectors.py
(`test_the_costliest_accepted_expression_stays_cheap`). A refused or failing
expression is never an exception out of here: it is a `SelectorError`, and the device
it was evaluated on does not match, which is what kube-scheduler does on an evaluation
error (the allocation on that node aborts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional

from extender.core.devices.model import (
    MAX_VERSION_CHARS,
    QUANTITY_KEY,
    SEMVER_KEY,
    SelectorError,
    quantity_input,
    semver_input,
    semver_ok,
)
from extender.core.model.quantity import INT64_MAX, parse_quantity, shorten

__all__ = [
    "ATTRIBUTE_VALUES",
    "MAX_COMPREHENSIONS",
    "MAX_ESTIMATED_STEPS",
    "MAX_EXPRESSION_CHARS",
    "Selector",
    "compile_selector",
]

MAX_EXPRESSION_CHARS = 10 * 1024
MAX_COMPREHENSIONS = 8
# The most values a device's attributes hold in all (ResourceSliceMaxAttributeValuesPerDevice):
# the longest list a selector can find on a device.
ATTRIBUTE_VALUES = 48
MAX_ESTIMATED_STEPS = 100_000


# ----- quantity and semver values, as Kubernetes' CEL libraries define them ------------


def _q(v: Any) -> Fraction:
    if isinstance(v, dict) and QUANTITY_KEY in v:
        n, d = str(v[QUANTITY_KEY]).split("/")
        return Fraction(int(n), int(d))
    raise ValueError("not a quantity")


def _semver_key(v: Any) -> tuple[Any, ...]:
    text = str(v[SEMVER_KEY])
    core, _, pre = text.partition("-")
    nums = tuple(int(x) for x in core.split("."))
    if not pre:
        return (*nums, 1, ())  # a release sorts after its pre-releases
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (*nums, 0, ids)


def _order(a: Any, b: Any) -> int:
    if isinstance(a, dict) and SEMVER_KEY in a and isinstance(b, dict) and SEMVER_KEY in b:
        ka, kb = _semver_key(a), _semver_key(b)
    else:
        ka, kb = _q(a), _q(b)  # type: ignore[assignment]
    return (ka > kb) - (ka < kb)


def _quantity(s: str) -> dict[str, str]:
    return quantity_input(parse_quantity(s))


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except ValueError:
        return False
    return True


def _semver(s: str) -> dict[str, str]:
    return semver_input(s)


def _is_semver(s: str) -> bool:
    return len(s) <= MAX_VERSION_CHARS and semver_ok(s)


def _as_integer(v: Any) -> int:
    q = _q(v)
    if q.denominator != 1 or abs(q) > INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return int(q)


def _sum(a: Any, b: Any, sign: int) -> dict[str, str]:
    other = Fraction(b) if isinstance(b, int) else _q(b)
    return quantity_input(_q(a) + sign * other)


_M, _I, _S, _B, _D = cel.Type.MAP, cel.Type.INT, cel.Type.STRING, cel.Type.BOOL, cel.Type.DOUBLE


def _member(name: str, ret: Any, args: Sequence[Any], impl: Any, oid: str = "") -> Any:
    return cel.FunctionDecl(name, [cel.Overload(
        oid or f"k8s_{name}", return_type=ret, parameters=[_M, *args], is_member=True,
        impl=impl)])


# Kubernetes' quantity library (k8s.io/apiserver/pkg/cel/library, quantity.go) and the
# comparisons of its semver library, over the one-entry maps above.
_FUNCTIONS = [
    cel.FunctionDecl("quantity", [cel.Overload(
        "k8s_quantity", return_type=_M, parameters=[_S], impl=_quantity)]),
    cel.FunctionDecl("isQuantity", [cel.Overload(
        "k8s_isQuantity", return_type=_B, parameters=[_S], impl=_is_quantity)]),
    cel.FunctionDecl("semver", [cel.Overload(
        "k8s_semver", return_type=_M, parameters=[_S], impl=_semver)]),
    cel.FunctionDecl("isSemver", [cel.Overload(
        "k8s_isSemver", return_type=_B, parameters=[_S], impl=_is_semver)]),
    _member("compareTo", _I, [_M], _order),
    _member("isGreaterThan", _B, [_M], lambda a, b: _order(a, b) > 0),
    _member("isLessThan", _B, [_M], lambda a, b: _order(a, b) < 0),
    _member("sign", _I, [], lambda a: (_q(a) > 0) - (_q(a) < 0)),
    _member("isInteger", _B, [], lambda a: _q(a).denominator == 1 and abs(_q(a)) <= INT64_MAX),
    _member("asInteger", _I, [], _as_integer),
    _member("asApproximateFloat", _D, [], lambda a: float(_q(a))),
    cel.FunctionDecl("add", [
        cel.Overload("k8s_add_quantity", return_type=_M, parameters=[_M, _M], is_member=True,
                     impl=lambda a, b: _sum(a, b, 1)),
        cel.Overload("k8s_add_int", return_type=_M, parameters=[_M, _I], is_member=True,
                     impl=lambda a, b: _sum(a, b, 1)),
    ]),
    cel.FunctionDecl("sub", [
        cel.Overload("k8s_sub_quantity", return_type=_M, parameters=[_M, _M], is_member=True,
                     impl=lambda a, b: _sum(a, b, -1)),
        cel.Overload("k8s_sub_int", return_type=_M, parameters=[_M, _I], is_member=True,
                     impl=lambda a, b: _sum(a, b, -1)),
    ]),
]

_ENV = cel.NewEnv(
    variables={"device": cel.Type.DYN},
    extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional()],
    functions=_FUNCTIONS,
)


# ----- the shape check: a bound on what an expression can cost, before it runs ---------


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's (field, value) pairs, read from the wire without its schema:
    the checked AST the library serializes (cel.expr.CheckedExpr inside an Any) has a
    small, stable schema, and this is all of it that the shape check needs."""
    i, out = 0, []
    while i < len(b):
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        v: int | bytes
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"unexpected wire type {wire}")
        out.append((num, v))
    return out


def _sub(b: bytes, num: int) -> list[bytes]:
    return [v for n, v in _fields(b) if n == num and isinstance(v, bytes)]


# cel.expr.Expr: 3 constant, 4 ident, 5 select, 6 call, 7 list, 8 struct/map, 9 comprehension.
_CONST, _SELECT, _CALL, _LIST, _STRUCT, _COMPREHENSION = 3, 5, 6, 7, 8, 9


@dataclass(slots=True)
class _Shape:
    """What `_walk` counts in one compiled selector, for the refusal checks."""

    nodes: int = 0
    comprehensions: int = 0
    list_elements: int = 0
    loop_steps: int = 0
    strings: set[str] = field(default_factory=set)


def _walk(e: bytes, shape: _Shape, in_comprehension: bool) -> int:
    """Walk one Expr; return its node count; refuse a comprehension inside another."""
    count = 1
    for num, v in _fields(e):
        if not isinstance(v, bytes):
            continue
        if num == _CONST:
            for n, s in _fields(v):
                if n == 6 and isinstance(s, bytes):  # string_value
                    shape.strings.add(s.decode("utf-8", "replace"))
        elif num == _SELECT:
            count += sum(_walk(x, shape, in_comprehension) for x in _sub(v, 1))
        elif num == _CALL:
            count += sum(_walk(x, shape, in_comprehension)
                         for n in (1, 3) for x in _sub(v, n))
        elif num == _LIST:
            elements = _sub(v, 1)
            shape.list_elements += len(elements)
            count += sum(_walk(x, shape, in_comprehension) for x in elements)
        elif num == _STRUCT:
            for entry in _sub(v, 2):
                count += sum(_walk(x, shape, in_comprehension)
                             for n in (3, 4) for x in _sub(entry, n))
        elif num == _COMPREHENSION:
            if in_comprehension:
                raise SelectorError("a comprehension (all, exists, exists_one, map, filter, "
                                    "cel.bind) inside another is not evaluated here")
            shape.comprehensions += 1
            if shape.comprehensions > MAX_COMPREHENSIONS:
                raise SelectorError(f"more than {MAX_COMPREHENSIONS} comprehensions "
                                    "(all, exists, exists_one, map, filter, cel.bind)")
            # The range's length: a literal's elements, and up to ATTRIBUTE_VALUES per
            # other node (a device's list attribute is the only other source of a list:
            # no loop is inside this one, and no function that makes lists is enabled).
            before = shape.list_elements
            range_nodes = sum(_walk(x, shape, True) for x in _sub(v, 2))
            items = shape.list_elements - before
            if items == 0 or range_nodes > items + 1:
                items += ATTRIBUTE_VALUES * range_nodes
            body = sum(_walk(x, shape, True) for n in (4, 5, 6, 7) for x in _sub(v, n))
            count += range_nodes + body
            shape.loop_steps += items * body
    shape.nodes += 1
    return count


def _shape(program: Any) -> _Shape:
    checked = _sub(program.serialize(), 2)  # Any.value: the CheckedExpr
    exprs = _sub(checked[0], 4) if checked else []
    if not exprs:
        raise SelectorError("the compiled expression has no body")
    shape = _Shape()
    _walk(exprs[0], shape, False)
    steps = shape.nodes + shape.loop_steps
    if steps > MAX_ESTIMATED_STEPS:
        raise SelectorError(f"estimated at {steps} steps, more than the "
                            f"{MAX_ESTIMATED_STEPS} evaluated here")
    return shape


# ----- compiled selectors --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Selector:
    """One compiled expression, shared by every claim and class that spells it."""

    text: str
    _program: Any = field(repr=False)
    # String constants of the expression: a domain it looks up that a device lacks is an
    # empty map, as Kubernetes documents, rather than a "no such key" error.
    _strings: frozenset[str] = field(repr=False)

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether the device (`Device.cel` of the device model) is selected; a result
        other than true or false, or an error, is `SelectorError`."""
        attrs, caps = device["attributes"], device["capacity"]
        missing = [s for s in self._strings if s not in attrs or s not in caps]
        if missing:
            attrs, caps = dict(attrs), dict(caps)
            for s in missing:
                attrs.setdefault(s, {})
                caps.setdefault(s, {})
            device = {**device, "attributes": attrs, "capacity": caps}
        try:
            result = self._program.eval(data={"device": device})
            value = result.value()
        except Exception as e:  # the library's own exception types are not public
            raise SelectorError(f"selector {shorten(self.text, 80)!r}: {e}") from None
        if result.type() == cel.Type.ERROR:
            raise SelectorError(f"selector {shorten(self.text, 80)!r} failed: "
                                f"{shorten(str(value), 160)}")
        if result.type() != cel.Type.BOOL or not isinstance(value, bool):
            raise SelectorError(f"selector {shorten(self.text, 80)!r} gave "
                                f"{shorten(str(value), 80)}, not true or false")
        return value


def compile_selector(text: str) -> Selector:
    """The compiled selector for `text`, compiled once per distinct text (memoized), or
    `SelectorError` saying why it cannot be evaluated."""
    if not isinstance(text, str):
        raise SelectorError(f"a selector must be a string, got {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise SelectorError(f"selector of {len(text)} characters, more than Kubernetes' "
                            f"{MAX_EXPRESSION_CHARS}")
    compiled = _compile(text)
    if isinstance(compiled, SelectorError):
        raise compiled
    return compiled


@lru_cache(maxsize=2048)
def _compile(text: str) -> Selector | SelectorError:
    """Refusals are memoized too: a hostile expression is examined once, not once per
    device and per pass."""
    try:
        program = _ENV.compile(text)
    except Exception as e:  # the library's own exception types are not public
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return SelectorError(f"selector {shorten(text, 80)!r} does not compile: "
                             f"{shorten(first, 160)}")
    try:
        shape = _shape(program)
    except SelectorError as e:
        return SelectorError(f"selector {shorten(text, 80)!r}: {e}")
    except (ValueError, IndexError) as e:
        return SelectorError(f"selector {shorten(text, 80)!r}: unreadable AST ({e})")
    return Selector(text, program, frozenset(shape.strings))

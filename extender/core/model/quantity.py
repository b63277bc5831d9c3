"""One Kubernetes quantity ("500m", "1.5Gi", "2e3") as the exact value apimachinery's
`resource.Quantity` holds, found in time linear in the text's length.

Every quantity the extender reads comes from someone who may be hostile or careless: a
PodGroup's minResources is an unvalidated string in a custom resource, and one such
string used to stall the whole event loop ("1e30000000" meant a 30-million-digit
power of ten). The value of a quantity only matters down to what kube-scheduler can
count, so this module never builds a number bigger than that:

* **Rounding**, as `ParseQuantity`: a non-zero amount is rounded up, away from zero, to
  a whole nano (10^-9); a binary-suffixed one ("Ki".."Ei") is capped at 2^63-1.
* **Saturation**: a decimal amount above 2^63-1 is beyond every unit kube-scheduler
  counts in (int64 of `Value()` or `MilliValue()`, which Kubernetes lets overflow), so
  it is taken as `SATURATED_VALUE`, "more than any node has". So is an exponent that
  Kubernetes itself misreads (beyond int32, which it truncates); one beyond int64 it
  rejects, and so does this module.

Only the digits that can change the rounded value are converted to a number: those at
or above the nano place (10^-69 for a binary suffix, which multiplies by up to 2^60),
plus whether anything non-zero follows them. The rest is counted, never converted.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from extender.core.model.fields import shown

__all__ = ["INT64_MAX", "SATURATED", "SATURATED_VALUE", "parse_quantity", "shorten"]

INT64_MAX = (1 << 63) - 1
# An amount in kube-scheduler's units that no int64 holds: more than any node has. Node
# capacities are capped at INT64_MAX, so a request of SATURATED never fits one.
SATURATED = 1 << 63
# A quantity whose value is beyond int64 in its plain unit, hence in every unit.
SATURATED_VALUE = Fraction(SATURATED)

_INT32 = range(-(1 << 31), 1 << 31)
_INT64 = range(-(1 << 63), 1 << 63)
_NANO = 10**9

# apimachinery's documented grammar: <sign><digits>[.<digits>] and then a binary suffix, a
# decimal suffix or an exponent ("1E" is one exa, "1E3" a thousand, "1e" is invalid).
# Every quantifier is possessive and no two parts can match the same character, so a
# failed match costs one pass over the text (the plain `\d+\.?\d*` took quadratic time on
# a long run of digits followed by a bad character).
_QUANTITY = re.compile(
    r"([+-]?+)([0-9]*+)(?:\.([0-9]*+))?+"
    r"(?:[eE]([+-]?+[0-9]++)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?+",
    re.ASCII,
)
_DECIMAL_SUFFIX: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_BINARY_SUFFIX: dict[str, int] = {
    "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60,
}
# The lowest decimal place whose digit can change the value rounded up to a nano.
_LOWEST_PLACE_DECIMAL = -9
_LOWEST_PLACE_BINARY = -69  # 2^60 < 10^19: a digit at 10^-70 moves the value < 10^-60
# Memoized texts are kept short: a cluster spells the same few dozen quantities
# millions of times, and a long one is hostile or a mistake, not worth keeping alive.
_MEMO_MAX_CHARS = 64


def shorten(text: object, limit: int = 40) -> str:
    """The text for an error message: a 10 MB quantity must not become a 10 MB log line,
    nor a list nested 1,000 deep a RecursionError (`fields.shown`)."""
    s = text if isinstance(text, str) else shown(text)
    if len(s) <= limit:
        return s
    return f"{s[:limit - 8]}...({len(s)} characters)"


def parse_quantity(s: str | int | float) -> Fraction:
    """The value of a Kubernetes quantity ("100m", "1.5Gi", "1e3", 2, 0.5) as Kubernetes
    holds it (module docstring): exact, rounded up to a nano, `SATURATED_VALUE` (signed)
    when beyond int64.

    Floats go through their shortest repr so a JSON `0.1` means one tenth, as it
    would had it been written as the string "0.1".
    """
    if isinstance(s, bool):
        raise ValueError(f"invalid quantity {s!r}")
    if isinstance(s, int):
        if s > INT64_MAX:
            return SATURATED_VALUE
        return -SATURATED_VALUE if s < -INT64_MAX else Fraction(s)
    if isinstance(s, float):
        if not math.isfinite(s):
            raise ValueError(f"invalid quantity '{s}'")
        return _parse(repr(s))
    if not isinstance(s, str):
        raise ValueError(f"invalid quantity {shorten(s)}")
    if len(s) <= _MEMO_MAX_CHARS:
        return _parse_memo(s)
    return _parse(s)


@lru_cache(maxsize=4096)
def _parse_memo(s: str) -> Fraction:
    return _parse(s)  # pure, so the memo is invisible


def _parse(s: str) -> Fraction:
    m = _QUANTITY.fullmatch(s)
    if m is None or not (m[2] or m[3]):
        raise ValueError(f"invalid quantity '{shorten(s)}'")
    sign, whole, frac, exponent, suffix = m.groups()
    frac = frac or ""
    e = 0 if exponent is None else _exponent(exponent, s)
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    shift = 0  # the value is int(digits) * 10**place * 2**shift
    if exponent is not None:
        if e not in _INT32 or len(frac) - e not in _INT32:
            # Kubernetes truncates the scale to int32 and reads some other number; an
            # amount it cannot represent is more than any node has.
            return -SATURATED_VALUE if sign == "-" else SATURATED_VALUE
        place = e - len(frac)
    elif suffix in _BINARY_SUFFIX:
        place, shift = -len(frac), _BINARY_SUFFIX[suffix]
    else:
        place = _DECIMAL_SUFFIX.get(suffix or "", 0) - len(frac)
    value = _rounded(digits, place, shift)
    return -value if sign == "-" else value


def _exponent(text: str, whole: str) -> int:
    """The exponent as `strconv.ParseInt(_, 10, 64)` reads it; beyond int64 it is
    invalid, as in Kubernetes ("unable to parse quantity's suffix")."""
    sign = "-" if text[0] == "-" else ""
    body = text.lstrip("+-").lstrip("0") or "0"
    e = int(sign + body) if len(body) <= 19 else None
    if e is None or e not in _INT64:
        raise ValueError(f"invalid quantity '{shorten(whole)}': exponent beyond int64")
    return e


def _rounded(digits: str, place: int, shift: int) -> Fraction:
    """int(digits) * 10**place * 2**shift (no leading zeros, not zero) rounded up to a
    nano, capped (binary) or saturated (decimal) beyond int64, reading only the digits
    that matter."""
    kept = digits.rstrip("0")
    place += len(digits) - len(kept)
    top = len(kept) + place  # 10**(top-1) <= value before the binary shift < 10**top
    if top > 19:  # >= 10**19 > INT64_MAX
        return Fraction(INT64_MAX) if shift else SATURATED_VALUE
    lowest = _LOWEST_PLACE_BINARY if shift else _LOWEST_PLACE_DECIMAL
    keep = top - lowest  # digits at or above 10**lowest
    if keep >= len(kept):
        nanos = math.ceil(int(kept) * (1 << shift) * Fraction(10) ** (place + 9))
    else:
        # A non-zero tail (its last digit is not 0) lies strictly between two multiples
        # of 10**lowest, and no whole nano does (the lowest places are chosen so): the
        # value rounds up to the nano just above the truncated one.
        head = int(kept[:keep]) if keep > 0 else 0
        nanos = math.floor(head * (1 << shift) * Fraction(10) ** (lowest + 9)) + 1
    value = Fraction(nanos, _NANO)
    if value > INT64_MAX:
        return Fraction(INT64_MAX) if shift else SATURATED_VALUE
    return value

"""Kubernetes quantities as the soak's checker reads them, apart from the checker
because they are a parser with their own edge cases (the hostile mode's absurd values)
and tests of their own, not part of watching pods or judging invariants."""

from __future__ import annotations

from typing import Any

_SUFFIX = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
           "k": 10**3, "M": 10**6, "G": 10**9}


HUGE = (1 << 63) - 1  # what a hostile quantity counts as here: more than any node has


def quantity(value: str, milli: bool = False) -> int:
    """A Kubernetes quantity as an integer (millis when `milli`), for the plain forms
    the soak writes ("250m", "2", "512Mi"). Deliberately not the product's parser. The
    hostile mode's absurd values ("1e300000", "9e18") count as `HUGE`: a watch that
    raised on them would relist forever and blur every timing the checker keeps."""
    try:
        return min(HUGE, _quantity(value, milli))
    except (ValueError, OverflowError):
        return HUGE


def _quantity(value: str, milli: bool) -> int:
    v = str(value).strip()
    scale = 1000 if milli else 1
    if v.endswith("m"):
        return int(v[:-1]) * scale // 1000
    for suffix, mult in _SUFFIX.items():
        if v.endswith(suffix):
            return int(float(v[: -len(suffix)]) * mult) * scale
    return int(float(v) * scale)


def pod_requests(spec: dict[str, Any]) -> tuple[int, int]:
    """(cpu millis, memory bytes) summed over the regular containers; the soak's pods
    have no init containers or overhead."""
    cpu = mem = 0
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += quantity(req.get("cpu", "0"), milli=True)
        mem += quantity(req.get("memory", "0"))
    return cpu, mem

"""The gang manager's settings (the CLI's flags of the same names)."""

from __future__ import annotations

from dataclasses import dataclass, field

from extender.core.queue.backoff import BackoffPolicy


@dataclass(frozen=True, slots=True)
class Config:
    default_timeout_seconds: float = 60.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    # Assembly wait: a member whose gang is still being created may wait in filter for
    # the rest instead of being turned away into kube-scheduler's pod backoff, while its
    # gang's newest member arrived less than `assembly_gap_seconds` ago and the rate
    # they arrive at brings the rest within `assembly_wait_seconds` in all
    # (`extender.core.filter`). 0 turns it off.
    assembly_wait_seconds: float = 0.5
    assembly_gap_seconds: float = 0.2

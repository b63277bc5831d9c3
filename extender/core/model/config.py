"""The gang manager's settings (the CLI's flags of the same names)."""

from __future__ import annotations

from dataclasses import dataclass, field

from extender.core.model.provisioning_request import ATOMIC_CLASS


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Group backoff after a timeout, in the shape of Kueue's requeuingStrategy: base
    doubling up to a cap, and an optional retry limit after which the group is Failed
    (applied by `queue/backoff.py`)."""

    base_seconds: float = 10.0
    cap_seconds: float = 300.0
    # None: retry forever. N: after N timed-out attempts the group is marked Failed.
    retry_limit: int | None = None

    def __post_init__(self) -> None:
        if self.base_seconds < 0 or self.cap_seconds < self.base_seconds:
            raise ValueError(
                f"backoff base {self.base_seconds}s must be >= 0 and <= cap {self.cap_seconds}s"
            )
        if self.retry_limit is not None and self.retry_limit < 1:
            raise ValueError(f"backoff retry limit must be >= 1, got {self.retry_limit}")

    def delay(self, attempts: int) -> float:
        """Wait after the `attempts`-th timeout (1-based): base * 2^(attempts-1), capped."""
        if attempts <= 0:
            return 0.0
        exponent = min(attempts - 1, 62)
        return float(min(self.base_seconds * (2**exponent), self.cap_seconds))

    def exhausted(self, attempts: int) -> bool:
        return self.retry_limit is not None and attempts >= self.retry_limit


@dataclass(frozen=True, slots=True)
class Config:
    default_timeout_seconds: float = 60.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    # Assembly wait: a member whose gang is still being created may wait in filter for
    # the rest instead of being turned away into kube-scheduler's pod backoff, while its
    # gang's newest member arrived less than `assembly_gap_seconds` ago and the rate
    # they arrive at brings the rest within `assembly_wait_seconds` in all
    # (`extender.core.filter`). 0 turns it off. 1.5 s and 0.5 s since bench.e2e showed
    # 0.5 and 0.2 turning away a member of 6-17 % of gangs whenever the creator paused
    # on a busy machine, that member then sitting out kube-scheduler's 1-2 s backoff; the
    # mean hold stayed at about 0.1 s (docs/performance.md, "The assembly wait").
    assembly_wait_seconds: float = 1.5
    assembly_gap_seconds: float = 0.5
    # Whole-gang preemption (`core/preemption/`): a gang or a plain pod of the gang
    # scheduler that cannot be planned evicts whole lower-priority gangs and plain pods.
    preemption: bool = True
    # The starvation guard (`core/queue/starvation.py`): once a gang that can be placed
    # has waited this long for capacity, the capacity of its best plan is held for it as
    # it frees up. None turns it off.
    starvation_after_seconds: float | None = 30.0
    # spec.schedulerName of the gang scheduler's profile: its pending plain pods may
    # preempt, and its pods' capacity is what the starvation guard waits for.
    scheduler_name: str = "gang-scheduler"
    # The longest a tenant's scheduleTimeoutSeconds may hold capacity for a quorum that
    # does not bind (`--max-schedule-timeout`): the CRD allows up to a day, and a gang
    # that never assembles would keep its nodes from everyone that long. None: no cap.
    max_timeout_seconds: float | None = 600.0
    # ProvisioningRequests (`core/provisioning.py`): a gang short of capacity asks the
    # cluster autoscaler for it, while the API is served; `--provisioning-requests=off`.
    provisioning: bool = True
    provisioning_class: str = ATOMIC_CLASS
    # The commit binds a planned gang's members itself, without a bind request each
    # (`Ledger._direct`, architecture.md §7). The one default: `--direct-commit` takes its
    # own from here, so a core built by hand behaves as the process does; tests of the
    # bind barrier, the path members with volumes or claims always take, turn it off.
    direct_commit: bool = True

    def timeout_for(self, requested: int | None) -> float:
        """The reservation timeout of a gang whose PodGroup asks for `requested` seconds
        (None or 0: the default), capped at `max_timeout_seconds`."""
        if not requested:
            return self.default_timeout_seconds
        if self.max_timeout_seconds is not None and requested > self.max_timeout_seconds:
            return self.max_timeout_seconds
        return float(requested)

    def timeout_capped(self, requested: int | None) -> str:
        """What a status message adds when `timeout_for` capped `requested`; else ""."""
        if not requested or self.timeout_for(requested) >= requested:
            return ""
        return (f" (scheduleTimeoutSeconds {requested} capped at --max-schedule-timeout "
                f"{self.timeout_for(requested):g}s)")

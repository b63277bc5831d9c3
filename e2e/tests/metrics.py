"""The extender's metrics as an e2e test reads them: scraped from its HTTP port and summed
over the samples whose labels match. The priority, direct-commit, unplaceable, failover
and restart tests all read counters this way, so it is a module of its own rather than a
test module the others import from."""

from __future__ import annotations

from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families


class Scraped(Protocol):
    """An extender's HTTP port: a `GangStack`, or a replica of the failover tests."""

    def get(self, path: str) -> Any: ...


def metric(stack: Scraped, name: str, labels: dict[str, str] | None = None) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for family in text_string_to_metric_families(stack.get("/metrics")):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
                total += s.value
    return total

"""Prometheus metrics (architecture.md §9). One registry per server so tests can run several."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources
from itertools import pairwise
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from extender.core.model.types import SCHEDULER_PLUGINS
from extender.core.model.vocabulary import (
    GangBound,
    GangDisrupted,
    GangTimedOut,
    Preempting,
    Reason,
    Report,
    StatusChanged,
)
from extender.core.reads import Reads
from extender.deprecated import METRICS

# new metric name → its deprecated old name, exported beside it for one release.
_OLD_NAME = {new: old for old, new in METRICS.items()}


@dataclass(frozen=True)
class GaugeSources:
    """What the gauges read at scrape time besides the gang manager. They belong to parts
    that count into the metrics themselves (the status writer, the informer), so they
    are handed to the scrape, made last, rather than to `Metrics`, made first."""

    # The status writer's (phase, reason, source) counts for the gangs gauge; None: the
    # gang manager's reasons alone.
    status_counts: Callable[[], dict[tuple[str, str, str], int]] | None = None
    leader_active: Callable[[], bool] | None = None  # None: always active
    # Connections the API client opened so far (on demand, ahead).
    connections_opened: Callable[[], tuple[int, int]] | None = None
    # Seconds each watched kind has been behind (`Informer.behind`).
    watches_behind: Callable[[], dict[str, float]] | None = None


NO_SOURCES = GaugeSources()


_Metric = Counter | Gauge | Histogram
_Kind = type[Counter] | type[Gauge] | type[Histogram]
_KINDS: dict[str, _Kind] = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}
_ENTRY_KEYS = {"name", "kind", "labels", "buckets", "help"}
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
CATALOGUE = "metrics.toml"  # beside this module, shipped as package data


@dataclass(frozen=True, slots=True)
class _Declared:
    """One metric of `Metrics`, as Prometheus shows it: its name, help and labels are
    what users read (docs/observability.md lists them), so they stand once, in
    `CATALOGUE`, one table a metric, rather than spread over a constructor."""

    attribute: str  # the `Metrics` attribute it is kept in
    kind: _Kind
    name: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] | None = None  # a histogram's

    def make(self, registry: CollectorRegistry) -> _Metric:
        if self.buckets is not None:
            return Histogram(self.name, self.help, self.labels, buckets=self.buckets,
                             registry=registry)
        return self.kind(self.name, self.help, self.labels, registry=registry)


class CatalogueError(ValueError):
    """The metric catalogue is malformed. Raised when this module is imported, naming
    the entry and what is wrong with it, so a bad edit stops the first test or the
    start-up rather than a scrape in production."""


def parse_catalogue(text: str, source: str = CATALOGUE) -> tuple[_Declared, ...]:
    """The metrics `text` (the catalogue's TOML) declares, in its order."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CatalogueError(f"{source}: not valid TOML: {e}") from None
    unknown = sorted(data.keys() - {"buckets", "metric"})
    if unknown:
        raise CatalogueError(f"{source}: unknown key(s) {', '.join(unknown)}; expected "
                             f"[buckets] and [metric.<attribute>] tables")
    sets = {name: _bucket_set(bounds, f"{source}: buckets.{name}")
            for name, bounds in _table(data.get("buckets", {}), f"{source}: [buckets]").items()}
    entries = _table(data.get("metric", {}), f"{source}: [metric]")
    if not entries:
        raise CatalogueError(f"{source}: declares no metric ([metric.<attribute>] tables)")
    rows = tuple(_entry(attribute, entry, sets, f"{source}: [metric.{attribute}]")
                 for attribute, entry in entries.items())
    seen: dict[str, str] = {}
    for row in rows:
        if row.name in seen:
            raise CatalogueError(f"{source}: [metric.{row.attribute}] and "
                                 f"[metric.{seen[row.name]}] both name {row.name}")
        seen[row.name] = row.attribute
    return rows


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CatalogueError(f"{where}: expected a table, got {value!r}")
    return value


def _bucket_set(bounds: object, where: str) -> tuple[float, ...]:
    if (not isinstance(bounds, list) or not bounds
            or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)):
        raise CatalogueError(f"{where}: expected a list of numbers, got {bounds!r}")
    if any(b >= c for b, c in pairwise(bounds)):
        raise CatalogueError(f"{where}: bounds must increase, got {bounds!r}")
    return tuple(float(b) for b in bounds)


def _entry(attribute: str, value: object, sets: dict[str, tuple[float, ...]],
           where: str) -> _Declared:
    entry = _table(value, where)
    if not attribute.isidentifier() or attribute.startswith("_"):
        raise CatalogueError(f"{where}: the attribute must be a public Python name")
    unknown = sorted(entry.keys() - _ENTRY_KEYS)
    if unknown:
        raise CatalogueError(f"{where}: unknown key(s) {', '.join(unknown)}; expected "
                             f"{', '.join(sorted(_ENTRY_KEYS))}")
    name = entry.get("name")
    if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
        raise CatalogueError(f"{where}: name must be a Prometheus metric name, got {name!r}")
    kind_name = entry.get("kind")
    kind = _KINDS.get(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        raise CatalogueError(f"{where}: kind must be one of {', '.join(_KINDS)}, "
                             f"got {kind_name!r}")
    labels = entry.get("labels", [])
    if (not isinstance(labels, list)
            or not all(isinstance(x, str) and _LABEL_NAME.fullmatch(x) for x in labels)
            or len(set(labels)) != len(labels)):
        raise CatalogueError(f"{where}: labels must be distinct label names, got {labels!r}")
    text = entry.get("help")
    if not isinstance(text, str) or not text.strip():
        raise CatalogueError(f"{where}: help must be a non-empty string")
    buckets = entry.get("buckets")
    if (buckets is not None) != (kind is Histogram):
        raise CatalogueError(f"{where}: a histogram names its buckets, and only a histogram")
    if buckets is not None and (not isinstance(buckets, str) or buckets not in sets):
        raise CatalogueError(f"{where}: buckets {buckets!r} is not a set of [buckets] "
                             f"({', '.join(sets) or 'none declared'})")
    return _Declared(attribute, kind, name, tuple(labels), text,
                     sets[buckets] if buckets is not None else None)


def _with_old_names(rows: tuple[_Declared, ...]) -> tuple[_Declared, ...]:
    """`rows`, each renamed metric followed by the same metric under its deprecated old
    name (kept in `<attribute>_old`): extender/deprecated.py is the one place old names
    are written."""
    named = {row.name for row in rows}
    missing = sorted(new for new in _OLD_NAME if new not in named)
    if missing:
        raise CatalogueError(f"extender/deprecated.py renames metric(s) to "
                             f"{', '.join(missing)}, which {CATALOGUE} does not declare")
    out: list[_Declared] = []
    for row in rows:
        out.append(row)
        old = _OLD_NAME.get(row.name)
        if old is not None:
            out.append(replace(row, attribute=f"{row.attribute}_old", name=old,
                               help=f"Deprecated: {row.name}."))
    return tuple(out)


def _read_catalogue() -> str:
    path = resources.files("extender.reporting").joinpath(CATALOGUE)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogueError(f"{path}: cannot be read ({e.strerror}); it is package data "
                             f"of extender.reporting (pyproject.toml)") from e


# In the order the scrape lists them.
DECLARED: tuple[_Declared, ...] = _with_old_names(parse_catalogue(_read_catalogue()))


class Metrics:
    """The extender's metrics, made from `DECLARED` in one registry per instance (tests
    run several servers). Each attribute's annotation is its row's kind, so callers are
    type-checked; tests/reporting/test_metrics_declared.py keeps the two in step."""

    registry: CollectorRegistry
    verb_latency: Histogram
    gangs: Gauge
    reservations: Gauge
    reserved_slots: Gauge
    held_ahead: Gauge
    held_idle: Gauge
    devices: Gauge
    unplaceable: Gauge
    waiting_binds: Gauge
    waiting_binds_old: Gauge
    transitions: Counter
    timeouts: Counter
    backoffs: Counter
    partial_gangs: Counter
    disruptions: Counter
    disrupted_pods: Counter
    evictions: Counter
    preemptions: Counter
    preemption_victims: Counter
    preempted_pods: Counter
    retry_limit: Counter
    status_writes: Counter
    events: Counter
    quorum_to_bound: Histogram
    bindings: Counter
    provisioning: Counter
    wakeups: Counter
    assembly_waits: Histogram
    commit_waits: Histogram
    loop_errors: Counter
    event_loop_lag: Histogram
    skipped_objects: Counter
    watch_behind: Gauge
    connections: Counter
    leader: Gauge

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for declared in DECLARED:
            setattr(self, declared.attribute, declared.make(self.registry))
        self._connections_seen = (0, 0)

    def on_report(self, report: Report) -> None:
        if isinstance(report, StatusChanged):
            return
        if isinstance(report, Preempting):
            # A plain pod that preempts has no group: counted under the default source.
            source = report.group.source if report.group is not None else SCHEDULER_PLUGINS
            self.transitions.labels(report.reason, source).inc()
            self.preemptions.labels("gang" if report.group is not None else "pod").inc()
            for v in report.victims:
                self.preemption_victims.labels(v.kind).inc()
                self.preempted_pods.inc(len(v.pods))
            return
        self.transitions.labels(report.reason, report.group.source).inc()
        if isinstance(report, GangTimedOut):
            self.timeouts.inc()
            if report.failed:
                self.retry_limit.inc()
            else:
                self.backoffs.inc()
            if report.evicted:
                self.partial_gangs.inc()
        elif isinstance(report, GangBound) and report.seconds is not None:
            self.quorum_to_bound.observe(report.seconds)
        elif isinstance(report, GangDisrupted):
            if report.lost:  # a disruption carried over a restart was counted before
                self.disruptions.labels(report.group.source).inc()
            self.disrupted_pods.inc(len(report.evicted))

    def on_binding(self, error: str | None) -> None:
        """A Binding POST ended: one a bind request asked for, or one the direct commit
        made without a request (so this counts Bindings, not bind calls)."""
        self.bindings.labels("ok" if error is None else "error").inc()

    def on_assembly_wait(self, placed: bool, seconds: float) -> None:
        self.assembly_waits.labels("placed" if placed else "turned_away").observe(seconds)

    def on_commit_wait(self, landed: bool, seconds: float) -> None:
        self.commit_waits.labels("landed" if landed else "timed_out").observe(seconds)

    def refresh(self, reads: Reads, sources: GaugeSources = NO_SOURCES) -> None:
        """Gauges are read at scrape time, never kept in step by hand."""
        gauges = reads.gauges()
        if sources.status_counts is not None:
            counts = sources.status_counts()
        else:  # no status writer: the gang manager's reasons alone
            counts = {("", reason, ""): n for reason, n in gauges.reasons.items()}
        self.gangs.clear()
        for (phase, reason, source), n in counts.items():
            self.gangs.labels(phase, reason, source).set(n)
        self.reservations.set(gauges.reservations)
        self.reserved_slots.set(gauges.reserved_slots)
        self.waiting_binds.set(gauges.waiting_binds)
        self.waiting_binds_old.set(gauges.waiting_binds)
        self.held_ahead.set(gauges.held)
        self.unplaceable.set(gauges.reasons.get(Reason.UNPLACEABLE, 0))
        self.held_idle.clear()
        for resource, amount in (gauges.held_idle or {}).items():
            self.held_idle.labels(resource).set(amount / 1000 if resource == "cpu" else amount)
        self.devices.clear()
        for device_class, by_state in (gauges.devices or {}).items():
            for state, n in zip(("free", "reserved", "allocated"), by_state, strict=True):
                self.devices.labels(device_class, state).set(n)
        self.leader.set(1 if sources.leader_active is None or sources.leader_active() else 0)
        if sources.watches_behind is not None:
            for kind, seconds in sources.watches_behind().items():
                self.watch_behind.labels(kind).set(seconds)
        if sources.connections_opened is not None:  # counted by the transport, told here
            on_demand, ahead = sources.connections_opened()
            seen_on_demand, seen_ahead = self._connections_seen
            self.connections.labels("on_demand").inc(max(0, on_demand - seen_on_demand))
            self.connections.labels("ahead").inc(max(0, ahead - seen_ahead))
            self._connections_seen = (max(on_demand, seen_on_demand), max(ahead, seen_ahead))

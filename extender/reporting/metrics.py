"""Prometheus metrics (architecture.md §9). One registry per server so tests can run several."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources
from itertools import pairwise
from typing import Annotated, Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

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


# The catalogue's shape, checked by Pydantic (strict: TOML already has types, so a string
# where a number belongs is an error, not a conversion). A check of one value raises a
# PydanticCustomError so its words stand without Pydantic's "Value error, " prefix.

def _check(holds: Callable[[Any], object], kind: str, words: str) -> AfterValidator:
    def check(value: Any) -> Any:
        if not holds(value):
            raise PydanticCustomError(kind, words)
        return value
    return AfterValidator(check)


_MetricName = Annotated[str, _check(re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").fullmatch,
                                    "metric_name", "not a Prometheus metric name")]
_LabelName = Annotated[str, _check(re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*").fullmatch,
                                   "label_name", "not a Prometheus label name")]
# The table's name becomes an attribute of `Metrics`.
_Attribute = Annotated[str, _check(lambda a: a.isidentifier() and not a.startswith("_"),
                                   "attribute", "must be a public Python name (it becomes "
                                   "an attribute of Metrics)")]
_Bounds = Annotated[list[float], Field(min_length=1),
                    _check(lambda b: all(x < y for x, y in pairwise(b)), "bounds_order",
                           "bounds must increase")]


class _Entry(BaseModel):
    """One [metric.<attribute>] table. Extra keys are refused, so a misspelt one (`lables`)
    stops the start-up instead of leaving a metric silently without its labels."""

    model_config = ConfigDict(strict=True, extra="forbid")

    name: _MetricName
    kind: Literal["counter", "gauge", "histogram"]
    labels: Annotated[list[_LabelName], _check(lambda ls: len(set(ls)) == len(ls),
                                               "labels_distinct", "must be distinct")
                      ] = Field(default_factory=list)
    buckets: str | None = None  # a set of [buckets]: the catalogue checks it is one
    help: Annotated[str, _check(str.strip, "help_blank", "must not be blank")]

    @model_validator(mode="after")
    def _buckets_for_histograms(self) -> _Entry:
        if (self.buckets is not None) != (self.kind == "histogram"):
            raise PydanticCustomError("buckets_kind",
                                      "a histogram names its buckets, and only a histogram")
        return self


class _Catalogue(BaseModel):
    """The whole file: the shared bucket sets, and the metrics in the scrape's order
    (TOML tables keep the order they are written in)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    buckets: dict[str, _Bounds] = Field(default_factory=dict)
    metric: dict[_Attribute, _Entry] = Field(min_length=1)

    @model_validator(mode="after")
    def _across_entries(self) -> _Catalogue:
        """What no single entry can check, so the error names the entries itself."""
        named: dict[str, str] = {}
        sets = ", ".join(self.buckets) or "none declared"
        for attribute, entry in self.metric.items():
            if entry.buckets is not None and entry.buckets not in self.buckets:
                raise PydanticCustomError("buckets_unknown", f"[metric.{attribute}] buckets: "
                                          f"{entry.buckets!r} is not a set of [buckets] ({sets})")
            if entry.name in named:
                raise PydanticCustomError("name_twice", f"[metric.{attribute}] and "
                                          f"[metric.{named[entry.name]}] both name {entry.name}")
            named[entry.name] = attribute
        return self


def parse_catalogue(text: str, source: str = CATALOGUE) -> tuple[_Declared, ...]:
    """The metrics `text` (the catalogue's TOML) declares, in its order."""
    try:
        catalogue = _Catalogue.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as e:
        raise CatalogueError(f"{source}: not valid TOML: {e}") from None
    except ValidationError as e:
        raise CatalogueError("\n".join(_said(source, error) for error in e.errors())) from None
    return tuple(
        _Declared(attribute, _KINDS[entry.kind], entry.name, tuple(entry.labels), entry.help,
                  None if entry.buckets is None else tuple(catalogue.buckets[entry.buckets]))
        for attribute, entry in catalogue.metric.items())


def _said(source: str, error: ErrorDetails) -> str:
    """One of Pydantic's errors as a line naming the file, the entry ([metric.calls]) or
    [buckets], the field and the value at fault: Pydantic's `loc` is a path of keys and
    list indexes that a reader of the TOML file would not recognise as such."""
    loc = [p if isinstance(p, str) else f"[{p}]" for p in error["loc"] if p != "[key]"]
    if loc[:1] == ["metric"] and len(loc) > 1:
        table, rest = f"[metric.{loc[1]}]", loc[2:]
    elif loc[:1] in (["metric"], ["buckets"]):
        table, rest = f"[{loc[0]}]", loc[1:]
    else:
        table, rest = "", loc
    where = " ".join(part for part in (table, "".join(rest)) if part)
    said = error["msg"]
    if error["type"] == "extra_forbidden":
        expected = _Entry.model_fields if table.startswith("[metric.") else _Catalogue.model_fields
        said = f"unknown key; expected {', '.join(sorted(expected))}"
    elif error["type"] in ("dict_type", "model_type"):  # not "instance of _Entry"
        said = f"must be a table, got {error['input']!r}"
    elif error["type"] != "missing" and not isinstance(error["input"], dict | BaseModel):
        said = f"{said}, got {error['input']!r}"  # a value, not a whole table
    return f"{source}: {where}: {said}" if where else f"{source}: {said}"


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

"""Prometheus metrics (architecture.md §9). One registry per server so tests can run several."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
                    0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_STARTUP_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600)

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


@dataclass(frozen=True, slots=True)
class _Declared:
    """One metric of `Metrics`, as Prometheus shows it: its name, help and labels are
    what users read (docs/observability.md lists them), so they stand here once, one
    row a metric, rather than spread over a constructor."""

    attribute: str  # the `Metrics` attribute it is kept in
    kind: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] | None = None  # a histogram's

    def make(self, registry: CollectorRegistry) -> _Metric:
        if self.buckets is not None:
            return Histogram(self.name, self.help, self.labels, buckets=self.buckets,
                             registry=registry)
        return self.kind(self.name, self.help, self.labels, registry=registry)


# In the order the scrape lists them.
DECLARED: tuple[_Declared, ...] = (
    _Declared("verb_latency", Histogram, "gang_extender_verb_duration_seconds", ("verb", "result"),
              "Time to answer a kube-scheduler extender call (bind includes the time it waited).",
              buckets=_LATENCY_BUCKETS),
    _Declared("gangs", Gauge, "gang_extender_gangs", ("phase", "reason", "source"),
              "Gangs by status phase, Scheduled condition reason and source (scheduler-plugins, "
              "workload-api, volcano, kueue)."),
    _Declared("reservations", Gauge, "gang_extender_reservations", (),
              "Reservations currently held."),
    _Declared("reserved_slots", Gauge, "gang_extender_reserved_slots", (),
              "Pod slots held by reservations."),
    _Declared("held_ahead", Gauge, "gang_extender_capacity_held_reservations", (),
              "Reservations held ahead of capacity: a starving gang's forward reservation, or a "
              "preemptor's while its victims leave."),
    _Declared("held_idle", Gauge, "gang_extender_capacity_held_idle", ("resource",),
              "Capacity already free on the nodes of held reservations that nothing else may use "
              "yet (cpu in cores, others in their units): what holding ahead costs right now."),
    _Declared("devices", Gauge, "gang_extender_devices", ("device_class", "state"),
              "Devices (DRA) each DeviceClass selects, by state: free, reserved (held by a "
              "gang's slots, not allocated yet) or allocated (to a claim)."),
    _Declared("unplaceable", Gauge, "gang_extender_unplaceable_gangs", (),
              "Gangs that fit no set of the cluster's nodes even emptied (reason Unplaceable): set"
              " aside until nodes change."),
    _Declared("waiting_binds", Gauge, "gang_extender_waiting_binds", (),
              "Bind requests waiting at the permit barrier until their gang is complete."),
    # The same gauge under its deprecated name (extender/deprecated.py).
    _Declared("waiting_binds_old", Gauge, _OLD_NAME["gang_extender_waiting_binds"], (),
              "Deprecated: gang_extender_waiting_binds."),
    _Declared("transitions", Counter, "gang_extender_gang_transitions_total", ("reason", "source"),
              "Gang transitions (Reserved, Bound, TimedOut, ...) by the gang's source."),
    _Declared("timeouts", Counter, "gang_extender_timeouts_total", (),
              "Reservations released at their deadline."),
    _Declared("backoffs", Counter, "gang_extender_backoffs_total", (),
              "Gangs sent to back off after a timeout."),
    _Declared("partial_gangs", Counter, "gang_extender_partial_gangs_total", (),
              "Gangs that ended below their quorum after their commit (their bound members are "
              "evicted)."),
    _Declared("disruptions", Counter, "gang_extender_gang_disruptions_total", ("source",),
              "Started gangs of disruption mode all evicted whole after they lost a member, by the"
              " gang's source."),
    _Declared("disrupted_pods", Counter, "gang_extender_disrupted_pods_total", (),
              "Members evicted because their started gang (disruption mode all) lost one."),
    _Declared("evictions", Counter, "gang_extender_evictions_total", ("result",),
              "Evictions of a partial or disrupted gang's members and of preemption victims: "
              "evicted, gone, refused (a PodDisruptionBudget or an error, at the last attempt), "
              "error."),
    _Declared("preemptions", Counter, "gang_extender_preemptions_total", ("preemptor",),
              "Preemptions started, by preemptor: gang or pod."),
    _Declared("preemption_victims", Counter, "gang_extender_preemption_victims_total", ("kind",),
              "Victim units of preemptions, by kind: gang, pod, reservation."),
    _Declared("preempted_pods", Counter, "gang_extender_preempted_pods_total", (),
              "Pods evicted by preemptions."),
    _Declared("retry_limit", Counter, "gang_extender_retry_limit_reached_total", (),
              "Gangs marked Failed after their last allowed timeout."),
    _Declared("status_writes", Counter, "gang_extender_podgroup_status_writes_total", ("result",),
              "PodGroup status patches."),
    _Declared("events", Counter, "gang_extender_events_total", ("result",),
              "Kubernetes Events posted (created, updated = a repeat folded into an existing "
              "Event, dropped, error)."),
    _Declared("quorum_to_bound", Histogram, "gang_extender_quorum_to_bound_seconds", (),
              "From the gang's quorum being present to the quorum being bound.",
              buckets=_STARTUP_BUCKETS),
    _Declared("bindings", Counter, "gang_extender_bindings_total", ("result",),
              "Binding POSTs made, by outcome."),
    _Declared("provisioning", Counter, "gang_extender_provisioning_requests_total", ("outcome",),
              "ProvisioningRequests of gangs, by outcome: requested, provisioned, failed, "
              "booking-expired, capacity-revoked, not-created."),
    _Declared("wakeups", Counter, "gang_extender_wakeups_total", (),
              "Pods touched so kube-scheduler retries them."),
    _Declared("assembly_waits", Histogram, "gang_extender_assembly_wait_seconds", ("outcome",),
              "Time a member's filter call waited for the rest of its gang to be created; outcome "
              "placed (the gang was complete and got its reservation) or turned_away.",
              buckets=_LATENCY_BUCKETS),
    _Declared("commit_waits", Histogram, "gang_extender_commit_wait_seconds", ("outcome",),
              "Time a member's filter call waited for the Bindings of the commits under way (its "
              "gang's and any other's) to be seen by the watch: answered with its node, or turned "
              "away though bound on a node kube-scheduler did not pass; outcome landed or "
              "timed_out.", buckets=_LATENCY_BUCKETS),
    # Supervised work (extender/scheduler/supervise.py).
    _Declared("loop_errors", Counter, "gang_extender_loop_errors_total", ("loop",),
              "Iterations of a background loop (tick, wake, podgroup-status) that raised: logged "
              "and skipped."),
    _Declared("event_loop_lag", Histogram, "gang_extender_event_loop_lag_seconds", (),
              "How much later than asked a fixed 0.25 s sleep woke: the time every verb and the "
              "tick waited behind other work.", buckets=_LAG_BUCKETS),
    _Declared("skipped_objects", Counter, "gang_extender_skipped_objects_total", ("kind", "reason"),
              "Watched objects skipped because they could not be read (a malformed or hostile "
              "object: its error is logged), by kind, and by reason: decode (its JSON or protobuf "
              "could not be decoded, e.g. nested deeper than 1,024 levels) or convert (decoded, "
              "but not a valid object of its kind)."),
    _Declared("watch_behind", Gauge, "gang_extender_watch_behind_seconds", ("kind",),
              "Seconds since the kind's watch broke, until the watch after its relist has "
              "delivered (0: caught up). Gang commits wait while pods or nodes are behind; "
              "/healthz fails once a kind has been behind for 180 s."),
    _Declared("connections", Counter, "gang_extender_api_connections_total", ("opened",),
              "Connections opened to the API server: ahead, for the Bindings of a gang whose "
              "members are being created (scheduler/warm.py), or on_demand, by a request (a "
              "Binding, a write, a list, a watch) that found none idle."),
    _Declared("leader", Gauge, "gang_extender_leader", (),
              "1 while this replica acts (its kube-scheduler holds the leader lease, or election "
              "is off), 0 on standby."),
)


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

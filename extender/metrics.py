"""Prometheus metrics (design 6). One registry per server so tests can run several."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from extender.core.framework import (
    BACKING_OFF,
    BOUND,
    FAILED,
    RESERVED,
    TIMED_OUT,
    GangEvent,
    GangFramework,
)

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
                    0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_STARTUP_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.verb_latency = Histogram(
            "gang_extender_verb_duration_seconds",
            "Time to answer a kube-scheduler extender call (bind includes the time held).",
            ["verb", "result"], buckets=_LATENCY_BUCKETS, registry=r)
        self.gangs = Gauge("gang_extender_gangs", "Gangs by state (condition reason).",
                           ["state"], registry=r)
        self.reservations = Gauge("gang_extender_reservations",
                                  "Reservations currently held.", registry=r)
        self.reserved_slots = Gauge("gang_extender_reserved_slots",
                                    "Pod slots held by reservations.", registry=r)
        self.held_binds = Gauge("gang_extender_held_binds",
                                "Bind requests held open until their gang is complete.",
                                registry=r)
        self.transitions = Counter("gang_extender_gang_transitions_total",
                                   "Gang transitions (Reserved, Bound, TimedOut, ...).",
                                   ["reason"], registry=r)
        self.timeouts = Counter("gang_extender_timeouts_total",
                                "Reservations released at their deadline.", registry=r)
        self.backoffs = Counter("gang_extender_backoffs_total",
                                "Gangs sent to back off after a timeout.", registry=r)
        self.quorum_to_bound = Histogram(
            "gang_extender_quorum_to_bound_seconds",
            "From the gang's quorum being present to the quorum being bound.",
            buckets=_STARTUP_BUCKETS, registry=r)
        self.bindings = Counter("gang_extender_bindings_total", "Bindings created.",
                                ["result"], registry=r)
        self.wakeups = Counter("gang_extender_wakeups_total",
                               "Pods touched so kube-scheduler retries them.", registry=r)

    def on_event(self, event: GangEvent) -> None:
        self.transitions.labels(event.reason).inc()
        if event.reason == TIMED_OUT:
            self.timeouts.inc()
            if "backing off" in event.message:
                self.backoffs.inc()
        if event.reason == BOUND and event.seconds is not None:
            self.quorum_to_bound.observe(event.seconds)

    def refresh(self, fw: GangFramework) -> None:
        """Gauges are read from the framework at scrape time, never kept in step by hand."""
        counts: dict[str, int] = {}
        for st in fw.status.values():
            counts[st.reason] = counts.get(st.reason, 0) + 1
        for state in {*counts, RESERVED, BOUND, BACKING_OFF, FAILED}:
            self.gangs.labels(state).set(counts.get(state, 0))
        self.reservations.set(len(fw.reservations))
        self.reserved_slots.set(sum(len(r.slots) for r in fw.reservations.values()))
        self.held_binds.set(len(fw.held))

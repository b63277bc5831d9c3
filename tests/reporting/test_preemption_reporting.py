"""What users see of a preemption and of a hold: Events on both sides, and metrics."""

from __future__ import annotations

from extender.core.model.vocabulary import (
    GangHeld,
    GroupRef,
    PodRef,
    Preempting,
    SlotView,
    Victim,
)
from extender.reporting.events import GangEvents
from extender.reporting.metrics import Metrics
from tests.reporting.status_env import Captured

HIGH = GroupRef("ns", "high", "g-high")
LOW = GroupRef("ns", "low", "g-low")
LOW_PODS = (PodRef("ns", "low-0", "u0"), PodRef("ns", "low-1", "u1"))
REPORT = Preempting(
    "gang ns/high", HIGH, None, 10, "gang ns/high (priority 10) preempts 2 ...",
    (Victim("gang ns/low", "gang", 1, LOW, LOW_PODS),
     Victim("pod ns/p", "pod", 0, None, (PodRef("ns", "p", "up"),)),
     Victim("reservation of gang ns/r", "reservation", 1, GroupRef("ns", "r", "g-r"), ())),
    (SlotView(PodRef("ns", "high-0", "h0"), "n0", {"cpu": 1000}),),
)


def test_events_on_the_preemptor_and_on_every_victim() -> None:
    rec = Captured()
    GangEvents(rec).on_report(REPORT)
    by_object = {(obj, reason): (msg, warn) for obj, reason, msg, warn in rec.seen}
    assert by_object[("PodGroup ns/high", "Preempting")][0] == REPORT.message
    msg, warn = by_object[("PodGroup ns/low", "Preempted")]
    assert warn and "gang ns/low (priority 1) preempted by gang ns/high (priority 10)" in msg
    assert "2 bound member(s) evicted" in msg
    for pod in ("Pod ns/low-0", "Pod ns/low-1", "Pod ns/p"):
        assert by_object[(pod, "Preempted")][1]
    assert "its reservation released" in by_object[("PodGroup ns/r", "Preempted")][0]


def test_a_plain_preemptor_gets_its_event_on_the_pod() -> None:
    rec = Captured()
    report = Preempting("pod ns/x", None, PodRef("ns", "x", "ux"), 5, "pod ns/x preempts",
                        (), ())
    GangEvents(rec).on_report(report)
    assert rec.seen == [("Pod ns/x", "Preempting", "pod ns/x preempts", False)]


def test_a_hold_gets_an_event() -> None:
    rec = Captured()
    GangEvents(rec).on_report(GangHeld(HIGH, "held for it", (), 31.0))
    assert rec.seen == [("PodGroup ns/high", "CapacityHeld", "held for it", False)]


def test_preemption_metrics() -> None:
    m = Metrics()
    m.on_report(REPORT)
    value = m.registry.get_sample_value
    assert value("gang_extender_preemptions_total", {"preemptor": "gang"}) == 1
    assert value("gang_extender_preemption_victims_total", {"kind": "gang"}) == 1
    assert value("gang_extender_preemption_victims_total", {"kind": "reservation"}) == 1
    assert value("gang_extender_preempted_pods_total") == 3
    assert value("gang_extender_gang_transitions_total",
                 {"reason": "Preempting", "source": "scheduler-plugins"}) == 1


def test_the_debug_view_shows_a_held_reservation_without_a_deadline() -> None:
    import orjson

    from extender.scheduler.debug import gangs_view
    from extender.scheduler.dispatch import Dispatcher
    from tests.core.queue.held_capacity import held_cluster

    sim, _, _ = held_cluster()
    view = gangs_view(Dispatcher(sim.manager, None, clock=lambda: sim.now))
    (res,) = view["reservations"]
    assert res["held"] == "starvation" and res["deadline"] is None
    assert res["secondsLeft"] is None
    orjson.dumps(view)  # no infinite float in the JSON

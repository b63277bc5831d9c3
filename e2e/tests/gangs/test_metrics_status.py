"""`/metrics` after a scenario on the real control plane: the counters moved as the
scenario says they must (issue 4). One gang binds; another, with a member that can
never be placed (its hostPort is taken on every node), times out and backs off."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.gang import GangStack, port_pod
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_podgroup
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.gang_reads import scheduled

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(gang: GangStack) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(gang.get("/metrics")):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every label set that includes `labels`."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= set(lab))


def test_metrics_move_with_a_bound_gang_and_a_timed_out_gang(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(2, prefix="met", cpu="4", memory="8Gi")
    for n in nodes:
        port_pod(ns, f"blocker-{n}", node=n)
    before = scrape(gang)
    create_podgroup(ns, "ok", 2)
    create_podgroup(ns, "stuck", 2, timeout=2)
    for i in range(2):
        create_pod(ns, f"ok-{i}", cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="ok")
    create_pod(ns, "stuck-0", cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="stuck")
    port_pod(ns, "stuck-1", group="stuck", cpu="1")

    def status(name: str) -> dict[str, Any]:
        st: dict[str, Any] = (get_podgroup(ns, name) or {}).get("status") or {}
        return st

    wait_for(lambda: status("ok").get("phase") == "Running" or NotYet(status("ok")), 20,
             "gang ok Running", logs=gang.logs())
    wait_for(lambda: scheduled(status("stuck")).get("reason") == "BackingOff"
             or NotYet(status("stuck")), 20, "gang stuck backing off", logs=gang.logs())

    def moved() -> Samples | NotYet:
        after = scrape(gang)
        gauge = value(after, "gang_extender_gangs", phase="Running", reason="Bound",
                      source="scheduler-plugins")
        events = value(after, "gang_extender_events_total", result="created") - value(
            before, "gang_extender_events_total", result="created")
        return after if gauge >= 1 and events >= 6 else NotYet({"gauge": gauge,
                                                                  "events": events})

    after = wait_for(moved, 10, "gauges and event counters caught up", logs=gang.logs())
    assert isinstance(after, dict)

    def delta(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    sp = "scheduler-plugins"
    assert delta("gang_extender_gang_transitions_total", reason="Reserved", source=sp) >= 2
    assert delta("gang_extender_gang_transitions_total", reason="Bound", source=sp) >= 1
    assert delta("gang_extender_gang_transitions_total", reason="TimedOut", source=sp) >= 1
    assert delta("gang_extender_timeouts_total") >= 1
    assert delta("gang_extender_backoffs_total") >= 1
    assert delta("gang_extender_retry_limit_reached_total") == 0
    assert delta("gang_extender_quorum_to_bound_seconds_count") >= 1
    assert delta("gang_extender_quorum_to_bound_seconds_bucket", le="5.0") >= 1, \
        "the ok gang was bound within seconds of its quorum being present"
    # One filter call for the ok gang (its first member's sets off the commit, whose
    # commit wait lets kube-scheduler drop the other member unseen), one or more for
    # stuck-0.
    assert delta("gang_extender_verb_duration_seconds_count", verb="filter") >= 2
    assert delta("gang_extender_verb_duration_seconds_count", verb="bind") >= 2
    assert delta("gang_extender_verb_duration_seconds_count", verb="bind", result="error") >= 1, \
        "the stuck gang's held bind was answered with an error at its deadline"
    assert delta("gang_extender_bindings_total", result="ok") >= 2
    assert delta("gang_extender_podgroup_status_writes_total", result="ok") >= 3
    assert delta("gang_extender_podgroup_status_writes_total", result="error") == 0
    assert delta("gang_extender_events_total", result="error") == 0
    assert total(after, "gang_extender_gangs", reason="BackingOff") + total(
        after, "gang_extender_gangs", reason="Reserved") + total(
        after, "gang_extender_gangs", reason="InsufficientCapacity") >= 1
    for gauge in ("gang_extender_reservations", "gang_extender_reserved_slots",
                  "gang_extender_waiting_binds"):
        assert (gauge, ()) in after, f"{gauge} is exported"
    # Its deprecated old name, for one release (docs/observability.md "Deprecated names").
    assert after[("gang_extender_held_binds", ())] == after[("gang_extender_waiting_binds", ())]

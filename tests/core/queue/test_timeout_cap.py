"""`--max-schedule-timeout` (Config.max_timeout_seconds): what a tenant's
scheduleTimeoutSeconds can hold capacity for (issue 27, hostile input). The CRD lets a
PodGroup ask for a day; a gang that never assembles must not keep its nodes that long."""

from __future__ import annotations

import pytest

from extender.cli import build_parser
from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.vocabulary import Reason
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


def stalled_gang(config: Config, timeout: int | None) -> SimScheduler:
    """A gang of 3 whose third member never reaches bind: its reservation can only end
    by its deadline."""
    sim = SimScheduler(Core.wire(config))
    for i in range(2):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3, timeout=timeout))
    pods = [sim.add_pod(pod(f"g-{i}", "g")) for i in range(3)]
    assert sim.schedule(pods[0].uid) == "held"
    assert sim.schedule(pods[1].uid) == "held"
    return sim


def test_a_long_schedule_timeout_is_capped_and_the_status_says_so() -> None:
    sim = stalled_gang(Config(10, BackoffPolicy(5, 20), max_timeout_seconds=60,
                              direct_commit=False), 86_400)
    (res,) = sim.manager.reads.reservations()
    assert res.deadline - res.created == 60
    st = sim.status("ns/g")
    assert st.reason == Reason.RESERVED
    assert "for 60s (scheduleTimeoutSeconds 86400 capped at --max-schedule-timeout 60s)" \
        in st.message, st
    sim.tick(59)
    assert "ns/g" in sim.core.ledger.reservations
    sim.tick(1.5)  # the cap, not the day the PodGroup asked for
    assert "ns/g" not in sim.core.ledger.reservations
    st = sim.status("ns/g")
    assert st.reason == Reason.BACKING_OFF
    assert "capped at --max-schedule-timeout 60s" in st.message, st


def test_a_timeout_within_the_cap_and_the_default_are_kept() -> None:
    sim = stalled_gang(Config(10, BackoffPolicy(5, 20), max_timeout_seconds=60,
                              direct_commit=False), 45)
    (res,) = sim.manager.reads.reservations()
    assert res.deadline - res.created == 45
    assert "capped" not in sim.status("ns/g").message
    sim = stalled_gang(Config(10, BackoffPolicy(5, 20), max_timeout_seconds=60,
                              direct_commit=False), None)
    (res,) = sim.manager.reads.reservations()
    assert res.deadline - res.created == 10


def test_no_cap_keeps_what_the_podgroup_asks() -> None:
    sim = stalled_gang(Config(10, BackoffPolicy(5, 20), max_timeout_seconds=None,
                              direct_commit=False), 86_400)
    (res,) = sim.manager.reads.reservations()
    assert res.deadline - res.created == 86_400


@pytest.mark.parametrize(("argv", "cap"), [([], 600.0), (["--max-schedule-timeout", "0"], 0.0),
                                           (["--max-schedule-timeout", "900"], 900.0)])
def test_the_flag_defaults_to_ten_minutes(argv: list[str], cap: float) -> None:
    assert build_parser().parse_args(["serve", *argv]).max_schedule_timeout == cap

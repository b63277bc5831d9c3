"""A gang's backoff survives a restart of the extender and a change of leader: the status
writer keeps it (in `status.requeueState` of a scheduler-plugins PodGroup, in a condition
of ours on an upstream one), the converter reads it back and the gang manager carries
it on (`Backoffs.restore`). Before, a restarted extender retried a timed-out gang at
once and a Failed one as if it had never failed. The tests of what both kinds of
PodGroup must do run once per kind (`SOURCES`); the upstream record's own format is
tested in `test_upstream_backoff_restart.py`."""

from __future__ import annotations

import dataclasses
import math

import pytest

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.phase import rfc3339
from extender.core.model.vocabulary import GroupRef, Reason
from extender.core.queue.backoff import Backoffs
from extender.core.wiring import Core
from tests.core.queue.restart import (
    GANG,
    PLUGINS,
    UPSTREAM,
    Source,
    podgroup,
    recorded,
    uid_of,
    written,
)
from tests.core.sim import SimScheduler, group, node, pod

SOURCES = [pytest.param(PLUGINS, id="scheduler-plugins"), pytest.param(UPSTREAM, id="upstream")]


def timed_out(policy: BackoffPolicy) -> SimScheduler:
    """A gang of two on one node whose second member never comes to filter: its
    reservation times out (after 10 s) once."""
    return PLUGINS.timed_out(policy)


@pytest.mark.parametrize("source", SOURCES)
def test_a_failed_group_stays_failed_across_a_restart(source: Source) -> None:
    gang = source.gang
    policy = BackoffPolicy(5, 8, retry_limit=1)
    first = source.timed_out(policy)
    assert first.status(gang).reason == Reason.FAILED
    restored = source.recorded(first)
    assert (restored.requeue_count, restored.requeue_at) == (1, 0.0)
    second = source.restarted(first, policy, after=60)
    second.tick()
    assert gang not in second.core.ledger.reservations
    assert second.status(gang).reason == Reason.FAILED
    assert "retry limit 1 reached" in second.status(gang).message
    assert second.schedule(uid_of(second, "g-0")) == "rejected"
    st = written(second, gang)
    assert st.phase == "Failed" and st.reason == Reason.RETRY_LIMIT_REACHED


def test_a_restarted_extender_writes_the_failed_count_again() -> None:
    """In `status.requeueState`, as the first process did: the count, and no end."""
    policy = BackoffPolicy(5, 8, retry_limit=1)
    second = PLUGINS.restarted(timed_out(policy), policy, after=60)
    second.tick()
    assert written(second).to_k8s()["requeueState"] == {"count": 1}


@pytest.mark.parametrize("source", SOURCES)
def test_a_restarted_extender_waits_out_the_recorded_backoff(source: Source) -> None:
    gang = source.gang
    policy = BackoffPolicy(20, 60, retry_limit=3)
    first = source.timed_out(policy)
    bo = first.core.backoffs.get(gang)
    assert bo is not None and bo.attempts == 1
    until = bo.until  # 20 s after the timeout; recorded rounded up to the second
    restored = source.recorded(first)
    assert (restored.requeue_count, restored.requeue_at) == (1, math.ceil(until))
    second = source.restarted(first, policy, after=5)
    second.tick()
    assert gang not in second.core.ledger.reservations
    st = second.status(gang)
    assert st.reason == Reason.BACKING_OFF and "carried over" in st.message, st.message
    assert second.schedule(uid_of(second, "g-0")) == "rejected"
    second.tick(until - second.now - 0.5)
    assert gang not in second.core.ledger.reservations
    second.tick(1.6)  # past the recorded, rounded-up end
    assert gang in second.core.ledger.reservations
    # The next timeout is the second, as it would have been without the restart: the
    # delay doubles, and the third is the last --backoff-limit allows.
    second.tick(10.1)
    bo2 = second.core.backoffs.get(gang)
    assert bo2 is not None and (bo2.attempts, bo2.until - second.now) == (2, 40)
    third = source.restarted(second, policy, after=41)
    third.tick()
    third.tick(10.1)
    bo3 = third.core.backoffs.get(gang)
    assert bo3 is not None and (bo3.attempts, bo3.failed) == (3, True)


def test_a_raised_retry_limit_lets_a_failed_group_go_on() -> None:
    first = timed_out(BackoffPolicy(5, 8, retry_limit=1))
    second = PLUGINS.restarted(first, BackoffPolicy(5, 8, retry_limit=3), after=1)
    second.tick()
    assert GANG in second.core.ledger.reservations
    second.tick(10.1)
    bo = second.core.backoffs.get(GANG)
    assert bo is not None and (bo.attempts, bo.failed) == (2, False)


def test_a_standby_follows_the_leaders_writes_and_leads_with_them() -> None:
    leader = timed_out(BackoffPolicy(20, 60))
    standby = SimScheduler(Core.wire(Config(10, BackoffPolicy(20, 60), direct_commit=False)))
    standby.now = leader.now
    standby.add_node(node("n0"))
    standby.add_group(group("g", 2))  # listed before the timeout
    standby.add_group(recorded(leader))  # the leader's status write arrives
    bo = standby.core.backoffs.get(GANG)
    assert bo is not None and bo.attempts == 1 and bo.until >= leader.now + 20
    standby.add_pod(pod("g-0", "g"))
    standby.add_pod(pod("g-1", "g"))
    standby.tick(1)  # now it leads
    assert GANG not in standby.core.ledger.reservations


def test_a_respecified_group_starts_over_though_its_status_still_shows_the_backoff() -> None:
    sim = timed_out(BackoffPolicy(20, 60))
    pg = recorded(sim)
    sim.add_group(pg)  # the status write comes back: nothing new
    assert sim.core.backoffs.get(GANG) is not None
    sim.add_group(dataclasses.replace(pg, min_member=1))  # status unchanged, spec changed
    assert sim.core.backoffs.get(GANG) is None
    sim.tick()
    assert GANG in sim.core.ledger.reservations


def test_restore_never_goes_back_and_never_takes_an_unchanged_state_twice() -> None:
    bos = Backoffs(BackoffPolicy(10, 100))
    g0 = group("g", 2)
    one = dataclasses.replace(g0, requeue_count=1, requeue_at=50.0)
    assert bos.restore(None, g0) is None  # nothing recorded
    taken = bos.restore(g0, one)
    assert taken is not None and (taken.attempts, taken.until) == (1, 50.0)
    assert bos.restore(one, one) is None
    bos.timed_out(GroupRef("ns", "g", "g-g"), 60.0)  # this process counted a second
    assert bos.restore(None, one) is None
    bo = bos.get(GANG)
    assert bo is not None and bo.attempts == 2
    other_uid = dataclasses.replace(one, uid="g-new")
    assert bos.restore(one, other_uid) is None  # a backoff of another incarnation


def test_requeue_state_is_read_and_a_malformed_one_is_dropped() -> None:
    at = "2026-11-24T10:00:00Z"
    g = group_from_k8s(podgroup({"requeueState": {"count": 3, "requeueAt": at}}))
    assert (g.requeue_count, rfc3339(g.requeue_at)) == (3, at)
    failed = group_from_k8s(podgroup({"requeueState": {"count": 2}}))
    assert (failed.requeue_count, failed.requeue_at) == (2, 0.0)
    for bad in ({"count": "3", "requeueAt": at}, {"count": 0}, {"count": True},
                {"count": 1, "requeueAt": "soon"}, "x", None):
        g = group_from_k8s(podgroup({"requeueState": bad}))
        assert (g.requeue_count, g.requeue_at) == (0, 0.0), bad
    assert group_from_k8s(podgroup(None)).requeue_count == 0


def test_a_failed_backoff_records_no_end() -> None:
    bos = Backoffs(BackoffPolicy(10, 100, retry_limit=2))
    ref = GroupRef("ns", "g", "g-g")
    assert bos.timed_out(ref, 0.0).until == 10.0
    failed = bos.timed_out(ref, 1.0)  # even before the first backoff was cleared
    assert (failed.failed, failed.until) == (True, 0.0)

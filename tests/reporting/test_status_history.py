"""The status writer beside a long history: what it revisits is proportional to the
groups that can still change, a backlog is worked through with the event loop let run,
and the gangs gauge costs a scrape nothing per group (docs/reliability.md, "History at
scale")."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from extender.core.model.types import GroupInfo
from tests.reporting.status_env import Env, make_env


def _finish(env: Env, name: str, members: int = 1) -> None:
    env.add_group(name, members)
    for i in range(members):
        uid = env.add_pod(f"{name}-{i}", name)
        env.sim.schedule(uid)
        env.set_phase(uid, "Succeeded")


def _computed(env: Env, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = env.writer.compute

    def counting(group: GroupInfo, now: float) -> Any:
        seen.append(group.name)
        return real(group, now)

    monkeypatch.setattr(env.writer, "compute", counting)
    return seen


def test_the_periodic_pass_revisits_groups_with_members_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It recomputed every group every 30 s: 100,000 finished ones held the event loop
    for seconds each time. Finished groups and groups whose pods are all gone change
    only with a watch event, which marks them."""
    env = make_env()
    for i in range(20):
        _finish(env, f"done{i}")
    env.add_group("empty", 2)  # its pods are gone (or never came)
    env.add_group("live", 3)
    env.add_pod("live-0", "live")
    env.step(6)
    assert env.api.status_writes("done3")[-1]["phase"] == "Finished"
    seen = _computed(env, monkeypatch)
    env.step(31)
    assert seen == ["live"]
    # A watch event still has a finished group looked at again.
    env.writer.observe_group({"metadata": {"namespace": "ns", "name": "done3",
                                           "uid": "g-done3"}})
    env.step(1)
    assert seen == ["live", "done3"]
    # And a group that gets members again is revisited again.
    env.add_pod("empty-0", "empty")
    env.step(1)
    seen.clear()
    env.step(31)
    assert sorted(seen) == ["empty", "live"]


def test_a_backlog_is_worked_through_in_batches_with_the_loop_let_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a restart's list every group is dirty at once: they were all recomputed
    in one stretch of the event loop."""
    env = make_env()
    env.writer.config.batch = 50
    env.writer.kube = None  # computing only
    for i in range(400):
        env.add_group(f"g{i}", 1)
    seen = _computed(env, monkeypatch)
    stretches: list[int] = []
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("extender.reporting.status.asyncio.sleep", sleep)

    async def go() -> None:
        async def other() -> None:
            last = 0
            while True:
                stretches.append(len(seen) - last)
                last = len(seen)
                await asyncio.sleep(0)

        watcher = asyncio.create_task(other())
        await env.writer.step()
        watcher.cancel()

    env.clock.now += 10
    asyncio.run(go())
    assert len(seen) == 400
    assert max(stretches) <= 50
    # Nothing is written (--podgroup-status off), so nothing waits for the write rate:
    # 400 groups took 8 s of gaps between writes that were never made.
    assert set(slept) == {0}


def test_the_gangs_gauge_is_kept_as_statuses_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A scrape walked every group (and asked the gang manager for each); the counts are
    kept as statuses are computed, and match a count from scratch through creation,
    finishing, a recreation under a new uid and deletion."""
    env = make_env()

    def from_scratch() -> dict[tuple[str, str, str], int]:
        out: Counter[tuple[str, str, str]] = Counter()
        for key, rec in env.writer.groups.items():
            group = env.manager.reads.group(key)
            if rec.current is not None and group is not None:
                out[(rec.current.phase, rec.current.reason, group.source)] += 1
        return dict(out)

    _finish(env, "a")
    env.add_group("b", 2)
    env.add_pod("b-0", "b")
    env.add_group("c", 1)
    env.step(6)
    assert env.writer.counts() == from_scratch() == {
        ("Finished", "Bound", "scheduler-plugins"): 1,
        ("Pending", "WaitingForMembers", "scheduler-plugins"): 2}
    # Recreated under a new uid: counted once, as what it is now.
    env.writer.observe_group({"metadata": {"namespace": "ns", "name": "a", "uid": "other"}})
    env.step(1)
    assert env.writer.counts() == from_scratch()
    env.manager.on_group_deleted("ns/c")
    env.writer.group_deleted("ns/c")
    env.step(1)
    assert env.writer.counts() == from_scratch() == {
        ("Finished", "Bound", "scheduler-plugins"): 1,
        ("Pending", "WaitingForMembers", "scheduler-plugins"): 1}

    def no_lookups(key: str) -> None:
        raise AssertionError("a scrape looked a group up")

    monkeypatch.setattr(env.manager.reads, "group", no_lookups)
    assert sum(env.writer.counts().values()) == 2


def test_a_record_keeps_the_statuses_it_compares_with_compactly() -> None:
    """The status of each PodGroup as the API shows it, about 1.3 KiB as parsed JSON,
    was kept for every group: 100,000 finished PodGroups, 130 MiB."""
    import tracemalloc

    from extender.reporting.status_records import GroupRecord

    status: dict[str, Any] = {
        "phase": "Finished", "succeeded": 2, "scheduleStartTime": "2026-11-26T20:00:00Z",
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Bound",
                        "message": "gang history/done-1: quorum of 2 bound",
                        "lastTransitionTime": "2026-11-26T20:00:00Z"}]}
    recs = [GroupRecord(f"u{i}") for i in range(200)]
    tracemalloc.start()
    try:
        for rec in recs:
            rec.observed = {**status, "conditions": [dict(c) for c in status["conditions"]]}
            rec.written = status
        per_record = tracemalloc.get_traced_memory()[0] / len(recs)
    finally:
        tracemalloc.stop()
    assert recs[7].observed == status and recs[7].written == status
    assert per_record < 2 * 400, per_record
    empty = GroupRecord("u")
    assert empty.observed == {} and not empty.has_observed and empty.written is None
    empty.observed = {}
    assert not empty.has_observed

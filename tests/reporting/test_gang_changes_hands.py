"""A gang that becomes another scheduler's, and one that becomes ours again, as users see
it through the status writer: the `gang_extender_gangs` gauge, /debug/podgroups and the
PodGroup's status.

A gang is ours while its pods name this scheduler (`watch_input.on_pod` makes a pod that
names another one NOT_A_MEMBER); when its pods are made again naming another scheduler
(a Job whose template was re-pointed, Coscheduling taking over the same CRD), the writer
must let go of it as it does of a deleted gang: counted nowhere, nothing said about it,
its status never touched again (issue 42's promise: nothing that is not ours). Before,
the gang stayed in the gauge under its last phase for as long as the process lived."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from prometheus_client import generate_latest

from extender.core.model.sources import VOLCANO_GROUP_ANNOTATION
from extender.core.model.types import VOLCANO, GroupInfo, Membership
from extender.reporting.status_debug import status_debug
from tests.core.sim import pod
from tests.reporting.status_env import T0, Env, cond, last, make_env

THEIRS = "scheduler-plugins-scheduler"


@pytest.fixture
def env() -> Env:
    return make_env()


def gauge(env: Env) -> dict[tuple[str, str, str], float]:
    """gang_extender_gangs as a scrape shows it: (phase, reason, source) -> gangs."""
    env.refresh()
    out = {}
    for line in generate_latest(env.metrics.registry).decode().splitlines():
        if line.startswith("gang_extender_gangs{"):
            labels, value = line.rsplit(" ", 1)
            parts = dict(kv.split("=", 1)
                         for kv in labels[labels.index("{") + 1:-1].split(","))
            out[parts["phase"].strip('"'), parts["reason"].strip('"'),
                parts["source"].strip('"')] = float(value)
    return out


def debug_row(env: Env, key: str) -> dict[str, object]:
    rows: list[dict[str, object]] = [
        r for r in status_debug(env.writer, env.clock.now)["podGroups"] if r["gang"] == key]
    (row,) = rows
    return row


def remake_pods(env: Env, uids: list[str], name: str, n: int, scheduler: str) -> list[str]:
    """The gang's pods deleted and made again naming `scheduler`, as a Job's controller
    does once its template changed: no status pass in between."""
    for uid in uids:
        p = env.manager.reads.pod(uid)
        env.sim.delete(uid)
        env.writer.pod_deleted(uid, p)
    return [env.add_pod(f"{name}-{i}", name, scheduler_name=scheduler) for i in range(n)]


def test_a_gang_that_becomes_another_schedulers_leaves_the_gauge_as_a_deleted_one_does(
        env: Env) -> None:
    env.add_group("g", 2)
    env.add_group("gone", 2)
    ours = [env.add_pod(f"g-{i}", "g") for i in range(2)]
    for i in range(2):
        env.add_pod(f"gone-{i}", "gone")
    env.step(1)
    queued = ("Pending", "Queued", "scheduler-plugins")
    assert gauge(env) == {queued: 2.0}
    assert debug_row(env, "ns/g")["phase"] == "Pending"

    env.manager.on_group_deleted("ns/gone")  # what a deleted gang does
    env.writer.group_deleted("ns/gone")
    remake_pods(env, ours, "g", 2, THEIRS)
    env.step(1)
    assert gauge(env) == {}, "the gang now Coscheduling's is still counted as ours"
    row = debug_row(env, "ns/g")
    assert "phase" not in row and "reason" not in row, row
    env.step(60)  # a resync changes nothing
    assert gauge(env) == {}


def test_a_gang_that_becomes_another_schedulers_is_never_written_and_comes_back(
        env: Env) -> None:
    """Taken over by Coscheduling, which writes its own status there: nothing of ours is
    written over it, on a change or a resync. Its pods made again naming us: ours
    again, counted, and our status written over Coscheduling's even where it is the
    status we wrote last (what we wrote before it changed hands is no longer there)."""
    env.add_group("g", 2)
    ours = [env.add_pod(f"g-{i}", "g") for i in range(2)]
    assert env.step(1) == 1
    before = last(env, "g")
    n_written = len(env.api.status_writes("g"))

    theirs = remake_pods(env, ours, "g", 2, THEIRS)
    env.writer.observe_group({"metadata": {"namespace": "ns", "name": "g", "uid": "g-g"},
                              "status": {"phase": "Running", "running": 2}})
    for seconds in (1, 60, 60):
        assert env.step(seconds) == 0
    assert len(env.api.status_writes("g")) == n_written, "our status over Coscheduling's"
    assert env.api.events_for("g-0") == []

    remake_pods(env, theirs, "g", 2, "gang-scheduler")
    assert env.step(1) == 1, "ours again, and the API shows Coscheduling's status"
    assert last(env, "g")["phase"] == before["phase"] == "Pending"
    assert cond(last(env, "g"))["message"] == cond(before)["message"] == (
        "gang ns/g: 2 members present, waiting to be planned")
    assert gauge(env) == {("Pending", "Queued", "scheduler-plugins"): 1.0}
    assert debug_row(env, "ns/g")["phase"] == "Pending"


def volcano_pods(env: Env, scheduler: str, gone: Sequence[str] = ()) -> list[str]:
    """`gone` deleted, and the Volcano gang v's two pods made naming `scheduler`,
    carrying Volcano's annotation as its controllers set it."""
    for uid in gone:
        p = env.manager.reads.pod(uid)
        env.sim.delete(uid)
        env.writer.pod_deleted(uid, p)
    made = []
    for i in range(2):
        p = env.sim.add_pod(pod(f"v-{i}", membership=Membership(VOLCANO, "v"),
                                scheduler_name=scheduler))
        env.sim.drain()
        env.writer.observe_pod({"metadata": {
            "namespace": "ns", "name": p.name, "uid": p.uid,
            "annotations": {VOLCANO_GROUP_ANNOTATION: "v"}}})
        made.append(p.uid)
    return made


def add_volcano_group(env: Env) -> str:
    g = GroupInfo("ns", "v", 2, uid="volcano-v", creation=T0, source=VOLCANO)
    env.sim.add_group(g)
    env.sim.drain()
    env.writer.group_changed(g.key)  # its PodGroup's watch event
    return g.key


def test_a_volcano_gang_whose_pods_are_gone_is_counted_as_it_is_now(env: Env) -> None:
    """A gang of a source whose status is not ours to write (Volcano's): what the writer
    keeps as its previous status is what it computed, not someone else's status, so it
    says nothing about whose the gang is. Its pods gone, it is counted as a PodGroup
    waiting for its members, steadily; before, it stayed counted under the state it had
    with its pods ("Queued"), and letting go of every gang with such a status made it
    come and go at each recompute."""
    key = add_volcano_group(env)
    uids = volcano_pods(env, "gang-scheduler")
    env.step(1)
    assert gauge(env) == {("Pending", "Queued", "volcano"): 1.0}
    for uid in uids:
        gone = env.manager.reads.pod(uid)
        env.sim.delete(uid)
        env.writer.pod_deleted(uid, gone)
    for _ in range(3):
        env.step(6)
        assert gauge(env) == {("Pending", "WaitingForMembers", "volcano"): 1.0}
        env.writer.group_changed(key)
    assert env.api.patches == [], "a Volcano PodGroup's status is Volcano's"


def test_a_volcano_gang_handed_to_volcanos_scheduler_leaves_the_gauge(env: Env) -> None:
    """Its pods made again naming Volcano's own scheduler: Volcano's gang, not one of
    ours waiting for members (the writer knew another scheduler's pods only by the
    scheduler-plugins label and the upstream spec.schedulingGroup); named for us again,
    it is counted again."""
    key = add_volcano_group(env)
    uids = volcano_pods(env, "gang-scheduler")
    env.step(1)
    assert gauge(env) == {("Pending", "Queued", "volcano"): 1.0}
    uids = volcano_pods(env, "volcano", gone=uids)
    for seconds in (1, 60):
        env.step(seconds)
        assert gauge(env) == {}
    assert "phase" not in debug_row(env, key)
    volcano_pods(env, "gang-scheduler", gone=uids)
    env.step(1)
    assert gauge(env) == {("Pending", "Queued", "volcano"): 1.0}

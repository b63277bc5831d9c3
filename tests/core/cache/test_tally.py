"""A gang's counts are kept as its pods change (cache/tally.py), so the checks made on
every pod event and every verb call cost the same for any gang size. Without it, each
event of a member walked the whole gang: a 1,000-pod gang's commit walked its members
some 2,000 times (docs/performance.md, "The commit of a planned gang")."""

from __future__ import annotations

import dataclasses

import pytest

from extender.core.cache.cache import Cache
from extender.core.cache.tally import Tally
from extender.core.model.config import Config
from extender.core.model.types import GroupInfo
from extender.core.model.vocabulary import BindPod
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


def test_a_commits_bindings_and_status_writes_never_walk_the_gang(
        monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[str] = []
    real = Cache.summary

    def counting(self: Cache, g: GroupInfo) -> object:
        if g.key not in self._summaries:  # a walk of the gang's pods, not a cached answer
            walks.append(g.key)
        return real(self, g)

    monkeypatch.setattr(Cache, "summary", counting)
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=True)))
    for i in range(8):
        sim.add_node(node(f"n{i}", cpu=64000))
    size = 200
    sim.add_group(group("g", size))
    pods = [pod(f"g-{i}", "g") for i in range(size)]
    for p in pods:
        sim.add_pod(p)
    sim.now += 1.0
    sim.manager.tick(sim.now)
    commit = [a for a in sim.manager.take_actions() if isinstance(a, BindPod)]
    assert len(commit) == size
    walks.clear()
    by_uid = {p.uid: p for p in pods}
    for a in commit:  # each Binding's answer, then its watch event, then the kubelet's
        sim.manager.binding_finished(a.pod.uid, a.node, None, sim.now)
        bound = dataclasses.replace(by_uid[a.pod.uid], node_name=a.node)
        sim.manager.on_pod(bound, sim.now)
        sim.manager.on_pod(dataclasses.replace(bound, phase="Running"), sim.now)
    assert not sim.manager.reads.reservations()  # the quorum was seen bound
    assert len(walks) <= 2, f"{len(walks)} walks of the gang for {size} members' events"


def test_the_tally_follows_members_that_leave_finish_or_change_gang() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    cache.upsert_group(group("a", 2))
    cache.upsert_group(group("b", 2))
    a0, a1 = pod("a-0", "a"), pod("a-1", "a")
    cache.upsert_pod(a0)
    cache.upsert_pod(a1)
    assert cache.tally(group("a", 2)) == Tally(2, 0, 0)
    cache.upsert_pod(dataclasses.replace(a0, node_name="n1", phase="Running"))
    assert cache.tally(group("a", 2)) == Tally(2, 1, 0)
    cache.upsert_pod(dataclasses.replace(a0, node_name="n1", phase="Succeeded"))
    assert cache.tally(group("a", 2)) == Tally(1, 0, 1)  # finished: not a member
    assert cache.tally(group("a", 2)).bound_or_succeeded == 1
    cache.upsert_pod(dataclasses.replace(a1, deleting=True))
    assert cache.tally(group("a", 2)) == Tally(0, 0, 1)
    moved = dataclasses.replace(pod("a-1", "b"), uid=a1.uid)
    cache.upsert_pod(moved)  # relabelled into another gang
    assert cache.tally(group("b", 2)) == Tally(1, 0, 0)
    cache.remove_pod(moved.uid)
    cache.remove_pod(a0.uid)
    assert cache.tally(group("a", 2)) == cache.tally(group("b", 2)) == Tally(0, 0, 0)
    assert not cache._tallies._counts  # nothing kept for gangs with no pods

"""`Reads.bindings_ahead`: how many Bindings the commits of the gangs being created
now will ask for, which the adapter opens connections for ahead of them
(scheduler/warm.py). It must count only what is still to come: a gang that is already
committing holds its connections, and one that stopped arriving is not about to commit."""

from __future__ import annotations

import dataclasses

from extender.core.model.config import Config
from extender.core.model.vocabulary import BindPod
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


def _sim() -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=True)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=64000))
    return sim


def test_members_of_a_gang_being_created_count_until_it_is_planned() -> None:
    sim = _sim()
    sim.add_group(group("big", 40))
    members = [pod(f"big-{i}", "big", creation=sim.now) for i in range(40)]
    for p in members[:25]:
        sim.add_pod(p)
    assert sim.manager.reads.bindings_ahead(sim.now) == 25  # those that exist, none bound
    for p in members[25:]:
        sim.add_pod(p)
    assert sim.manager.reads.bindings_ahead(sim.now) == 40
    sim.now += 0.2
    sim.manager.tick(sim.now)
    commit = [a for a in sim.manager.take_actions() if isinstance(a, BindPod)]
    assert len(commit) == 40
    # Committing: its Bindings hold their own connections.
    assert sim.manager.reads.bindings_ahead(sim.now) == 0
    for a in commit:
        sim.manager.binding_finished(a.pod.uid, a.node, None, sim.now)
    assert sim.manager.reads.bindings_ahead(sim.now) == 0


def test_gangs_that_stopped_arriving_bound_members_and_groupless_pods_do_not_count() -> None:
    sim = _sim()
    sim.add_group(group("old", 8))
    for i in range(3):  # waits for members that never come
        sim.add_pod(pod(f"old-{i}", "old", creation=sim.now))
    sim.now += 6.0  # past the arriving window
    assert sim.manager.reads.bindings_ahead(sim.now) == 0

    sim.add_group(group("fresh", 4))
    fresh = [pod(f"fresh-{i}", "fresh", creation=sim.now) for i in range(3)]
    for p in fresh:
        sim.add_pod(p)
    # One member bound by someone else's Binding (a restart's leftover, say): not ahead.
    sim.add_pod(dataclasses.replace(pod("fresh-3", "fresh", creation=sim.now),
                                    node_name="n0"))
    # Members of a gang whose PodGroup does not exist yet cannot be committed.
    sim.add_pod(pod("orphan-0", "orphan", creation=sim.now))
    assert sim.manager.reads.bindings_ahead(sim.now) == 3

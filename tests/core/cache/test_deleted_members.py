"""A pod being deleted counts for nothing in its gang (architecture.md §1), not even one
that ran to success (`tally.counts_as_succeeded`).

Why: a job restarted whole (an MPI job, a training run, a JobSet's new attempt) deletes
its old pods and creates new ones at once. A worker that exits 0 on SIGTERM is written
Succeeded by the kubelet while its deletion is still in progress. Counted as succeeded,
those dying pods made the new attempt's quorum look bound, so its pods were let through
the filter and bound one by one as elastic extras, as far as room went: part of the new
gang bound and the rest without room, the hung job gang scheduling exists to prevent."""

from __future__ import annotations

import dataclasses

import pytest

from extender.core.cache.cache import Cache
from extender.core.cache.tally import Tally
from extender.core.model.config import Config
from extender.core.model.types import CompositeInfo, PodInfo, composite_key
from extender.core.model.vocabulary import BindPod, GangReserved
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

MODES = pytest.mark.parametrize("direct", [True, False], ids=["direct", "barrier"])
# How the kubelet leaves a deleted pod before it is gone: still running its grace
# period, or written Succeeded (its containers exited 0 on SIGTERM).
DYING = pytest.mark.parametrize("phase", ["Running", "Succeeded"])
PARENT = composite_key("ns", "lw")


def test_a_succeeded_pod_being_deleted_counts_for_nothing() -> None:
    cache = Cache()
    cache.upsert_node(node("n1"))
    g = group("g", 2)
    cache.upsert_group(g)
    a, b = (dataclasses.replace(pod(f"g-{i}", "g"), node_name="n1", phase="Running")
            for i in range(2))
    cache.upsert_pod(a)
    cache.upsert_pod(b)
    cache.upsert_pod(dataclasses.replace(a, phase="Succeeded"))
    assert cache.tally(g) == Tally(1, 1, 1)  # finished and kept: still counts
    cache.upsert_pod(dataclasses.replace(a, phase="Succeeded", deleting=True))
    cache.upsert_pod(dataclasses.replace(b, deleting=True))
    assert cache.tally(g) == Tally(0, 0, 0)
    assert cache.succeeded(g) == 0 and cache.quorum_counts(g).bound_or_succeeded == 0


def cluster(direct: bool) -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=direct)))
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=8000))
    return sim


def dying(sim: SimScheduler, pods: list[PodInfo], phase: str) -> None:
    """The owner deletes `pods`; the kubelet then writes `phase` (they stay bound)."""
    for p in pods:
        cur = sim.cache.pods[p.uid]
        assert cur.node_name
        sim.manager.on_pod(dataclasses.replace(cur, deleting=True), sim.now)
        sim.manager.on_pod(dataclasses.replace(cur, deleting=True, phase=phase), sim.now)
    sim.drain()


def bound_gang(direct: bool, min_member: int, count: int
               ) -> tuple[SimScheduler, list[PodInfo]]:
    """Gang ns/g of `count` pods of 6 CPUs (quorum `min_member`), one pod a node, placed
    and bound: the attempt whose pods the job then deletes."""
    sim = cluster(direct)
    sim.add_group(group("g", min_member))
    old = [sim.add_pod(pod(f"g-{i}", "g", cpu=6000)) for i in range(count)]
    sim.run_all()
    sim.tick()
    assert len(sim.bound("g")) == count
    return sim, old


def new_names(sim: SimScheduler) -> list[str]:
    return sorted(p.name for p in sim.bound() if "-new" in p.name)


def placed_whole(sim: SimScheduler, old: list[PodInfo], blocker: PodInfo,
                 new: list[PodInfo]) -> None:
    """Once the old pods and `blocker` are gone the new set fits: it is reserved, then
    bound, all of it."""
    mark = len(sim.actions)
    for p in [*old, blocker]:
        sim.delete(p.uid)
    sim.tick(1)
    sim.run_all()
    sim.tick(1)
    assert new_names(sim) == sorted(p.name for p in new)
    after = sim.actions[mark:]
    reserved = [i for i, a in enumerate(after) if isinstance(a, GangReserved)]
    binds = [i for i, a in enumerate(after) if isinstance(a, BindPod)]
    assert len(binds) == len(new) and reserved and reserved[0] < binds[0]


@MODES
@DYING
def test_a_restarted_gang_is_placed_whole_not_on_a_quorum_of_dying_pods(
        direct: bool, phase: str) -> None:
    sim, old = bound_gang(direct, 4, 4)
    dying(sim, old, phase)
    # A pod that takes one node's room once the dying one there leaves it: three of
    # the four replacements would fit, not all.
    blocker = sim.add_pod(pod("plain", None, cpu=6000))
    if phase == "Succeeded":  # finished: their capacity is free already
        assert sim.schedule(blocker.uid) == "bound"
    else:
        sim.bind_foreign(blocker, "n3")
    new = [sim.add_pod(pod(f"g-new-{i}", "g", cpu=6000)) for i in range(4)]
    sim.tick()
    assert [sim.schedule(p.uid) for p in new] == ["rejected"] * 4
    assert new_names(sim) == []
    assert "ns/g" not in sim.core.ledger.reservations
    if phase == "Succeeded":
        assert sim.last_filter[new[0].uid].startswith(
            "gang ns/g: needs 4 × {cpu: 6, memory: 1Gi}; 3 fit")
    placed_whole(sim, old, blocker, new)


@MODES
def test_a_restarted_composite_is_placed_whole_not_on_children_of_dying_pods(
        direct: bool) -> None:
    sim = cluster(direct)
    sim.manager.on_group(CompositeInfo("ns", "lw", 2, uid="c-lw"), sim.now)
    sim.add_group(group("leader", 1, parent=PARENT))
    sim.add_group(group("workers", 3, parent=PARENT))
    old = [pod("leader-0", "leader", cpu=6000)]
    old += [pod(f"workers-{i}", "workers", cpu=6000) for i in range(3)]
    for p in old:
        sim.add_pod(p)
    sim.run_all()
    sim.tick()
    assert len(sim.bound()) == 4
    dying(sim, old, "Succeeded")
    blocker = sim.add_pod(pod("plain", None, cpu=6000))
    assert sim.schedule(blocker.uid) == "bound"
    new = [pod("leader-new", "leader", cpu=6000)]
    new += [pod(f"workers-new-{i}", "workers", cpu=6000) for i in range(3)]
    for p in new:
        sim.add_pod(p)
    sim.tick()
    assert [sim.schedule(p.uid) for p in new] == ["rejected"] * 4
    assert new_names(sim) == []
    placed_whole(sim, old, blocker, new)


@MODES
def test_an_elastic_gang_binds_extras_on_its_live_quorum_alone(direct: bool) -> None:
    """minMember 2 of 3 bound: one of them dying after it succeeded leaves a quorum of
    two live bound members, so a new pod is an extra, bound at once. Two more dying
    leave one live bound member: the next new pod completes a quorum, and is placed
    with a reservation like any gang short of its quorum, not as an extra."""
    sim, old = bound_gang(direct, 2, 3)

    def reservations() -> int:
        return sum(isinstance(a, GangReserved) for a in sim.actions)

    made = reservations()
    dying(sim, old[:1], "Succeeded")
    extra = sim.add_pod(pod("g-new-0", "g", cpu=6000))
    assert sim.schedule(extra.uid) == "bound"
    assert reservations() == made
    dying(sim, old[1:], "Succeeded")
    assert sim.cache.tally(group("g", 2)) == Tally(1, 1, 0)
    late = sim.add_pod(pod("g-new-1", "g", cpu=6000))
    sim.tick()
    sim.schedule(late.uid)
    sim.tick()
    assert new_names(sim) == ["g-new-0", "g-new-1"]
    assert reservations() == made + 1

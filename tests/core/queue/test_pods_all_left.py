"""A gang whose every pod of ours leaves (deleted, or created again naming another
scheduler, as a user moving the job does: a pod's schedulerName cannot change) while it is
reserved: nothing waits for that reservation any more, so it ends at once, without a
backoff step and without rejecting anything, and the gang's next pods (an MPI job
recreating its workers) are planned afresh. Kept, it stayed a reservation of no slots
until its deadline, timed out, and counted against the gang's backoff, so the next
attempt waited out a backoff it had not earned (architecture.md §2, §4; issue 42: the core
keeps no state about what is gone). A Binding in flight keeps its pod's charge until it is
answered, whatever happens to the gang (§11).

Its status says then what a PodGroup created without pods says: nothing of the gang
manager's own (the status writer counts "0 of N members exist"), not its last word about
pods and capacity that are gone; a backoff's word stays, since the backoff does."""

from __future__ import annotations

import pytest

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.phase import compute_status
from extender.core.model.types import CompositeInfo
from extender.core.model.vocabulary import BindOutcome, GangReserved, GangTimedOut, Reason
from extender.core.wiring import Core
from extender.reporting.metrics import Metrics
from tests.core.ledger.direct_commit_sim import binds, direct_sim, run_pass, taken
from tests.core.queue.held_capacity import held_cluster
from tests.core.sim import SimScheduler, group, node, pod

# How a gang's pods all leave: deleted, or deleted and created again naming another
# scheduler.
LEAVING = pytest.mark.parametrize("theirs", [False, True], ids=["deleted", "other-scheduler"])
# A CompositePodGroup with a gang policy: both its children are placed together.
COMPOSITE = CompositeInfo("ns", "lw", 2, uid="c-lw")


def cluster(sim: SimScheduler | None = None) -> SimScheduler:
    """Three 8-CPU nodes; the barrier unless `sim` says otherwise."""
    sim = sim or SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=8000))
    return sim


def add_members(sim: SimScheduler, gang: str, n: int, scheduler: str = "gang-scheduler",
                tag: str = "") -> list[str]:
    """`n` pods of 6 CPU in `gang`: each takes a node of its own."""
    return [sim.add_pod(pod(f"{gang}-{tag}{i}", gang, cpu=6000, creation=sim.now,
                            scheduler_name=scheduler)).uid for i in range(n)]


def leave(sim: SimScheduler, uids: list[str], gang: str, theirs: bool) -> list[str]:
    """Every pod in `uids` deleted; `theirs`: as many created again naming another
    scheduler (this simulated kube-scheduler does not place them). Their uids."""
    for uid in uids:
        sim.delete(uid)
    if not theirs:
        return []
    new = add_members(sim, gang, len(uids), "other-scheduler", "theirs-")
    sim.held.update(new)
    return new


def timed_out(sim: SimScheduler, gang: str) -> list[GangTimedOut]:
    return [a for a in sim.actions if isinstance(a, GangTimedOut) and a.group.key == gang]


def reserved(sim: SimScheduler, gang: str) -> int:
    return len([a for a in sim.actions if isinstance(a, GangReserved) and a.group.key == gang])


def reservations(sim: SimScheduler) -> dict[str, int]:
    """Gang -> its reservation's slots."""
    return {r.gang: len(r.slots) for r in sim.manager.reads.reservations()}


@LEAVING
def test_a_reserved_gang_whose_pods_all_left_is_released_at_once_without_a_backoff(
        theirs: bool) -> None:
    """Two of three members wait at the barrier when every pod of the gang leaves: the
    reservation ends then, not 30 s later as a timeout, and the job's new pods are
    placed at once."""
    sim = cluster()
    sim.add_group(group("g", 3))
    first = add_members(sim, "g", 3)
    sim.tick(0.1)
    assert reservations(sim) == {"ns/g": 3}
    assert [sim.schedule(uid) for uid in first[:2]] == ["held", "held"]
    other = leave(sim, first, "g", theirs)
    assert reservations(sim) == {}
    assert sim.manager.reads.binds_in_progress() == []
    sim.tick(40.0)  # past the gang's 30 s timeout
    assert timed_out(sim, "ns/g") == []
    assert sim.core.backoffs.get("ns/g") is None
    for uid in other:
        sim.delete(uid)
    second = add_members(sim, "g", 3, tag="new-")
    sim.tick(0.1)
    assert reserved(sim, "ns/g") == 2  # planned afresh, no backoff to wait out
    sim.run_all()
    assert all(sim.cache.pods[uid].node_name for uid in second)
    assert sim.overcommits == []


def test_a_committed_gang_whose_pods_all_left_keeps_the_charge_of_its_bindings_in_flight(
        ) -> None:
    """The direct commit decided the three Bindings and none is answered when the pods
    are deleted: the reservation ends at once, without a backoff, but each Binding's
    pod stays charged to its node until its answer (it may land there), and a plain
    pod's bind onto that capacity is refused until then."""
    sim = cluster(direct_sim())
    sim.add_group(group("g", 3))
    add_members(sim, "g", 3)
    run_pass(sim)
    flying = binds(taken(sim))
    assert len(flying) == 3
    for uid in flying:
        sim.manager.on_pod_deleted(uid, sim.now)
    assert reservations(sim) == {}
    node0 = sorted(flying.values())[0]
    assert sim.cache.free[node0]["cpu"] == 2000
    plain = sim.add_pod(pod("plain", cpu=6000))
    refused = sim.manager.bind(plain.namespace, plain.name, plain.uid, node0, sim.now)
    assert refused.outcome is BindOutcome.ERROR
    for uid, on in flying.items():
        assert sim.manager.post_due(uid, on) is not None  # its pod is gone: not posted
        sim.manager.binding_finished(uid, on, "not posted: the pod is gone", sim.now)
    assert sim.cache.free[node0]["cpu"] == 8000
    run_pass(sim, 40.0)
    taken(sim)
    assert timed_out(sim, "ns/g") == []
    assert sim.core.backoffs.get("ns/g") is None


def test_a_gang_whose_commit_bound_members_and_lost_the_rest_is_still_evicted() -> None:
    """Only a gang with no pod of ours left is released at once: one whose commit bound
    members and lost the others (below its quorum) still times out at its deadline and
    has its bound members evicted, so that it is placed again whole (§11)."""
    sim = cluster(direct_sim())
    sim.add_group(group("g", 3))
    add_members(sim, "g", 3)
    run_pass(sim)
    flying = binds(taken(sim))
    uids = sorted(flying)
    for uid in uids[:2]:
        sim.manager.binding_finished(uid, flying[uid], None, sim.now)
    sim.manager.binding_finished(uids[2], flying[uids[2]], "404: gone", sim.now)
    sim.manager.on_pod_deleted(uids[2], sim.now)
    assert list(reservations(sim)) == ["ns/g"]
    run_pass(sim, 40.0)
    taken(sim)
    (out,) = timed_out(sim, "ns/g")
    assert sorted(p.uid for p in out.evicted) == uids[:2]
    assert sim.core.backoffs.get("ns/g") is not None


@LEAVING
def test_a_reserved_composite_whose_pods_all_left_is_released_at_once(theirs: bool) -> None:
    """A CompositePodGroup with a gang policy, its two children reserved together: every
    pod of both leaves, and both reservations end at once, neither child backing off."""
    sim = cluster()
    sim.manager.on_group(COMPOSITE, sim.now)
    kids = {"leader": 1, "workers": 2}
    pods: dict[str, list[str]] = {}
    for name, n in kids.items():
        sim.add_group(group(name, n, parent=COMPOSITE.key))
        pods[name] = add_members(sim, name, n)
    sim.tick(0.1)
    assert reservations(sim) == {"ns/leader": 1, "ns/workers": 2}
    for name, uids in pods.items():
        leave(sim, uids, name, theirs)
    assert reservations(sim) == {}
    assert sim.decision("ns/leader") is sim.decision("ns/workers") is None
    sim.tick(40.0)
    assert timed_out(sim, "ns/leader") == timed_out(sim, "ns/workers") == []
    assert sim.core.backoffs.get("ns/leader") is None
    assert sim.core.backoffs.get("ns/workers") is None


def test_a_child_reserved_alone_after_its_composite_was_placed_is_released_at_once() -> None:
    """Once its composite is placed, a child that starts later is reserved as a gang of
    its own (`composite_unit.unit_of`): its pods all leaving end that reservation at
    once, while its siblings keep running."""
    sim = cluster()
    sim.manager.on_group(CompositeInfo("ns", "lw", 1, uid="c-lw"), sim.now)
    sim.add_group(group("leader", 1, parent=COMPOSITE.key))
    (leader,) = add_members(sim, "leader", 1)
    sim.tick(0.1)
    assert sim.schedule(leader) == "bound"
    sim.add_group(group("late", 2, parent=COMPOSITE.key))
    late = add_members(sim, "late", 2)
    sim.tick(0.1)
    assert reservations(sim) == {"ns/late": 2}
    assert sim.schedule(late[0]) == "held"
    leave(sim, late, "late", theirs=False)
    assert reservations(sim) == {}
    sim.tick(40.0)
    assert timed_out(sim, "ns/late") == []
    assert sim.core.backoffs.get("ns/late") is None
    assert sim.cache.pods[leader].node_name


def gangs_by_reason(sim: SimScheduler) -> dict[str, int]:
    """The gang manager's reasons as the metrics count them (the unplaceable gauge reads
    these whatever the status writer counts)."""
    return sim.manager.reads.gauges().reasons


def unplaceable_gauge(sim: SimScheduler) -> float | None:
    m = Metrics()
    m.refresh(sim.manager.reads)
    return m.registry.get_sample_value("gang_extender_unplaceable_gangs")


@LEAVING
def test_a_reserved_gang_whose_pods_all_left_says_what_a_fresh_podgroup_says(
        theirs: bool) -> None:
    sim = cluster()
    sim.add_group(group("fresh", 3))
    sim.tick(0.1)
    assert sim.decision("ns/fresh") is None  # a PodGroup without pods: no word of ours
    sim.add_group(group("g", 3))
    first = add_members(sim, "g", 3)
    sim.tick(0.1)
    assert sim.status("ns/g").reason == Reason.RESERVED
    other = leave(sim, first, "g", theirs)
    sim.tick(0.1)
    assert sim.decision("ns/g") is None
    assert gangs_by_reason(sim) == {}
    for uid in other:
        sim.delete(uid)
    # The job's new pods, as the status writer sees them before the next pass: not
    # "Reserved 3 slot(s)" (nothing is), but present and not yet looked at.
    second = [sim.cache.pods[uid] for uid in add_members(sim, "g", 3, tag="new-")]
    st = compute_status(sim.cache.groups["ns/g"], second, sim.decision("ns/g"), sim.now)
    assert st is not None and (st.phase, st.reason) == ("Pending", Reason.QUEUED)


@LEAVING
def test_a_starving_gang_whose_pods_all_left_no_longer_says_capacity_is_held(
        theirs: bool) -> None:
    sim, driver, big = held_cluster()
    assert sim.status("ns/big").reason == Reason.CAPACITY_HELD
    leave(sim, list(big.uids), "big", theirs)
    big.uids = []
    driver.run(1.0)
    assert sim.decision("ns/big") is None
    assert Reason.CAPACITY_HELD not in gangs_by_reason(sim)


@LEAVING
def test_an_unplaceable_gang_whose_pods_all_left_is_no_longer_counted(theirs: bool) -> None:
    sim = cluster()
    sim.add_group(group("huge", 2))
    uids = [sim.add_pod(pod(f"huge-{i}", "huge", cpu=16000)).uid for i in range(2)]
    sim.tick(0.1)
    assert sim.status("ns/huge").reason == Reason.UNPLACEABLE
    assert unplaceable_gauge(sim) == 1
    leave(sim, uids, "huge", theirs)
    assert sim.decision("ns/huge") is None
    assert unplaceable_gauge(sim) == 0


@pytest.mark.parametrize("limit", [None, 1], ids=["backing-off", "retry-limit"])
def test_a_backing_off_gang_whose_pods_all_left_still_says_it_backs_off(
        limit: int | None) -> None:
    """The backoff outlives the pods (the next ones wait it out), as one carried over in
    a PodGroup's status does for a group read anew: its word stays, and a group Failed
    at its retry limit stays Failed."""
    sim = cluster(SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                                direct_commit=False,
                                                backoff=BackoffPolicy(retry_limit=limit)))))
    sim.add_group(group("g", 3))
    first = add_members(sim, "g", 3)
    sim.tick(0.1)
    assert sim.schedule(first[0]) == "held"
    sim.tick(31.0)  # one member only: the reservation times out
    before = sim.status("ns/g")
    assert before.reason == (Reason.FAILED if limit else Reason.BACKING_OFF)
    leave(sim, first, "g", theirs=False)
    assert sim.decision("ns/g") == before

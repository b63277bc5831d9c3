"""A member's Binding in flight keeps its capacity whatever happens to its gang, and every
post of it is decided when it is sent (extender/core/ledger/__init__.py, "A Binding in
flight"; architecture.md §11).

Each test sets up the same commit: three members of 6 CPU planned on three 8-CPU nodes,
their Bindings decided (direct commit) and not yet answered. Then something happens to the
gang before the answers come, and a plain 6-CPU pod asks to bind onto a member's node:
letting it through would put 12 of 8 CPU there once both Bindings land.
"""

from __future__ import annotations

import dataclasses

import pytest

from extender.core.model.vocabulary import BindOutcome
from extender.core.wiring import Core
from tests.core.ledger.direct_commit_sim import binds, direct_sim, run_pass, taken
from tests.core.sim import SimScheduler, group, node, pod


def commit_in_flight() -> tuple[SimScheduler, dict[str, str]]:
    """The commit above, its Bindings decided and none answered: pod uid -> node."""
    sim = direct_sim()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=8000))
    sim.add_group(group("g", 3))
    for i in range(3):
        sim.add_pod(pod(f"g-{i}", "g", cpu=6000))
    run_pass(sim)
    flying = binds(taken(sim))
    assert len(flying) == 3
    return sim, flying


def core(sim: SimScheduler) -> Core:
    return sim.manager._core


def plain_bind_refused(sim: SimScheduler, on: str) -> bool:
    """Whether a plain 6-CPU pod's bind onto `on` is refused."""
    plain = sim.add_pod(pod("plain", cpu=6000))
    decision = sim.manager.bind(plain.namespace, plain.name, plain.uid, on, sim.now)
    return decision.outcome is BindOutcome.ERROR


def test_a_deleted_group_keeps_the_charge_of_bindings_in_flight() -> None:
    sim, flying = commit_in_flight()
    sim.manager.on_group_deleted("ns/g")
    first = sorted(flying.values())[0]
    assert core(sim).cache.free[first]["cpu"] == 2000  # 8 - 6, as before the deletion
    assert plain_bind_refused(sim, first)


def test_a_recreated_group_keeps_the_charge_of_bindings_in_flight() -> None:
    sim, flying = commit_in_flight()
    sim.manager.on_group(dataclasses.replace(group("g", 3), uid="g-g-2"), sim.now)
    assert plain_bind_refused(sim, sorted(flying.values())[0])


def test_a_lowered_min_member_keeps_the_charge_of_bindings_in_flight() -> None:
    """Two members land, minMember drops to 2: the quorum is bound and the reservation
    ends, while the third member's Binding is still in flight."""
    sim, flying = commit_in_flight()
    uids = sorted(flying)
    for uid in uids[:2]:
        sim.manager.binding_finished(uid, flying[uid], None, sim.now)
    sim.manager.on_group(group("g", 2), sim.now)
    assert "ns/g" not in core(sim).ledger.reservations  # the quorum is bound: reservation over
    assert plain_bind_refused(sim, flying[uids[2]])


def test_bindings_of_a_released_gang_are_not_posted() -> None:
    sim, flying = commit_in_flight()
    sim.manager.on_group_deleted("ns/g")
    for uid, on in flying.items():
        why = sim.manager.post_due(uid, on)
        assert why is not None and "ns/g" in why and "withdrawn" in why


def test_a_withdrawn_binding_frees_its_charge_once_answered() -> None:
    sim, flying = commit_in_flight()
    sim.manager.on_group_deleted("ns/g")
    uid, on = sorted(flying.items())[0]
    why = sim.manager.post_due(uid, on)
    sim.manager.binding_finished(uid, on, why, sim.now)
    assert core(sim).cache.free[on]["cpu"] == 8000
    assert not plain_bind_refused(sim, on)


def test_a_landed_binding_of_a_released_gang_is_charged_once() -> None:
    """Sent before the deletion: the pod lands, and is charged as bound, not twice."""
    sim, flying = commit_in_flight()
    uid, on = sorted(flying.items())[0]
    assert sim.manager.post_due(uid, on) is None  # sent before the group went
    sim.manager.on_group_deleted("ns/g")
    sim.manager.binding_finished(uid, on, None, sim.now)
    assert core(sim).cache.free[on]["cpu"] == 2000


def test_a_post_is_refused_on_a_node_taken_since_the_commit() -> None:
    """A `spec.nodeName` pod landed on a member's node after the commit decided its
    Binding (a retry after a 429 comes up to a second later): that post is not sent, and
    the member's slot moves to a node with room."""
    sim, flying = commit_in_flight()
    sim.add_node(node("spare", cpu=8000))
    uid, on = sorted(flying.items())[0]
    sim.bind_foreign(pod("squatter", cpu=4000), on)
    why = sim.manager.post_due(uid, on)
    assert why is not None and f"node {on} is short of" in why
    sim.manager.binding_finished(uid, on, why, sim.now)
    res = core(sim).ledger.reservations.get("ns/g")
    assert res is not None and res.slots[uid].node == "spare"


def test_no_post_while_a_watch_is_behind() -> None:
    sim, flying = commit_in_flight()
    sim.manager.watch_broken("pods")
    uid, on = sorted(flying.items())[0]
    why = sim.manager.post_due(uid, on)
    assert why is not None and "watch" in why


def test_a_post_for_a_deleted_pod_is_refused() -> None:
    sim, flying = commit_in_flight()
    uid, on = sorted(flying.items())[0]
    sim.manager.on_pod_deleted(uid, sim.now)
    assert sim.manager.post_due(uid, on) is not None


def test_a_post_no_longer_decided_is_refused() -> None:
    sim, flying = commit_in_flight()
    uid, on = sorted(flying.items())[0]
    sim.manager.binding_finished(uid, on, "refused", sim.now)
    assert sim.manager.post_due(uid, on) is not None


def test_posts_of_a_live_commit_are_due() -> None:
    sim, flying = commit_in_flight()
    assert all(sim.manager.post_due(uid, on) is None for uid, on in flying.items())


def test_a_post_is_refused_on_capacity_nominated_since_the_commit() -> None:
    """kube-scheduler's preemption nominated a pending pod of equal priority to a
    member's node after the commit decided the member's Binding: the post that comes
    later does not take that capacity."""
    sim, flying = commit_in_flight()
    sim.add_node(node("spare", cpu=8000))
    uid, on = sorted(flying.items())[0]
    # 4 CPU nominated where 2 are free once the member is counted.
    sim.add_pod(pod("preemptor", cpu=4000, nominated_node=on))
    why = sim.manager.post_due(uid, on)
    assert why is not None and "nominated" in why and "preemptor" in why


def plain_bound_in_flight(sim: SimScheduler, on: str) -> str:
    """A plain 6-CPU pod's bind onto `on` accepted: its Binding in flight; its uid."""
    first = sim.add_pod(pod("first", cpu=6000))
    decision = sim.manager.bind(first.namespace, first.name, first.uid, on, sim.now)
    assert decision.outcome is BindOutcome.BOUND or sim.manager.reads.bind_in_flight(first.uid)
    sim.manager.take_actions()
    return first.uid


def unknown_outcome() -> tuple[SimScheduler, str]:
    """A plain pod's Binding onto n0 (8 CPU) whose every try lost its answer, and the
    pod could not be read back: it may be bound there."""
    sim = direct_sim()
    sim.add_node(node("n0", cpu=8000))
    uid = plain_bound_in_flight(sim, "n0")
    sim.manager.binding_finished(uid, "n0", "connection reset", sim.now, unknown=True)
    return sim, uid


def test_a_binding_of_unknown_outcome_keeps_its_charge() -> None:
    sim, uid = unknown_outcome()
    assert not sim.manager.reads.bind_in_flight(uid)  # not in flight: answered
    assert core(sim).cache.free["n0"]["cpu"] == 2000
    assert plain_bind_refused(sim, "n0")


def test_an_unknown_outcome_ends_when_the_watch_shows_the_pod_bound() -> None:
    sim, uid = unknown_outcome()
    bound = dataclasses.replace(core(sim).cache.pods[uid], node_name="n0", phase="Running")
    sim.manager.on_pod(bound, sim.now)
    assert core(sim).cache.free["n0"]["cpu"] == 2000  # charged once, as bound


def test_an_unknown_outcome_ends_when_a_later_list_shows_the_pod_unbound() -> None:
    sim, uid = unknown_outcome()
    sim.manager.pods_listed({uid}, sim.now - 1, sim.now)  # began before: tells nothing
    assert core(sim).cache.free["n0"]["cpu"] == 2000
    sim.now += 1
    sim.manager.pods_listed({uid}, sim.now, sim.now)  # began after, pod still unbound
    assert core(sim).cache.free["n0"]["cpu"] == 8000


def test_an_unknown_outcome_ends_with_its_pod() -> None:
    sim, uid = unknown_outcome()
    sim.manager.on_pod_deleted(uid, sim.now)
    assert core(sim).cache.free["n0"]["cpu"] == 8000


@pytest.mark.parametrize("end", ["listed unbound", "deleted"])
def test_an_unknown_outcome_of_a_released_gang_still_ends(end: str) -> None:
    """A member's Binding ends of unknown outcome while its slot charges the node, then
    its gang is released (PodGroup deleted): the slot's charge passes to an assumption,
    which ends as the unknown outcome does. It once outlived it: the node stayed 6 CPU
    short for good (found by the commit model, `UNKNOWN_THEN_RELEASED` there)."""
    sim, flying = commit_in_flight()
    uid = sorted(flying)[0]
    on = flying[uid]
    sim.manager.binding_finished(uid, on, "429; the pod not readable", sim.now, unknown=True)
    sim.manager.on_group_deleted("ns/g")
    assert core(sim).cache.free[on]["cpu"] == 2000  # it may have landed: still charged
    sim.now += 1
    if end == "deleted":
        sim.manager.on_pod_deleted(uid, sim.now)
    else:
        sim.manager.pods_listed(set(flying), sim.now, sim.now)
    assert core(sim).cache.free[on]["cpu"] == 8000


def test_a_deleted_groups_bindings_are_withdrawn_after_its_quorum_bound() -> None:
    """minMember lowered while the commit's Bindings fly: one lands, the quorum is bound
    and the reservation ends; then the PodGroup is deleted. The Bindings not yet sent
    belong to a gang that is gone: withdrawn, though no reservation is left to release."""
    sim, flying = commit_in_flight()
    uids = sorted(flying)
    sim.manager.binding_finished(uids[0], flying[uids[0]], None, sim.now)
    sim.manager.on_group(group("g", 1), sim.now)
    assert "ns/g" not in core(sim).ledger.reservations
    sim.manager.on_group_deleted("ns/g")
    for uid in uids[1:]:
        why = sim.manager.post_due(uid, flying[uid])
        assert why is not None and "withdrawn" in why

"""A gang that ends below its quorum after its commit (a Binding that failed for good,
a member gone) is partial: at its deadline, what its commit bound is evicted, so that
the gang is placed again whole (architecture.md §11)."""

from __future__ import annotations

from extender.core.model.config import Config
from extender.core.model.vocabulary import BindPod, EvictPods, GangTimedOut, PodRef
from extender.core.queue.timeouts import COMMIT_GRACE_SECONDS
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


class FailingBinds(SimScheduler):
    """kube-scheduler's side, with the API server refusing the Bindings of some pods."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__(Core.wire(Config(default_timeout_seconds=30, direct_commit=False)))
        self.failing = failing

    def _do_bind(self, uid: str, node_name: str) -> None:
        if uid in self.failing:
            self.held.discard(uid)
            self.assumed.pop(uid, None)
            self.manager.binding_finished(uid, node_name, "pod not found (404)", self.now)
            return
        super()._do_bind(uid, node_name)


def committed_gang(failing_names: set[str]) -> tuple[FailingBinds, list[str]]:
    pods = [pod(f"g-{i}", "g") for i in range(3)]
    sim = FailingBinds({p.uid for p in pods if p.name in failing_names})
    for i in range(3):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3))
    for p in pods:
        sim.add_pod(p)
    for p in pods:
        sim.schedule(p.uid)
    return sim, [p.uid for p in pods]


def test_a_binding_that_fails_for_good_makes_the_gang_partial_and_its_bound_are_evicted() -> None:
    sim, uids = committed_gang({"g-2"})
    assert len(sim.bound("g")) == 2  # the commit let all three through; one failed
    sim.manager.on_pod_deleted(uids[2], sim.now)  # ... because the pod is gone
    sim.drain()
    sim.tick(29)
    assert not [a for a in sim.actions if isinstance(a, EvictPods)]  # before the deadline
    sim.tick(2)
    evict = [a for a in sim.actions if isinstance(a, EvictPods)]
    assert len(evict) == 1
    assert {p.uid for p in evict[0].pods} == set(uids[:2])
    timed_out = [a for a in sim.actions if isinstance(a, GangTimedOut)]
    assert timed_out and set(timed_out[-1].evicted) == set(evict[0].pods)
    assert "2 member(s) bound by its commit are evicted" in timed_out[-1].message


def test_a_late_commit_gets_a_grace_before_the_gang_is_called_partial() -> None:
    """kube-scheduler retries a failed Binding after its backoff: a commit that happened
    just before the deadline is not judged until the grace has passed."""
    sim, uids = committed_gang({"g-2"})
    res = sim.core.ledger.reservations["ns/g"]
    res.deadline = sim.now + 1  # the commit was just now, the deadline a second away
    sim.tick(2)
    assert "ns/g" in sim.core.ledger.reservations  # still within the grace
    sim.failing.clear()
    sim.schedule(uids[2])  # kube-scheduler's retry, and it binds this time
    assert len(sim.bound("g")) == 3
    assert not [a for a in sim.actions if isinstance(a, EvictPods)]
    assert not sim.core.ledger.reservations


def test_grace_runs_out() -> None:
    sim, _ = committed_gang({"g-2"})
    sim.core.ledger.reservations["ns/g"].deadline = sim.now + 1
    sim.tick(COMMIT_GRACE_SECONDS + 0.5)
    assert [a for a in sim.actions if isinstance(a, EvictPods)]


def test_members_this_commit_did_not_bind_are_never_evicted() -> None:
    """A member bound before this process placed the gang (an earlier life of the
    extender, say) is not evicted by this reservation's timeout."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=False)))
    for i in range(3):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", 3))
    early = sim.add_pod(pod("g-0", "g"))
    sim.bind_foreign(early, "n0")  # bound already when this process started
    rest = [sim.add_pod(pod(f"g-{i}", "g")) for i in (1, 2)]
    assert sim.schedule(rest[0].uid) == "held"  # the gang needs 2 more; 1 waits
    sim.tick(31)
    assert [a for a in sim.actions if isinstance(a, GangTimedOut)]
    assert not [a for a in sim.actions if isinstance(a, EvictPods)]
    assert not [a for a in sim.actions if isinstance(a, BindPod)]
    assert PodRef("ns", "g-0", early.uid) not in [
        p for a in sim.actions if isinstance(a, EvictPods) for p in a.pods]


def test_retried_members_do_not_push_the_grace_back() -> None:
    """kube-scheduler retries the refused member every few seconds, and each retry
    passes the barrier again: the grace still runs from the gang's first commit."""
    sim, uids = committed_gang({"g-2"})
    sim.core.ledger.reservations["ns/g"].deadline = sim.now + 1
    for _ in range(6):  # a retry every 3 s, each refused again
        sim.tick(3)
        sim.schedule(uids[2])
    assert [a for a in sim.actions if isinstance(a, EvictPods)]

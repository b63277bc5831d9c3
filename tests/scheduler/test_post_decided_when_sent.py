"""Every POST of a Binding is decided when it is sent (`BindingCycle._post_due`,
`GangManager.post_due`): a retry after a 503, a Binding queued behind a big commit or held
for kube-scheduler's bind request can come well after the commit decided it, and the lease
may be lost meanwhile."""

from __future__ import annotations

import asyncio
import time

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import NodeInfo, PodInfo
from extender.kube.client import ApiError
from extender.scheduler.dispatch import Dispatcher, Gates
from tests.kube.leases import lease
from tests.scheduler.fakes import RecordingKube, ScriptedKube, add_gang, leadership, sampled


class DeletedOnFirstTry(ScriptedKube):
    """Answers the first Binding with 503, and the pod is deleted meanwhile (the watch
    tells the manager before the retry is due)."""

    def __init__(self, manager: GangManager) -> None:
        super().__init__([ApiError(503, "ServiceUnavailable", "restarting")])
        self.manager = manager

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        self.manager.on_pod_deleted(uid, 0.0)
        await super().bind(namespace, name, uid, node)


def test_a_retry_is_not_sent_for_a_pod_deleted_since_the_first_try() -> None:
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "pods": 10}))
    manager.on_pod(PodInfo("u1", "ns", "p", {"cpu": 1000, "pods": 1},
                           scheduler_name="gang-scheduler"), 0.0)
    kube = DeletedOnFirstTry(manager)
    error = asyncio.run(Dispatcher(manager, kube, clock=lambda: 0.0).bindings.bind("ns", "p", "u1",
                                                                          "n0"))
    # The retry was not sent; the pod was read back (the first try's 503 says nothing of
    # whether it took effect): not bound, so the error stands.
    assert kube.calls == [("bind", "p"), ("get_pod", "p")]
    assert error is not None and "deleted" in error
    assert manager.reads.binds_in_progress() == []


def test_a_held_binding_is_not_posted_once_the_lease_is_lost() -> None:
    """The direct commit of a gang, made in a member's filter call: that member's
    Binding is held for kube-scheduler's bind request, and the lease is lost before the
    request comes. The exit's `bindings_settled` releases it, and it is refused, not sent
    beside what the new leader decides."""
    base, manager = sampled(Config(direct_commit=True))
    pods = add_gang(manager, base, "duo", 2)

    async def go() -> None:
        kube = RecordingKube()
        leader = leadership("me_1")
        dispatcher = Dispatcher(manager, kube, gates=Gates(leader=leader))
        await dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"])
        assert dispatcher.bindings.held.held("uid-duo-0")
        leader.observe(lease("other_1", time.time()))  # lost
        await dispatcher.bindings.settled(1.0)
        await dispatcher.idle()
        assert [b[1] for b in kube.bindings] == ["duo-1"]  # sent before the loss
        assert not manager.reads.bind_in_flight("uid-duo-0")

    asyncio.run(go())

"""The direct commit through the dispatcher: the Bindings of a planned gang go out with
no bind request, each counted in `gang_extender_bindings_total`; a bind request for a
member being committed is answered with that Binding's outcome, and makes no second one;
a pod bound with no bind request is reported for its Scheduled Event."""

from __future__ import annotations

import asyncio
import time

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import GroupInfo
from extender.core.wiring import Core
from extender.kube.client import ApiError
from extender.reporting.metrics import Metrics
from extender.scheduler.dispatch import Dispatcher
from tests.test_http_contract import RecordingKube, fake_nodes, sample
from tests.test_standby import member


class SlowKube(RecordingKube):
    """Bindings that take a moment, and one pod whose Binding the API server refuses."""

    def __init__(self, refuse: str) -> None:
        super().__init__()
        self.refuse = refuse

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        await asyncio.sleep(0.05)
        if name == self.refuse:
            raise ApiError(422, "Unprocessable", "node name is invalid")
        await super().bind(namespace, name, uid, node)


def test_a_committed_gang_is_bound_without_bind_requests_and_its_bindings_counted() -> None:
    base = sample("nodecachecapable-true.filter.request.json")
    manager = GangManager(Core.wire(Config(direct_commit=True)))
    fake_nodes(manager, base["NodeNames"])
    manager.on_group(GroupInfo("default", "trio", 3, uid="g1"), time.time())
    pods = [member(base, "trio", i) for i in range(3)]
    for p in pods:
        manager.on_pod(pod_from_k8s(p), time.time())
    kube = SlowKube(refuse="trio-2")
    metrics = Metrics()

    def count(result: str) -> float:
        return metrics.bindings.labels(result)._value.get()  # type: ignore[no-any-return]

    async def go() -> None:
        dispatcher = Dispatcher(manager, kube)
        dispatcher.on_binding = metrics.on_binding
        directly: list[str] = []
        dispatcher.on_bound_directly = lambda pod, node: directly.append(pod.name)
        first = await dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"])
        flying = {b.pod: b.node for b in manager.binds_in_progress() if b.in_flight}
        assert len(flying) == 3 and flying["default/trio-0"] == first.nodes[0]
        # kube-scheduler's bind calls for two members arrive while their Bindings fly.
        answers = await asyncio.gather(
            dispatcher.bind("default", "trio-0", "uid-trio-0", first.nodes[0]),
            dispatcher.bind("default", "trio-2", "uid-trio-2", flying["default/trio-2"]))
        await dispatcher.idle()
        assert answers[0] is None
        assert answers[1] is not None and "node name is invalid" in answers[1]
        assert sorted(b[1] for b in kube.bindings) == ["trio-0", "trio-1"]  # one each
        assert (count("ok"), count("error")) == (2.0, 1.0)
        # Only the member no bind request asked for gets the extender's Scheduled Event:
        # kube-scheduler posts trio-0's itself, and trio-2 was not bound.
        assert directly == ["trio-1"]

    asyncio.run(go())

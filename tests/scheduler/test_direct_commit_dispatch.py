"""The direct commit through the dispatcher: the Bindings of a planned gang go out with
no bind request, each counted in `gang_extender_bindings_total`; a bind request for a
member being committed is answered with that Binding's outcome, and makes no second one;
a pod bound with no bind request is reported for its Scheduled Event."""

from __future__ import annotations

import asyncio

from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.kube.client import ApiError
from extender.reporting.metrics import Metrics
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Outlets
from tests.scheduler.fakes import RecordingKube, add_gang, sampled


class SlowKube(RecordingKube):
    """Bindings that take a moment, and one pod whose Binding the API server refuses."""

    def __init__(self, refuse: str) -> None:
        super().__init__()
        self.refuse = refuse

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        await asyncio.sleep(0.05)
        if name == self.refuse:
            raise ApiError(422, "Unprocessable", "node name is invalid")
        await super().bind(namespace, name, uid, node)


def test_a_committed_gang_is_bound_without_bind_requests_and_its_bindings_counted() -> None:
    base, manager = sampled(Config(direct_commit=True))
    pods = add_gang(manager, base, "trio", 3)
    kube = SlowKube(refuse="trio-2")
    metrics = Metrics()

    def count(result: str) -> float:
        return metrics.bindings.labels(result)._value.get()  # type: ignore[no-any-return]

    async def go() -> None:
        # No commit wait: the filter answers while the Bindings fly, as it does when
        # they take longer than the wait (tests/scheduler/test_commit_wait.py has the wait).
        directly: list[str] = []
        dispatcher = Dispatcher(manager, kube, config=DispatchConfig(commit_wait=0),
                                outlets=Outlets(on_binding=metrics.on_binding,
                                                on_bound_directly=lambda pod, node:
                                                directly.append(pod.name)))
        first = await dispatcher.filter(pod_from_k8s(pods[0]), base["NodeNames"])
        flying = {b.pod: b.node for b in manager.reads.binds_in_progress() if b.in_flight}
        assert len(flying) == 3 and flying["default/trio-0"] == first.nodes[0]
        # kube-scheduler's bind calls for two members arrive while their Bindings fly.
        answers = await asyncio.gather(
            dispatcher.bindings.bind("default", "trio-0", "uid-trio-0", first.nodes[0]),
            dispatcher.bindings.bind("default", "trio-2", "uid-trio-2", flying["default/trio-2"]))
        await dispatcher.idle()
        assert answers[0] is None
        assert answers[1] is not None and "node name is invalid" in answers[1]
        assert sorted(b[1] for b in kube.bindings) == ["trio-0", "trio-1"]  # one each
        assert (count("ok"), count("error")) == (2.0, 1.0)
        # Only the member no bind request asked for gets the extender's Scheduled Event:
        # kube-scheduler posts trio-0's itself, and trio-2 was not bound.
        assert directly == ["trio-1"]

    asyncio.run(go())

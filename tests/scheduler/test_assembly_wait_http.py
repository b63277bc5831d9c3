"""The assembly wait through the served verbs: a /filter call for a member of a gang that
is still being created is answered when the next members arrive (event-driven), or turned
away after the gap, never left hanging."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import GroupInfo
from extender.core.wiring import Core
from extender.reporting.metrics import Metrics
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Outlets
from extender.scheduler.http import create_app, with_fast_verbs
from tests.scheduler.fakes import RecordingKube, fake_nodes
from tests.wire import sample

GROUP = "scheduling.x-k8s.io/pod-group"


def member(name: str) -> dict[str, Any]:
    """A filter request for a member of default/trainer created just now."""
    req: dict[str, Any] = sample("nodecachecapable-true.filter.request.json")
    meta = req["Pod"]["metadata"]
    meta.update(name=name, uid=f"uid-{name}",
                creationTimestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    meta["labels"][GROUP] = "trainer"
    return req


def stack(fast: bool, **config: float) -> tuple[Core, GangManager, Dispatcher, Metrics,
                                                 httpx.AsyncClient, dict[str, Any]]:
    """The extender's verbs over HTTP (`fast`: the fast verbs in front of the routes) on
    the sample's nodes, the PodGroup trainer of 3 listed and none of its pods yet, and
    the filter request of its first member, trainer-0."""
    core = Core.wire(Config(**config))  # type: ignore[arg-type]
    manager = GangManager(core)
    metrics = Metrics()
    dispatcher = Dispatcher(manager, RecordingKube(), config=DispatchConfig(bind_wait_limit=5),
                            outlets=Outlets(on_assembly_wait=metrics.on_assembly_wait))
    app = create_app(dispatcher, metrics)
    served = with_fast_verbs(app) if fast else app
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://t")
    first = member("trainer-0")
    fake_nodes(manager, first["NodeNames"])
    manager.on_group(GroupInfo("default", "trainer", 3, uid="g1"), time.time())
    return core, manager, dispatcher, metrics, client, first


def waits(metrics: Metrics, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "gang_extender_assembly_wait_seconds_count", {"outcome": outcome})
    return value or 0.0


@pytest.mark.parametrize("fast", [True, False], ids=["fast-verbs", "fastapi-routes"])
def test_filter_answers_with_the_slot_as_soon_as_the_gang_is_complete(fast: bool) -> None:
    # Budget and gap far longer than the test: only the arrival can end the wait early.
    core, manager, dispatcher, metrics, client, first = stack(
        fast, assembly_wait_seconds=60, assembly_gap_seconds=60)

    async def go() -> dict[str, Any]:
        call = asyncio.create_task(client.post("/filter", json=first))
        await asyncio.sleep(0.1)
        assert not call.done()  # held: 1 of 3 members exist, and more are arriving
        waiting = (await client.get("/debug/gangs")).json()["filterWaits"]
        assert [(w["pod"], w["for"]) for w in waiting] == [("default/trainer-0", "members")]
        for name in ("trainer-1", "trainer-2"):
            manager.on_pod(pod_from_k8s(member(name)["Pod"]), time.time())
            dispatcher.cache_changed()
        reply = await asyncio.wait_for(call, 10)
        return reply.json()  # type: ignore[no-any-return]

    started = time.monotonic()
    body = asyncio.run(go())
    assert time.monotonic() - started < 10
    assert len(body["NodeNames"]) == 1 and body["FailedAndUnresolvableNodes"] == {}
    assert "default/trainer" in core.ledger.reservations
    assert waits(metrics, "placed") == 1 and waits(metrics, "turned_away") == 0


def test_filter_turns_the_member_away_after_the_gap_when_no_one_arrives() -> None:
    *_, metrics, client, first = stack(True, assembly_wait_seconds=5,
                                       assembly_gap_seconds=0.2)

    async def go() -> dict[str, Any]:
        return (await client.post("/filter", json=first)).json()  # type: ignore[no-any-return]

    started = time.monotonic()
    body = asyncio.run(go())
    assert time.monotonic() - started >= 0.15
    assert body["NodeNames"] == []
    assert set(body["FailedAndUnresolvableNodes"].values()) == {
        "gang default/trainer: 1 of 3 members exist"}
    assert waits(metrics, "turned_away") == 1 and waits(metrics, "placed") == 0

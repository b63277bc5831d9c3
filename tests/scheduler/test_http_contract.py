"""The HTTP layer against bodies a real kube-scheduler sent (tests/wire, recorded by
``python -m e2e.capture_wire``).

Runs the ASGI app in-process (no network, no API server): the gang manager is fed the
sample's nodes directly, and bindings go to a recording stand-in for the API.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import node_from_k8s, pod_from_k8s
from extender.core.model.types import GroupInfo
from extender.core.wiring import Core
from extender.kube.client import ApiError
from extender.scheduler.dispatch import DispatchConfig, Dispatcher
from extender.scheduler.http import create_app, with_fast_verbs
from tests.scheduler.fakes import RecordingKube, fake_nodes
from tests.wire import sample


@pytest.fixture(params=["fast-verbs", "fastapi-routes"])
def env(request: pytest.FixtureRequest) -> tuple[Core, GangManager, RecordingKube,
                                                 httpx.AsyncClient]:
    """Both ways the verbs are served: the ASGI fast path the CLI serves, and the
    FastAPI routes; every test must pass on both, byte for byte the same contract."""
    core = Core.wire(Config(direct_commit=False))  # binds wait at the barrier
    manager = GangManager(core)
    kube = RecordingKube()
    dispatcher = Dispatcher(manager, kube, config=DispatchConfig(bind_wait_limit=5))
    app = create_app(dispatcher)
    served = with_fast_verbs(app) if request.param == "fast-verbs" else app
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://t")
    return core, manager, kube, client


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_filter_prioritize_bind_with_node_names(env: Any) -> None:
    core, manager, kube, client = env
    req = sample("nodecachecapable-true.filter.request.json")
    fake_nodes(manager, req["NodeNames"])

    async def go() -> None:
        r = await client.post("/filter", json=req)
        assert r.status_code == 200
        body = r.json()
        assert set(body) == {"NodeNames", "Nodes", "FailedNodes", "FailedAndUnresolvableNodes",
                             "Error"}
        assert body["NodeNames"] == req["NodeNames"] and body["Nodes"] is None
        assert body["Error"] == ""
        r = await client.post("/prioritize",
                              json=sample("nodecachecapable-true.prioritize.request.json"))
        assert r.status_code == 200
        scores = r.json()
        assert [s["Host"] for s in scores] == req["NodeNames"]
        assert all(type(s["Score"]) is int for s in scores)
        r = await client.post("/bind", json=sample("nodecachecapable-true.bind.request.json"))
        assert r.status_code == 200 and r.json() == {"Error": ""}

    run(go())
    bind = sample("nodecachecapable-true.bind.request.json")
    assert kube.bindings == [(bind["PodNamespace"], bind["PodName"], bind["PodUID"], bind["Node"])]
    assert core.cache.pods[bind["PodUID"]].node_name == bind["Node"]


def _shape(value: Any) -> Any:
    """What kube-scheduler's JSON decoding depends on: keys, and the kind of each value
    (a null where it expects one, a list where a list), not the values themselves."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


@pytest.mark.parametrize("mode", ["nodecachecapable-true", "nodecachecapable-false"])
def test_every_answer_has_the_shape_of_the_reply_kube_scheduler_accepted(
        env: Any, mode: str) -> None:
    """Each recorded request, answered by our HTTP layer, gets a reply shaped like the
    one kube-scheduler accepted for it in the recording: same keys, same kinds of values,
    for filter, prioritize and bind, with node names and with whole Node objects."""
    _, manager, _, client = env
    req = sample(f"{mode}.filter.request.json")
    names = req["NodeNames"] or [n["metadata"]["name"] for n in req["Nodes"]["items"]]
    fake_nodes(manager, names)
    manager.on_pod(pod_from_k8s(req["Pod"]), 0.0)

    async def go() -> dict[str, Any]:
        return {verb: (await client.post(f"/{verb}", json=sample(
            f"{mode}.{verb}.request.json"))).json() for verb in ("filter", "prioritize", "bind")}

    answers = run(go())
    for verb, body in answers.items():
        accepted = sample(f"{mode}.{verb}.response.json")
        assert _shape(body) == _shape(accepted), verb
    assert answers["bind"] == {"Error": ""}


def test_filter_with_full_node_objects_returns_node_objects(env: Any) -> None:
    """nodeCacheCapable=false: kube-scheduler ignores NodeNames in the reply."""
    _, manager, _, client = env
    req = sample("nodecachecapable-false.filter.request.json")
    for item in req["Nodes"]["items"]:
        manager.on_node(node_from_k8s(item))

    async def go() -> dict[str, Any]:
        r = await client.post("/filter", json=req)
        return r.json()  # type: ignore[no-any-return]

    body = run(go())
    assert body["NodeNames"] is None
    names = [n["metadata"]["name"] for n in body["Nodes"]["items"]]
    assert names == [n["metadata"]["name"] for n in req["Nodes"]["items"]]
    assert body["Nodes"]["items"][0] == req["Nodes"]["items"][0]


def test_gang_member_rejected_as_unresolvable_with_reason(env: Any) -> None:
    _, manager, _, client = env
    req = sample("nodecachecapable-true.filter.request.json")
    req["Pod"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "trainer"
    fake_nodes(manager, req["NodeNames"])
    manager.on_group(GroupInfo("default", "trainer", 4, uid="u1"), 0.0)

    async def go() -> dict[str, Any]:
        return (await client.post("/filter", json=req)).json()  # type: ignore[no-any-return]

    body = run(go())
    assert body["NodeNames"] == []
    assert body["FailedNodes"] == {}
    assert set(body["FailedAndUnresolvableNodes"]) == set(req["NodeNames"])
    assert set(body["FailedAndUnresolvableNodes"].values()) == {
        "gang default/trainer: 1 of 4 members exist"
    }


def test_gang_binds_are_held_until_quorum_then_all_bound(env: Any) -> None:
    _, manager, kube, client = env
    base = sample("nodecachecapable-true.filter.request.json")
    fake_nodes(manager, base["NodeNames"])
    manager.on_group(GroupInfo("default", "pair", 2, uid="u1"), 0.0)
    pods = []
    for i in range(2):
        p = json.loads(json.dumps(base["Pod"]))
        p["metadata"].update(name=f"pair-{i}", uid=f"uid-pair-{i}")
        p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "pair"
        pods.append(p)
        manager.on_pod(pod_from_k8s(p), 0.0)

    async def go() -> list[Any]:
        chosen = []
        for p in pods:
            r = await client.post("/filter", json={"Pod": p, "Nodes": None,
                                                   "NodeNames": base["NodeNames"]})
            chosen.append(r.json()["NodeNames"][0])
        first = asyncio.create_task(client.post("/bind", json={
            "PodName": "pair-0", "PodNamespace": "default", "PodUID": "uid-pair-0",
            "Node": chosen[0]}))
        await asyncio.sleep(0.2)
        assert not first.done() and kube.bindings == []  # held, nothing bound
        second = await client.post("/bind", json={
            "PodName": "pair-1", "PodNamespace": "default", "PodUID": "uid-pair-1",
            "Node": chosen[1]})
        return [(await first).json(), second.json()]

    assert run(go()) == [{"Error": ""}, {"Error": ""}]
    assert sorted(b[1] for b in kube.bindings) == ["pair-0", "pair-1"]


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/filter", b"{not json", "malformed JSON"),
        ("/filter", b"", "empty body"),
        ("/filter", b"[]", "invalid request"),
        ("/filter", b'{"Pod": 3}', "Pod"),
        ("/filter", b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": ["n"]}', "invalid"),
        ("/filter", b'{"Pod": {}, "NodeNames": "n1"}', "NodeNames"),
        ("/bind", b'{"PodName": "x"}', "PodNamespace"),
        ("/bind", b'{"PodName": "", "PodNamespace": "d", "PodUID": "u", "Node": "n"}', "PodName"),
        ("/bind", b"\xff\xfe", "invalid request"),
    ],
)
def test_bad_input_gets_a_clear_error_and_changes_nothing(
    env: Any, path: str, body: bytes, needle: str
) -> None:
    core, manager, kube, client = env
    fake_nodes(manager, ["n1"])
    before = (dict(core.cache.pods), manager.reads.reservations(), dict(core.ledger.binds.waiting))

    async def go() -> httpx.Response:
        r: httpx.Response = await client.post(
            path, content=body, headers={"Content-Type": "application/json"})
        return r

    r = run(go())
    assert r.status_code == 200
    assert needle in r.json()["Error"]
    after = (dict(core.cache.pods), manager.reads.reservations(), dict(core.ledger.binds.waiting))
    assert after == before
    assert kube.bindings == []


def test_prioritize_bad_input_is_a_400_with_reason(env: Any) -> None:
    _, _, _, client = env

    async def go() -> httpx.Response:
        r: httpx.Response = await client.post("/prioritize", content=b"{")
        return r

    r = run(go())
    assert r.status_code == 400 and "malformed JSON" in r.json()["Error"]


def test_bind_unknown_pod_and_pod_bound_elsewhere(env: Any) -> None:
    _, manager, kube, client = env
    req = sample("nodecachecapable-true.filter.request.json")
    fake_nodes(manager, req["NodeNames"])
    pod = pod_from_k8s(req["Pod"])
    manager.on_pod(pod, 0.0)

    async def go() -> list[dict[str, Any]]:
        out = []
        for body in (
            {"PodName": "ghost", "PodNamespace": "default", "PodUID": "nope",
             "Node": "fake-node-0"},
            {"PodName": pod.name, "PodNamespace": "default", "PodUID": pod.uid, "Node": "ghost"},
        ):
            out.append((await client.post("/bind", json=body)).json())
        return out

    unknown_pod, unknown_node = run(go())
    assert "is not known" in unknown_pod["Error"]
    assert "node ghost is not known" in unknown_node["Error"]
    import dataclasses

    manager.on_pod(dataclasses.replace(pod, node_name="fake-node-1"), 0.0)

    async def again() -> dict[str, Any]:
        return (await client.post("/bind", json={  # type: ignore[no-any-return]
            "PodName": pod.name, "PodNamespace": "default", "PodUID": pod.uid,
            "Node": "fake-node-2"})).json()

    assert "already bound to node fake-node-1" in run(again())["Error"]
    assert kube.bindings == []


def test_api_rejection_of_binding_is_reported(env: Any) -> None:
    core, manager, kube, client = env
    req = sample("nodecachecapable-true.filter.request.json")
    fake_nodes(manager, req["NodeNames"])
    manager.on_pod(pod_from_k8s(req["Pod"]), 0.0)
    kube.fail_with = ApiError(409, "Conflict", "Operation cannot be fulfilled: UID mismatch")

    async def go() -> dict[str, Any]:
        return (await client.post(  # type: ignore[no-any-return]
            "/bind", json=sample("nodecachecapable-true.bind.request.json"))).json()

    err = run(go())["Error"]
    assert "UID mismatch" in err and "gang-0" in err
    assert not core.cache.pods[req["Pod"]["metadata"]["uid"]].node_name


def test_health_ready_metrics_debug(env: Any) -> None:
    _, _, _, client = env

    async def go() -> list[httpx.Response]:
        return [await client.get(p) for p in ("/healthz", "/readyz", "/metrics", "/debug/gangs")]

    health, ready, metrics, debug = run(go())
    assert health.text == "ok" and ready.status_code == 200
    assert "gang_extender_verb_duration_seconds" in metrics.text
    assert set(debug.json()) >= {"queue", "reservations", "waitingBinds", "heldBinds"}


def test_metrics_app_serves_no_verbs() -> None:
    from extender.reporting.metrics import Metrics
    from extender.scheduler.http import create_metrics_app

    app = create_metrics_app(GangManager().reads, Metrics())
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")

    async def go() -> list[int]:
        out = [(await client.get(p)).status_code for p in ("/metrics", "/healthz", "/readyz")]
        for verb in ("/filter", "/prioritize", "/bind"):
            out.append((await client.post(verb, content=b"{}")).status_code)
        out.append((await client.get("/debug/gangs")).status_code)
        return out

    assert run(go()) == [200, 200, 200, 404, 404, 404, 404]


def test_fast_path_hands_everything_but_verb_posts_to_fastapi(env: Any) -> None:
    """GET on a verb, unknown paths and the probes behave exactly as FastAPI answers
    them, whichever way the app is served."""
    _, _, _, client = env

    async def go() -> None:
        assert (await client.get("/filter")).status_code == 405
        assert (await client.post("/nope", content=b"{}")).status_code == 404
        assert (await client.get("/healthz")).text == "ok"

    run(go())


def test_declared_oversized_body_is_refused_before_reading(env: Any) -> None:
    _, _, _, client = env

    async def go() -> None:
        r = await client.post("/filter", content=b"{}",
                              headers={"Content-Length": str(70 * 1024 * 1024)})
        assert r.status_code == 200
        assert "exceeds" in r.json()["Error"]

    run(go())


def test_a_pod_the_watch_delivered_is_answered_from_the_managers_copy_unconverted(
        env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-scheduler's copy of a known pod is not converted (the manager decides on its
    own copy anyway): a request pod that would not even convert is answered as the
    known pod; an unknown one is still converted and checked."""
    import extender.scheduler.http as http_mod

    _, manager, _, client = env
    req = sample("nodecachecapable-true.filter.request.json")
    fake_nodes(manager, req["NodeNames"])
    manager.on_pod(pod_from_k8s(req["Pod"]), 0.0)
    converted: list[Any] = []

    def counting(obj: Any) -> Any:
        converted.append(obj)
        return pod_from_k8s(obj)

    monkeypatch.setattr(http_mod, "pod_from_k8s", counting)
    known = json.loads(json.dumps(req))
    known["Pod"]["spec"]["containers"] = "not a list"

    async def go() -> tuple[Any, Any, Any]:
        a = (await client.post("/filter", json=known)).json()
        p = (await client.post("/prioritize", json=known)).json()
        unknown = json.loads(json.dumps(known))
        unknown["Pod"]["metadata"]["uid"] = "someone-else"
        u = (await client.post("/filter", json=unknown)).json()
        return a, p, u

    answer, scores, other = run(go())
    assert answer["NodeNames"] == req["NodeNames"] and answer["Error"] == ""
    assert [s["Host"] for s in scores] == req["NodeNames"]
    assert len(converted) == 1 and "spec.containers must be a list" in other["Error"]


def test_metrics_refuses_scrapes_beyond_its_concurrency_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to `limit` scrapes may be in progress; one more is answered 503 at once (not
    queued), and once they finish scrapes are served again."""
    import threading

    import prometheus_client

    from extender.reporting.metrics import Metrics
    from extender.scheduler import http as http_mod

    release = threading.Event()
    rendering = threading.Semaphore(0)
    real = prometheus_client.generate_latest

    def slow_render(registry: Any) -> bytes:
        rendering.release()
        release.wait(10)
        return real(registry)

    monkeypatch.setattr(http_mod, "generate_latest", slow_render)
    manager, metrics = GangManager(), Metrics()
    app = http_mod.create_metrics_app(manager.reads, metrics, metrics_limit=2)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    # A second listener of the same process (the loopback one) shares the limit.
    other_app = http_mod.create_metrics_app(manager.reads, metrics, metrics_limit=2)
    other = httpx.AsyncClient(transport=httpx.ASGITransport(app=other_app),
                              base_url="http://t")

    async def go() -> tuple[list[int], httpx.Response, int, str]:
        first = asyncio.ensure_future(client.get("/metrics"))
        second = asyncio.ensure_future(other.get("/metrics"))
        await asyncio.to_thread(rendering.acquire, True, 5)  # the first one is rendering
        await asyncio.sleep(0.05)  # the second waits its turn
        third = await client.get("/metrics")
        health = (await client.get("/healthz")).status_code  # probes are not limited
        release.set()
        done = [r.status_code for r in await asyncio.gather(first, second)]
        after = await client.get("/metrics")
        return done, third, health, after.text

    done, third, health, after = run(go())
    assert done == [200, 200]
    assert third.status_code == 503 and third.headers["retry-after"] == "1"
    assert "limit 2" in third.text
    assert health == 200
    assert "gang_extender_verb_duration_seconds" in after

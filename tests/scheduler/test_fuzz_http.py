"""Fuzzing every HTTP route of the extender (issue 7, part 2).

The ASGI app runs in-process, as in test_http_contract.py, in front of a gang manager fed
a small cluster: four nodes, two PodGroups (minMember 3 and 2) with their pods, a plain
pod and a pod already bound. Hypothesis then sends sequences of requests, concurrently
where the verb holds (bind): random bytes, truncated and malformed JSON, random JSON
values, valid bodies with a field dropped, retyped or added, unknown pods, unknown
nodes, UID mismatches, duplicate and out-of-order binds, and valid traffic.

Every request must get a clear answer: HTTP 200 (or 400 for prioritize, whose
error path kube-scheduler ignores anyway) with a JSON body of the verb's shape, an
`Error` text when the request was wrong. After each sequence the server still answers
/healthz, and the gang manager's bookkeeping is recomputed from scratch and compared
(`assert_consistent`): per-node free capacity, reservations, binds waiting at the permit
barrier and in flight, and no gang bound short of its quorum.

`FUZZ_EXAMPLES=2000 .venv/bin/pytest tests/scheduler/test_fuzz_http.py` runs a longer campaign.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import node_from_k8s, pod_from_k8s
from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.types import Resources
from extender.core.model.vocabulary import Report
from extender.core.wiring import Core
from extender.kube.client import ApiError
from extender.kube.recorder import EventRecorder
from extender.reporting.events import GangEvents
from extender.reporting.metrics import GaugeSources, Metrics
from extender.reporting.status import StatusWriter
from extender.scheduler.debug import install_podgroups_route
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Outlets
from extender.scheduler.http import MAX_BODY, create_app, with_fast_verbs
from tests.core.model.hostile import paths
from tests.core.sim import in_flight

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
NS = "fuzz"
NODES = ["n0", "n1", "n2", "n3"]
GROUPS = {"g3": 3, "g2": 2}


# ----- the cluster the gang manager starts from ---------------------------------------------


def node_obj(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod_obj(name: str, group: str | None = None, node: str = "", cpu: str = "1") -> dict[str, Any]:
    labels = {GROUP_LABEL: group} if group else {}
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": labels,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"schedulerName": "gang-scheduler", "nodeName": node or None,
                 "containers": [{"name": "c", "resources": {
                     "requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": "Running" if node else "Pending"},
    }


def group_obj(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": f"pg-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": min_member}}


POD_OBJS: list[dict[str, Any]] = [
    *(pod_obj(f"g3-{i}", "g3") for i in range(4)),  # one elastic extra
    *(pod_obj(f"g2-{i}", "g2") for i in range(2)),
    pod_obj("plain-0"),
    pod_obj("bound-0", node="n0", cpu="2"),
]
POD_NAMES = [p["metadata"]["name"] for p in POD_OBJS]


class RecordingKube:
    """The API server's side of Bindings, wake-ups, status and events; it can be told
    to reject Bindings the way the API server does."""

    def __init__(self, reject: Callable[[str], ApiError | None] | None = None) -> None:
        self.bindings: list[tuple[str, str, str, str]] = []
        self.reject = reject
        self.bound: dict[str, str] = {"bound-0": "n0"}

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        await asyncio.sleep(0)  # a real round trip yields to other requests
        err = self.reject(name) if self.reject else None
        if err is not None:
            raise err
        if name in self.bound:
            raise ApiError(409, "Conflict", f"pod {name} is already assigned to a node")
        self.bound[name] = node
        self.bindings.append((namespace, name, uid, node))

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        node = self.bound.get(name)
        return {"spec": {"nodeName": node}} if node else None

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        return None

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return body


@dataclass
class Env:
    core: Core
    manager: GangManager
    kube: RecordingKube
    dispatcher: Dispatcher
    client: httpx.AsyncClient
    problems: list[str] = field(default_factory=list)


def make_env(reject: Callable[[str], ApiError | None] | None = None,
             wait_limit: float = 0.05) -> Env:
    core = Core.wire(Config(direct_commit=False))  # binds wait at the barrier
    manager = GangManager(core)
    kube = RecordingKube(reject)
    metrics = Metrics()
    recorder = EventRecorder(kube)
    gang_events = GangEvents(recorder)
    status = StatusWriter(manager.reads, kube, events=gang_events)

    def on_report(report: Report) -> None:  # as extender/serve.py wires them
        metrics.on_report(report)
        gang_events.on_report(report)
        status.on_report(report)

    # No watch feeds the Bindings back here, so a commit wait would last its whole
    # limit on every filter call that finds its gang committing: off.
    dispatcher = Dispatcher(manager, kube,
                            config=DispatchConfig(bind_wait_limit=wait_limit, commit_wait=0),
                            outlets=Outlets(on_report=on_report))
    app = create_app(dispatcher, metrics, gauges=GaugeSources(status_counts=status.counts))
    install_podgroups_route(app, status, recorder, dispatcher.clock)
    for n in NODES:
        manager.on_node(node_from_k8s(node_obj(n)))
    for g, m in GROUPS.items():
        manager.on_group(group_from_k8s(group_obj(g, m)), 0.0)
    for p in POD_OBJS:
        manager.on_pod(pod_from_k8s(p), 0.0)
    manager.take_actions()
    # The app as the CLI serves it: the verbs through the ASGI fast path, the rest FastAPI.
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=with_fast_verbs(app)),
                               base_url="http://t", timeout=30)
    return Env(core, manager, kube, dispatcher, client)


# ----- the consistency check -----------------------------------------------------------


def _sub(into: Resources, req: Resources) -> None:
    for k, v in req.items():
        into[k] = into.get(k, 0) - v


def assert_consistent(env: Env, settled: bool = True) -> None:
    """The gang manager's incremental bookkeeping equals a recomputation from scratch."""
    core, cache = env.core, env.core.cache
    permit, reservations = core.ledger.binds, core.ledger.reservations
    slots = {uid: (res.gang, s) for res in reservations.values()
             for uid, s in res.slots.items()}
    for name, node in cache.nodes.items():
        want = dict(node.allocatable)
        for pod in cache.pods.values():
            if pod.takes_capacity and pod.node_name == name:
                _sub(want, pod.requests)
        for _, s in slots.values():
            if s.node == name:
                _sub(want, s.pod.requests)
        have = cache.free[name]
        keys = want.keys() | have.keys()
        assert {k: want.get(k, 0) for k in keys} == {k: have.get(k, 0) for k in keys}, (
            f"free capacity of {name} drifted: cache {have}, recomputed {want}")
    per_node: dict[str, int] = {}
    for _, s in slots.values():
        per_node[s.node] = per_node.get(s.node, 0) + 1
    assert cache.reserved_nodes == per_node, (cache.reserved_nodes, per_node)
    for gang in reservations:
        res = reservations[gang]
        assert gang == res.gang
        for uid, s in res.slots.items():
            slot_pod = cache.pods.get(uid)
            assert slot_pod is not None, f"slot for unknown pod {uid}"
            assert slot_pod.gang == gang
            assert not slot_pod.node_name, f"slot kept for bound pod {slot_pod.key}"
            assert s.node in cache.nodes, f"slot on unknown node {s.node}"
    for uid, held_node in permit.waiting.items():
        assert uid in slots and slots[uid][1].node == held_node, f"held bind {uid} has no slot"
    # No gang bound short of its quorum, and no Binding for a pod twice.
    for key, group in cache.groups.items():
        bound = sum(1 for m in cache.members(group) if m.node_name)
        assert bound == 0 or bound >= group.min_member, (
            f"gang {key}: {bound} of {group.min_member} bound")
    names = [b[1] for b in env.kube.bindings]
    with contextlib.suppress(InvalidArgument):  # outside @given: no statistics
        event(f"bindings created: {min(len(names), 4)}+")
    assert len(names) == len(set(names)), f"a pod was bound twice: {names}"
    if settled:
        assert not permit.waiting, (
            f"held binds left after every request was answered: {dict(permit.waiting)}")
        assert not in_flight(permit), f"bindings left in flight: {in_flight(permit)}"
        # Answering whatever still waits finds nothing: no answer future was left pending.
        assert not env.dispatcher.bindings.answer_waiting("x"), "an answer future was left pending"


# ----- strategies ----------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
names = st.one_of(st.sampled_from(POD_NAMES), st.text(min_size=0, max_size=12))
node_names = st.one_of(st.sampled_from(NODES), st.text(max_size=8))


def pod_by_name(name: str) -> dict[str, Any]:
    for p in POD_OBJS:
        if p["metadata"]["name"] == name:
            return copy.deepcopy(p)
    group = "g3" if name.startswith("g3") else "g2" if name.startswith("g2") else None
    return pod_obj(name or "x", group)  # unknown to the gang manager


@st.composite
def filter_bodies(draw: st.DrawFn) -> dict[str, Any]:
    pod = pod_by_name(draw(names))
    if draw(st.booleans()):  # a pod the informer never delivered
        pod["metadata"]["uid"] = draw(st.sampled_from(["uid-new", "uid-g3-9", "uid-x"]))
    nodes = draw(st.lists(node_names, max_size=6))
    if draw(st.integers(0, 3)) == 0:  # nodeCacheCapable: false
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": [node_obj(n) for n in nodes]},
                "NodeNames": None}
    return {"Pod": pod, "Nodes": None, "NodeNames": nodes}


@st.composite
def bind_bodies(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(names)
    uid = draw(st.sampled_from([f"uid-{name}", f"uid-{name}", "uid-g3-0", "other", ""]))
    return {"PodName": name, "PodNamespace": draw(st.sampled_from([NS, NS, "default", ""])),
            "PodUID": uid, "Node": draw(node_names)}


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]]) -> Any:
    """A valid body with one node of its tree dropped, replaced, or given a sibling."""
    body = draw(base)
    where = draw(st.sampled_from(paths(body)))
    if not where:
        return draw(json_values)
    parent = body
    for step in where[:-1]:
        parent = parent[step]
    last = where[-1]
    how = draw(st.sampled_from(["drop", "retype", "extra"]))
    if how == "drop":
        del parent[last]
    elif how == "retype":
        parent[last] = draw(json_values)
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(json_values)
    else:
        parent.append(draw(json_values))
    return body


def encode(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # integers beyond 64 bits: the stdlib writes them, orjson won't
        return json.dumps(value).encode()


@st.composite
def raw_bodies(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]]) -> bytes:
    kind = draw(st.sampled_from(["bytes", "truncated", "value", "mutated", "nested"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "truncated":
        full = encode(draw(base))
        return full[: draw(st.integers(0, max(0, len(full) - 1)))]
    if kind == "value":
        return encode(draw(json_values))
    if kind == "nested":
        depth = draw(st.integers(1, 3000))
        return b"[" * depth + b"]" * depth
    return encode(draw(mutated(base)))


VERB_BODIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "/filter": filter_bodies(), "/prioritize": filter_bodies(), "/bind": bind_bodies(),
}
GETS = ["/healthz", "/readyz", "/metrics", "/debug/gangs", "/debug/podgroups"]


@dataclass(frozen=True)
class Request:
    path: str
    body: bytes | None  # None: GET

    def __repr__(self) -> str:
        return f"Request({self.path}, {self.body[:200] if self.body else None!r})"


@st.composite
def requests(draw: st.DrawFn) -> Request:
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return Request(draw(st.sampled_from(GETS)), None)
    path = draw(st.sampled_from(list(VERB_BODIES)))
    base = VERB_BODIES[path]
    if choice <= 4:  # valid shape: known and unknown pods and nodes
        return Request(path, encode(draw(base)))
    return Request(path, draw(raw_bodies(base)))


# ----- running requests and checking each answer -------------------------------------------


def check_reply(env: Env, req: Request, resp: httpx.Response) -> None:
    where = f"{req!r} -> {resp.status_code} {resp.text[:300]!r}"
    if req.body is None:
        assert resp.status_code == 200 or (req.path == "/readyz" and resp.status_code == 503), where
        return
    allowed = (200, 400) if req.path == "/prioritize" else (200,)
    assert resp.status_code in allowed, where
    body = resp.json()
    if req.path == "/filter":
        assert isinstance(body, dict) and set(body) == {
            "NodeNames", "Nodes", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}, where
        assert isinstance(body["Error"], str), where
        if body["Error"]:
            assert body["Error"].startswith("invalid request"), where
            assert not body["NodeNames"] and not body["Nodes"], where
            return
        sent = orjson.loads(req.body)
        asked = _asked_nodes(sent)
        got = body["NodeNames"] if body["NodeNames"] is not None else [
            n["metadata"]["name"] for n in body["Nodes"]["items"]]
        assert set(got) <= set(asked), where
        assert set(body["FailedAndUnresolvableNodes"]) <= set(asked), where
        assert all(isinstance(v, str) and v for v in body["FailedAndUnresolvableNodes"].values())
    elif req.path == "/prioritize":
        if resp.status_code == 400:
            assert isinstance(body, dict) and body["Error"].startswith("invalid request"), where
            return
        assert isinstance(body, list), where
        candidates = set(_asked_nodes(orjson.loads(req.body)))
        for entry in body:
            assert set(entry) == {"Host", "Score"} and entry["Host"] in candidates, where
            assert type(entry["Score"]) is int and 0 <= entry["Score"] <= 10, where
    else:
        assert isinstance(body, dict) and set(body) == {"Error"}, where
        assert isinstance(body["Error"], str), where
        if body["Error"] == "":
            # Success means the pod is bound there, in the cache and at the "API".
            sent = orjson.loads(req.body)
            pod = env.manager.reads.pod(sent["PodUID"])
            assert pod is not None and pod.node_name == sent["Node"], where
            assert env.kube.bound.get(sent["PodName"]) == sent["Node"], where


def _asked_nodes(sent: dict[str, Any]) -> list[str]:
    if sent.get("NodeNames") is not None:
        return list(sent["NodeNames"])
    return [n["metadata"]["name"] for n in (sent.get("Nodes") or {}).get("items") or []]


async def send(env: Env, req: Request) -> None:
    if req.body is None:
        resp = await env.client.get(req.path)
    else:
        resp = await env.client.post(req.path, content=req.body,
                                     headers={"Content-Type": "application/json"})
    check_reply(env, req, resp)


async def let_run() -> None:
    """A few turns of the loop: a request just started gets as far as it can (a bind to
    where it is held) before the next one is sent."""
    for _ in range(5):
        await asyncio.sleep(0)


async def finish(env: Env, tasks: list[asyncio.Task[None]]) -> None:
    """Every request sent answered, then the dispatcher idle and its actions carried
    out."""
    await asyncio.gather(*tasks)
    await env.dispatcher.idle()
    env.dispatcher.drain()


async def run_sequence(env: Env, reqs: list[Request]) -> None:
    """Requests in order, each started before the previous answer when it is held (binds
    are held open until the gang's quorum is there, as kube-scheduler sends them)."""
    tasks = []
    for req in reqs:
        tasks.append(asyncio.create_task(send(env, req)))
        await let_run()
    await finish(env, tasks)
    health = await env.client.get("/healthz")
    assert health.status_code == 200 and health.text == "ok"
    debug = await env.client.get("/debug/gangs")
    assert debug.status_code == 200 and set(debug.json()) >= {"queue", "reservations"}


# ----- the fuzz tests ----------------------------------------------------------------------


@FUZZ
@given(st.lists(requests(), min_size=1, max_size=12))
def test_any_request_sequence_gets_clear_answers_and_keeps_state(reqs: list[Request]) -> None:
    env = make_env()
    asyncio.run(run_sequence(env, reqs))
    assert_consistent(env)


@st.composite
def gang_traffic(draw: st.DrawFn) -> list[Request]:
    """Filters and binds of the gang members, shuffled, duplicated, to wrong nodes."""
    reqs = []
    members = [p for p in POD_OBJS if p["metadata"]["labels"].get(GROUP_LABEL)]
    for _ in range(draw(st.integers(1, 24))):
        p = draw(st.sampled_from(members))
        name = p["metadata"]["name"]
        if draw(st.booleans()):
            nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True))
            reqs.append(Request("/filter", encode({"Pod": p, "NodeNames": nodes})))
        else:
            reqs.append(Request("/bind", encode({
                "PodName": name, "PodNamespace": NS,
                "PodUID": draw(st.sampled_from([f"uid-{name}"] * 4 + ["uid-g2-0"])),
                "Node": draw(st.sampled_from([*NODES, "gone"]))})))
    return reqs


async def run_with_followups(env: Env, reqs: list[Request]) -> None:
    """Each filter that passes a node is followed, as kube-scheduler does, by a bind of
    the pod to that node; the other requests go as drawn."""
    tasks: list[asyncio.Task[None]] = []
    for req in reqs:
        if req.path == "/filter":
            sent = orjson.loads(req.body or b"{}")
            resp = await env.client.post("/filter", content=req.body)
            check_reply(env, req, resp)
            chosen = resp.json()["NodeNames"] or []
            if chosen:
                meta = sent["Pod"]["metadata"]
                follow = Request("/bind", encode({
                    "PodName": meta["name"], "PodNamespace": NS, "PodUID": meta["uid"],
                    "Node": chosen[0]}))
                tasks.append(asyncio.create_task(send(env, follow)))
        else:
            tasks.append(asyncio.create_task(send(env, req)))
        await let_run()
    await finish(env, tasks)


@FUZZ
@given(gang_traffic())
def test_duplicate_and_out_of_order_binds_never_half_bind(reqs: list[Request]) -> None:
    env = make_env()
    asyncio.run(run_with_followups(env, reqs))
    assert_consistent(env)


@FUZZ
@given(gang_traffic(), st.sets(st.sampled_from([p["metadata"]["name"] for p in POD_OBJS])),
       st.sampled_from([409, 500, 404]))
def test_bindings_the_api_rejects_answer_an_error_and_leave_state_consistent(
    reqs: list[Request], rejected: set[str], status: int
) -> None:
    """The API server refuses some Bindings (already bound, UID mismatch, gone): the
    bind request gets the error, the pod stays unbound in the cache, nothing leaks.
    (A gang can end up short of its quorum here: the API has no multi-object
    transaction; kube-scheduler retries the refused member, see test_failure_paths.)"""
    def reject(name: str) -> ApiError | None:
        if name in rejected:
            return ApiError(status, "Conflict" if status == 409 else "Error",
                            f"Operation cannot be fulfilled on pods/binding \"{name}\"")
        return None

    env = make_env(reject)
    asyncio.run(run_with_followups(env, reqs))
    manager, permit = env.manager, env.core.ledger.binds
    for name in rejected:
        pod = manager.reads.pod(f"uid-{name}")
        if pod is not None and name != "bound-0":
            assert not pod.node_name, f"{name} refused by the API but bound in the cache"
    assert not permit.waiting and not in_flight(permit)
    # Only the quorum clause may differ (a refused member); the rest must hold.
    for g in manager.reads.groups():
        g.min_member = 1
    assert_consistent(env)


# ----- huge bodies, explicitly -------------------------------------------------------------


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/bind"])
def test_body_over_the_limit_is_refused_with_a_reason(path: str) -> None:
    env = make_env()
    body = b'{"Pod": "' + b"x" * (MAX_BODY + 16) + b'"}'

    async def go() -> httpx.Response:
        return await env.client.post(path, content=body)

    resp = asyncio.run(go())
    assert resp.status_code in (200, 400, 413)
    assert "exceeds" in resp.json()["Error"]
    assert_consistent(env)


def test_large_valid_filter_with_many_unknown_nodes_is_answered() -> None:
    env = make_env()
    body = {"Pod": POD_OBJS[0], "NodeNames": [f"node-{i}" for i in range(50_000)] + NODES}

    async def go() -> httpx.Response:
        return await env.client.post("/filter", content=orjson.dumps(body))

    resp = asyncio.run(go())
    assert resp.status_code == 200
    reply = resp.json()
    assert reply["Error"] == ""
    assert set(reply["NodeNames"] or []) <= set(NODES)
    assert_consistent(env)


# ----- regressions found by the fuzzer -----------------------------------------------------


async def _reserve_g2(env: Env) -> str:
    """Filter g2-0 (which reserves the gang) and return its node."""
    resp = await env.client.post("/filter", content=encode(
        {"Pod": pod_by_name("g2-0"), "NodeNames": NODES}))
    chosen: list[str] = resp.json()["NodeNames"]
    assert chosen, resp.json()
    return chosen[0]


def test_second_bind_of_a_held_pod_to_another_node_is_refused() -> None:
    """A duplicate bind for a pod whose bind is held must not be answered with the held
    bind's result when it names another node (it would report success for a node the
    pod is not bound to)."""
    env = make_env(wait_limit=5)

    async def go() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        node = await _reserve_g2(env)
        other = next(n for n in NODES if n != node)
        first = asyncio.create_task(env.client.post("/bind", content=encode(
            {"PodName": "g2-0", "PodNamespace": NS, "PodUID": "uid-g2-0", "Node": node})))
        await asyncio.sleep(0.05)
        assert not first.done()
        second = (await env.client.post("/bind", content=encode(
            {"PodName": "g2-0", "PodNamespace": NS, "PodUID": "uid-g2-0",
             "Node": other}))).json()
        # The quorum arrives: the first request is answered with success.
        resp = await env.client.post("/filter", content=encode(
            {"Pod": pod_by_name("g2-1"), "NodeNames": NODES}))
        n1 = resp.json()["NodeNames"][0]
        await env.client.post("/bind", content=encode(
            {"PodName": "g2-1", "PodNamespace": NS, "PodUID": "uid-g2-1", "Node": n1}))
        return (await first).json(), second, {"node": node}

    first, second, where = asyncio.run(go())
    assert first == {"Error": ""}
    assert "already" in second["Error"] and where["node"] in second["Error"], second
    assert env.kube.bound["g2-0"] == where["node"]
    assert_consistent(env)


def test_bind_naming_another_pod_with_a_held_pods_uid_is_refused() -> None:
    env = make_env(wait_limit=5)

    async def go() -> dict[str, Any]:
        node = await _reserve_g2(env)
        first = asyncio.create_task(env.client.post("/bind", content=encode(
            {"PodName": "g2-0", "PodNamespace": NS, "PodUID": "uid-g2-0", "Node": node})))
        await asyncio.sleep(0.05)
        wrong = (await env.client.post("/bind", content=encode(
            {"PodName": "g3-0", "PodNamespace": NS, "PodUID": "uid-g2-0",
             "Node": node}))).json()
        assert not first.done()
        first.cancel()
        return wrong  # type: ignore[no-any-return]

    wrong = asyncio.run(go())
    assert "uid-g2-0 belongs to pod fuzz/g2-0, not fuzz/g3-0" in wrong["Error"], wrong
    assert "g3-0" not in env.kube.bound


def test_oversized_streamed_body_is_cut_off_without_reading_it_all() -> None:
    """A body past the limit is refused as soon as the limit is crossed: the server
    must not buffer an arbitrarily large request before looking at its size."""
    env = make_env()
    chunk = b" " * (1 << 20)
    total = MAX_BODY // len(chunk) + 64
    sent = 0

    async def body() -> Any:
        nonlocal sent
        for _ in range(total):
            sent += 1
            yield chunk

    async def go() -> httpx.Response:
        return await env.client.post("/filter", content=body())

    resp = asyncio.run(go())
    assert resp.status_code == 200 and "exceeds" in resp.json()["Error"]
    assert sent < total, "the whole oversized body was read"


def test_declared_oversized_body_is_refused_from_its_length() -> None:
    env = make_env()

    async def go() -> httpx.Response:
        return await env.client.post("/bind", content=b"{}",
                                     headers={"Content-Length": str(MAX_BODY + 1)})

    resp = asyncio.run(go())
    assert resp.status_code == 200 and "exceeds" in resp.json()["Error"], resp.text


# ----- findings in the gang manager (extender/core/), pinned -----------------------


def test_late_filter_of_a_deleted_member_does_not_resurrect_it() -> None:
    env = make_env()
    replacement = pod_obj("g2-2", "g2")
    replacement["metadata"]["creationTimestamp"] = "2026-01-01T00:01:00Z"

    async def go() -> list[list[str]]:
        env.manager.on_pod_deleted("uid-g2-1")  # the watch delivers the DELETE ...
        env.manager.on_pod(pod_from_k8s(replacement), 0.0)  # ... and the Job's replacement
        # ... then kube-scheduler's filter call for the deleted pod, already in flight.
        await env.client.post("/filter", content=encode(
            {"Pod": pod_by_name("g2-1"), "NodeNames": NODES}))
        out = []
        for body in (pod_by_name("g2-0"), replacement):
            r = await env.client.post("/filter", content=encode(
                {"Pod": body, "NodeNames": NODES}))
            out.append(r.json()["NodeNames"])
        return out

    placed = asyncio.run(go())
    assert env.manager.reads.pod("uid-g2-1") is None, "a deleted pod is back in the cache"
    assert all(placed), f"the gang's two live members must both get a node: {placed}"


def test_plain_pods_filtered_before_their_binds_do_not_overcommit_a_hold() -> None:
    env = make_env(wait_limit=5)
    manager, core = env.manager, env.core
    for n in NODES[1:]:
        manager.on_node_deleted(n)
    manager.on_pod_deleted("uid-bound-0")  # n0: 4 cpu, all free
    extra = [pod_obj(f"plain-{i}") for i in (1, 2)]
    for p in extra:
        manager.on_pod(pod_from_k8s(p), 0.0)
    plains = [pod_by_name("plain-0"), *extra]

    async def go() -> list[dict[str, Any]]:
        # g2 reserves 2 × 1 cpu on n0: 2 cpu stay free for everyone else.
        await env.client.post("/filter", content=encode(
            {"Pod": pod_by_name("g2-0"), "NodeNames": ["n0"]}))
        assert core.ledger.reservations
        # kube-scheduler's serial loop: three 1-cpu pods filtered, then their binds.
        passed = []
        for p in plains:
            r = await env.client.post("/filter", content=encode(
                {"Pod": p, "NodeNames": ["n0"]}))
            if r.json()["NodeNames"]:
                passed.append(p["metadata"])
        return [(await env.client.post("/bind", content=encode({
            "PodName": m["name"], "PodNamespace": NS, "PodUID": m["uid"],
            "Node": "n0"}))).json() for m in passed]

    asyncio.run(go())
    committed = sum(p.requests["cpu"] for p in core.cache.pods.values()
                    if p.node_name == "n0" and not p.terminal)
    held = sum(s.pod.requests["cpu"] for r in core.ledger.reservations.values()
               for s in r.slots.values() if s.node == "n0")
    assert committed + held <= 4000, (
        f"n0 has 4000m: {committed}m bound plus {held}m reserved for g2")


def test_refilter_of_a_held_member_does_not_release_the_node_it_binds_to() -> None:
    env = make_env(wait_limit=5)
    cache = env.core.cache
    plain = pod_by_name("plain-0")

    async def go() -> None:
        r = await env.client.post("/filter", content=encode(
            {"Pod": pod_by_name("g2-0"), "NodeNames": NODES}))
        node = r.json()["NodeNames"][0]
        held = asyncio.create_task(env.client.post("/bind", content=encode(
            {"PodName": "g2-0", "PodNamespace": NS, "PodUID": "uid-g2-0", "Node": node})))
        await asyncio.sleep(0.05)
        # A restarted kube-scheduler filters g2-0 again, without its node.
        await env.client.post("/filter", content=encode(
            {"Pod": pod_by_name("g2-0"), "NodeNames": [n for n in NODES if n != node]}))
        # The capacity g2-0 will bind to looks free now: a plain pod takes it.
        r = await env.client.post("/filter", content=encode(
            {"Pod": plain, "NodeNames": [node]}))
        if r.json()["NodeNames"]:
            await env.client.post("/bind", content=encode(
                {"PodName": "plain-0", "PodNamespace": NS, "PodUID": "uid-plain-0",
                 "Node": node}))
        r = await env.client.post("/filter", content=encode(
            {"Pod": pod_by_name("g2-1"), "NodeNames": NODES}))
        await env.client.post("/bind", content=encode(
            {"PodName": "g2-1", "PodNamespace": NS, "PodUID": "uid-g2-1",
             "Node": r.json()["NodeNames"][0]}))
        await held

    asyncio.run(go())
    for n in NODES:
        used = sum(p.requests["cpu"] for p in cache.pods.values()
                   if p.node_name == n and not p.terminal)
        assert used <= 4000, f"{n}: {used}m bound on 4000m ({env.kube.bindings})"

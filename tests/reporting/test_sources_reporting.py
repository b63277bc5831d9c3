"""What users see of gangs from the other sources (issue 19): Events on the right object
(the Volcano or upstream PodGroup; the pods of a Kueue pod group, which has no object),
no status written to objects the extender does not own, the source in /debug and in the
metrics; and the informer watching an optional API only while it is served."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from prometheus_client import generate_latest

from extender.core.manager import GangManager
from extender.core.model.sources import KUEUE_GROUP_LABEL, KUEUE_TOTAL_ANNOTATION
from extender.core.model.types import KUEUE, VOLCANO, WORKLOAD_API, GroupInfo, Membership, gang_key
from extender.kube.client import ApiError, Kube
from extender.kube.informer import Informer, InformerOptions
from extender.kube.source_kinds import VOLCANO_GROUPS, VOLCANO_PATH, WORKLOAD_GROUPS
from extender.reporting.kinds import observed_kinds, source_kinds
from extender.reporting.status import StatusWriter
from extender.scheduler.debug import install_podgroups_route
from tests.core.sim import pod
from tests.kube.watch_wire import QuietWatch
from tests.reporting.status_env import T0, Env, make_env


@pytest.fixture(name="env")
def env_fixture() -> Env:
    """The stand-in API, gang manager and reporting of status_env.py, wired as
    extender/serve.py wires them."""
    return make_env()


def add_group(env: Env, source: str, name: str, min_member: int) -> str:
    g = GroupInfo("ns", name, min_member, uid=f"{source}-{name}", creation=T0, source=source)
    env.sim.add_group(g)
    env.sim.drain()
    env.writer.group_changed(g.key)
    return g.key


def add_member(env: Env, source: str, group: str, name: str, total: int | None = None,
               **kw: Any) -> str:
    p = env.sim.add_pod(pod(name, membership=Membership(source, group, total), **kw))
    env.sim.drain()
    env.writer.observe_pod({"metadata": {"namespace": p.namespace, "name": p.name,
                                         "uid": p.uid}})
    return p.uid


def events_on(env: Env, kind: str, name: str) -> list[tuple[str, str, str]]:
    """(apiVersion, reason, message) of the Events about the object."""
    return sorted((e["involvedObject"]["apiVersion"], e["reason"], e["message"])
                  for e in env.api.events.values()
                  if e["involvedObject"]["kind"] == kind
                  and e["involvedObject"]["name"] == name)


@pytest.mark.parametrize("source,api_version", [
    (VOLCANO, "scheduling.volcano.sh/v1beta1"),
    (WORKLOAD_API, "scheduling.k8s.io/v1alpha2"),
])
def test_events_go_to_the_sources_podgroup_and_no_status_is_written(
        env: Env, source: str, api_version: str) -> None:
    key = add_group(env, source, "mpi", 3)
    uids = [add_member(env, source, "mpi", f"mpi-{i}", cpu=3000) for i in range(3)]
    for uid in uids:
        env.sim.schedule(uid)
    env.step(1)
    got = events_on(env, "PodGroup", "mpi")
    assert got, "no Event on the PodGroup"
    assert {v for v, _, _ in got} == {api_version}
    reasons = {r: m for _, r, m in got}
    # 3 × 3 CPUs fit no node of this cluster: set aside, with an Event of its own.
    assert reasons["Unplaceable"].startswith(f"gang {key}: ")
    assert env.api.patches == [], "the extender never writes these PodGroups' status"
    env.refresh()
    text = generate_latest(env.metrics.registry).decode()
    assert (f'gang_extender_gangs{{phase="Scheduling",reason="Unplaceable",'
            f'source="{source}"}} 1.0') in text
    assert "gang_extender_unplaceable_gangs 1.0" in text


def test_a_kueue_pod_groups_why_pending_goes_to_its_pods(env: Env) -> None:
    uids = [add_member(env, KUEUE, "kq", f"kq-{i}", total=3) for i in range(2)]
    env.step(1)
    key = gang_key(KUEUE, "ns", "kq")
    for i in range(2):
        assert ("v1", "WaitingForMembers", f"gang {key}: 2 of 3 members exist") in events_on(
            env, "Pod", f"kq-{i}")
    assert events_on(env, "PodGroup", "kq") == []
    uids.append(add_member(env, KUEUE, "kq", "kq-2", total=3, cpu=3000))
    uids.append(add_member(env, KUEUE, "kq", "kq-3", total=3, cpu=3000))
    for uid in uids:
        env.sim.schedule(uid)
    env.step(1)
    assert any(r == "Bound" for _, r, _ in events_on(env, "Pod", "kq-0"))
    assert env.api.patches == []
    env.refresh()
    text = generate_latest(env.metrics.registry).decode()
    assert ('gang_extender_gang_transitions_total{reason="Reserved",source="kueue"} 1.0'
            in text)
    for uid in uids:
        env.sim.delete(uid)
    env.step(1)
    assert env.manager.reads.group(key) is None and key not in env.writer.groups


def test_debug_podgroups_names_each_gangs_source(env: Env) -> None:
    env.add_group("sp", 2)
    add_group(env, VOLCANO, "vc", 2)
    add_member(env, KUEUE, "kq", "kq-0", total=2)
    env.step(6)
    app = FastAPI()
    install_podgroups_route(app, env.writer, env.recorder, env.clock)

    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as client:
            return (await client.get("/debug/podgroups")).json()

    rows = {r["gang"]: r for r in asyncio.run(go())["podGroups"]}
    assert {g: r["source"] for g, r in rows.items()} == {
        "ns/sp": "scheduler-plugins", "volcano:ns/vc": "volcano", "kueue:ns/kq": "kueue"}
    assert rows["volcano:ns/vc"]["statusWritten"] is False
    assert rows["kueue:ns/kq"]["message"] == "gang kueue:ns/kq: 1 of 2 members exist"


def test_a_pod_json_with_kueue_keys_joins_its_gang_through_the_kinds() -> None:
    manager = GangManager()
    writer = StatusWriter(manager.reads, None)
    kinds = {k.name: k for k in (*observed_kinds(writer), *source_kinds(writer))}
    kinds["pods"].apply(manager, {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pu",
                     "labels": {KUEUE_GROUP_LABEL: "kq"},
                     "annotations": {KUEUE_TOTAL_ANNOTATION: "2"}},
        "spec": {"schedulerName": "gang-scheduler", "containers": []}}, T0)
    assert writer.dirty == {"kueue:ns/kq"}
    g = manager.reads.group("kueue:ns/kq")
    assert g is not None and g.min_member == 2
    kinds["volcano-podgroups"].apply(manager, {
        "metadata": {"namespace": "ns", "name": "vc", "uid": "vu"},
        "spec": {"minMember": 4}}, T0)
    assert "volcano:ns/vc" in writer.dirty and manager.reads.group("volcano:ns/vc") is not None
    kinds["volcano-podgroups"].delete(manager, "volcano:ns/vc", T0)
    assert manager.reads.group("volcano:ns/vc") is None


# ----- the informer: optional APIs --------------------------------------------------------


class FakeServer:
    """An API server whose Volcano CRD can be installed and removed."""

    def __init__(self) -> None:
        self.volcano = False
        self.groups: list[dict[str, Any]] = []
        self.requests: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append(path + ("?watch" if "watch" in request.url.params else ""))
        if path.startswith("/apis/scheduling.volcano.sh") and not self.volcano:
            return httpx.Response(404, json={"kind": "Status", "reason": "NotFound"})
        if path == VOLCANO_PATH:
            return httpx.Response(200, json={"kind": "APIResourceList", "resources": [
                {"name": "podgroups"}, {"name": "podgroups/status"}]})
        if path.startswith("/apis/scheduling.k8s.io"):
            return httpx.Response(404, json={"kind": "Status", "reason": "NotFound"})
        if "watch" in request.url.params:
            return httpx.Response(200, stream=QuietWatch())
        items = self.groups if path.startswith(VOLCANO_PATH) else []
        return httpx.Response(200, content=orjson.dumps(
            {"items": items, "metadata": {"resourceVersion": "1"}}))


async def _run_informer(server: FakeServer, manager: GangManager,
                        steps: list[tuple[float, Any]]) -> Informer:
    async with httpx.AsyncClient(transport=httpx.MockTransport(server.handle),
                                 base_url="http://t") as http:
        informer = Informer(Kube(http), manager, lambda: T0, lambda: None,
                            kinds=(VOLCANO_GROUPS, WORKLOAD_GROUPS),
                            options=InformerOptions(discovery_interval=0.05))
        task = asyncio.ensure_future(informer.run())
        try:
            for delay, action in steps:
                await asyncio.sleep(delay)
                action(informer)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return informer


VC = {"metadata": {"namespace": "ns", "name": "vc", "uid": "vu"}, "spec": {"minMember": 2}}


def test_an_api_that_is_not_served_is_not_watched_and_does_not_hold_readiness() -> None:
    server, manager = FakeServer(), GangManager()
    seen: dict[str, Any] = {}
    informer = asyncio.run(_run_informer(server, manager, [
        (0.2, lambda inf: seen.update(synced=inf.synced.is_set(), served=dict(inf.served)))]))
    assert seen == {"synced": True, "served": {"volcano-podgroups": False,
                                               "workload-podgroups": False}}
    assert set(server.requests) == {VOLCANO_PATH, "/apis/scheduling.k8s.io/v1alpha2"}, (
        "discovery only: no list, no watch")
    assert informer.synced.is_set()


def test_a_crd_installed_later_is_picked_up_and_one_removed_is_forgotten() -> None:
    server, manager = FakeServer(), GangManager()
    server.groups = [VC]

    def install(_: Informer) -> None:
        server.volcano = True

    def check_and_remove(_: Informer) -> None:
        assert manager.reads.group("volcano:ns/vc") is not None, "picked up after installation"
        server.volcano = False

    asyncio.run(_run_informer(server, manager, [
        (0.15, lambda inf: None), (0.0, install), (0.3, check_and_remove), (0.3, lambda i: None)]))
    assert manager.reads.group("volcano:ns/vc") is None, "forgotten with its API"
    assert f"{VOLCANO_PATH}/podgroups?watch" in server.requests


def test_an_api_error_from_a_watch_keeps_its_status() -> None:
    """Every watch error leaves httpx's stream through an async context manager, which
    sets the exception's __traceback__: a frozen dataclass refused it with a TypeError,
    so a watch's 404 (an API gone) read as something else."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"kind": "Status", "reason": "NotFound",
                                         "message": "the server could not find it"})

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            async for _ in Kube(http).watch("/apis/x/v1/things", "1"):
                pass

    with pytest.raises(ApiError) as exc:
        asyncio.run(go())
    assert exc.value.status == 404

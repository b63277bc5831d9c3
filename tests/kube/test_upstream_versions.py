"""The upstream PodGroup watched in whichever version the API server serves (issue 28):
scheduling.k8s.io/v1beta1 on Kubernetes 1.37, v1alpha2 on 1.36; its Events name the
version it was read in."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from extender.core.manager import GangManager
from extender.kube.client import Kube
from extender.kube.informer import Informer, InformerOptions
from extender.kube.source_kinds import (
    SOURCE_GROUP_KINDS,
    WORKLOAD_BETA_GROUPS,
    WORKLOAD_BETA_PATH,
    WORKLOAD_PATH,
    group_api_version,
)
from extender.reporting.events import group_ref
from tests.kube.watch_wire import QuietWatch
from tests.reporting.status_env import T0

PG = {"metadata": {"namespace": "versions", "name": "up", "uid": "u-1",
                   "creationTimestamp": "2026-11-24T10:25:29Z"},
      "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}
KEY = "workload-api:versions/up"


class OneVersionServer:
    """An API server that serves upstream PodGroups in one version of scheduling.k8s.io
    only (as every release does) and 404s the other."""

    def __init__(self, served: str) -> None:
        self.served = served
        self.requests: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append(path + ("?watch" if "watch" in request.url.params else ""))
        if not path.startswith(self.served):
            return httpx.Response(404, json={"kind": "Status", "reason": "NotFound"})
        if path == self.served:
            return httpx.Response(200, json={"kind": "APIResourceList", "resources": [
                {"name": "podgroups"}, {"name": "podgroups/status"}, {"name": "workloads"}]})
        if "watch" in request.url.params:
            return httpx.Response(200, stream=QuietWatch())
        return httpx.Response(200, content=orjson.dumps(
            {"items": [PG], "metadata": {"resourceVersion": "1"}}))


def run(served: str) -> tuple[OneVersionServer, int, str | None]:
    """(the server, the quorum of the gang read, the apiVersion its Events name)."""
    server, manager = OneVersionServer(served), GangManager()
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(server.handle),
                                     base_url="http://t") as http:
            informer = Informer(Kube(http), manager, lambda: T0, lambda: None,
                                kinds=SOURCE_GROUP_KINDS,
                                options=InformerOptions(discovery_interval=0.05))
            task = asyncio.ensure_future(informer.run())
            await asyncio.sleep(0.3)
            g = manager.reads.group(KEY)
            seen["version"] = None if g is None else group_api_version(g.source, g.key)
            seen["quorum"] = 0 if g is None else g.min_member
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            for kind in SOURCE_GROUP_KINDS:
                kind.delete(manager, KEY, T0)  # the cache and what it remembers go

    asyncio.run(main())
    return server, seen["quorum"], seen["version"]


@pytest.mark.parametrize("served", [WORKLOAD_BETA_PATH, WORKLOAD_PATH])
def test_the_served_version_is_watched_and_the_other_only_discovered(served: str) -> None:
    server, quorum, version = run(served)
    assert quorum == 3
    assert version == served.removeprefix("/apis/"), "Events name the version read"
    other = WORKLOAD_PATH if served == WORKLOAD_BETA_PATH else WORKLOAD_BETA_PATH
    assert f"{served}/podgroups" in server.requests
    assert {r for r in server.requests if r.startswith(other)} == {other}, (
        "the version not served is only asked discovery: no list, no watch")


def test_an_event_names_the_podgroup_in_the_version_it_was_read_in() -> None:
    manager = GangManager()
    WORKLOAD_BETA_GROUPS.apply(manager, PG, T0)
    g = manager.reads.group(KEY)
    assert g is not None
    ref = group_ref(g)
    assert ref is not None and ref.api_version == "scheduling.k8s.io/v1beta1"
    WORKLOAD_BETA_GROUPS.delete(manager, KEY, T0)
    assert group_api_version(g.source, KEY) == "scheduling.k8s.io/v1alpha2", (
        "forgotten with its object")


def test_every_source_kind_is_watched() -> None:
    names = {k.name for k in SOURCE_GROUP_KINDS}
    assert names == {"volcano-podgroups", "workload-podgroups", "workload-podgroups-v1beta1",
                     "jobsets", "compositepodgroups"}

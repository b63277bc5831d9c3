"""Watch stream framing: JSON lines and protobuf frames split across chunks arrive
whole, in order."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from extender.kube import protobuf
from extender.kube.client import Kube, ProtoDecoder, ResourceExpired
from tests.kube.watch_wire import Chunks, fill_proto, watch_frame


def _decoder() -> ProtoDecoder:
    return protobuf.Pod, protobuf.pod_dict


def _events(chunks: list[bytes]) -> list[tuple[str, dict[str, object]]]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Chunks(chunks))

    async def go() -> list[tuple[str, dict[str, object]]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            return [e async for e in Kube(http).watch("/api/v1/pods", "1")]

    return asyncio.run(go())


def test_lines_split_across_chunks_blank_lines_and_a_last_line_without_newline() -> None:
    events = [orjson.dumps({"type": t, "object": {"metadata": {"name": f"p{i}"}}})
              for i, t in enumerate(["ADDED", "MODIFIED", "DELETED"])]
    wire = events[0] + b"\n\n" + events[1] + b"\n" + events[2]
    # every split point, including inside a line and between "\n"s
    for cut in range(1, len(wire)):
        got = _events([wire[:cut], wire[cut:]])
        assert [(t, o["metadata"]) for t, o in got] == [
            ("ADDED", {"name": "p0"}), ("MODIFIED", {"name": "p1"}),
            ("DELETED", {"name": "p2"}),
        ], cut


def test_one_byte_chunks() -> None:
    wire = b'{"type":"ADDED","object":{"a":1}}\n{"type":"BOOKMARK","object":{}}\n'
    got = _events([wire[i:i + 1] for i in range(len(wire))])
    assert got == [("ADDED", {"a": 1}), ("BOOKMARK", {})]


def test_list_and_watch_narrowed_by_a_field_selector() -> None:
    """The lease is listed and watched by name (extender/kube/leader.py): the selector
    must reach the query of every page and of the watch, next to the client's own."""
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        if request.url.params.get("watch") == "1":
            return httpx.Response(200, stream=Chunks([b'{"type":"ADDED","object":{}}\n']))
        page = {"metadata": {"resourceVersion": "5",
                             "continue": "" if request.url.params.get("continue") else "c"},
                "items": [{"n": len(seen)}]}
        return httpx.Response(200, content=orjson.dumps(page))

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            kube = Kube(http)
            sel = {"fieldSelector": "metadata.name=gang-scheduler"}
            items, rv = await kube.list("/apis/x/leases", params=sel)
            assert (items, rv) == ([{"n": 1}, {"n": 2}], "5")
            assert [e async for e in kube.watch("/apis/x/leases", rv, params=sel)] == [
                ("ADDED", {})]

    asyncio.run(go())
    assert [dict(u.params) for u in seen] == [
        {"fieldSelector": "metadata.name=gang-scheduler", "limit": "2000"},
        {"fieldSelector": "metadata.name=gang-scheduler", "limit": "2000", "continue": "c"},
        {"fieldSelector": "metadata.name=gang-scheduler", "watch": "1", "resourceVersion": "5",
         "allowWatchBookmarks": "true", "timeoutSeconds": "300"},
    ]


def _proto_watch(chunks: list[bytes], content_type: str, accept: list[str]
                 ) -> list[tuple[str, dict[str, object]]]:
    def handler(request: httpx.Request) -> httpx.Response:
        accept.append(request.headers.get("accept", ""))
        return httpx.Response(200, stream=Chunks(chunks),
                              headers={"content-type": content_type})

    async def go() -> list[tuple[str, dict[str, object]]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            return [e async for e in Kube(http).watch("/api/v1/pods", "1", proto=_decoder())]

    return asyncio.run(go())


def test_a_protobuf_watch_is_asked_for_and_read_frame_by_frame() -> None:
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "7"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    wire = watch_frame("ADDED", "Pod", fill_proto(protobuf.Pod(), pod).SerializeToString()) * 2
    accept: list[str] = []
    # every split point, including inside the 4-byte length and the envelope
    for cut in range(1, len(wire), 7):
        got = _proto_watch([wire[:cut], wire[cut:]], "application/vnd.kubernetes.protobuf;"
                           "stream=watch", accept)
        assert [(t, o["metadata"]) for t, o in got] == [
            ("ADDED", {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "7"})
        ] * 2, cut
    assert accept[0].startswith(protobuf.WATCH_ACCEPT)


def test_a_protobuf_watch_answered_in_json_is_read_as_json() -> None:
    wire = b'{"type":"ADDED","object":{"a":1}}\n'
    assert _proto_watch([wire], "application/json", []) == [("ADDED", {"a": 1})]


def test_a_protobuf_watch_error_event_raises_like_json() -> None:
    status: Any = protobuf._Status()
    status.code = 410
    wire = watch_frame("ERROR", "Status", status.SerializeToString())
    with pytest.raises(ResourceExpired):
        _proto_watch([wire], "application/vnd.kubernetes.protobuf;stream=watch", [])


class _RecordingKube:
    """Lists nothing and records how each kind is watched, then stops the informer."""

    def __init__(self) -> None:
        self.proto: dict[str, object] = {}

    async def list_pages(self, path: str, limit: int = 2000, params: object = None
                         ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        yield [], "1"

    async def watch(self, path: str, rv: str, timeout_seconds: int = 300,
                    params: object = None, proto: object = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.proto[path] = proto
        raise asyncio.CancelledError
        yield "", {}  # an async generator


@pytest.mark.parametrize("on", [False, True])
def test_the_informer_watches_pods_in_protobuf_only_when_asked(on: bool) -> None:
    from extender.core.manager import GangManager
    from extender.core.wiring import Core
    from extender.kube.informer import NODES, PODS, Informer, InformerOptions

    kube = _RecordingKube()
    inf = Informer(kube, GangManager(Core.wire()), lambda: 0.0,  # type: ignore[arg-type]
                   lambda: None, kinds=(NODES, PODS), options=InformerOptions(protobuf=on))
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(inf.run())
    assert kube.proto == {"/api/v1/nodes": None, "/api/v1/pods": _decoder() if on else None}


def test_the_protobuf_runtime_is_not_loaded_for_a_json_watch() -> None:
    """4 MiB and 25-30 ms of import for a watch encoding that is off by default."""
    code = ("import sys, extender.cli; "
            "assert 'google.protobuf' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

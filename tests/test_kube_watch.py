"""Watch stream framing: JSON lines split across chunks arrive whole, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import orjson

from extender.kube.client import Kube


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


def _events(chunks: list[bytes]) -> list[tuple[str, dict[str, object]]]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Chunks(chunks))

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
            return httpx.Response(200, stream=_Chunks([b'{"type":"ADDED","object":{}}\n']))
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

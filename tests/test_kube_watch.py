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

"""extender.kube.transport.AsyncioTransport against a raw asyncio TCP server on 127.0.0.1.

The server side (tests/kube/raw_server.py) is written byte by byte (no HTTP library), so
every test controls the exact wire behaviour: framing, keep-alive, closes at awkward
moments, malformed heads. The client side is the real thing the extender uses:
``httpx.AsyncClient(transport=AsyncioTransport())``.

No pytest-asyncio: each test is a sync function running its coroutine with ``asyncio.run``
under an overall deadline, so a regression that hangs fails in seconds instead of stalling
the suite. No test depends on timing beyond that deadline and one 0.2 s read timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from extender.kube.transport import AsyncioTransport
from tests.kube.raw_server import (
    CHUNKED_HEAD,
    Handler,
    Peer,
    Req,
    answer_all,
    chunk,
    client_for,
    connected,
    ok_json,
    response,
    run,
    serve,
    until,
)

# -- 1. Content-Length responses ---------------------------------------------------------


def test_content_length_response_status_headers_body_json() -> None:
    payload = {"kind": "Pod", "metadata": {"name": "p-0", "labels": {"a": "b"}}, "n": [1, 2]}
    body = json.dumps(payload).encode()

    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(response(body, status=201, reason=b"Created", headers=[
            b"Content-Type: application/json", b"X-Thing:  spaced value  ",
            b"Set-Cookie: a=1", b"Set-Cookie: b=2"]))
        await peer.until_client_closes()

    async def go() -> None:
        async with connected(handler) as (_, t, client):
            r = await client.get("/api/v1/pods/p-0")
        assert r.status_code == 201
        assert r.reason_phrase == "Created"
        assert r.http_version == "HTTP/1.1"
        assert r.headers["content-type"] == "application/json"
        assert r.headers["x-thing"] == "spaced value"
        assert r.headers.get_list("set-cookie") == ["a=1", "b=2"]
        assert r.headers["content-length"] == str(len(body))
        assert r.content == body
        assert r.json() == payload
        assert t.stats.requests == 1 and t.stats.connects == 1

    run(go())


def test_empty_content_length_body_and_large_body() -> None:
    big = bytes(range(256)) * 8192  # 2 MiB: several reads, more than the head limit

    async def go() -> None:
        async with serve(answer_all(
            lambda req: response(big if req.target == b"/big" else b"")
        )) as (_, url):
            t = AsyncioTransport(None)
            async with client_for(url, t) as client:
                assert (await client.get("/empty")).content == b""
                assert (await client.get("/big")).content == big
                assert (await client.get("/empty")).content == b""
            assert t.stats.connects == 1

    run(go())


# -- 2. chunked responses ----------------------------------------------------------------


def test_chunked_response_body() -> None:
    async def handler(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            if req.target == b"/chunked":
                wire = CHUNKED_HEAD + chunk(b'{"items": [')
                wire += b"4;name=value\r\n1, 2\r\n"  # a chunk extension
                wire += b"5 \r\n, 3]}\r\n"  # whitespace after the size
                wire += b"0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n"  # trailers
                await peer.send(wire)
            else:  # hex sizes in both cases, a chunk bigger than one read
                big = b"x" * 0x1AB
                await peer.send(CHUNKED_HEAD + b"1AB\r\n" + big + b"\r\n1ab\r\n" + big
                                + b"\r\n" + chunk(b"y" * 200_000) + b"0\r\n\r\n")

    async def go() -> None:
        async with connected(handler) as (_, t, client):
            r = await client.get("/chunked")
            assert r.status_code == 200
            assert "content-length" not in r.headers
            assert r.content == b'{"items": [1, 2, 3]}'
            assert r.json() == {"items": [1, 2, 3]}
            # the second response follows on the same connection: the first one's
            # trailers were consumed exactly
            r = await client.get("/again")
            assert r.content == b"x" * (2 * 0x1AB) + b"y" * 200_000
        assert t.stats.connects == 1

    run(go())


def test_chunked_watch_stream_delivers_lines_before_the_end() -> None:
    """Like a Kubernetes watch: events arrive one chunk at a time, long before the end.

    The server only sends the next event once the client has seen the previous one, so the
    test deadlocks (and fails on the deadline) unless each line reaches aiter_lines as soon
    as its chunk arrives.
    """
    events = [{"type": "ADDED", "object": {"metadata": {"name": f"p-{i}"}}} for i in range(4)]
    seen: list[asyncio.Event] = [asyncio.Event() for _ in events]

    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(CHUNKED_HEAD)
        for i, ev in enumerate(events):
            line = json.dumps(ev).encode() + b"\n"
            if i == 2:  # one event split across two chunks, one chunk holding the newline
                await peer.send(chunk(line[:10]))
                await asyncio.sleep(0.01)
                await peer.send(chunk(line[10:-1]) + chunk(b"\n"))
            else:
                await peer.send(chunk(line))
            await seen[i].wait()
            await asyncio.sleep(0.01)  # a pause between events, as a real watch has
        await peer.send(b"0\r\n\r\n")
        while await peer.request() is not None:
            await peer.send(response(b"after"))

    async def go() -> None:
        async with connected(handler) as (_, t, client):
            got = []
            async with client.stream("GET", "/api/v1/pods?watch=1") as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    got.append(json.loads(line))
                    seen[len(got) - 1].set()
            assert got == events
            # the finished stream returned its connection to the pool
            assert (await client.get("/next")).content == b"after"
        assert t.stats.connects == 1

    run(go())


def test_chunks_that_arrive_together_are_delivered_as_one_piece() -> None:
    """A busy API server's watch puts several events (one chunk each) in one segment: they
    reach the reader as one piece, in order, instead of one piece (and two timed reads)
    per chunk, which is what made a watch event cost the most in the informers."""
    lines = [json.dumps({"type": "MODIFIED", "n": i}).encode() + b"\n" for i in range(5)]

    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(CHUNKED_HEAD + b"".join(chunk(line) for line in lines))
        await asyncio.sleep(0.05)
        await peer.send(chunk(b"last\n") + b"0\r\n\r\n")
        while await peer.request() is not None:
            await peer.send(response(b"after"))

    async def go() -> None:
        async with connected(handler) as (_, t, client):
            async with client.stream("GET", "/w") as r:
                pieces = [p async for p in r.aiter_raw()]
            assert pieces == [b"".join(lines), b"last\n"]
            assert (await client.get("/next")).content == b"after"
        assert t.stats.connects == 1

    run(go())


def test_a_stream_that_keeps_arriving_outlives_its_read_timeout() -> None:
    """The read timeout counts silence, not the length of the body: a watch whose events
    keep coming every 0.1 s runs well past a 0.3 s timeout."""

    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(CHUNKED_HEAD)
        for i in range(10):
            await peer.send(chunk(b"%d\n" % i))
            await asyncio.sleep(0.1)
        await peer.send(b"0\r\n\r\n")

    async def go() -> None:
        async with (serve(handler) as (_, url),
                    client_for(url, AsyncioTransport(None), timeout=0.3) as client):
            async with client.stream("GET", "/w") as r:
                got = [line async for line in r.aiter_lines()]
            assert got == [str(i) for i in range(10)]

    run(go())


def test_bytes_after_a_chunked_body_keep_its_connection_out_of_the_pool() -> None:
    """Anything the server sends after the terminating chunk would be read as the start of
    the next response on that connection; such a connection is closed instead."""

    async def handler(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(CHUNKED_HEAD + chunk(b"body") + b"0\r\n\r\nHTTP/1.1 200 OK\r\n")

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            assert (await client.get("/a")).content == b"body"
            assert (await client.get("/b")).content == b"body"
        assert t.stats.connects == 2
        assert server.accepted == 2

    run(go())


# -- 3. keep-alive and the pool ----------------------------------------------------------


def test_sequential_requests_reuse_one_connection() -> None:
    async def go() -> None:
        async with connected(answer_all(ok_json)) as (server, t, client):
            for i in range(5):
                r = await client.get(f"/n/{i}")
                assert r.json() == {"path": f"/n/{i}", "conn": 0}
        assert t.stats.connects == 1
        assert t.stats.requests == 5
        assert server.accepted == 1
        assert t.stats.by_key == {("http", "127.0.0.1", server.port): 5}

    run(go())


def test_concurrent_requests_open_more_connections() -> None:
    n = 4
    arrived: list[Peer] = []
    all_in = asyncio.Event()

    async def handler(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            if len(arrived) < n:
                # hold the answer until all n requests are in flight at once: with only one
                # connection (or a serialising transport) this never happens
                arrived.append(peer)
                if len(arrived) == n:
                    all_in.set()
                await all_in.wait()
            await peer.send(ok_json(req))

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            rs = await asyncio.gather(*(client.get(f"/c/{i}") for i in range(n)))
            assert sorted(r.json()["conn"] for r in rs) == list(range(n))
            assert t.stats.connects == n
            # all n are idle now; the next n concurrent requests reuse them
            rs = await asyncio.gather(*(client.get(f"/d/{i}") for i in range(n)))
            assert all(r.status_code == 200 for r in rs)
        assert t.stats.connects == n
        assert server.accepted == n

    run(go())


def test_idle_pool_is_bounded_by_max_idle() -> None:
    n, max_idle = 5, 2
    arrived = 0
    all_in = asyncio.Event()

    async def handler(peer: Peer) -> None:
        nonlocal arrived
        while (req := await peer.request()) is not None:
            if arrived < n:
                arrived += 1
                if arrived == n:
                    all_in.set()
                await all_in.wait()
            await peer.send(ok_json(req))

    async def go() -> None:
        async with connected(handler, max_idle=max_idle) as (server, t, client):
            await asyncio.gather(*(client.get(f"/c/{i}") for i in range(n)))
            assert t.stats.connects == n
            key = ("http", "127.0.0.1", server.port)
            assert len(t._idle[key]) == max_idle
            # the surplus connections were closed, not leaked
            await until(lambda: sum(p.client_closed.is_set() for p in server.peers)
                        == n - max_idle)
            kept = {p.index for p in server.peers if not p.client_closed.is_set()}
            for i in range(4):
                r = await client.get(f"/s/{i}")
                assert r.json()["conn"] in kept
            assert t.stats.connects == n

    run(go())


# -- 4. the server closes an idle keep-alive connection ----------------------------------


def drops_second_request(drop: Callable[[Peer], None]) -> Handler:
    """A keep-alive server whose first connection answers one request, then reads the
    next and drops the connection with it unanswered (`drop`: close or reset)."""

    async def handler(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        await peer.send(ok_json(req))
        if peer.index == 0:
            await peer.request()
            drop(peer)
            return
        while (req := await peer.request()) is not None:
            await peer.send(ok_json(req))

    return handler


def test_get_on_a_reused_connection_closed_before_answering_is_retried_once() -> None:
    """The race a keep-alive client always has: the server closes an idle connection just
    as a request goes out on it. Here the server reads the second request on the first
    connection and closes without answering; a GET is safe to repeat, so the transport
    sends it again on a new connection."""

    async def go() -> None:
        async with connected(drops_second_request(Peer.close)) as (server, t, client):
            assert (await client.get("/first")).json()["conn"] == 0
            r = await client.get("/second")
            assert r.status_code == 200
            assert r.json() == {"path": "/second", "conn": 1}
            assert t.stats.retries == 1
            assert t.stats.connects == 2
            assert t.stats.requests == 2
            # and the fresh connection is pooled in turn
            assert (await client.get("/third")).json()["conn"] == 1
        assert [(q.conn, q.target) for q in server.requests] == [
            (0, b"/first"), (0, b"/second"), (1, b"/second"), (1, b"/third")]

    run(go())


UNSAFE = ["POST", "PATCH", "PUT", "DELETE"]


@pytest.mark.parametrize("drop", [Peer.close, Peer.reset], ids=["close", "reset"])
@pytest.mark.parametrize("method", UNSAFE)
def test_unsafe_request_read_then_dropped_on_a_reused_connection_is_not_resent(
        method: str, drop: Callable[[Peer], None]) -> None:
    """The same race for a request that changes something: the server read it and may
    have acted on it (a Binding made) before the connection died, and nothing in HTTP/1.1
    tells the two apart. Sending it again could do it twice; the caller gets the error
    and the server sees the request exactly once."""

    async def go() -> None:
        async with connected(drops_second_request(drop)) as (server, t, client):
            assert (await client.get("/first")).json()["conn"] == 0
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await client.request(method, "/second", content=b'{"x":1}')
            # the error left nothing behind: the next request opens a new connection
            assert (await client.get("/third")).json()["conn"] == 1
        assert t.stats.retries == 0
        assert [(q.conn, q.method, q.target) for q in server.requests] == [
            (0, b"GET", b"/first"), (0, method.encode(), b"/second"),
            (1, b"GET", b"/third")]

    run(go())


@pytest.mark.parametrize("drop", [Peer.close, Peer.reset], ids=["close", "reset"])
def test_raw_request_path_does_not_resend_a_post(drop: Callable[[Peer], None]) -> None:
    """`AsyncioTransport.request`, the path Bindings, patches and Events take, follows
    the same rule: one POST on the wire, an error to the caller."""

    async def go() -> None:
        async with serve(drops_second_request(drop)) as (server, _):
            t = AsyncioTransport(None)
            key = ("http", "127.0.0.1", server.port)
            host = f"Host: 127.0.0.1:{server.port}\r\n".encode()
            status, _ = await t.request(key, b"POST", b"/first", host, b"{}", 2.0)
            assert status == 200
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await t.request(key, b"POST", b"/second", host, b"{}", 2.0)
            status, _ = await t.request(key, b"GET", b"/third", host, b"", 2.0)
            assert status == 200
            assert t.stats.retries == 0
            assert [(q.conn, q.target) for q in server.requests] == [
                (0, b"/first"), (0, b"/second"), (1, b"/third")]
            await t.aclose()

    run(go())


def test_get_on_a_reused_connection_reset_by_server_is_retried_once() -> None:
    """Same race, but the server answers the request with an RST (OSError path)."""

    async def go() -> None:
        async with connected(drops_second_request(Peer.reset)) as (_, t, client):
            assert (await client.get("/first")).json()["conn"] == 0
            assert (await client.get("/second")).json()["conn"] == 1
        assert t.stats.retries == 1
        assert t.stats.connects == 2

    run(go())


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_idle_connection_seen_closed_is_discarded_without_a_retry(method: str) -> None:
    """When the server's close has already arrived, the pool drops that connection at
    checkout and the request goes straight to a new one: nothing was written on the old
    one, so this is safe for a POST too, and it is not a retry."""

    async def handler(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        await peer.send(ok_json(req))
        if peer.index == 0:
            return  # closes right after the response: the idle-timeout case
        while (req := await peer.request()) is not None:
            await peer.send(ok_json(req))

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            await client.get("/first")
            key = ("http", "127.0.0.1", server.port)
            (idle,) = t._idle[key]
            await until(lambda: not idle.reusable())
            r = await client.request(method, "/second", content=b"{}")
            assert r.json()["conn"] == 1
        assert t.stats.retries == 0
        assert t.stats.connects == 2
        assert [(q.conn, q.method) for q in server.requests] == [
            (0, b"GET"), (1, method.encode())]

    run(go())


def test_retry_happens_at_most_once() -> None:
    """A reused connection fails, and so does the fresh one: the error surfaces."""

    async def handler(peer: Peer) -> None:
        if peer.index == 0:
            req = await peer.request()
            assert req is not None
            await peer.send(ok_json(req))
        await peer.request()  # then close without an answer, on every connection

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            await client.get("/first")
            with pytest.raises(httpx.RemoteProtocolError, match="without sending"):
                await client.get("/second")
        assert t.stats.retries == 1
        assert t.stats.connects == 2
        assert server.accepted == 2

    run(go())


# -- 5. Connection: close and close-delimited bodies -------------------------------------


@pytest.mark.parametrize("wire", [
    pytest.param(response(b"closing", headers=[b"Connection: close"]), id="connection-close"),
    pytest.param(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nclosing", id="until-eof"),
    pytest.param(b"HTTP/1.0 200 OK\r\n\r\nclos" + b"ing", id="http10-until-eof"),
    pytest.param(response(b"closing", version=b"HTTP/1.0"), id="http10-content-length"),
])
def test_response_that_ends_the_connection_is_not_reused(wire: bytes) -> None:
    async def handler(peer: Peer) -> None:
        await peer.request()
        if b"Content-Length" in wire:
            await peer.send(wire)
            await peer.until_client_closes()  # the client must be the one to close
        else:
            await peer.send(wire[:-3])
            await asyncio.sleep(0.01)
            await peer.send(wire[-3:])  # the body ends only with the close

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            for _ in range(3):
                r = await client.get("/x")
                assert r.content == b"closing"
        assert t.stats.connects == 3
        assert server.accepted == 3
        assert t.stats.retries == 0
        assert not any(t._idle.values())

    run(go())


def test_http10_keep_alive_response_is_reused() -> None:
    async def go() -> None:
        async with serve(answer_all(lambda req: response(
            b"ten", version=b"HTTP/1.0", headers=[b"Connection: Keep-Alive"]))) as (_, url):
            t = AsyncioTransport(None)
            async with client_for(url, t) as client:
                assert (await client.get("/a")).content == b"ten"
                assert (await client.get("/b")).content == b"ten"
            assert t.stats.connects == 1

    run(go())


# -- 6. the request on the wire ----------------------------------------------------------


def test_request_line_headers_and_body_arrive_exactly() -> None:
    async def go() -> None:
        async with serve(answer_all(lambda req: response(b"{}"))) as (server, url):
            t = AsyncioTransport(None)
            async with httpx.AsyncClient(base_url=url, transport=t, headers={
                    "Authorization": "Bearer tok"}) as client:
                await client.post("/api/v1/namespaces/ns/pods/p/binding",
                                  params={"fieldManager": "gang extender", "dryRun": "All"},
                                  json={"target": {"name": "node-1"}})
                await client.patch("/apis/x/v1/ns/g?x=1&y=%2F",
                                   content=b'{"status":{"phase":"Running"}}',
                                   headers={"Content-Type": "application/merge-patch+json"})
                await client.get("/api/v1/pods", params={"labelSelector": "a=b,c in (d)",
                                                         "watch": "1"})
                await client.delete("/api/v1/x")
            host = f"127.0.0.1:{server.port}".encode()
            post, patch, get, delete = server.requests
            assert all(q.conn == 0 for q in server.requests)  # framing kept the conn usable

            assert post.line == (b"POST /api/v1/namespaces/ns/pods/p/binding"
                                 b"?fieldManager=gang+extender&dryRun=All HTTP/1.1")
            assert post.body == b'{"target":{"name":"node-1"}}'
            assert post.header(b"content-length") == [str(len(post.body)).encode()]
            assert post.header(b"content-type") == [b"application/json"]
            assert post.header(b"host") == [host]
            assert post.header(b"authorization") == [b"Bearer tok"]
            assert post.header(b"transfer-encoding") == []

            assert patch.line == b"PATCH /apis/x/v1/ns/g?x=1&y=%2F HTTP/1.1"
            assert patch.body == b'{"status":{"phase":"Running"}}'
            assert patch.header(b"content-type") == [b"application/merge-patch+json"]
            assert patch.header(b"content-length") == [str(len(patch.body)).encode()]

            assert get.method == b"GET"
            assert get.target == b"/api/v1/pods?labelSelector=a%3Db%2Cc+in+%28d%29&watch=1"
            assert get.body == b""
            assert get.header(b"content-length") == []
            assert get.header(b"host") == [host]

            assert delete.line == b"DELETE /api/v1/x HTTP/1.1"

    run(go())


def test_request_head_is_exactly_what_httpx_built() -> None:
    """No header is added, dropped or duplicated on the way to the wire."""
    raw: list[bytes] = []

    async def handler(peer: Peer) -> None:
        raw.append(await peer.reader.readuntil(b"\r\n\r\n") + await peer.reader.readexactly(5))
        await peer.send(response(b""))
        await peer.until_client_closes()

    async def go() -> None:
        async with serve(handler) as (_, url):
            async with client_for(url, AsyncioTransport(None)) as client:
                req = client.build_request("PUT", "/p?q=1", content=b"hello",
                                           headers={"X-A": "1"})
                await client.send(req)
            expected = [b"PUT /p?q=1 HTTP/1.1"]
            expected += [n + b": " + v for n, v in req.headers.raw]
            assert raw == [b"\r\n".join(expected) + b"\r\n\r\nhello"]
            assert sum(line.lower().startswith(b"content-length:")
                       for line in raw[0].split(b"\r\n")) == 1

    run(go())


def test_streaming_request_body_is_sent_with_a_valid_framing() -> None:
    """httpx marks a generator body ``Transfer-Encoding: chunked``; the transport reads it
    whole first, so what goes out must be framed consistently (one of the two headers)."""

    async def parts() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b"def"

    got: list[tuple[bytes, bytes]] = []

    async def handler(peer: Peer) -> None:
        head = await peer.reader.readuntil(b"\r\n\r\n")
        req = Req(peer.index, head[:-4], b"")
        te, cl = req.header(b"transfer-encoding"), req.header(b"content-length")
        assert not (te and cl), head  # both at once is a request smuggling red flag
        if cl:
            body = await peer.reader.readexactly(int(cl[0]))
        else:
            body = b""
            while (size := int((await peer.reader.readuntil(b"\r\n")).strip(), 16)):
                body += (await peer.reader.readexactly(size + 2))[:-2]
            await peer.reader.readuntil(b"\r\n")
        got.append((req.line, body))
        await peer.send(response(b"ok"))
        await peer.until_client_closes()

    async def go() -> None:
        async with serve(handler) as (_, url), client_for(url, AsyncioTransport(None)) as client:
            r = await client.post("/up", content=parts())
            assert r.content == b"ok"
        assert got == [(b"POST /up HTTP/1.1", b"abcdef")]

    run(go())


# -- 7. errors ---------------------------------------------------------------------------


def test_connection_refused_is_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now

    async def go() -> None:
        t = AsyncioTransport(None)
        async with client_for(f"http://127.0.0.1:{port}", t) as client:
            with pytest.raises(httpx.ConnectError, match=f"127.0.0.1:{port}"):
                await client.get("/")
        assert t.stats.connects == 0

    run(go())


def test_no_answer_within_read_timeout_is_read_timeout() -> None:
    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.until_client_closes()  # never answers

    async def go() -> None:
        async with connected(handler, timeout=0.2) as (server, t, client):
            with pytest.raises(httpx.ReadTimeout):
                await client.get("/slow")
            # the timed-out connection is closed, never pooled with a late answer due
            await asyncio.wait_for(server.peers[0].client_closed.wait(), 2)
        assert not any(t._idle.values())

    run(go())


def test_server_not_reading_the_request_is_write_timeout() -> None:
    stop = asyncio.Event()

    async def handler(peer: Peer) -> None:
        await stop.wait()  # never reads: the request fills the socket buffers

    async def go() -> None:
        async with serve(handler) as (_, url):
            async with client_for(url, AsyncioTransport(None), timeout=0.2) as client:
                with pytest.raises(httpx.WriteTimeout):
                    await client.post("/big", content=b"x" * (64 << 20))
            stop.set()

    run(go())


def test_body_stalls_past_read_timeout_is_read_timeout() -> None:
    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(CHUNKED_HEAD + chunk(b"first\n"))
        await peer.until_client_closes()

    async def go() -> None:
        async with (serve(handler) as (server, url),
                    client_for(url, AsyncioTransport(None), timeout=0.2) as client):
            lines = []
            with pytest.raises(httpx.ReadTimeout):
                async with client.stream("GET", "/w") as r:
                    async for line in r.aiter_lines():
                        lines.append(line)
            assert lines == ["first"]
            await asyncio.wait_for(server.peers[0].client_closed.wait(), 2)

    run(go())


@pytest.mark.parametrize("wire", [
    pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b", id="content-length"),
    pytest.param(CHUNKED_HEAD + chunk(b"one chunk") + b"10\r\nhalf", id="chunked-mid-chunk"),
    pytest.param(CHUNKED_HEAD + chunk(b"one chunk"), id="chunked-between-chunks"),
    pytest.param(CHUNKED_HEAD + chunk(b"one chunk") + b"0\r\n", id="chunked-in-trailers"),
])
def test_server_closing_mid_body_is_read_error(wire: bytes) -> None:
    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(wire)  # and close

    async def go() -> None:
        async with connected(handler) as (_, t, client):
            with pytest.raises(httpx.ReadError):
                await client.get("/x")
        assert not any(t._idle.values())
        assert t.stats.retries == 0

    run(go())


@pytest.mark.parametrize("wire", [
    pytest.param(b"", id="nothing"),
    pytest.param(b"HTTP/1.1 200 OK\r\nContent-Le", id="half-a-head"),
])
def test_fresh_connection_closed_without_response_is_remote_protocol_error(wire: bytes) -> None:
    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(wire)

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            with pytest.raises(httpx.RemoteProtocolError, match="without sending"):
                await client.get("/x")
        assert t.stats.retries == 0  # a fresh connection is never retried
        assert server.accepted == 1

    run(go())


def assert_bad_answer_fails(wire: bytes, match: str | None = None) -> None:
    """The server answers a GET with `wire` and waits: the request fails with a
    RemoteProtocolError (matching `match`) naming it, and the connection is closed, never
    pooled."""

    async def handler(peer: Peer) -> None:
        await peer.request()
        with contextlib.suppress(ConnectionError):
            await peer.send(wire)
        await peer.until_client_closes()

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            with pytest.raises(httpx.RemoteProtocolError, match=match) as info:
                await client.get("/x")
            assert info.value.request.url.path == "/x"
            await asyncio.wait_for(server.peers[0].client_closed.wait(), 2)
        assert not any(t._idle.values())

    run(go())


@pytest.mark.parametrize("head", [
    pytest.param(b"garbage\r\n\r\n", id="garbage"),
    pytest.param(b"HTTP/2 200 OK\r\n\r\n", id="http2"),
    pytest.param(b"HTTP/1.1 OK 200\r\n\r\n", id="swapped"),
    pytest.param(b"HTTP/1.1\r\n\r\n", id="no-status"),
    pytest.param(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", id="header-without-colon"),
    pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", id="bad-content-length"),
    pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", id="negative-length"),
])
def test_malformed_head_is_remote_protocol_error(head: bytes) -> None:
    assert_bad_answer_fails(head)


def test_oversized_head_is_remote_protocol_error() -> None:
    assert_bad_answer_fails(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n",
                            "too large")


@pytest.mark.parametrize("size_line", [
    b"zz", b"", b"-5", b"-2", b"0x5", b"+5", b"5 5", b"1_0",
])
def test_bad_chunk_size_is_remote_protocol_error(size_line: bytes) -> None:
    assert_bad_answer_fails(CHUNKED_HEAD + chunk(b"fine") + size_line + b"\r\nhello\r\n"
                            + b"0123456789abcdef" * 2 + b"\r\n0\r\n\r\n", "chunk size")


def test_chunk_not_ending_in_crlf_is_remote_protocol_error() -> None:
    """A chunk whose data is not followed by CRLF (its size is wrong): without the check
    the transport takes any two bytes for the CRLF, and here it would silently return
    b"abc" for a body that is not valid chunked framing."""

    assert_bad_answer_fails(CHUNKED_HEAD + b"3\r\nabcXY0\r\n\r\n", "CRLF")


def test_unsupported_scheme() -> None:
    async def go() -> None:
        async with httpx.AsyncClient(transport=AsyncioTransport(None)) as client:
            with pytest.raises(httpx.UnsupportedProtocol):
                await client.get("ftp://127.0.0.1/x")

    run(go())


# -- 8. a stream abandoned by its reader -------------------------------------------------


def test_stream_closed_early_closes_its_connection() -> None:
    stop = asyncio.Event()

    async def handler(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        if peer.index == 0:
            await peer.send(CHUNKED_HEAD + chunk(b"line 1\n") + chunk(b"line 2\n"))
            await peer.until_client_closes()
            stop.set()
            return
        await peer.send(ok_json(req))
        while (req := await peer.request()) is not None:
            await peer.send(ok_json(req))

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            async with client.stream("GET", "/watch") as r:
                async for line in r.aiter_lines():
                    assert line == "line 1"
                    break
            # the unread rest of that response must not be mistaken for the next one's
            await asyncio.wait_for(stop.wait(), 2)
            assert not any(t._idle.values())
            r2 = await client.get("/next")
            assert r2.json() == {"path": "/next", "conn": 1}
            assert (await client.get("/next2")).json()["conn"] == 1
        assert t.stats.connects == 2
        assert server.accepted == 2

    run(go())


def test_stream_closed_without_reading_closes_its_connection() -> None:
    async def handler(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        if peer.index == 0:
            await peer.send(response(b"never read"))
            await peer.until_client_closes()
            return
        await peer.send(ok_json(req))
        await peer.until_client_closes()

    async def go() -> None:
        async with connected(handler) as (server, _, client):
            async with client.stream("GET", "/unread"):
                pass
            await asyncio.wait_for(server.peers[0].client_closed.wait(), 2)
            assert (await client.get("/next")).json()["conn"] == 1

    run(go())


def test_cancelled_request_closes_its_connection() -> None:
    """A caller's own deadline (asyncio.timeout, task cancellation on shutdown) may cancel
    a request while it waits for the response head; that connection must be closed, not
    leaked open with a response still to come."""
    answer = asyncio.Event()

    async def handler(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        if peer.index == 0:
            await peer.until_client_closes()
            answer.set()
            return
        await peer.send(ok_json(req))
        await peer.until_client_closes()

    async def go() -> None:
        async with connected(handler) as (server, t, client):
            task = asyncio.create_task(client.get("/slow"))
            await until(lambda: len(server.requests) == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as info:
                await task
            # info keeps the traceback, and with it the request's frames, alive: the
            # close must be explicit, not StreamWriter.__del__ at garbage collection
            await asyncio.wait_for(answer.wait(), 2)
            assert info.traceback
            assert not any(t._idle.values())
            assert (await client.get("/next")).json()["conn"] == 1

    run(go())


# -- 9. responses without a body ---------------------------------------------------------


def test_204_304_and_head_have_no_body_and_keep_the_connection() -> None:
    def make(req: Req) -> bytes:
        if req.target == b"/204":
            return b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"
        if req.target == b"/304":
            # a Content-Length on a 304 describes the full entity: no body follows
            return b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"
        if req.target == b"/head-chunked":
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        if req.method == b"HEAD":
            return (b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n"
                    b"Content-Type: application/json\r\n\r\n")
        return response(b"real body")

    async def go() -> None:
        async with connected(answer_all(make)) as (server, t, client):
            r = await client.delete("/204")
            assert (r.status_code, r.content, r.headers["x-a"]) == (204, b"", "1")
            r = await client.get("/304")
            assert (r.status_code, r.content) == (304, b"")
            r = await client.head("/thing")
            assert (r.status_code, r.content) == (200, b"")
            assert r.headers["content-length"] == "1234"
            r = await client.request("HEAD", "/head-chunked")
            assert r.content == b""
            r = await client.get("/body")
            assert r.content == b"real body"  # nothing left over from the others
        assert t.stats.connects == 1
        assert server.accepted == 1

    run(go())


# -- 10. aclose --------------------------------------------------------------------------


def test_aclose_closes_idle_connections_and_refuses_new_requests() -> None:
    async def go() -> None:
        async with serve(answer_all(ok_json)) as (server, url):
            t = AsyncioTransport(None)
            client = client_for(url, t)
            await asyncio.gather(*(client.get(f"/{i}") for i in range(3)))
            held = [c for conns in t._idle.values() for c in conns]
            assert len(held) == 3  # held: the close must be aclose's, not the GC's
            await client.aclose()  # closes the transport too
            assert not any(t._idle.values())
            await asyncio.wait_for(
                asyncio.gather(*(p.client_closed.wait() for p in server.peers)), 2)
            # through the client, httpx itself refuses
            with pytest.raises(RuntimeError, match="closed"):
                await client.get("/after")
            # and the transport on its own refuses with an httpx error
            req = httpx.Request("GET", url + "/after")
            with pytest.raises(httpx.ConnectError, match="transport is closed"):
                await t.handle_async_request(req)
            assert server.accepted == 3
            assert all(c.writer.is_closing() for c in held)

    run(go())


def test_response_finishing_after_aclose_is_not_pooled() -> None:
    release = asyncio.Event()

    async def handler(peer: Peer) -> None:
        await peer.request()
        await peer.send(CHUNKED_HEAD + chunk(b"a"))
        await release.wait()
        await peer.send(chunk(b"b") + b"0\r\n\r\n")
        await peer.until_client_closes()

    async def go() -> None:
        async with serve(handler) as (server, url):
            t = AsyncioTransport(None)
            client = client_for(url, t)
            async with client.stream("GET", "/s") as r:
                it = r.aiter_bytes()
                assert await it.__anext__() == b"a"
                await t.aclose()
                release.set()
                assert [b async for b in it] == [b"b"]
            assert not any(t._idle.values())
            await asyncio.wait_for(server.peers[0].client_closed.wait(), 2)
            await client.aclose()

    run(go())


# -- 11. TLS -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, made with the openssl CLI
    (the project does not depend on the cryptography package; e2e/harness/pki.py makes
    its certificates the same way)."""
    exe = shutil.which("openssl")
    if exe is None:
        pytest.skip("neither openssl nor the cryptography package is available")
    return self_signed(exe, tmp_path_factory.mktemp("tls") / "server", "localhost",
                       "DNS:localhost,IP:127.0.0.1")


def self_signed(exe: str, stem: Path, name: str, alt_names: str) -> tuple[Path, Path]:
    """A self-signed EC certificate for `name` (subjectAltName `alt_names`), valid a
    day, made by openssl `exe`: its files `stem`.crt and `stem`.key."""
    cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
    subprocess.run([exe, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", f"/CN={name}",
                    "-addext", f"subjectAltName={alt_names}",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def tls_contexts(cert: Path, key: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_tls_requests_keep_alive_and_stream(tls_files: tuple[Path, Path], host: str) -> None:
    server_ctx, client_ctx = tls_contexts(*tls_files)

    async def handler(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            if req.target == b"/watch":
                await peer.send(CHUNKED_HEAD + chunk(b'{"n": 1}\n') + chunk(b'{"n": 2}\n')
                                + b"0\r\n\r\n")
            else:
                await peer.send(ok_json(req))

    async def go() -> None:
        async with serve(handler, server_ctx, host) as (server, url):
            assert url.startswith("https://")
            t = AsyncioTransport(client_ctx)
            async with client_for(url, t) as client:
                r = await client.post("/a", json={"x": 1})
                assert r.json() == {"path": "/a", "conn": 0}
                async with client.stream("GET", "/watch") as s:
                    assert [json.loads(x) async for x in s.aiter_lines()] == [{"n": 1},
                                                                             {"n": 2}]
                assert (await client.get("/b")).json() == {"path": "/b", "conn": 0}
            assert t.stats.connects == 1
            assert server.accepted == 1
            assert server.requests[0].header(b"host") == [f"{host}:{server.port}".encode()]

    run(go())


def test_tls_verifies_the_server_name(tls_files: tuple[Path, Path],
                                      tmp_path: Path) -> None:
    """server_hostname is the URL's host: a certificate for another name is refused."""
    exe = shutil.which("openssl")
    assert exe is not None
    server_ctx, client_ctx = tls_contexts(*self_signed(exe, tmp_path / "other", "other",
                                                       "DNS:other.example"))
    _, untrusting = tls_contexts(*tls_files)  # trusts only the localhost certificate

    async def handler(peer: Peer) -> None:
        with contextlib.suppress(ssl.SSLError, OSError):
            await peer.request()

    async def go() -> None:
        async with serve(handler, server_ctx) as (_, url):
            for ctx, why in ((client_ctx, "match|mismatch"), (untrusting, "verify")):
                t = AsyncioTransport(ctx)
                async with client_for(url, t) as client:
                    with pytest.raises(httpx.ConnectError, match=why):
                        await client.get("/")
                assert t.stats.connects == 0

    run(go())

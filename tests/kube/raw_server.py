"""A raw HTTP/1.1 server on 127.0.0.1, written byte by byte (no HTTP library), for the
tests of the extender's own HTTP client: each test scripts the exact wire behaviour it
needs (framing, keep-alive, closes at awkward moments, malformed heads). The transport's
tests, the kube client's writes and the connection warmer's tests all drive their client
against it, so it is a module of its own rather than a test module others import from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from extender.kube.client import Kube, _Writer
from extender.kube.transport import AsyncioTransport

DEADLINE = 5.0  # per test; everything here finishes in milliseconds when it works


def run(coro: Coroutine[Any, Any, None]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(DEADLINE):
            await coro

    asyncio.run(bounded())


# -- the raw server ----------------------------------------------------------------------


@dataclass
class Req:
    """One request as the server read it off the wire."""

    conn: int  # index of the connection it arrived on, in accept order
    head: bytes  # request line + headers, without the final blank line
    body: bytes

    @property
    def line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]

    @property
    def method(self) -> bytes:
        return self.line.split(b" ")[0]

    @property
    def target(self) -> bytes:
        return self.line.split(b" ")[1]

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        out = []
        for line in self.head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            out.append((name.strip().lower(), value.strip()))
        return out

    def header(self, name: bytes) -> list[bytes]:
        return [v for n, v in self.headers if n == name.lower()]


@dataclass(eq=False)
class Peer:
    """The server's end of one accepted connection."""

    server: RawServer
    index: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    client_closed: asyncio.Event = field(default_factory=asyncio.Event)

    async def request(self) -> Req | None:
        """The next request, or None once the client closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            self.client_closed.set()
            return None
        req = Req(self.index, head[:-4], b"")
        length = req.header(b"content-length")
        if length:
            req.body = await self.reader.readexactly(int(length[0]))
        self.server.requests.append(req)
        return req

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def until_client_closes(self) -> None:
        """Read (and discard) until the client closes its end."""
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(65536):
                pass
        self.client_closed.set()

    def close(self) -> None:
        self.writer.close()

    def reset(self) -> None:
        """Close with an RST instead of a FIN (SO_LINGER with a zero timeout)."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.close()


Handler = Callable[[Peer], Awaitable[None]]


class RawServer:
    def __init__(self, handler: Handler, ssl_ctx: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_ctx = ssl_ctx
        self.peers: list[Peer] = []
        self.requests: list[Req] = []
        self.errors: list[BaseException] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(self, len(self.peers), reader, writer)
        self.peers.append(peer)
        try:
            await self.handler(peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away mid-exchange: some tests do that on purpose
        except asyncio.CancelledError:
            pass  # asyncio.run's teardown; on 3.11 a cancelled handler logs a spurious error
        except Exception as exc:  # surfaced by the `serve` context manager
            self.errors.append(exc)
        finally:
            peer.writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0,
                                                  ssl=self.ssl_ctx)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for peer in self.peers:
            peer.writer.close()
        await self._server.wait_closed()

    @property
    def accepted(self) -> int:
        return len(self.peers)


@contextlib.asynccontextmanager
async def serve(handler: Handler, ssl_ctx: ssl.SSLContext | None = None,
                host: str = "127.0.0.1") -> AsyncIterator[tuple[RawServer, str]]:
    server = RawServer(handler, ssl_ctx)
    await server.start()
    scheme = "https" if ssl_ctx else "http"
    try:
        yield server, f"{scheme}://{host}:{server.port}"
    finally:
        await server.stop()
    assert not server.errors, server.errors


def client_for(url: str, transport: AsyncioTransport, timeout: float = 2.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout)


@contextlib.asynccontextmanager
async def connected(handler: Handler, timeout: float = 2.0, max_idle: int = 16
                    ) -> AsyncIterator[tuple[RawServer, AsyncioTransport, httpx.AsyncClient]]:
    """The server running `handler`, a transport of its own (`max_idle`) and a client on
    it: what most transport tests start from. The client is closed, then the server
    stopped, on the way out; the transport's stats and the server's record stay readable."""
    async with serve(handler) as (server, url):
        transport = AsyncioTransport(None, max_idle=max_idle)
        async with client_for(url, transport, timeout) as client:
            yield server, transport, client


def kube_for(url: str, path_prefix: str = "") -> tuple[Kube, AsyncioTransport]:
    """The extender's kube client on this server, its writes on the raw request path with
    the headers serve.py gives it, and the transport, whose stats tell the connections."""
    transport = AsyncioTransport(None)
    http = httpx.AsyncClient(base_url=url + path_prefix, transport=transport, headers={
        "Accept": "application/json", "User-Agent": "gang-extender",
        "Authorization": "Bearer t0ken"})
    return Kube(http, _Writer.for_client(http, transport, 2.0)), transport


def response(body: bytes = b"", status: int = 200, reason: bytes = b"OK",
             headers: list[bytes] | None = None, version: bytes = b"HTTP/1.1") -> bytes:
    lines = [version + b" " + str(status).encode() + b" " + reason,
             *(headers or []), b"Content-Length: " + str(len(body)).encode()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


CHUNKED_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def answer_all(make: Callable[[Req], bytes]) -> Handler:
    """A keep-alive server: answers every request on the connection with make(req)."""

    async def handler(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            await peer.send(make(req))

    return handler


def ok_json(req: Req) -> bytes:
    return response(json.dumps({"path": req.target.decode(), "conn": req.conn}).encode(),
                    headers=[b"Content-Type: application/json"])


def created(req: Req) -> bytes:
    """What kube-apiserver answers a create it accepted (a Binding's POST)."""
    return response(b'{"kind":"Status","status":"Success"}', status=201, reason=b"Created")


async def until(cond: Callable[[], bool]) -> None:
    """Yield to the loop until cond() holds (the test deadline bounds the wait)."""
    while not cond():
        await asyncio.sleep(0.005)

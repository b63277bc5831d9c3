"""An httpx transport on asyncio's own streams: HTTP/1.1 with keep-alive, nothing more.

Why it is kept instead of a library (2026-11-24,
`.venv/bin/python -m lab.experiments.binding_client` after
`.venv/bin/pip install aiohttp kubernetes_asyncio`; docs/performance.md, "The API
client"): one Binding POST, 16 in flight on uvloop against the local API server, cost the
client process 152 µs of CPU through `_Writer` and this module's `request`, 247 µs
through aiohttp 3.14 (1.65 times: the median of 5 repetitions' ratios; 1.67 with its
cookie jar and decompression off), 776 µs through kubernetes_asyncio 36.1 (5.0 times)
and 3.2 ms through httpx's default transport (21 times). Two more runs that day gave
1.71 and 2.02 for aiohttp. The bar for replacing this module with a maintained library
was 15 %.

Why httpx's default (httpcore) costs so much: on asyncio it runs TLS through anyio's
``TLSStream``, which feeds ``ssl.MemoryBIO`` from Python on every read and write, plus
h11's pure-Python parser and a pool scanned per request. Bindings were 43 % of the
extender's CPU in the end-to-end benchmark when they went through it. The extender talks
to exactly one server, the API server, and only with plain requests and watch streams,
so the little HTTP/1.1 it needs is written here (the response framing in `http1`):
Content-Length and chunked bodies, keep-alive with a bounded idle pool, and one retry of
a GET whose reused connection the server closed before it answered (never of a POST or
PATCH: see `_exchange`).

httpx stays the client API (requests, responses, timeouts, content decoding, errors);
only the bytes on the wire move through this module.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

import httpx

from extender.kube.http1 import CRLF, HEAD_LIMIT, Body, Conn, Head, Key, parse_head

# The only requests sent a second time after a reused connection failed them: "safe"
# methods (RFC 9110, 9.2.1), which change nothing on the server however many copies of
# them it processed. A POST or PATCH that went out may have been acted on even though no
# answer came back (a Binding made, an Event created), so its failure is the caller's.
_SAFE_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS"})


@dataclass
class TransportStats:
    """Counters for tests and the benchmark: how often connections were opened and reused."""

    connects: int = 0
    on_demand: int = 0  # of `connects`: opened by a request that found none idle
    warmed: int = 0  # of `connects`: opened ahead of need by `warm`, and kept
    requests: int = 0
    retries: int = 0
    by_key: dict[Key, int] = field(default_factory=dict)


class AsyncioTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over ``asyncio.open_connection`` with a pool of idle keep-alive connections.

    Concurrency is not limited here (callers bound their own: the runtime's Binding
    semaphore, one connection per watch); at most ``max_idle`` idle connections per host
    are kept, the rest are closed when their response ends.
    """

    def __init__(self, ssl_context: ssl.SSLContext | None = None, max_idle: int = 16) -> None:
        self._ssl = ssl_context
        self._max_idle = max_idle
        self._idle: dict[Key, list[Conn]] = {}
        self._closed = False
        self.stats = TransportStats()

    # -- pool --------------------------------------------------------------------------

    def _checkout(self, key: Key) -> Conn | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reusable():
                return conn
            conn.close()
        return None

    def _release(self, key: Key, conn: Conn, keep_alive: bool) -> None:
        idle = self._idle.setdefault(key, [])
        if self._closed or not keep_alive or not conn.reusable() or len(idle) >= self._max_idle:
            conn.close()
            return
        idle.append(conn)

    async def _connect(self, key: Key, timeout: float | None,
                       request: httpx.Request | None) -> Conn:
        scheme, host, port = key
        ctx = None
        if scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname=host if ctx else None,
                    limit=HEAD_LIMIT,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out",
                                       request=request) from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"connecting to {host}:{port}: {exc}",
                                     request=request) from exc
        self.stats.connects += 1
        return Conn(reader, writer)

    # -- requests ----------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise httpx.ConnectError("transport is closed", request=request)
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}", request=request)
        key: Key = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
        timeouts = request.extensions.get("timeout") or {}
        connect_timeout = timeouts.get("connect")
        read_timeout = timeouts.get("read")
        write_timeout = timeouts.get("write")

        body = await request.aread()
        method = request.method.encode("ascii")
        head_lines = [method + b" " + url.raw_path + b" HTTP/1.1"]
        # The body was read whole, so it always goes out with a Content-Length, never with
        # the "Transfer-Encoding: chunked" httpx sets for a generator body.
        head_lines.extend(name + b": " + value for name, value in request.headers.raw
                          if name.lower() != b"transfer-encoding")
        if (body or "transfer-encoding" in request.headers) and (
                "content-length" not in request.headers):
            head_lines.append(b"Content-Length: " + str(len(body)).encode())
        wire = CRLF.join(head_lines) + CRLF + CRLF + body

        conn, head = await self._exchange(key, method, wire, connect_timeout, read_timeout,
                                          write_timeout, request)
        return httpx.Response(
            head.status,
            headers=head.headers,
            stream=Body(self._release, key, conn, head, read_timeout, request),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )

    async def request(self, key: Key, method: bytes, target: bytes, headers: bytes,
                      body: bytes, timeout: float | None,
                      connect_timeout: float | None = None) -> tuple[int, bytes]:
        """One request without httpx's request and response objects: (status, body).

        For the extender's small writes (Bindings, patches, Events), where building and
        reading httpx's models cost 0.3 ms a request, more than the wire. `headers` is
        the ready header block ending in CRLF, without Content-Length; the response must
        not be content-encoded (send no Accept-Encoding)."""
        if self._closed:
            raise httpx.ConnectError("transport is closed")
        wire = b"".join((method, b" ", target, b" HTTP/1.1\r\n", headers,
                         b"Content-Length: %d\r\n\r\n" % len(body), body))
        conn, head = await self._exchange(
            key, method, wire, timeout if connect_timeout is None else connect_timeout,
            timeout, timeout, None)
        chunks = [c async for c in Body(self._release, key, conn, head, timeout, None)]
        return head.status, chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def warm(self, key: Key, want: int, probe: bytes,
                   timeout: float | None) -> tuple[int, list[BaseException]]:
        """Open connections until `want` (at most the idle limit) are idle for `key`, each
        sending `probe` (a whole, safe request) once and reading its answer. A connection
        that fails to open is left out: warming is best effort.

        Why: a direct commit sends up to its Binding concurrency at once, and every one
        of them without an idle connection paid a TLS handshake (and the API server's
        authentication) at that moment, on the commit's critical path. The probe makes
        the connection count as used: the API server closes a connection that never
        carried a request after its ReadHeaderTimeout (32 s), a used one after its
        IdleTimeout (90 s). Returns how many were opened and why the others were not."""
        idle = [c for c in self._idle.get(key, ()) if c.reusable()]
        missing = min(want, self._max_idle) - len(idle)
        if missing <= 0 or self._closed:
            return 0, []
        outcomes = await asyncio.gather(*(self._open_idle(key, probe, timeout)
                                          for _ in range(missing)), return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        return sum(1 for o in outcomes if o is True), errors

    async def _open_idle(self, key: Key, probe: bytes, timeout: float | None) -> bool:
        conn = await self._connect(key, timeout, None)
        try:
            conn.writer.write(probe)
            async with asyncio.timeout(timeout):
                await conn.writer.drain()
                raw = await conn.reader.readuntil(b"\r\n\r\n")
            head = parse_head(raw, b"GET")
        except BaseException:
            conn.close()
            raise
        async for _ in Body(self._release, key, conn, head, timeout, None):
            pass  # read to its end, which returns the connection to the idle pool
        if not head.keep_alive:
            # A server (or proxy) that closes after each answer: warming it is a waste of
            # connections, and a failure makes the caller back off.
            raise httpx.RemoteProtocolError("the server closed the connection after the "
                                            "probe's answer: nothing to keep open")
        self.stats.warmed += 1
        return True  # kept: whatever the status, the connection is open and idle

    async def _exchange(
        self, key: Key, method: bytes, wire: bytes, connect_timeout: float | None,
        read_timeout: float | None, write_timeout: float | None,
        request: httpx.Request | None,
    ) -> tuple[Conn, Head]:
        """Send `wire` on a pooled (or new) connection and read the response head; the
        caller reads the body with `Body`, which returns the connection to the pool.

        A request is sent twice only when HTTP makes that harmless: a pooled connection
        the server is seen to have closed is dropped before a byte is written (at
        checkout), and a safe method that failed on a reused connection before its
        response head was read is sent once more on a new one. Anything else that went
        out and failed is the caller's error: the server may have read it and acted on
        it, and only the caller knows how to check (a Binding's 409 and a GET of the pod,
        in the runtime)."""
        self.stats.requests += 1
        self.stats.by_key[key] = self.stats.by_key.get(key, 0) + 1
        safe = method in _SAFE_METHODS
        for attempt in range(2):
            conn = self._checkout(key)
            resend = safe and conn is not None and attempt == 0
            if conn is None:
                conn = await self._connect(key, connect_timeout, request)
                self.stats.on_demand += 1
            sending = True
            try:
                conn.writer.write(wire)
                async with asyncio.timeout(write_timeout):
                    await conn.writer.drain()
                sending = False
                async with asyncio.timeout(read_timeout):
                    raw = await conn.reader.readuntil(b"\r\n\r\n")
            except TimeoutError:
                conn.close()
                if sending:
                    raise httpx.WriteTimeout("timed out sending the request",
                                             request=request) from None
                raise httpx.ReadTimeout("timed out waiting for the response",
                                        request=request) from None
            except asyncio.IncompleteReadError as exc:
                conn.close()
                if resend:
                    # Most likely the server closed the idle connection as the request
                    # went out; whether it read it or not, a safe method may go again.
                    self.stats.retries += 1
                    continue
                raise httpx.RemoteProtocolError(
                    "server disconnected without sending a response"
                    + ("" if safe else f" (a {method.decode()} is not resent)"),
                    request=request,
                ) from exc
            except asyncio.LimitOverrunError as exc:
                conn.close()
                raise httpx.RemoteProtocolError("response head too large",
                                                request=request) from exc
            except OSError as exc:
                conn.close()
                if resend:
                    self.stats.retries += 1
                    continue
                raise httpx.ReadError(f"request failed: {exc!r}", request=request) from exc
            except BaseException:
                # Cancelled (a caller's deadline, shutdown) or anything unforeseen: the
                # response may still arrive on this connection, so it must not live on.
                conn.close()
                raise
            try:
                head = parse_head(raw, method)
            except httpx.RemoteProtocolError as exc:
                conn.close()
                if request is not None:
                    exc.request = request
                raise
            return conn, head
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

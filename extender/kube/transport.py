"""An httpx transport on asyncio's own streams: HTTP/1.1 with keep-alive, nothing more.

Why not httpx's default (httpcore): on asyncio it runs TLS through anyio's ``TLSStream``,
which feeds ``ssl.MemoryBIO`` from Python on every read and write, plus h11's pure-Python
parser and a pool scanned per request. Measured against the local API server, one Binding
POST cost 1.47 ms of extender CPU through the default transport and 0.11 ms over asyncio
streams; Bindings were 43 % of the extender's CPU in the end-to-end benchmark
(docs/performance.md). The extender talks to exactly one server, the API server, and
only with plain requests and watch streams, so the little HTTP/1.1 it needs is written
here: Content-Length and chunked bodies, keep-alive with a bounded idle pool, and one
retry of a GET whose reused connection the server closed before it answered (never of a
POST or PATCH: see `_exchange`).

httpx stays the client API (requests, responses, timeouts, content decoding, errors);
only the bytes on the wire move through this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

import httpx

_HEAD_LIMIT = 1 << 20  # largest response head or chunk-size line accepted
_CRLF = b"\r\n"
_NO_BODY_STATUS = frozenset({204, 304})
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
# The only requests sent a second time after a reused connection failed them: "safe"
# methods (RFC 9110, 9.2.1), which change nothing on the server however many copies of
# them it processed. A POST or PATCH that went out may have been acted on even though no
# answer came back (a Binding made, an Event created), so its failure is the caller's.
_SAFE_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS"})

_Key = tuple[str, str, int]


@dataclass(slots=True, eq=False)
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    used: int = 0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    def reusable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()


@dataclass(slots=True)
class _Head:
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    length: int | None  # None: chunked or until close
    chunked: bool
    keep_alive: bool


def _parse_head(raw: bytes, method: bytes) -> _Head:
    lines = raw[:-4].split(_CRLF)
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}")
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else b""
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    keep_alive = parts[0] == b"HTTP/1.1"
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        name = name.strip()
        value = value.strip()
        headers.append((name, value))
        lname = name.lower()
        if lname == b"content-length":
            if not value.isdigit():
                raise httpx.RemoteProtocolError(f"bad Content-Length {value[:40]!r}")
            length = int(value)
        elif lname == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif lname == b"connection":
            token = value.lower()
            if b"close" in token:
                keep_alive = False
            elif b"keep-alive" in token:
                keep_alive = True
    if method == b"HEAD" or status < 200 or status in _NO_BODY_STATUS:
        length, chunked = 0, False
    elif chunked:
        length = None
    elif length is None:
        keep_alive = False  # the body ends when the server closes
    return _Head(status, reason, headers, length, chunked, keep_alive)


class _Deadline:
    """A read timeout for a long body that costs nothing per read: a timer checks, when
    it is due, whether anything arrived since it was set, and re-arms itself if so; only
    a connection silent for the whole timeout is aborted, which ends the pending read.
    (`asyncio.timeout` around every read reschedules a timer each time.)"""

    __slots__ = ("_conn", "_handle", "_last", "_loop", "_timeout", "expired")

    def __init__(self, conn: _Conn | None, timeout: float) -> None:
        self._conn = conn
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self.expired = False
        self._handle = self._loop.call_at(self._last + timeout, self._check)

    def touch(self) -> None:
        self._last = self._loop.time()

    def _check(self) -> None:
        due = self._last + self._timeout
        if self._loop.time() < due:
            self._handle = self._loop.call_at(due, self._check)
            return
        self.expired = True
        if self._conn is not None:
            self._conn.writer.transport.abort()

    def cancel(self) -> None:
        self._handle.cancel()


class _Body(httpx.AsyncByteStream):
    """A response body read straight off the connection; the connection goes back to the
    pool as soon as the last byte is read, and is closed if the reader stops early."""

    def __init__(self, transport: AsyncioTransport, key: _Key, conn: _Conn, head: _Head,
                 read_timeout: float | None, request: httpx.Request | None) -> None:
        self._transport = transport
        self._key = key
        self._conn: _Conn | None = conn
        self._head = head
        self._timeout = read_timeout
        self._request = request
        self._stray = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        head = self._head
        reader = conn.reader
        try:
            if head.chunked:
                async with contextlib.aclosing(self._chunked(reader)) as pieces:
                    async for data in pieces:
                        yield data
            elif head.length is not None:
                if head.length:
                    async with asyncio.timeout(self._timeout):
                        data = await reader.readexactly(head.length)
                    yield data
            else:
                while True:
                    async with asyncio.timeout(self._timeout):
                        data = await reader.read(1 << 16)
                    if not data:
                        break
                    yield data
        except TimeoutError:
            self._drop()
            raise httpx.ReadTimeout("timed out reading the response body",
                                    request=self._request) from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
            self._drop()
            raise httpx.ReadError(f"reading the response body: {exc!r}",
                                  request=self._request) from exc
        self._conn = None
        self._transport._release(self._key, conn, head.keep_alive and not self._stray)

    async def _chunked(self, reader: asyncio.StreamReader) -> AsyncGenerator[bytes, None]:
        """The data of a chunked body, one piece per read of the connection: every chunk
        that read completed, joined. A watch stream's events arrive one chunk each and,
        on a busy API server, several to a read; reading chunk by chunk cost two awaits
        and two timeout scopes per event, the largest share of the informers' CPU
        besides the events themselves."""
        buf = bytearray()
        pos = 0
        size = -1  # -1: a size line is next; otherwise the data of a chunk this long
        trailers = False  # past the last chunk: trailer lines up to an empty one
        deadline = _Deadline(self._conn, self._timeout) if self._timeout is not None else None
        try:
            while True:
                out: list[bytes] = []
                while True:
                    if size < 0:
                        end = buf.find(_CRLF, pos)
                        if end < 0:
                            if len(buf) - pos > _HEAD_LIMIT:
                                raise httpx.RemoteProtocolError(
                                    "chunk size line too long", request=self._request)
                            break
                        line = bytes(buf[pos:end])
                        pos = end + 2
                        if trailers:
                            if not line:
                                if out:
                                    yield b"".join(out)
                                # Bytes past the body would be taken for the next
                                # response's: such a connection is not used again.
                                self._stray = pos < len(buf)
                                return
                            continue  # a trailer: none that the extender reads
                        size_text = line.split(b";", 1)[0].strip()
                        # 1*HEXDIG only: int() would also take "-5", "+5", "0x5", "1_0"
                        if not size_text or not _HEX_DIGITS.issuperset(size_text):
                            raise httpx.RemoteProtocolError(
                                f"bad chunk size {size_text[:20]!r}", request=self._request)
                        size = int(size_text, 16)
                        if size == 0:
                            size, trailers = -1, True
                        continue
                    if len(buf) - pos < size + 2:
                        break
                    if buf[pos + size:pos + size + 2] != _CRLF:
                        raise httpx.RemoteProtocolError(
                            "chunk data not followed by CRLF", request=self._request)
                    out.append(bytes(buf[pos:pos + size]))
                    pos += size + 2
                    size = -1
                if out:
                    yield out[0] if len(out) == 1 else b"".join(out)
                del buf[:pos]
                pos = 0
                data = await reader.read(1 << 16)
                if not data:
                    if deadline is not None and deadline.expired:
                        raise TimeoutError
                    raise asyncio.IncompleteReadError(bytes(buf), None)
                if deadline is not None:
                    deadline.touch()
                buf += data
        finally:
            if deadline is not None:
                deadline.cancel()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def aclose(self) -> None:
        self._drop()


@dataclass
class TransportStats:
    """Counters for tests and the benchmark: how often connections were opened and reused."""

    connects: int = 0
    requests: int = 0
    retries: int = 0
    by_key: dict[_Key, int] = field(default_factory=dict)


class AsyncioTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over ``asyncio.open_connection`` with a pool of idle keep-alive connections.

    Concurrency is not limited here (callers bound their own: the runtime's Binding
    semaphore, one connection per watch); at most ``max_idle`` idle connections per host
    are kept, the rest are closed when their response ends.
    """

    def __init__(self, ssl_context: ssl.SSLContext | None = None, max_idle: int = 16) -> None:
        self._ssl = ssl_context
        self._max_idle = max_idle
        self._idle: dict[_Key, list[_Conn]] = {}
        self._closed = False
        self.stats = TransportStats()

    # -- pool --------------------------------------------------------------------------

    def _checkout(self, key: _Key) -> _Conn | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reusable():
                return conn
            conn.close()
        return None

    def _release(self, key: _Key, conn: _Conn, keep_alive: bool) -> None:
        idle = self._idle.setdefault(key, [])
        if self._closed or not keep_alive or not conn.reusable() or len(idle) >= self._max_idle:
            conn.close()
            return
        idle.append(conn)

    async def _connect(self, key: _Key, timeout: float | None,
                       request: httpx.Request | None) -> _Conn:
        scheme, host, port = key
        ctx = None
        if scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname=host if ctx else None,
                    limit=_HEAD_LIMIT,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out",
                                       request=request) from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"connecting to {host}:{port}: {exc}",
                                     request=request) from exc
        self.stats.connects += 1
        return _Conn(reader, writer)

    # -- requests ----------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise httpx.ConnectError("transport is closed", request=request)
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}", request=request)
        key: _Key = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
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
        wire = _CRLF.join(head_lines) + _CRLF + _CRLF + body

        conn, head = await self._exchange(key, method, wire, connect_timeout, read_timeout,
                                          write_timeout, request)
        return httpx.Response(
            head.status,
            headers=head.headers,
            stream=_Body(self, key, conn, head, read_timeout, request),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )

    async def request(self, key: _Key, method: bytes, target: bytes, headers: bytes,
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
        chunks = [c async for c in _Body(self, key, conn, head, timeout, None)]
        return head.status, chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _exchange(
        self, key: _Key, method: bytes, wire: bytes, connect_timeout: float | None,
        read_timeout: float | None, write_timeout: float | None,
        request: httpx.Request | None,
    ) -> tuple[_Conn, _Head]:
        """Send `wire` on a pooled (or new) connection and read the response head; the
        caller reads the body with `_Body`, which returns the connection to the pool.

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
            conn.used += 1
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
                head = _parse_head(raw, method)
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

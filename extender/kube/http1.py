"""HTTP/1.1 responses as the transport reads them off a connection: the head, and a
body framed by Content-Length, chunked encoding or the connection's end.

Apart from the pool in `transport` because this half is the wire format alone: what
it accepts and refuses is what tests/kube/test_transport.py checks byte by byte.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass

import httpx

HEAD_LIMIT = 1 << 20  # largest response head or chunk-size line accepted
CRLF = b"\r\n"
_NO_BODY_STATUS = frozenset({204, 304})
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")

Key = tuple[str, str, int]  # scheme, host, port: one pool of connections each


@dataclass(slots=True, eq=False)
class Conn:
    """One keep-alive connection; the transport pools it between responses."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    def reusable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()


@dataclass(slots=True)
class Head:
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    length: int | None  # None: chunked or until close
    chunked: bool
    keep_alive: bool


def parse_head(raw: bytes, method: bytes) -> Head:
    lines = raw[:-4].split(CRLF)
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
    return Head(status, reason, headers, length, chunked, keep_alive)


# How a finished body hands its connection back: (key, connection, keep it alive).
Release = Callable[[Key, Conn, bool], None]


class _Deadline:
    """A read timeout for a long body that costs nothing per read: a timer checks, when
    it is due, whether anything arrived since it was set, and re-arms itself if so; only
    a connection silent for the whole timeout is aborted, which ends the pending read.
    (`asyncio.timeout` around every read reschedules a timer each time.)"""

    __slots__ = ("_conn", "_handle", "_last", "_loop", "_timeout", "expired")

    def __init__(self, conn: Conn | None, timeout: float) -> None:
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


class Body(httpx.AsyncByteStream):
    """A response body read straight off the connection; the connection goes back to the
    pool as soon as the last byte is read, and is closed if the reader stops early."""

    def __init__(self, release: Release, key: Key, conn: Conn, head: Head,
                 read_timeout: float | None, request: httpx.Request | None) -> None:
        self._release = release
        self._key = key
        self._conn: Conn | None = conn
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
        self._release(self._key, conn, head.keep_alive and not self._stray)

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
                        end = buf.find(CRLF, pos)
                        if end < 0:
                            if len(buf) - pos > HEAD_LIMIT:
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
                    if buf[pos + size:pos + size + 2] != CRLF:
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

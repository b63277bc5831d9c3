"""A lean JSON client for the fake kubelet's per-pod writes: the kubeconfig's connection
settings, without the kubernetes client's generated layer.

Why a second Kubernetes client in the harness, where everything else uses the
``kubernetes`` package through ``e2e/harness/k8s.py``: the fake kubelet writes two
statuses and one delete for every pod, on the same 2 cores as the schedulers that
``bench.e2e`` measures (a real kubelet runs on other machines). Measured with

    .venv/bin/python -m lab.experiments.kubelet_writes --pods 200 --reps 3

(the fake kubelet's own loop given another client for its writes; CPU of the calling
thread; medians of 3 × 200 pods; two runs; 2-core VM, kubernetes 37.0.2, urllib3 2.8.0;
a status write includes building its body, the same in every row):

=============================  ==============  ==============  ===============
client                         status write    delete          per pod (2 + 1)
=============================  ==============  ==============  ===============
generated, response read       0.69 / 0.74 ms  0.61 / 0.66 ms  2.00 / 2.14 ms
generated, models              1.07 / 1.12 ms  1.00 / 1.04 ms  3.14 / 3.27 ms
generated, response unread     3.42 / 3.42 ms  3.31 / 3.33 ms  10.2 / 10.2 ms
RawApi                         0.35 / 0.36 ms  0.32 / 0.32 ms  1.02 / 1.03 ms
=============================  ==============  ==============  ===============

Used well (``_preload_content=False``, response read), the generated client still costs
about 1 ms more per pod, as much as the extender's own CPU per pod (docs/performance.md).
Around the same ``http.client`` exchange it adds pydantic call validation, parameter and
body serialisation and urllib3's pool and response wrapping (not broken down further
here). A response left unread keeps its connection out of urllib3's pool, so
the next call pays a TLS handshake with a client certificate; that was the ~4 ms per pod
that first led to this client.

A LIST of all 200 pods costs the same either way (medians of 120 calls: 4.4 / 4.5 ms
generated, 4.2 / 4.6 ms here) and a watch is one request per two minutes, so the fake
kubelet lists and watches through the generated client: this one carries only the
writes. Give it another path only with a measurement that says so.

It takes everything from the kubernetes ``ApiClient``'s configuration (server, CA, client
certificate, ``tls-server-name``, ``insecure-skip-tls-verify``, the bearer token, refreshed
by the kubeconfig loader's hook as usual) and:

* sends plain requests over one keep-alive ``http.client`` connection per calling thread
  (no pool bookkeeping, URL re-parsing or response wrapping). A request failing on a reused
  connection the server has meanwhile closed is sent once more on a fresh one, as urllib3
  would;
* uses the ``ApiClient``'s own ``urllib3.PoolManager`` when the kubeconfig names a proxy,
  which ``http.client`` here does not speak;
* encodes bodies with orjson and always reads responses, so connections stay alive.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson
import urllib3

JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
"""What the kubernetes client sends for a dict body to a ``patch_*`` method."""

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
"""Requests (writes, LISTs): long enough for a loaded API server, short enough that a
connection that died silently is noticed and the caller's retry takes over."""

_STALE = (ConnectionError, http.client.BadStatusLine, ssl.SSLEOFError, ssl.SSLZeroReturnError)
"""What a request on a keep-alive connection the server closed in the meantime raises."""

QueryValue = str | int | float | bool
Query = Mapping[str, QueryValue]


class RawApiError(Exception):
    """A non-2xx answer. ``status`` and ``body`` mirror ``kubernetes.client.ApiException``
    so callers can treat both alike."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(f"({status}) {reason}: {body[:500]!r}")
        self.status = status
        self.reason = reason
        self.body = body


def _query_value(v: QueryValue) -> str:
    """Booleans as the API server expects them (``true``), like the kubernetes client."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def path_segment(s: str) -> str:
    """Quote a name for use in a URL path (names are DNS labels, but be safe)."""
    return quote(s, safe="")


def ssl_context(cfg: Any) -> ssl.SSLContext:
    """The TLS client context a kubernetes ``Configuration`` describes (as its urllib3 pool
    would set it up): CA or system roots, optional client certificate, optional
    verification."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cfg.verify_ssl:
        if cfg.ssl_ca_cert:
            ctx.load_verify_locations(cafile=cfg.ssl_ca_cert)
        else:
            ctx.load_default_certs()
        ctx.check_hostname = cfg.assert_hostname is not False
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return ctx


class _Connection(http.client.HTTPConnection):
    """A keep-alive connection, TLS when ``context`` is given.

    Unlike ``http.client.HTTPSConnection`` the name sent as SNI and checked against the
    certificate may differ from the address dialled (kubeconfig ``tls-server-name``), and
    connecting has its own, shorter timeout than reading.
    """

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None,
                 server_hostname: str, connect_timeout: float, read_timeout: float) -> None:
        super().__init__(host, port, timeout=read_timeout)
        self._context = context
        self._server_hostname = server_hostname
        self._connect_timeout = connect_timeout

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self._connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.timeout)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class RawApi:
    """Requests with JSON bodies, configured like the given ``ApiClient``.

    Thread-safe: each thread gets its own connection for :meth:`request`; through a proxy,
    requests share the ``ApiClient``'s (thread-safe) urllib3 pool.
    """

    def __init__(self, api_client: Any) -> None:
        cfg = self.configuration = api_client.configuration
        self.host: str = cfg.host.rstrip("/")
        self.pool: urllib3.PoolManager = api_client.rest_client.pool_manager
        self._base_headers: dict[str, str] = {"Accept": JSON, **api_client.default_headers}
        u = urlsplit(self.host)
        self._prefix = u.path.rstrip("/")  # a server URL may carry a path (a proxy's)
        self._direct = not cfg.proxy
        self._addr = (u.hostname or "localhost",
                      u.port or (443 if u.scheme == "https" else 80))
        self._context = ssl_context(cfg) if u.scheme == "https" else None
        self._server_hostname: str = (
            cfg.tls_server_name
            or (cfg.assert_hostname if isinstance(cfg.assert_hostname, str) else None)
            or self._addr[0])
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[_Connection] = []

    @staticmethod
    def _path_query(path: str, query: Query | None) -> str:
        if not query:
            return path
        return f"{path}?" + urlencode([(k, _query_value(v)) for k, v in query.items()])

    def url(self, path: str, query: Query | None = None) -> str:
        """Absolute URL for an API path such as ``/api/v1/pods``."""
        return self.host + self._path_query(path, query)

    def _connection(self) -> _Connection:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _Connection(self._addr[0], self._addr[1], self._context,
                               self._server_hostname, CONNECT_TIMEOUT, READ_TIMEOUT)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Close every thread's connection (a thread still using one gets an error)."""
        with self._lock:
            conns, self._connections = self._connections, []
        for c in conns:
            c.close()

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        """Default headers plus authorization (re-read per call: tokens may be refreshed)."""
        h = dict(self._base_headers)
        for s in self.configuration.auth_settings().values():
            if s.get("in") == "header" and s.get("value"):
                h[s["key"]] = s["value"]
        if content_type:
            h["Content-Type"] = content_type
        return h

    def request(
        self,
        method: str,
        path: str,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> bytes:
        """Send one request and return the response body; raise :class:`RawApiError` on non-2xx.

        ``body`` (any JSON-able value) is encoded with orjson. Transport errors (refused,
        reset, timed out) propagate as ``OSError``/``http.client.HTTPException`` (or
        urllib3's errors when going through a proxy); callers retry.
        """
        data = None if body is None else orjson.dumps(body)
        headers = self.headers(content_type if data is not None else None)
        if not self._direct:
            r = self.pool.request(
                method, self.url(path, query), body=data, headers=headers,
                timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT),
                preload_content=True)
            status, reason, out = r.status, r.reason or "", r.data
        else:
            status, reason, out = self._send(
                method, self._prefix + self._path_query(path, query), data, headers)
        if not 200 <= status <= 299:
            raise RawApiError(status, reason, out)
        return out

    def _send(self, method: str, target: str, data: bytes | None,
              headers: dict[str, str]) -> tuple[int, str, bytes]:
        """One exchange on this thread's connection; once more on a fresh connection if a
        reused one turns out to have been closed by the server."""
        conn = self._connection()
        while True:
            reused = conn.sock is not None
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.reason, resp.read()
            except _STALE:
                conn.close()
                if not reused:
                    raise
            except BaseException:
                conn.close()  # mid-exchange: the connection's state is unknown
                raise


def watch_lines(resp: Any) -> Iterator[bytes]:
    """Split a streaming urllib3 response (``_preload_content=False``) into JSON lines,
    one watch event each. Here because every raw watch of the tests, the fake kubelet's,
    the soak checker's and the benchmark's, reads its stream this way."""
    buf = b""
    for chunk in resp.stream(64 * 1024, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf

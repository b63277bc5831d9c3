"""Kubernetes API access: an async httpx client configured like the kubernetes client.

httpx instead of the generated client: watches and bindings run on the server's own
event loop without threads, and a Binding's `Status` reply is not mis-parsed (the
generated client raises on it, kubernetes-client/python#547). The generated asyncio
client (kubernetes_asyncio) spent 5 times the CPU per Binding (`lab.experiments.binding_client`).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import orjson
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from extender.kube import decode
from extender.kube.transport import AsyncioTransport

log = logging.getLogger("gang-extender.kube")

PODGROUP_PATH = "/apis/scheduling.x-k8s.io/v1alpha1"
_JSON = b"application/json"
_MERGE_PATCH = b"application/merge-patch+json"
# Built-in kinds only: lists merge by their patchMergeKey (conditions by type).
_STRATEGIC_PATCH = b"application/strategic-merge-patch+json"
# A kind's protobuf message class and its conversion to the JSON shape (`protobuf`).
ProtoDecoder = tuple[Any, Callable[[Any], dict[str, Any]]]
_PROTOBUF = "application/vnd.kubernetes.protobuf"  # protobuf.CONTENT_TYPE, WATCH_ACCEPT
_WATCH_PROTOBUF = _PROTOBUF + ";stream=watch"
# On each Binding the extender posts, and so (kube-apiserver's BindingREST merges a
# Binding's annotations into the pod's) on the pod it bound: when that Binding was
# decided. Informational: who checks over-commits after the fact (the soak's checker)
# needs the moment of the decision, which may be long before the pod shows bound.
DECIDED_AT = "gang-extender.x-k8s.io/decided-at"


def decided_at_text(t: float) -> str:
    """Epoch seconds as RFC 3339 in UTC with microseconds (`2026-11-28T23:57:01.123456Z`,
    the shape of Kubernetes' MicroTime)."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Not frozen: contextlib sets `__traceback__` on an exception leaving an async context
# manager (httpx's stream, so every error of a watch), and a frozen dataclass refuses
# that with a TypeError that hid the status (a 404 of a watch read as "super(type, obj):
# obj must be an instance or subtype of type").
@dataclass(eq=False, slots=True)
class ApiError(Exception):
    status: int
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.status} {self.reason}: {self.message}"


class ResourceExpired(Exception):
    """A watch's resourceVersion is too old (410 Gone): list again."""


def _load(kubeconfig: str | None) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(client_configuration=cfg)
    return cfg


def make_kube(kubeconfig: str | None, timeout: float = 30.0, max_idle: int = 24) -> Kube:
    """The extender's API access: httpx for lists and watches, and the same connection
    pool without httpx's models for the writes (Bindings, patches, Events). `max_idle`:
    connections kept open between requests; the wiring makes it the Binding concurrency
    and a few, so that the connections a commit opened (or `Kube.warm` opened ahead of
    it) are there for the next one."""
    cfg = _load(kubeconfig)
    transport = AsyncioTransport(_ssl_context(cfg), max_idle=max_idle)
    http = _make_client(cfg, timeout, transport)
    return Kube(http, _Writer.for_client(http, transport, timeout))


def _ssl_context(cfg: k8s_client.Configuration) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else (
        ssl.create_default_context()
    )
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.cert_file and cfg.key_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return ctx


def _make_client(cfg: k8s_client.Configuration, timeout: float,
                 transport: AsyncioTransport) -> httpx.AsyncClient:
    headers = {"Accept": "application/json", "User-Agent": "gang-extender"}
    token = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
    if token:
        prefix = cfg.api_key_prefix.get("authorization", "")
        bearer = token if token.startswith("Bearer") else f"{prefix} {token}".strip()
        headers["Authorization"] = bearer
    return httpx.AsyncClient(
        base_url=cfg.host,
        headers=headers,
        timeout=httpx.Timeout(timeout, connect=5.0),
        transport=transport,
    )


_PATH_SAFE = "/-._~:@!$&'()*+,;="


@dataclass(frozen=True, slots=True)
class _Writer:
    """Small requests straight through the transport (`AsyncioTransport.request`), with
    the client's own headers: a Binding costs 0.17 ms of CPU this way, 0.47 ms via
    httpx (300 Bindings against the local API server)."""

    transport: AsyncioTransport
    key: tuple[str, str, int]
    prefix: str  # the base URL's path, for API servers behind a path-routing proxy
    headers: bytes
    timeout: float
    connect_timeout: float

    @classmethod
    def for_client(cls, http: httpx.AsyncClient, transport: AsyncioTransport,
                   timeout: float, connect_timeout: float = 5.0) -> _Writer:
        url = http.base_url
        port = url.port or (443 if url.scheme == "https" else 80)
        host = f"[{url.host}]" if ":" in url.host else url.host  # an IPv6 literal
        if url.port is not None:
            host = f"{host}:{url.port}"
        lines = [b"Host: " + host.encode("idna")]
        for name, value in http.headers.raw:
            if name.lower() not in (b"host", b"accept-encoding", b"connection",
                                    b"content-length", b"transfer-encoding"):
                lines.append(name + b": " + value)
        return cls(transport, (url.scheme, url.host, port), url.path.rstrip("/"),
                   b"\r\n".join(lines) + b"\r\n", timeout, connect_timeout)

    async def warm(self, want: int) -> tuple[int, list[BaseException]]:
        """`AsyncioTransport.warm` with a `GET /version` (readable by every authenticated
        client through the default `system:public-info-viewer` role) as the probe."""
        target = quote(self.prefix + "/version", safe=_PATH_SAFE).encode("ascii")
        probe = b"GET " + target + b" HTTP/1.1\r\n" + self.headers + b"\r\n"
        return await self.transport.warm(self.key, want, probe, self.connect_timeout)

    async def send(self, method: bytes, path: str, content_type: bytes,
                   body: bytes) -> tuple[int, bytes]:
        # Names come from requests (a /bind body): quoted, a CR or LF cannot end a line.
        target = quote(self.prefix + path, safe=_PATH_SAFE).encode("ascii")
        headers = self.headers + b"Content-Type: " + content_type + b"\r\n"
        return await self.transport.request(self.key, method, target, headers, body,
                                            self.timeout, self.connect_timeout)


async def _lines(resp: httpx.Response) -> AsyncIterator[bytes]:
    """The non-empty lines of a watch stream, as bytes: httpx's `aiter_lines` decodes to
    text and splits with a general-purpose decoder, a third of the informers' CPU."""
    tail = b""
    async for chunk in resp.aiter_bytes():
        if tail:
            chunk = tail + chunk
        lines = chunk.split(b"\n")
        tail = lines.pop()
        for line in lines:
            if line.strip():
                yield line
    if tail.strip():
        yield tail


async def _json_events(resp: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async for line in _lines(resp):
        yield decode.event(line)  # a line orjson cannot read: an UNDECODABLE event


async def _proto_events(resp: httpx.Response, proto: ProtoDecoder
                        ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    from extender.kube import protobuf  # only for a protobuf watch (informer._pod_proto)

    kind, to_dict = proto
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        for frame in protobuf.frames(buf):
            # Frames are length-delimited: one that cannot be read is that event alone.
            try:
                etype, obj = protobuf.decode_event(frame, kind)
                out = obj if isinstance(obj, dict) else to_dict(obj)
            except Exception as exc:
                yield decode.UNDECODABLE, decode.Undecodable(f"{type(exc).__name__}: {exc}")
                continue
            yield etype, out


def _error(resp: httpx.Response) -> ApiError:
    return _error_from(resp.status_code, resp.content, resp.reason_phrase)


def _error_from(status: int, content: bytes, reason: str = "") -> ApiError:
    try:
        body = orjson.loads(content)
        return ApiError(status, str(body.get("reason", "")), str(body.get("message", "")))
    except (orjson.JSONDecodeError, ValueError, AttributeError):
        return ApiError(status, reason, content[:300].decode("utf-8", "replace"))


class Kube:
    """The few API calls the extender makes."""

    def __init__(self, http: httpx.AsyncClient, writer: _Writer | None = None) -> None:
        self.http = http
        self.writer = writer

    async def _write(self, method: bytes, path: str, content_type: bytes,
                     body: bytes) -> tuple[int, bytes]:
        if self.writer is not None:
            return await self.writer.send(method, path, content_type, body)
        resp = await self.http.request(method.decode(), path, content=body,
                                       headers={"Content-Type": content_type.decode()})
        return resp.status_code, resp.content

    def connections_opened(self) -> tuple[int, int]:
        """Connections opened so far on demand (by lists, watches and writes that found
        none idle) and ahead of need by `warm` (the metrics): each only grows."""
        if self.writer is None:
            return 0, 0
        stats = self.writer.transport.stats
        return stats.on_demand, stats.warmed

    async def warm(self, want: int) -> tuple[int, list[BaseException]]:
        """Open connections until `want` are idle for the writes (`_Writer.warm`): how
        many were opened, and why the others were not."""
        return (0, []) if self.writer is None else await self.writer.warm(want)

    async def list_pages(self, path: str, limit: int = 2000,
                         params: Mapping[str, str] | None = None
                         ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        """The objects at `path` one page at a time, each with the list's
        resourceVersion so far (the last page's is the one to watch from): a caller
        that applies each page before asking for the next holds one page in memory,
        not the whole list. An object that cannot be decoded is a `decode.Undecodable`
        (an empty dict saying why) in its place: the rest of the page is read."""
        query: dict[str, Any] = {**(params or {}), "limit": limit}
        while True:
            resp = await self.http.get(path, params=query)
            if resp.status_code != 200:
                raise _error(resp)
            body = decode.page(resp.content)  # an object it cannot read: an Undecodable
            del resp
            meta = body.get("metadata") or {}
            yield body.get("items") or [], str(meta.get("resourceVersion", ""))
            if not meta.get("continue"):
                return
            query = {**(params or {}), "limit": limit, "continue": meta["continue"]}

    async def list(self, path: str, limit: int = 2000, params: Mapping[str, str] | None = None
                   ) -> tuple[list[dict[str, Any]], str]:
        """Every object at `path`, page by page; `params` narrow it (a field selector)."""
        items: list[dict[str, Any]] = []
        rv = ""
        async for page, page_rv in self.list_pages(path, limit, params):
            items.extend(page)
            rv = page_rv
        return items, rv

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300,
        params: Mapping[str, str] | None = None, proto: ProtoDecoder | None = None,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(type, object) of each event. With `proto` (a message class of the watched
        kind and its conversion to the JSON shape), asks for protobuf, and still reads
        JSON if the API server answers with it. An event that cannot be decoded comes as
        (`decode.UNDECODABLE`, a `decode.Undecodable`), and the stream goes on."""
        query = {
            **(params or {}),
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = httpx.Timeout(timeout_seconds + 30.0, connect=5.0)
        headers = {"Accept": f"{_WATCH_PROTOBUF}, application/json"} if proto else None
        async with self.http.stream("GET", path, params=query, timeout=timeout,
                                    headers=headers) as resp:
            if resp.status_code == 410:
                raise ResourceExpired(path)
            if resp.status_code != 200:
                await resp.aread()
                raise _error(resp)
            if proto is not None and resp.headers.get("content-type", "").startswith(
                    _PROTOBUF):
                events = _proto_events(resp, proto)
            else:
                events = _json_events(resp)
            async for etype, obj in events:
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise ResourceExpired(path)
                    raise ApiError(int(obj.get("code", 500)), str(obj.get("reason", "")),
                                   str(obj.get("message", "")))
                yield etype, obj

    async def discover(self, group_version: str) -> set[str] | None:
        """The resources a group-version serves ("/apis/scheduling.volcano.sh/v1beta1"),
        or None when it is not served (404). Discovery is readable by every
        authenticated user (system:discovery): it needs no RBAC of its own."""
        resp = await self.http.get(group_version)
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise _error(resp)
        body = orjson.loads(resp.content)
        return {str(r.get("name", "")) for r in body.get("resources") or []
                if isinstance(r, dict)}

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        """`decided_at`: the wall-clock time (epoch seconds) this try was decided; sent
        as the Binding's `DECIDED_AT` annotation, which kube-apiserver copies onto the
        pod with the node."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
        if decided_at is not None:
            metadata["annotations"] = {DECIDED_AT: decided_at_text(decided_at)}
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        status, content = await self._write(
            b"POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", _JSON,
            orjson.dumps(body))
        if status not in (200, 201):
            raise _error_from(status, content)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        status, content = await self._write(b"PATCH", path, _MERGE_PATCH, orjson.dumps(patch))
        if status not in (200, 201):
            raise _error_from(status, content)

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> None:
        status, content = await self._write(b"PATCH", path, _STRATEGIC_PATCH,
                                            orjson.dumps(patch))
        if status not in (200, 201):
            raise _error_from(status, content)

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """policy/v1 Eviction of the pod with this uid (a pod of the same name created
        since is left alone). Raises ApiError: 429 when a PodDisruptionBudget refuses it
        now, 404 when the pod is gone."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        status, content = await self._write(
            b"POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", _JSON,
            orjson.dumps(body))
        if status not in (200, 201):
            raise _error_from(status, content)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object at `path`, None when there is none (404)."""
        resp = await self.http.get(path)
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise _error(resp)
        result: dict[str, Any] = orjson.loads(resp.content)
        return result

    async def delete(self, path: str, uid: str = "") -> None:
        """Delete the object at `path`; with `uid`, only if it is still the object of that
        uid (DeleteOptions.preconditions): another made since under the name is left
        alone and the answer is a 409."""
        body = b"" if not uid else orjson.dumps({
            "kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}})
        status, content = await self._write(b"DELETE", path, _JSON, body)
        if status not in (200, 202):
            raise _error_from(status, content)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, content = await self._write(b"POST", path, _JSON, orjson.dumps(body))
        if status not in (200, 201):
            raise _error_from(status, content)
        result: dict[str, Any] = orjson.loads(content)
        return result

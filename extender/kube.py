"""Kubernetes API access: an async httpx client configured like the kubernetes client.

httpx instead of the generated client: watches and bindings run on the server's own
event loop without threads, and a Binding's `Status` reply is not mis-parsed (the
generated client raises on it, kubernetes-client/python#547).
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from extender.transport import AsyncioTransport

log = logging.getLogger("gang-extender.kube")

PODGROUP_PATH = "/apis/scheduling.x-k8s.io/v1alpha1"


@dataclass(frozen=True, slots=True)
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
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=cfg
        )
    else:
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg
            )
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg
            )
    return cfg


def make_client(kubeconfig: str | None, timeout: float = 30.0) -> httpx.AsyncClient:
    cfg = _load(kubeconfig)
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else (
        ssl.create_default_context()
    )
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.cert_file and cfg.key_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
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
        transport=AsyncioTransport(ctx, max_idle=16),
    )


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


def _error(resp: httpx.Response) -> ApiError:
    try:
        body = resp.json()
        return ApiError(resp.status_code, str(body.get("reason", "")), str(body.get("message", "")))
    except (json.JSONDecodeError, ValueError, AttributeError):
        return ApiError(resp.status_code, resp.reason_phrase, resp.text[:300])


class Kube:
    """The few API calls the extender makes."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def list(self, path: str, limit: int = 2000) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": limit}
        while True:
            resp = await self.http.get(path, params=params)
            if resp.status_code != 200:
                raise _error(resp)
            body = orjson.loads(resp.content)
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            if not meta.get("continue"):
                return items, str(meta.get("resourceVersion", ""))
            params = {"limit": limit, "continue": meta["continue"]}

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = httpx.Timeout(timeout_seconds + 30.0, connect=5.0)
        async with self.http.stream("GET", path, params=params, timeout=timeout) as resp:
            if resp.status_code == 410:
                raise ResourceExpired(path)
            if resp.status_code != 200:
                await resp.aread()
                raise _error(resp)
            async for line in _lines(resp):
                event = orjson.loads(line)
                etype = event.get("type", "")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise ResourceExpired(path)
                    raise ApiError(int(obj.get("code", 500)), str(obj.get("reason", "")),
                                   str(obj.get("message", "")))
                yield etype, obj

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        resp = await self.http.post(
            f"/api/v1/namespaces/{namespace}/pods/{name}/binding", content=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        if resp.status_code not in (200, 201):
            raise _error(resp)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        resp = await self.http.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise _error(resp)
        result: dict[str, Any] = orjson.loads(resp.content)
        return result

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        resp = await self.http.patch(
            path, content=orjson.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if resp.status_code not in (200, 201):
            raise _error(resp)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self.http.post(path, content=orjson.dumps(body),
                                    headers={"Content-Type": "application/json"})
        if resp.status_code not in (200, 201):
            raise _error(resp)
        result: dict[str, Any] = orjson.loads(resp.content)
        return result

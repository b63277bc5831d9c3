"""The HTTP adapter: kube-scheduler's extender verbs plus health, metrics and debug.

Every verb answers 200 with a JSON body: kube-scheduler drops the body of any other
status, so a readable error must travel in the `Error` field (extender-protocol 2.1).
Malformed input is answered with such an error and changes no state.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from extender.core.convert import pod_from_k8s
from extender.core.framework import GangFramework
from extender.core.types import PodInfo
from extender.metrics import Metrics
from extender.runtime import Runtime
from extender.wire import ExtenderArgs, ExtenderBindingArgs

log = logging.getLogger("gang-extender.http")

MAX_BODY = 64 * 1024 * 1024


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:5]:
            loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
            parts.append(f"{loc}: {err.get('msg')}")
        return "invalid request: " + "; ".join(parts)
    if isinstance(exc, orjson.JSONDecodeError):
        return f"invalid request: malformed JSON ({exc})"
    return f"invalid request: {exc}"


async def _read(request: Request) -> Any:
    # Refuse an oversized body from its declared length, or as soon as the stream
    # crosses the limit: never buffer an arbitrarily large request first.
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise ValueError(f"body of {declared} bytes exceeds the {MAX_BODY} byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise ValueError(f"body of more than {MAX_BODY} bytes exceeds the byte limit")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body:
        raise ValueError("empty body")
    return orjson.loads(body)


async def _extender_args(request: Request) -> tuple[ExtenderArgs, PodInfo, list[str]]:
    """The filter/prioritize body, its pod in core terms and the candidate node names;
    raises ValueError/ValidationError with a readable message on bad input."""
    args = ExtenderArgs.model_validate(await _read(request))
    return args, pod_from_k8s(args.Pod), args.node_names()


def _add_probes_and_metrics(app: FastAPI, fw: GangFramework, m: Metrics, ready: Any) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    @app.get("/readyz")
    async def readyz() -> Response:
        if ready is None or ready.is_set():
            return Response("ok", media_type="text/plain")
        return Response("watches not synced yet", status_code=503, media_type="text/plain")

    @app.get("/metrics")
    async def metrics_() -> Response:
        m.refresh(fw)
        return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)


def create_metrics_app(fw: GangFramework, metrics: Metrics, ready: Any = None) -> FastAPI:
    """Only /metrics and the probes, for an address reachable from outside the pod: the
    verbs (a /bind binds any pod anywhere with the extender's rights) and the debug view
    stay on the loopback listener."""
    app = FastAPI(title="gang-extender metrics", docs_url=None, redoc_url=None,
                  openapi_url=None)
    _add_probes_and_metrics(app, fw, metrics, ready)
    return app


def create_app(
    runtime: Runtime,
    metrics: Metrics | None = None,
    ready: Any = None,
) -> FastAPI:
    """`ready` is an object with `is_set()` (the informers' synced event); None: ready."""
    fw: GangFramework = runtime.fw
    m = metrics or Metrics()
    app = FastAPI(title="gang-extender", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.runtime = runtime
    app.state.metrics = m

    def observe(verb: str, start: float, result: str) -> None:
        m.verb_latency.labels(verb, result).observe(time.perf_counter() - start)

    @app.post("/filter")
    async def filter_(request: Request) -> Response:
        start = time.perf_counter()
        try:
            args, pod, names = await _extender_args(request)
        except (ValueError, ValidationError) as exc:
            observe("filter", start, "error")
            return _json({"NodeNames": None, "Nodes": None, "FailedNodes": {},
                          "FailedAndUnresolvableNodes": {}, "Error": _describe(exc)})
        result = fw.filter(pod, names, runtime.clock())
        runtime.drain()
        if args.NodeNames is None and args.Nodes is not None:
            keep = set(result.nodes)
            items = [n for n in (args.Nodes.items or []) if n["metadata"]["name"] in keep]
            body: dict[str, Any] = {"NodeNames": None, "Nodes": {"metadata": {}, "items": items}}
        else:
            body = {"NodeNames": result.nodes, "Nodes": None}
        body["FailedNodes"] = {}
        body["FailedAndUnresolvableNodes"] = result.unresolvable
        body["Error"] = result.error
        observe("filter", start, "ok" if result.nodes else "rejected")
        if not result.nodes and result.unresolvable:
            reason = next(iter(result.unresolvable.values()))
            log.info("filter pod=%s rejected: %s", pod.key, reason)
        return _json(body)

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        start = time.perf_counter()
        try:
            _, pod, names = await _extender_args(request)
        except (ValueError, ValidationError) as exc:
            observe("prioritize", start, "error")
            return _json({"Error": _describe(exc)}, status=400)
        scores = fw.prioritize(pod, names)
        observe("prioritize", start, "ok")
        return _json([{"Host": h, "Score": int(s)} for h, s in scores])

    @app.post("/bind")
    async def bind(request: Request) -> Response:
        start = time.perf_counter()
        try:
            args = ExtenderBindingArgs.model_validate(await _read(request))
        except (ValueError, ValidationError) as exc:
            observe("bind", start, "error")
            return _json({"Error": _describe(exc)})
        error = await runtime.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node)
        observe("bind", start, "ok" if error is None else "error")
        m.bindings.labels("ok" if error is None else "error").inc()
        return _json({"Error": error or ""})

    _add_probes_and_metrics(app, fw, m, ready)

    @app.get("/debug/gangs")
    async def debug() -> Response:
        return _json(fw.debug(runtime.clock()))

    return app

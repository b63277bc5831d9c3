"""The HTTP adapter: kube-scheduler's extender verbs plus health, metrics and debug.

Every verb answers 200 with a JSON body: kube-scheduler drops the body of any other
status, so a readable error must travel in the `Error` field (architecture.md §13).
Malformed input is answered with such an error and changes no state. So is every verb
on standby: its kube-scheduler does not lead, so nothing should be calling it. And so is
every verb before the informers have applied their first lists (`NOT_SYNCED`): answered
from a partial cache, a filter would place a gang on nodes whose pods it has not seen
yet; kube-scheduler takes the error as a failed attempt and retries the pod after its
backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import PodInfo
from extender.core.reads import Reads
from extender.reporting.metrics import NO_SOURCES, GaugeSources, Metrics
from extender.scheduler.debug import install_gangs_route
from extender.scheduler.dispatch import Dispatcher
from extender.scheduler.wire import ExtenderArgs, ExtenderBindingArgs

log = logging.getLogger("gang-extender.http")

MAX_BODY = 64 * 1024 * 1024


def _too_large() -> ValueError:
    """The one error for a body over `MAX_BODY`, however it was read."""
    return ValueError(f"body of more than {MAX_BODY} bytes exceeds the byte limit")

NOT_SYNCED = ("gang-extender is not synced yet: the first lists of nodes, pods and pod "
              "groups are still being applied; the pod is retried after its backoff")

# Scrapes of /metrics in progress at once (rendering, or waiting for the one rendering);
# beyond it a scrape is answered 503 at once. Two lets a pair of redundant Prometheus
# servers both succeed; a flood of scrapers cannot queue up renderings without bound.
METRICS_MAX_CONCURRENT = 2


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


async def _read(request: Request) -> bytes:
    # Refuse an oversized body from its declared length, or as soon as the stream
    # crosses the limit: never buffer an arbitrarily large request first.
    _check_declared(request.headers.get("content-length", ""))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def _check_declared(declared: str) -> None:
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise ValueError(f"body of {declared} bytes exceeds the {MAX_BODY} byte limit")


def _parse(body: bytes) -> Any:
    if not body:
        raise ValueError("empty body")
    return orjson.loads(body)


def _extender_args(raw: bytes, known: Callable[[str], PodInfo | None]
                   ) -> tuple[ExtenderArgs, PodInfo, list[str]]:
    """The filter/prioritize body, its pod in core terms and the candidate node names;
    raises ValueError/ValidationError with a readable message on bad input.

    A pod the watch has delivered (`known` by uid) is not converted again: the gang
    manager answers from its own copy of a known pod and ignores kube-scheduler's
    (`GangManager.filter`, `prioritize`), so the conversion was a third of the
    handler's CPU for nothing. Only a pod the watch has not delivered yet is converted
    (and so checked)."""
    args = ExtenderArgs.model_validate(_parse(raw))
    meta = args.Pod.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    pod = known(uid) if isinstance(uid, str) and uid else None
    return args, pod if pod is not None else pod_from_k8s(args.Pod), args.node_names()


Reader = Callable[[], Awaitable[bytes]]
_Args = TypeVar("_Args")


@dataclass(frozen=True, slots=True)
class _Declined:
    """Why a verb does not act: it may not (`_refusal`), or its body could not be read
    (`bad_body`), which prioritize answers with 400."""

    error: str
    bad_body: bool


def _binding_args(raw: bytes) -> ExtenderBindingArgs:
    return ExtenderBindingArgs.model_validate(_parse(raw))


class Verbs:
    """filter, prioritize and bind from request bytes to (status, reply bytes).

    Shared by the FastAPI routes and the ASGI fast path (`with_fast_verbs`), so both
    answer byte for byte the same; `read` raises ValueError for a body that is too large.
    """

    def __init__(self, dispatcher: Dispatcher, metrics: Metrics, ready: Any = None) -> None:
        self.dispatcher = dispatcher
        self.bindings = dispatcher.bindings  # the bind verb's binding cycle
        self.manager = dispatcher.manager
        self.m = metrics
        self.ready = ready  # the informers' synced event (`is_set()`); None: synced

    def _observe(self, verb: str, start: float, result: str) -> None:
        self.m.verb_latency.labels(verb, result).observe(time.perf_counter() - start)

    async def _refusal(self, verb: str, read: Reader, start: float) -> str | None:
        """The error of a verb that must not act (on standby, or before the first lists
        are applied), the body read and dropped; None when it may act."""
        leader = self.dispatcher.leader
        if not leader.active:
            error, result = leader.standby_error(), "standby"
        elif self.ready is not None and not self.ready.is_set():
            error, result = NOT_SYNCED, "not_synced"
        else:
            return None
        with contextlib.suppress(ValueError):
            await read()
        self._observe(verb, start, result)
        return error

    async def _arguments(self, verb: str, read: Reader, start: float,
                         parse: Callable[[bytes], _Args]) -> _Args | _Declined:
        """The verb's arguments read from its body, or why it does not act; a body that
        cannot be read is observed as the verb's error."""
        refused = await self._refusal(verb, read, start)
        if refused is not None:
            return _Declined(refused, bad_body=False)
        try:
            return parse(await read())
        except (ValueError, ValidationError) as exc:
            self._observe(verb, start, "error")
            return _Declined(_describe(exc), bad_body=True)

    def _filter_args(self, raw: bytes) -> tuple[ExtenderArgs, PodInfo, list[str]]:
        return _extender_args(raw, self.manager.reads.pod)

    async def filter(self, read: Reader) -> tuple[int, bytes]:
        start = time.perf_counter()
        got = await self._arguments("filter", read, start, self._filter_args)
        if isinstance(got, _Declined):
            return 200, orjson.dumps({"NodeNames": None, "Nodes": None, "FailedNodes": {},
                                      "FailedAndUnresolvableNodes": {}, "Error": got.error})
        args, pod, names = got
        result = await self.dispatcher.filter(pod, names)
        if args.NodeNames is None and args.Nodes is not None:
            keep = set(result.nodes)
            items = [n for n in (args.Nodes.items or []) if n["metadata"]["name"] in keep]
            body: dict[str, Any] = {"NodeNames": None, "Nodes": {"metadata": {}, "items": items}}
        else:
            body = {"NodeNames": result.nodes, "Nodes": None}
        body["FailedNodes"] = {}
        body["FailedAndUnresolvableNodes"] = result.unresolvable
        body["Error"] = result.error
        self._observe("filter", start, "ok" if result.nodes else "rejected")
        if not result.nodes and result.unresolvable:
            reason = next(iter(result.unresolvable.values()))
            log.info("filter pod=%s rejected: %s", pod.key, reason)
        return 200, orjson.dumps(body)

    async def prioritize(self, read: Reader) -> tuple[int, bytes]:
        start = time.perf_counter()
        got = await self._arguments("prioritize", read, start, self._filter_args)
        if isinstance(got, _Declined):
            # kube-scheduler cannot decode this as scores and ignores a failed prioritize;
            # the filter call before it has already failed with the same message.
            return (400 if got.bad_body else 200), orjson.dumps({"Error": got.error})
        _, pod, names = got
        scores = self.manager.prioritize(pod, names)
        self._observe("prioritize", start, "ok")
        return 200, orjson.dumps([{"Host": h, "Score": int(s)} for h, s in scores])

    async def bind(self, read: Reader) -> tuple[int, bytes]:
        start = time.perf_counter()
        args = await self._arguments("bind", read, start, _binding_args)
        if isinstance(args, _Declined):
            return 200, orjson.dumps({"Error": args.error})
        error = await self.bindings.bind(args.PodNamespace, args.PodName, args.PodUID,
                                        args.Node)
        self._observe("bind", start, "ok" if error is None else "error")
        return 200, orjson.dumps({"Error": error or ""})


Health = Callable[[], str | None]


class MetricsEndpoint:
    """/metrics with a concurrency limit.

    The gauges are refreshed on the loop (they read the gang manager's `Reads`), and the text is
    rendered in a worker thread, so a large exposition does not hold the loop. One scrape
    refreshes and renders at a time (a second refresh would clear gauge families under a
    rendering); up to `limit` scrapes may be in progress, waiting their turn, and any
    more are refused with 503 and Retry-After rather than queued (the scraper's own `up`
    series shows the refusal).

    One per `Metrics` (`for_metrics`): the loopback listener and the metrics listener
    serve the same gauges, so they share the turn and the limit.
    """

    def __init__(self, reads: Reads, m: Metrics,
                 limit: int = METRICS_MAX_CONCURRENT, gauges: GaugeSources = NO_SOURCES
                 ) -> None:
        self.reads, self.m, self.limit, self.gauges = reads, m, limit, gauges
        self.in_progress = 0
        self._turn = asyncio.Lock()

    @classmethod
    def for_metrics(cls, reads: Reads, m: Metrics, limit: int = METRICS_MAX_CONCURRENT,
                    gauges: GaugeSources = NO_SOURCES) -> MetricsEndpoint:
        endpoint = _ENDPOINTS.get(m)
        if endpoint is None or endpoint.reads is not reads or endpoint.gauges is not gauges:
            endpoint = _ENDPOINTS[m] = cls(reads, m, limit, gauges)
        return endpoint

    async def __call__(self) -> Response:
        if self.in_progress >= self.limit:
            return Response(f"too many concurrent scrapes (limit {self.limit})\n",
                            status_code=503, media_type="text/plain",
                            headers={"Retry-After": "1"})
        self.in_progress += 1
        try:
            async with self._turn:
                self.m.refresh(self.reads, self.gauges)
                body = await asyncio.to_thread(generate_latest, self.m.registry)
        finally:
            self.in_progress -= 1
        return Response(body, media_type=CONTENT_TYPE_LATEST)


_ENDPOINTS: weakref.WeakKeyDictionary[Metrics, MetricsEndpoint] = weakref.WeakKeyDictionary()


def _add_probes_and_metrics(app: FastAPI, reads: Reads, m: Metrics, ready: Any,
                            health: Health | None, gauges: GaugeSources,
                            metrics_limit: int = METRICS_MAX_CONCURRENT) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        # `health`: why the process is not alive (the tick loop stopped), or None.
        why = health() if health is not None else None
        if why is None:
            return Response("ok", media_type="text/plain")
        return Response(why, status_code=503, media_type="text/plain")

    @app.get("/readyz")
    async def readyz() -> Response:
        if ready is None or ready.is_set():
            return Response("ok", media_type="text/plain")
        return Response("watches not synced yet", status_code=503, media_type="text/plain")

    app.add_api_route("/metrics", MetricsEndpoint.for_metrics(reads, m, metrics_limit, gauges),
                      methods=["GET"])


def create_metrics_app(reads: Reads, metrics: Metrics, ready: Any = None,
                       health: Health | None = None,
                       metrics_limit: int = METRICS_MAX_CONCURRENT,
                       gauges: GaugeSources = NO_SOURCES) -> FastAPI:
    """Only /metrics and the probes, for an address reachable from outside the pod: the
    verbs (a /bind binds any pod anywhere with the extender's rights) and the debug view
    stay on the loopback listener."""
    app = FastAPI(title="gang-extender metrics", docs_url=None, redoc_url=None,
                  openapi_url=None)
    _add_probes_and_metrics(app, reads, metrics, ready, health, gauges, metrics_limit)
    return app


def create_app(
    dispatcher: Dispatcher,
    metrics: Metrics | None = None,
    ready: Any = None,
    health: Health | None = None,
    gauges: GaugeSources = NO_SOURCES,
) -> FastAPI:
    """`ready` is an object with `is_set()` (the informers' synced event); None: ready.
    `health` says why /healthz fails (`Dispatcher.tick_health`); None: always ok.
    `gauges`: what /metrics reads besides the gang manager."""
    m = metrics or Metrics()
    app = FastAPI(title="gang-extender", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.dispatcher = dispatcher
    app.state.metrics = m

    verbs = app.state.verbs = Verbs(dispatcher, m, ready)

    def reply(status_body: tuple[int, bytes]) -> Response:
        status, body = status_body
        return Response(body, status_code=status, media_type="application/json")

    @app.post("/filter")
    async def filter_(request: Request) -> Response:
        return reply(await verbs.filter(lambda: _read(request)))

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        return reply(await verbs.prioritize(lambda: _read(request)))

    @app.post("/bind")
    async def bind(request: Request) -> Response:
        return reply(await verbs.bind(lambda: _read(request)))

    _add_probes_and_metrics(app, dispatcher.manager.reads, m, ready, health, gauges)
    install_gangs_route(app, dispatcher)
    return app


_JSON_HEADERS = [(b"content-type", b"application/json")]


def with_fast_verbs(app: FastAPI) -> ASGIApp:
    """The app to serve: POSTs of the three verbs go straight to `Verbs`, the rest to
    FastAPI.

    kube-scheduler calls filter (and bind) once per pod in its serial scheduling loop,
    and FastAPI's routing and middleware stack cost as much as the work itself
    (docs/performance.md). The routes on `app` stay for in-process use and give the
    same answers.
    """
    verbs: Verbs = app.state.verbs
    handlers = {"/filter": verbs.filter, "/prioritize": verbs.prioritize, "/bind": verbs.bind}

    async def fast(scope: Scope, receive: Receive, send: Send) -> None:
        handler = handlers.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None or scope["method"] != "POST":
            await app(scope, receive, send)
            return

        async def read() -> bytes:
            for name, value in scope["headers"]:
                if name == b"content-length":
                    _check_declared(value.decode("latin-1"))
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ValueError("client disconnected before sending the whole body")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY:
                    raise _too_large()
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)

        status, body = await handler(read)
        await send({"type": "http.response.start", "status": status,
                    "headers": [*_JSON_HEADERS, (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    return fast

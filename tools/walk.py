"""The walk of one request through the extender: which of its files the request visits,
in order, and how often it comes back to a file it had already left.

A newcomer changing what a bind does should find one place to change, and a reader
following a bind should read it top-down. Both show in the walk: a request that visits
few files and seldom returns to one it left reads like kube-scheduler's `ScheduleOne`;
one that goes back and forth between the same files is hard to follow and to change.
docs/architecture.md shows the walks; tests/repo/test_walks.py holds the bind walk to its
bound, so a change that scatters it again fails a test.

The request goes through the real path, adapters included: the ASGI app the CLI serves,
the dispatcher, the gang manager and the core, the actions out, the Binding's POST
through the extender's own API client and transport to an HTTP server on loopback that
answers every request 201, and back to the reply. Three walks:

* `bind`: the bind barrier (`--direct-commit=false`): two members of a gang of three
  wait in their bind requests; the third member's bind request, walked, commits the
  gang: its own Binding and the two others' are posted, and it is answered.
* `bind-held`: the bind request as deploy/ ships the extender (the direct commit,
  `--commit-wait=1`): the filter call of the member that completed its gang committed
  it and held that member's Binding for kube-scheduler's bind request (posted before
  kube-scheduler assumed the pod, it would fail the cycle); the bind request, walked,
  posts it and is answered with its outcome.
* `filter`: a member's filter call against a gang that holds a reservation.
* `commit`: the direct commit (the default): the filter call of the member whose
  arrival lets the gang be placed, which plans it, reserves it and posts its Bindings
  (`--commit-wait 0`: with no watch here, nothing would end the wait).

How it counts (what `sys.setprofile` reports of the walked request's task and the tasks
it starts, from the request's arrival to its reply and the end of those tasks):

* a stop: a function defined under extender/ entered for the first time from its
  caller. Not counted: comprehensions and lambdas (expressions inside a function),
  property getters and what they call (they read as attributes), a function called
  again from the same caller (a loop's iterations are one stop), and a coroutine or
  generator resumed (the code after an `await` continues the stop that awaited);
* files: distinct files among the stops;
* returns: visits to a file the walk had already left (consecutive stops in one file
  are one visit; a later visit to a file seen earlier is a return).

    .venv/bin/python -m tools.walk bind     # or filter, commit; --stops lists each stop

`--parts` shares each count out between the adapters and the core: a part's stops and
files, and the returns that come back to one of its files (they add up to the walk's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import orjson

import extender
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import node_from_k8s, pod_from_k8s
from extender.core.model.types import GROUP_LABEL, GroupInfo
from extender.core.wiring import Core
from extender.kube.client import make_kube
from extender.scheduler.dispatch import DispatchConfig, Dispatcher
from extender.scheduler.http import create_app, with_fast_verbs

ROOT = str(Path(extender.__file__).resolve().parent) + "/"
_EXPRESSIONS = frozenset({"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"})
_IN_PROPERTY = -2  # the stack's mark for a frame inside a property getter
_OUTSIDE = -1  # the stack's mark for a frame with no counted stop above it
WALKS = ("bind", "bind-held", "filter", "commit")


@dataclass(frozen=True, slots=True)
class Stop:
    file: str  # relative to extender/
    function: str  # qualified name
    depth: int  # stops above it in its caller chain, for the listing


@dataclass(frozen=True, slots=True)
class Count:
    stops: int
    files: int
    returns: int

    def __str__(self) -> str:
        return (f"stops {self.stops}, files {self.files}, "
                f"returns to a file already left {self.returns}")


def count(stops: list[Stop]) -> Count:
    visits: list[str] = []
    for stop in stops:
        if not visits or visits[-1] != stop.file:
            visits.append(stop.file)
    seen: set[str] = set()
    returns = 0
    for file in visits:
        returns += file in seen
        seen.add(file)
    return Count(len(stops), len(seen), returns)


PARTS = ("adapters", "core")


def part_of(file: str) -> str:
    return "core" if file.startswith("core/") else "adapters"


def by_part(stops: list[Stop]) -> dict[str, Count]:
    """The walk's count shared out between the adapters and the core (`--parts`): each
    part's stops and files, and the returns that land in its files. The parts' returns
    add up to the walk's: a return is the same as in `count`, charged to the file it
    comes back to."""
    visits: list[str] = []
    for stop in stops:
        if not visits or visits[-1] != stop.file:
            visits.append(stop.file)
    seen: set[str] = set()
    returns = dict.fromkeys(PARTS, 0)
    for file in visits:
        returns[part_of(file)] += file in seen
        seen.add(file)
    return {part: Count(sum(part_of(s.file) == part for s in stops),
                        sum(part_of(f) == part for f in seen), returns[part])
            for part in PARTS}


def _property_codes() -> set[CodeType]:
    """The code of every property getter under extender/: a property reads as an
    attribute, so it is not a stop."""
    out: set[CodeType] = set()
    for name, module in list(sys.modules.items()):
        if name != "extender" and not name.startswith("extender."):
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and obj.__module__ == name:
                for attr in vars(obj).values():
                    if isinstance(attr, property) and attr.fget is not None:
                        out.add(attr.fget.__code__)
    return out


class Recorder:
    """Stops of one task and the tasks it starts, in the order they are first entered.

    The profiler sees every Python frame of the thread; one stack of marks, pushed on
    each call and popped on each return, follows it (a coroutine's resumption and
    suspension are a call and a return too). Each mark is the stop a frame counts
    under: its own if it is a stop, its caller's otherwise."""

    def __init__(self, properties: set[CodeType], follow: str | None = None) -> None:
        self.stops: list[Stop] = []
        self._properties = properties
        self._follow = follow
        self._stack: list[int] = []
        self._seen: dict[tuple[int, CodeType], int] = {}  # (caller's stop, callee) -> stop
        self._frames: dict[FrameType, int] = {}  # coroutines and generators, to resume
        self._tasks: set[asyncio.Task[Any]] = set()
        self._root: asyncio.Task[Any] | None = None

    def task_factory(self, loop: asyncio.AbstractEventLoop,
                     coro: Coroutine[Any, Any, Any], **kwargs: Any) -> asyncio.Task[Any]:
        """The loop's task factory while walking: a task started by a walked task is
        walked too (the Bindings a commit posts run in tasks of their own)."""
        task = asyncio.Task(coro, loop=loop, **kwargs)
        parent = asyncio.current_task(loop)
        if parent is not None and parent in self._tasks:
            self._tasks.add(task)
        return task

    def walk(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        self._root = task

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "return":
            if self._stack:
                self._stack.pop()
            return
        if event != "call":
            return
        parent = self._stack[-1] if self._stack else _OUTSIDE
        code = frame.f_code
        if parent == _IN_PROPERTY or code in self._properties:
            self._stack.append(_IN_PROPERTY)
            return
        if not code.co_filename.startswith(ROOT) or code.co_name in _EXPRESSIONS:
            self._stack.append(parent)
            return
        resumed = self._frames.get(frame)
        if resumed is not None:
            self._stack.append(resumed)
            return
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: set up or torn down, not the walk
            task = None
        if task is None or task not in self._tasks:
            self._stack.append(_OUTSIDE)
            return
        entry = parent == _OUTSIDE and task is self._root  # the route: handed bytes
        if self._follow is not None and not entry and not _carries(frame, self._follow):
            self._stack.append(parent)
            return
        key = (parent, code)
        index = self._seen.get(key)
        if index is None:
            index = self._seen[key] = len(self.stops)
            depth = self.stops[parent].depth + 1 if parent >= 0 else 0
            self.stops.append(Stop(code.co_filename[len(ROOT):], code.co_qualname, depth))
        if code.co_flags & 0x2A0:  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
            self._frames[frame] = index
        self._stack.append(index)


def _carries(frame: FrameType, uid: str) -> bool:
    """Whether a call is handed the walked pod: its uid, or an object that is the pod or
    carries it (`PodInfo`, a `BindPod`), among its arguments."""
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    values = frame.f_locals
    for name in names:
        if name in ("self", "cls"):
            continue
        value = values.get(name)
        if value == uid or getattr(value, "uid", None) == uid:
            return True
        if getattr(getattr(value, "pod", None), "uid", None) == uid:
            return True
    return False


# ----- the cluster the walks run against -------------------------------------------------


class _AcceptAll:
    """An HTTP/1.1 server on loopback answering every request `201 {}`: the API server's
    side of a Binding, with nothing behind it."""

    def __init__(self) -> None:
        self.requests = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        # Cancelled too: `asyncio.run` cancels the idle connections' handlers at its end.
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError,
                                 asyncio.CancelledError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 2\r\n\r\n{}")
                await writer.drain()
        writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def _kubeconfig(port: int, folder: Path) -> str:
    path = folder / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: walk\n"
        f"clusters:\n- name: walk\n  cluster:\n    server: http://127.0.0.1:{port}\n"
        "contexts:\n- name: walk\n  context:\n    cluster: walk\n    user: walk\n"
        "users:\n- name: walk\n  user:\n    token: walk\n")
    return str(path)


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}",
                         "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def _pod(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}",
                         "labels": {GROUP_LABEL: "g"}},
            "spec": {"schedulerName": "gang-scheduler", "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"}}


@dataclass(frozen=True, slots=True)
class _Cluster:
    app: Any
    dispatcher: Dispatcher
    server: _AcceptAll
    pods: list[dict[str, Any]]
    nodes: list[str]


@contextlib.asynccontextmanager
async def _cluster(direct_commit: bool, commit_wait: float = 0.0) -> AsyncIterator[_Cluster]:
    """A gang of three 1-CPU members and three 4-CPU nodes, behind the app the CLI
    serves, its Bindings posted to `_AcceptAll`."""
    server = _AcceptAll()
    port = await server.start()
    with tempfile.TemporaryDirectory() as folder:
        kube = make_kube(_kubeconfig(port, Path(folder)))
        manager = GangManager(Core.wire(Config(direct_commit=direct_commit)))
        names = [f"n{i}" for i in range(3)]
        for name in names:
            manager.on_node(node_from_k8s(_node(name)))
        manager.on_group(GroupInfo(namespace="ns", name="g", min_member=3, uid="g-uid"), 0.0)
        pods = [_pod(i) for i in range(3)]
        for pod in pods[:2]:
            manager.on_pod(pod_from_k8s(pod), 0.0)
        dispatcher = Dispatcher(manager, kube, config=DispatchConfig(commit_wait=commit_wait))
        try:
            yield _Cluster(with_fast_verbs(create_app(dispatcher)), dispatcher, server, pods,
                           names)
        finally:
            await dispatcher.idle()
            await kube.http.aclose()
            await server.stop()


async def _post(app: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One POST through the ASGI app, as uvicorn delivers it."""
    raw = orjson.dumps(body)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8888),
        "headers": [(b"host", b"127.0.0.1:8888"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(raw)).encode())],
    }
    answered = asyncio.get_running_loop().create_future()
    chunks: list[bytes] = []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await answered
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body") and not answered.done():
                answered.set_result(None)

    await app(scope, receive, send)
    reply: dict[str, Any] = orjson.loads(b"".join(chunks) or b"{}")
    return reply


def _filter(c: _Cluster, i: int) -> Coroutine[Any, Any, dict[str, Any]]:
    return _post(c.app, "/filter", {"Pod": c.pods[i], "Nodes": None, "NodeNames": c.nodes})


def _bind(c: _Cluster, i: int, node: str) -> Coroutine[Any, Any, dict[str, Any]]:
    meta = c.pods[i]["metadata"]
    return _post(c.app, "/bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                  "PodUID": meta["uid"], "Node": node})


async def _walked(recorder: Recorder, request: Coroutine[Any, Any, dict[str, Any]],
                  c: _Cluster) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()
    loop.set_task_factory(recorder.task_factory)  # type: ignore[arg-type]
    task = loop.create_task(request)
    recorder.walk(task)
    sys.setprofile(recorder.profile)
    try:
        reply = await task
        await c.dispatcher.idle()  # the Bindings it started, answered
    finally:
        sys.setprofile(None)
        loop.set_task_factory(factory)
    return reply


async def _walk_bind(recorder: Recorder) -> None:
    async with _cluster(direct_commit=False) as c:
        c.dispatcher.manager.on_pod(pod_from_k8s(c.pods[2]), 0.0)
        chosen = [(await _filter(c, i))["NodeNames"][0] for i in range(3)]
        waiting = [asyncio.ensure_future(_bind(c, i, chosen[i])) for i in range(2)]
        await asyncio.sleep(0)  # both wait for the rest of their gang
        reply = await _walked(recorder, _bind(c, 2, chosen[2]), c)
        assert not reply.get("Error"), f"the walked bind failed: {reply}"
        assert c.server.requests == 3, f"{c.server.requests} Bindings posted, not 3"
        for done in await asyncio.gather(*waiting):
            assert not done.get("Error"), f"a waiting bind failed: {done}"


async def _walk_bind_held(recorder: Recorder) -> None:
    # The commit wait ends when the watch shows the gang bound; with no watch here, the
    # filter call answers after it (1 s), its member's Binding held meanwhile.
    async with _cluster(direct_commit=True, commit_wait=1.0) as c:
        c.dispatcher.manager.on_pod(pod_from_k8s(c.pods[2]), 0.0)
        node = (await _filter(c, 2))["NodeNames"][0]  # the third member: the gang is whole
        posted = c.server.requests
        assert posted == 2, f"{posted} Bindings posted before the bind, not the 2 not held"
        reply = await _walked(recorder, _bind(c, 2, node), c)
        assert not reply.get("Error"), f"the walked bind failed: {reply}"
        assert c.server.requests == 3, "the walked bind did not post the held Binding"


async def _walk_filter(recorder: Recorder) -> None:
    async with _cluster(direct_commit=False) as c:
        c.dispatcher.manager.on_pod(pod_from_k8s(c.pods[2]), 0.0)
        await _filter(c, 0)  # plans and reserves the gang
        reply = await _walked(recorder, _filter(c, 1), c)
        assert reply.get("NodeNames"), f"the walked filter placed the member nowhere: {reply}"


async def _walk_commit(recorder: Recorder) -> None:
    async with _cluster(direct_commit=True) as c:
        await _walked(recorder, _filter(c, 2), c)  # the third member: the gang is whole
        posted = c.server.requests
        assert posted == 3, f"the walked filter did not commit the gang: {posted} Bindings"


# Each walk, and the uid of the pod whose request it walks.
_WALKERS: dict[str, tuple[Callable[[Recorder], Coroutine[Any, Any, None]], str]] = {
    "bind": (_walk_bind, "u2"), "bind-held": (_walk_bind_held, "u2"),
    "filter": (_walk_filter, "u1"), "commit": (_walk_commit, "u2"),
}


def walk(which: str, everything: bool = False) -> list[Stop]:
    """The stops of walk `which` (`WALKS`), in the order they were entered: the calls
    the walked pod is handed to (its uid, or the pod, or an action that carries it),
    or with `everything` every call the request makes, helpers included."""
    walker, uid = _WALKERS[which]
    recorder = Recorder(_property_codes(), None if everything else uid)
    asyncio.run(walker(recorder))
    return recorder.stops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("walks", nargs="*", metavar="WALK",
                    help=f"any of {', '.join(WALKS)} (default: all)")
    ap.add_argument("--stops", action="store_true", help="list each stop, indented by depth")
    ap.add_argument("--everything", action="store_true",
                    help="count every call the request makes, not only those handed its pod")
    ap.add_argument("--parts", action="store_true",
                    help="share each count out between the adapters and the core")
    args = ap.parse_args(argv)
    unknown = [w for w in args.walks if w not in WALKS]
    if unknown:
        ap.error(f"unknown walk {unknown[0]!r}: choose from {', '.join(WALKS)}")
    for which in args.walks or WALKS:
        stops = walk(which, args.everything)
        if args.stops:
            for stop in stops:
                print(f"  {'  ' * stop.depth}{stop.file}:{stop.function}")
        print(f"{which}: {count(stops)}")
        if args.parts:
            for part, got in by_part(stops).items():
                print(f"  {part}: {got}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

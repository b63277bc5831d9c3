"""The extender in this process, wired as the CLI wires it (less the informers, status
and Event writers), and timed only at its seams: the HTTP verbs (by the caller, around
`asgi_post`), the gang planner (injected, `Core.wire(planner=...)`) and the manager's
bind decision (`TimedManager`, through the public `bind`).

No network and no API server: `asgi_post` hands a request to the ASGI app as uvicorn
would, and `NullKube` accepts every Binding and patch at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.core.cache.snapshot import Snapshot
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.model.vocabulary import BindDecision
from extender.core.planner import Plan, Shortfall, plan_group
from extender.core.wiring import Core
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Outlets
from extender.scheduler.http import create_app, with_fast_verbs
from extender.scheduler.wakeups import Wakeups


async def asgi_post(app: Any, path: str, body: bytes) -> tuple[int, bytes]:
    """One POST through the ASGI app, as uvicorn would deliver it."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8888),
        "headers": [(b"host", b"127.0.0.1:8888"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }
    done = asyncio.get_running_loop().create_future()
    delivered = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done  # a disconnect only after the response, like a kept-alive client
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body") and not done.done():
                done.set_result(None)

    await app(scope, receive, send)
    return status, b"".join(chunks)


class NullKube:
    """The API server's side of Bindings and wake-up patches: accepts everything at once.
    `on_bind(uid, node)` runs just after each Binding is answered, as the watch would
    deliver the pod bound: a directly committed pod is never assumed by kube-scheduler,
    so only that tells the simulated kube-scheduler (and the extender's cache) of it."""

    def __init__(self) -> None:
        self.on_bind: Callable[[str, str], None] | None = None

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        if self.on_bind is not None:
            asyncio.get_running_loop().call_soon(self.on_bind, uid, node)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        return None


# ----- timing ----------------------------------------------------------------------------


@dataclass
class Timings:
    verbs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, verb: str, seconds: float) -> None:
        self.verbs.setdefault(verb, []).append(seconds)


@dataclass
class Plans:
    """Every planning call the gang queue made, with its gang size and outcome."""

    seconds: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    ok: int = 0
    short: int = 0

    def planner(
        self, group: GroupInfo, members: Sequence[PodInfo], succeeded: int, snapshot: Snapshot,
        explain: bool = True,
    ) -> Plan | Shortfall:
        """`plan_group`, timed: what the bench passes to `Core.wire`."""
        t = time.perf_counter()
        result = plan_group(group, members, succeeded, snapshot, explain)
        self.seconds.append(time.perf_counter() - t)
        self.sizes.append(group.min_member)
        if isinstance(result, Plan):
            self.ok += 1
        else:
            self.short += 1
        return result


class TimedManager(GangManager):
    """The gang manager with its bind decision timed (the /bind answer also waits for
    the Binding, and for a gang member, for the rest of its gang)."""

    def __init__(self, core: Core, timings: Timings) -> None:
        super().__init__(core)
        self._timings = timings

    def bind(self, namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        t = time.perf_counter()
        decision = super().bind(namespace, name, uid, node, now)
        self._timings.add("bind: manager decision", time.perf_counter() - t)
        return decision


# ----- the extender ------------------------------------------------------------------------


@dataclass
class Extender:
    core: Core
    manager: GangManager
    dispatcher: Dispatcher
    app: Any  # the ASGI app the CLI serves
    kube: NullKube


def extender(clock: Callable[[], float], timings: Timings, plans: Plans,
             direct_commit: bool | None = None) -> Extender:
    config = Config() if direct_commit is None else Config(direct_commit=direct_commit)
    core = Core.wire(config, planner=plans.planner)
    manager = TimedManager(core, timings)
    kube = NullKube()
    # Wake-ups are queued, as the CLI's are, but never sent: no kube-scheduler is parked.
    wakeups = Wakeups(manager.reads, kube, clock)
    # No commit wait: it holds the call of the member that set a commit off until the
    # watch delivers its gang bound, a wait on kube-scheduler's loop that bench.e2e
    # measures (here it would time the gang's Bindings and their watch events, and on
    # the simulation's clock it never reaches its limit). Without it, the filter call
    # is timed as before the wait existed; the Bindings go out just the same.
    dispatcher = Dispatcher(manager, kube, DispatchConfig(commit_wait=0), clock,
                            Outlets(wakeups=wakeups))
    return Extender(core, manager, dispatcher, with_fast_verbs(create_app(dispatcher)), kube)

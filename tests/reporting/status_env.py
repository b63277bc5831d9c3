"""The reporting side wired as extender/serve.py wires it, over recording stand-ins: an
API that records status patches and Events (and strategic patches, for the upstream
PodGroups), a clock, the core simulator forwarding the gang manager's reports, and the
writer, recorder and metrics between them. The status, history, sources, upstream and
disruption tests all watch what users see through this one world, so it is a module of
its own rather than a test module the others import from."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from extender.core.manager import GangManager
from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.vocabulary import (
    BindPod,
    GangBound,
    GangReserved,
    GangTimedOut,
    RejectWaitingBind,
    Report,
    StatusChanged,
    WakePods,
)
from extender.core.wiring import Core
from extender.kube.client import ApiError
from extender.kube.recorder import EventRecorder, ObjectRef
from extender.reporting.events import GangEvents
from extender.reporting.metrics import GaugeSources, Metrics
from extender.reporting.status import StatusConfig, StatusHooks, StatusWriter
from tests.core.sim import SimScheduler, group, node, pod

T0 = 1_800_000_000.0


class FakeApi:
    """Records status patches and Events; can be told to fail."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: dict[str, dict[str, Any]] = {}
        self.fail: ApiError | None = None
        self.event_404 = False

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        if self.fail is not None:
            raise self.fail
        if "/events/" in path:
            name = path.rsplit("/", 1)[1]
            if self.event_404 or name not in self.events:
                raise ApiError(404, "NotFound", "gone")
            self.events[name].update(patch)
            return
        self.patches.append((path, patch))

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        name = f"{body['metadata']['generateName']}{len(self.events)}"
        self.events[name] = dict(body, metadata={**body["metadata"], "name": name})
        return self.events[name]

    def status_writes(self, name: str) -> list[dict[str, Any]]:
        return [p["status"] for path, p in self.patches if f"/podgroups/{name}/status" in path]

    def events_for(self, name: str) -> list[tuple[str, str, int, str]]:
        return sorted((e["reason"], e["type"], e["count"], e["message"])
                      for e in self.events.values() if e["involvedObject"]["name"] == name)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Sim(SimScheduler):
    """The core simulator, forwarding the gang manager's reports as the dispatcher does."""

    def __init__(self, core: Core, forward: Any) -> None:
        super().__init__(core)
        self.now = T0
        self.forward = forward

    def drain(self) -> None:
        while out := self.manager.take_actions():
            for a in out:
                if isinstance(a, GangReserved | GangBound | GangTimedOut | StatusChanged):
                    self.forward(a)
                elif isinstance(a, BindPod):
                    self._do_bind(a.pod.uid, a.node)
                elif isinstance(a, RejectWaitingBind):
                    self.held.discard(a.uid)
                    self.assumed.pop(a.uid, None)
                elif isinstance(a, WakePods):
                    pass


@dataclasses.dataclass
class Env:
    core: Core
    manager: GangManager
    api: FakeApi
    clock: Clock
    writer: StatusWriter
    recorder: EventRecorder
    metrics: Metrics
    sim: Sim

    def refresh(self) -> None:
        """The gauges as a scrape reads them, the gangs' from the writer's counts (as
        extender/serve.py wires it)."""
        self.metrics.refresh(self.manager.reads, GaugeSources(status_counts=self.writer.counts))

    def step(self, seconds: float = 0.0) -> int:
        self.clock.now += seconds
        self.sim.now = self.clock.now

        async def go() -> int:
            n = await self.writer.step()
            await self.recorder.flush()
            return n

        return asyncio.run(go())

    def tick(self, seconds: float) -> None:
        """Time passes for the framework (deadlines, backoffs), then the writer runs."""
        self.clock.now += seconds
        self.sim.now = self.clock.now
        self.sim.tick(0)
        self.step()

    def add_group(self, name: str, min_member: int, **kw: Any) -> None:
        g = group(name, min_member, **kw)
        self.sim.add_group(g)
        self.sim.drain()  # what the informer's on_change (Dispatcher.cache_changed) does
        self.writer.observe_group({"metadata": {"namespace": g.namespace, "name": g.name,
                                                "uid": g.uid}})

    def add_pod(self, name: str, grp: str, owner: str | None = None, **kw: Any) -> str:
        p = self.sim.add_pod(pod(name, grp, **kw))
        self.sim.drain()  # what the informer's on_change (Dispatcher.cache_changed) does
        meta: dict[str, Any] = {"namespace": p.namespace, "name": p.name, "uid": p.uid,
                                "labels": dict(p.labels)}
        if owner:
            meta["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": "j1"}]
        self.writer.observe_pod({"metadata": meta})
        return p.uid

    def set_phase(self, uid: str, phase: str) -> None:
        p = self.manager.reads.pod(uid)
        assert p is not None
        self.manager.on_pod(dataclasses.replace(p, phase=phase), self.clock.now)
        self.sim.drain()
        self.writer.dirty.add(f"{p.namespace}/{p.group}")



def make_env() -> Env:
    core = Core.wire(Config(default_timeout_seconds=10,
                            backoff=BackoffPolicy(2, 8, retry_limit=2),
                            direct_commit=False))
    manager = GangManager(core)
    api = FakeApi()
    clock = Clock()
    metrics = Metrics()
    recorder = EventRecorder(api, clock, on_result=lambda r: metrics.events.labels(r).inc())
    events = GangEvents(recorder, manager.reads)  # as extender/serve.py wires it
    # settle=0: these tests follow every status a gang goes through; the settling has its
    # own tests below.
    writer = StatusWriter(manager.reads, api, clock, StatusConfig(min_interval=1.0, settle=0.0),
                          events=events,
                          hooks=StatusHooks(
                              on_write=lambda r: metrics.status_writes.labels(r).inc()))

    def forward(report: Report) -> None:  # as extender/serve.py's on_report
        metrics.on_report(report)
        events.on_report(report)
        writer.on_report(report)

    sim = Sim(core, forward)
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    return Env(core, manager, api, clock, writer, recorder, metrics, sim)


def last(env: Env, name: str) -> dict[str, Any]:
    writes = env.api.status_writes(name)
    assert writes, f"no status written for {name}"
    return writes[-1]


def cond(status: dict[str, Any], type_: str = "Scheduled") -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)



class Api(FakeApi):
    """FakeApi that also takes strategic merge patches, as the real client does."""

    def __init__(self) -> None:
        super().__init__()
        self.strategic: list[tuple[str, dict[str, Any]]] = []

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> None:
        if self.fail is not None:
            raise self.fail
        self.strategic.append((path, patch))


def writes(api: Api, name: str) -> list[tuple[str, dict[str, Any]]]:
    return [(path, p["status"]) for path, p in api.strategic
            if f"/podgroups/{name}/status" in path]


def conds(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}



class Captured(EventRecorder):
    """An event recorder that keeps what it is asked to record, for the tests of what
    the events say."""

    def __init__(self) -> None:
        super().__init__(None)
        self.seen: list[tuple[str, str, str, bool]] = []

    def record(self, ref: ObjectRef, reason: str, message: str, warning: bool = False,
               background: bool = False) -> None:
        self.seen.append((f"{ref.kind} {ref.namespace}/{ref.name}", reason, message, warning))

"""A plain-data stand-in for kube-scheduler driving the framework, for core tests.

It does what kube-scheduler does around an extender: its own fit check against bound
and assumed pods, filter, bind (held binds wait), and it executes the framework's
BindPod actions as the API server would. Used by unit and property tests only; the
real scheduler is exercised in e2e/.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import cast

from extender.core.framework import (
    BindPod,
    Config,
    FailHeld,
    GangFramework,
    WakePods,
)
from extender.core.resources import fits
from extender.core.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo, Resources

_uid = itertools.count()


def node(
    name: str, cpu: int = 8000, memory: int = 32 << 30, gpu: int = 0, **kw: object
) -> NodeInfo:
    alloc: Resources = {"cpu": cpu, "memory": memory, "pods": 110}
    if gpu:
        alloc["nvidia.com/gpu"] = gpu
    return NodeInfo(name=name, allocatable=alloc, labels={"kubernetes.io/hostname": name}, **kw)  # type: ignore[arg-type]


def pod(
    name: str,
    group: str | None = None,
    cpu: int = 1000,
    memory: int = 1 << 30,
    gpu: int = 0,
    ns: str = "ns",
    creation: float = 0.0,
    **kw: object,
) -> PodInfo:
    req: Resources = {"cpu": cpu, "memory": memory, "pods": 1}
    if gpu:
        req["nvidia.com/gpu"] = gpu
    labels = {GROUP_LABEL: group} if group else {}
    labels.update(cast(dict[str, str], kw.pop("labels", {})))
    return PodInfo(
        uid=f"uid-{name}-{next(_uid)}", namespace=ns, name=name, requests=req, labels=labels,
        creation=creation, scheduler_name="gang-scheduler", **kw,  # type: ignore[arg-type]
    )


def group(name: str, min_member: int, ns: str = "ns", creation: float = 0.0,
          timeout: int | None = None) -> GroupInfo:
    return GroupInfo(namespace=ns, name=name, min_member=min_member, uid=f"g-{name}",
                     creation=creation, schedule_timeout_seconds=timeout)


class SimScheduler:
    """kube-scheduler's side: assumed pods, fit check, filter -> bind."""

    def __init__(self, fw: GangFramework | None = None) -> None:
        self.fw = fw or GangFramework(Config(default_timeout_seconds=30))
        self.now = 1000.0
        self.assumed: dict[str, str] = {}  # uid -> node (filter passed, bind pending)
        self.held: set[str] = set()
        self.bind_log: list[tuple[float, str, str]] = []  # (time, uid, node) of Bindings
        self.failed_binds: list[tuple[str, str]] = []
        self.woken: list[tuple[str, str, str]] = []
        self.last_filter: dict[str, str] = {}

    # ----- cluster changes ------------------------------------------------------------
    def add_node(self, n: NodeInfo) -> None:
        self.fw.on_node(n)

    def add_group(self, g: GroupInfo) -> None:
        self.fw.on_group(g, self.now)

    def add_pod(self, p: PodInfo) -> PodInfo:
        self.fw.on_pod(p, self.now)
        return p

    def finish(self, uid: str) -> None:
        p = self.fw.cache.pods[uid]
        self.fw.on_pod(dataclasses.replace(p, phase="Succeeded"), self.now)
        self.drain()

    def delete(self, uid: str) -> None:
        self.fw.on_pod_deleted(uid, self.now)
        self.assumed.pop(uid, None)
        self.drain()

    # ----- kube-scheduler's own view ---------------------------------------------------
    def _used(self, name: str) -> Resources:
        used: Resources = {}
        for p in self.fw.cache.pods.values():
            on = p.node_name if p.holds_capacity else self.assumed.get(p.uid)
            if on == name:
                for k, v in p.requests.items():
                    used[k] = used.get(k, 0) + v
        return used

    def feasible(self, p: PodInfo) -> list[str]:
        out = []
        for n in self.fw.cache.nodes.values():
            used = self._used(n.name)
            free = {k: v - used.get(k, 0) for k, v in n.allocatable.items()}
            if fits(p.requests, free):
                out.append(n.name)
        return out

    # ----- one scheduling cycle --------------------------------------------------------
    def schedule(self, uid: str) -> str:
        """Filter + bind one pod. Returns 'rejected', 'held', 'bound' or 'error', or
        'waiting' when the filter call would wait for the rest of a gang being created
        (the runtime asks again after the next member arrives)."""
        p = self.fw.cache.pods[uid]
        if p.node_name or uid in self.assumed:
            return "skip"
        res = self.fw.filter(p, self.feasible(p), self.now)
        self.drain()
        if res.wait:
            return "waiting"
        if not res.nodes:
            self.last_filter[uid] = next(iter(res.unresolvable.values()), "")
            return "rejected"
        chosen = res.nodes[0]
        self.assumed[uid] = chosen
        d = self.fw.bind(p.namespace, p.name, uid, chosen, self.now)
        if d.kind == "error":
            self.assumed.pop(uid, None)
            self.failed_binds.append((uid, d.message))
            return "error"
        if d.kind == "bind":
            self._do_bind(uid, chosen)
            return "bound"
        if d.kind == "bound":
            return "bound"
        self.held.add(uid)
        self.drain()
        return "bound" if self.fw.cache.pods[uid].node_name else "held"

    def _do_bind(self, uid: str, node_name: str) -> None:
        self.bind_log.append((self.now, uid, node_name))
        self.held.discard(uid)
        self.assumed.pop(uid, None)
        self.fw.bind_finished(uid, node_name, None, self.now)

    def drain(self) -> None:
        while self.fw.outbox:
            out, self.fw.outbox = self.fw.outbox, []
            for a in out:
                if isinstance(a, BindPod):
                    self._do_bind(a.uid, a.node)
                elif isinstance(a, FailHeld):
                    self.held.discard(a.uid)
                    self.assumed.pop(a.uid, None)
                    self.failed_binds.append((a.uid, a.message))
                elif isinstance(a, WakePods):
                    self.woken.extend(a.pods)

    def tick(self, seconds: float = 0.0) -> None:
        self.now += seconds
        self.fw.tick(self.now)
        self.drain()

    def run_all(self, rounds: int = 3) -> None:
        """Offer every pending pod to the scheduler, a few rounds (like re-queues)."""
        for _ in range(rounds):
            for uid in sorted(self.fw.cache.pods, key=lambda u: self.fw.cache.pods[u].name):
                p = self.fw.cache.pods[uid]
                if not p.node_name and not p.terminal and uid not in self.held:
                    self.schedule(uid)

    def bound(self, group_name: str | None = None) -> list[PodInfo]:
        return [
            p for p in self.fw.cache.pods.values()
            if p.node_name and (group_name is None or p.group == group_name)
        ]

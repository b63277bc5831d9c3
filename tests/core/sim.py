"""A plain-data stand-in for kube-scheduler driving the gang manager, for core tests.

It does what kube-scheduler does around an extender: its own fit check against bound
and assumed pods, filter, bind (held binds wait), and it executes the manager's
BindPod actions as the API server would. The fit check is the benchmark's
(bench/core/simulator.py), so both drive the extender with the same view of the cluster.
Used by unit and property tests only; the real scheduler is exercised in e2e/.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, cast

from bench.core.simulator import KubeSchedulerView
from extender.core.ledger import Binds
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo, Resources
from extender.core.model.vocabulary import (
    Action,
    BindOutcome,
    BindPod,
    Decision,
    RejectWaitingBind,
    StatusChanged,
    WakePods,
)
from extender.core.wiring import Core

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
        creation=creation, scheduler_name=str(kw.pop("scheduler_name", "gang-scheduler")),
        **kw,  # type: ignore[arg-type]
    )


def group(name: str, min_member: int, ns: str = "ns", creation: float = 0.0,
          timeout: int | None = None, **kw: Any) -> GroupInfo:
    """`kw`: other GroupInfo fields (the topology)."""
    return GroupInfo(namespace=ns, name=name, min_member=min_member, uid=f"g-{name}",
                     creation=creation, schedule_timeout_seconds=timeout, **kw)


class SimScheduler:
    """kube-scheduler's side: assumed pods, fit check, filter -> bind."""

    def __init__(self, core: Core | None = None) -> None:
        # The bind barrier unless a test says otherwise: this simulator takes each member
        # through kube-scheduler's cycle (filter, then bind), which the direct commit skips.
        self.core = core or Core.wire(Config(default_timeout_seconds=30, direct_commit=False))
        self.manager = GangManager(self.core)
        self.cache = self.core.cache
        # Each gang's latest Decision, as the StatusChanged actions carry it to the
        # adapters (the only way it leaves the core), read as each is left in the
        # outbox, so a test sees it without taking the actions it has not run yet.
        self.decisions: dict[str, Decision] = {}
        append = self.core.outbox.append

        def observe(action: Action) -> None:
            if isinstance(action, StatusChanged):
                if action.status is None:
                    self.decisions.pop(action.gang, None)
                else:
                    self.decisions[action.gang] = action.status
            append(action)

        self.core.outbox.append = observe  # type: ignore[method-assign]
        self.now = 1000.0
        self.assumed: dict[str, str] = {}  # uid -> node (filter passed, bind pending)
        self.held: set[str] = set()
        self.bind_log: list[tuple[float, str, str]] = []  # (time, uid, node) of Bindings
        self.failed_binds: list[tuple[str, str]] = []
        self.woken: list[tuple[str, str, str]] = []  # (namespace, name, uid)
        self.last_filter: dict[str, str] = {}
        self.actions: list[object] = []  # every action taken, in order
        # Bindings that left their node over-committed on what the pod requests.
        self.overcommits: list[str] = []
        self.view = KubeSchedulerView()
        self._charged: dict[str, tuple[str, Resources]] = {}  # uid -> what the view counts

    def decision(self, gang: str) -> Decision | None:
        return self.decisions.get(gang)

    def status(self, gang: str) -> Decision:
        st = self.decisions.get(gang)
        assert st is not None, f"no status for gang {gang}"
        return st

    # ----- cluster changes ------------------------------------------------------------
    def add_node(self, n: NodeInfo) -> None:
        self.manager.on_node(n)

    def add_group(self, g: GroupInfo) -> None:
        self.manager.on_group(g, self.now)

    def add_pod(self, p: PodInfo) -> PodInfo:
        self.manager.on_pod(p, self.now)
        return p

    def finish(self, uid: str) -> None:
        p = self.cache.pods[uid]
        self.manager.on_pod(dataclasses.replace(p, phase="Succeeded"), self.now)
        self.drain()

    def delete(self, uid: str) -> None:
        self.manager.on_pod_deleted(uid, self.now)
        self.assumed.pop(uid, None)
        self.drain()

    # ----- kube-scheduler's own view ---------------------------------------------------
    def _sync_view(self) -> None:
        """Bring the view up to the manager's cache (tests also feed the manager
        directly): its nodes, the pods bound there and the ones assumed here."""
        view, nodes = self.view, self.cache.nodes
        if list(view.nodes.items()) != list(nodes.items()):
            view.set_nodes(nodes.values())
        placed: dict[str, tuple[str, Resources]] = {}
        for p in self.cache.pods.values():
            on = p.node_name if p.takes_capacity else self.assumed.get(p.uid)
            if on:
                placed[p.uid] = (on, p.requests)
        for uid, (on, req) in list(self._charged.items()):
            if placed.get(uid) != (on, req):
                view.credit(on, req)
                del self._charged[uid]
        for uid, (on, req) in placed.items():
            if uid not in self._charged:
                view.charge(on, req)
                self._charged[uid] = (on, dict(req))

    def feasible(self, p: PodInfo) -> list[str]:
        self._sync_view()
        return list(self.view.feasible(self.view.shape_of(p)))

    # ----- one scheduling cycle --------------------------------------------------------
    def schedule(self, uid: str) -> str:
        """Filter + bind one pod. Returns 'rejected', 'held', 'bound' or 'error', or
        'waiting' when the filter call would wait for the rest of a gang being created
        (the runtime asks again after the next member arrives)."""
        p = self.cache.pods[uid]
        if p.node_name or uid in self.assumed:
            return "skip"
        res = self.manager.filter(p, self.feasible(p), self.now)
        self.drain()
        if res.wait:
            return "waiting"
        if not res.nodes:
            self.last_filter[uid] = next(iter(res.unresolvable.values()), "")
            return "rejected"
        chosen = res.nodes[0]
        self.assumed[uid] = chosen
        d = self.manager.bind(p.namespace, p.name, uid, chosen, self.now)
        if d.outcome is BindOutcome.ERROR:
            self.assumed.pop(uid, None)
            self.failed_binds.append((uid, d.message))
            return "error"
        if d.outcome is BindOutcome.BOUND:
            return "bound"
        self.held.add(uid)
        self.drain()
        return "bound" if self.cache.pods[uid].node_name else "held"

    def bind_foreign(self, p: PodInfo, node_name: str) -> PodInfo:
        """A pod bound by someone else (another scheduler, or created with spec.nodeName):
        the extender only hears of it from the watch. A gang member keeps its
        schedulerName (bound before a restart, or created with spec.nodeName)."""
        bound = dataclasses.replace(
            p, node_name=node_name, phase="Running",
            scheduler_name=p.scheduler_name if p.gang else "default-scheduler")
        self.manager.on_pod(bound, self.now)
        self.drain()
        return bound

    def _overcommit(self, uid: str, node_name: str) -> str | None:
        """Whether binding `uid` to `node_name` leaves the node over-committed on any
        resource the pod requests (bound pods only: what the kubelet would admit)."""
        p = self.cache.pods[uid]
        n = self.cache.nodes.get(node_name)
        if n is None:
            return f"{p.key} bound to unknown node {node_name}"
        for r, q in p.requests.items():
            if q <= 0:
                continue
            used = q + sum(o.requests.get(r, 0) for o in self.cache.pods.values()
                           if o.takes_capacity and o.node_name == node_name and o.uid != uid)
            if used > n.allocatable.get(r, 0):
                return f"{p.key} on {node_name}: {r} {used} > {n.allocatable.get(r, 0)}"
        return None

    def _do_bind(self, uid: str, node_name: str) -> None:
        over = self._overcommit(uid, node_name)
        if over is not None:
            self.overcommits.append(over)
        self.bind_log.append((self.now, uid, node_name))
        self.held.discard(uid)
        self.assumed.pop(uid, None)
        self.manager.binding_finished(uid, node_name, None, self.now)

    def drain(self) -> None:
        while out := self.manager.take_actions():
            self.actions.extend(out)
            for a in out:
                if isinstance(a, BindPod):
                    self._do_bind(a.pod.uid, a.node)
                elif isinstance(a, RejectWaitingBind):
                    self.held.discard(a.uid)
                    self.assumed.pop(a.uid, None)
                    self.failed_binds.append((a.uid, a.message))
                elif isinstance(a, WakePods):
                    self.woken.extend((p.namespace, p.name, p.uid) for p in a.pods)

    def tick(self, seconds: float = 0.0) -> None:
        self.now += seconds
        self.manager.tick(self.now)
        self.drain()

    def run_all(self, rounds: int = 3) -> None:
        """Offer every pending pod to the scheduler, a few rounds (like re-queues)."""
        for _ in range(rounds):
            for uid in sorted(self.cache.pods, key=lambda u: self.cache.pods[u].name):
                p = self.cache.pods[uid]
                if not p.node_name and not p.terminal and uid not in self.held:
                    self.schedule(uid)

    def bound(self, group_name: str | None = None) -> list[PodInfo]:
        return [
            p for p in self.cache.pods.values()
            if p.node_name and (group_name is None or p.group == group_name)
        ]


def in_flight(binds: Binds) -> dict[str, str]:
    """Pod uid -> node of every Binding in flight (the ledger's view of binds)."""
    return dict(binds.in_flight)


FOUR_NODES = ["n0", "n1", "n2", "n3"]


def four_nodes(**config: object) -> SimScheduler:
    """The nodes `FOUR_NODES`, of the default size, and a gang manager of a 30 s timeout
    and `config`: the cluster the filter's arrival tests (the assembly wait, the arrival
    clock) ask their questions of."""
    sim = SimScheduler(Core.wire(Config(30, **config)))  # type: ignore[arg-type]
    for name in FOUR_NODES:
        sim.add_node(node(name))
    return sim

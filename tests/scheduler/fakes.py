"""Stand-ins the scheduler adapter's tests share: API servers that record or script the
Bindings they are sent, a gang manager that knows the nodes of the recorded filter request
(tests/wire), gangs made of that request's pod, and a replica's leadership. Several test
modules drive the HTTP verbs and the dispatcher the same way; the stand-ins live here so
that no test module imports another."""

from __future__ import annotations

import json
import time
from typing import Any

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert import pod_from_k8s
from extender.core.model.types import GroupInfo, NodeInfo
from extender.core.wiring import Core
from extender.kube.client import ApiError
from extender.kube.leader import Leadership
from tests.kube.leases import REF, lease
from tests.wire import sample


class RecordingKube:
    """Answers Binding POSTs like the API server would, and records them."""

    def __init__(self) -> None:
        self.bindings: list[tuple[str, str, str, str]] = []
        self.fail_with: ApiError | None = None
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.bindings.append((namespace, name, uid, node))

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self.patches.append((path, patch))


def fake_nodes(manager: GangManager, names: list[str]) -> None:
    for name in names:
        manager.on_node(NodeInfo(name, {"cpu": 8000, "memory": 32 << 30, "pods": 110,
                                   "nvidia.com/gpu": 8}, {"kubernetes.io/hostname": name}))


class ScriptedKube:
    """Answers each Binding (and eviction) with the next scripted outcome: None for
    success, or the exception to raise."""

    def __init__(self, outcomes: list[BaseException | None], node_of_pod: str = "",
                 get_pod_errors: list[BaseException] | None = None) -> None:
        self.outcomes = outcomes
        self.calls: list[tuple[str, str]] = []
        self.node_of_pod = node_of_pod
        self.get_pod_errors = get_pod_errors or []

    def _next(self, call: str, name: str) -> None:
        self.calls.append((call, name))
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome

    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None:
        self._next("bind", name)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("get_pod", name))
        if self.get_pod_errors:
            raise self.get_pod_errors.pop(0)
        return {"spec": {"nodeName": self.node_of_pod}}

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        self._next("evict", name)


GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def leadership(holder: str) -> Leadership:
    """A Leadership of "me" that has seen `holder` hold the lease (call inside a running
    loop): active when `holder` is "me_1", its own kube-scheduler, standby otherwise."""
    leader = Leadership(None, REF, "me")
    leader.observe(lease(holder, time.time()))
    return leader


def standby() -> Leadership:
    return leadership("other_1")


def sampled(config: Config | None = None) -> tuple[dict[str, Any], GangManager]:
    """The filter request sample (its pod, its node names) and a gang manager that
    knows those nodes."""
    base = sample("nodecachecapable-true.filter.request.json")
    # The bind barrier unless a test asks for the direct commit.
    manager = GangManager(Core.wire(config or Config(direct_commit=False)))
    fake_nodes(manager, base["NodeNames"])
    return base, manager


def add_gang(manager: GangManager, base: dict[str, Any], gang: str, size: int
             ) -> list[dict[str, Any]]:
    """PodGroup `gang` of `size` and every member (the sample's pod renamed), as the
    watch delivers them."""
    manager.on_group(GroupInfo("default", gang, size, uid="g1"), time.time())
    pods = [member(base, gang, i) for i in range(size)]
    for p in pods:
        manager.on_pod(pod_from_k8s(p), time.time())
    return pods


def member(base: dict[str, Any], gang: str, i: int, unschedulable: bool = False
           ) -> dict[str, Any]:
    p: dict[str, Any] = json.loads(json.dumps(base["Pod"]))
    p["metadata"].update(name=f"{gang}-{i}", uid=f"uid-{gang}-{i}")
    p["metadata"]["labels"][GROUP_LABEL] = gang
    if unschedulable:
        p["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return p

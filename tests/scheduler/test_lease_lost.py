"""Between the loss of the lease and the exit (extender/serve.py waits up to
`LOST_BINDINGS_GRACE_SECONDS` for the Bindings in flight, then closes the servers), every
background writer still runs. What it queued or was about to retry while this replica
led must not be sent then: the new leader may already be deciding otherwise. Each test
loses the lease with a write queued or due for a retry, and counts what reaches the API.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.core.model.provisioning_request import ATOMIC_CLASS, GANG_ANNOTATION
from extender.core.model.types import GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import (
    CreateRequest,
    DeleteRequest,
    EvictPods,
    GroupRef,
    PodRef,
    PodSet,
    ProtectNode,
    ProvisioningAction,
    WakePods,
)
from extender.kube.client import ApiError
from extender.kube.recorder import EventRecorder, ObjectRef, RecorderLimits
from extender.reporting.status import StatusConfig, StatusWriter
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Gates
from extender.scheduler.evictions import NOT_LEADING, EvictionConfig, Evictions
from extender.scheduler.provisioner import Provisioner
from extender.scheduler.wakeups import WakeConfig, Wakeups
from tests.kube.leases import lease
from tests.scheduler.fakes import ScriptedKube, leadership


class Lease:
    """Whether this replica leads: `active` for the writers, `lose()` to step down."""

    def __init__(self) -> None:
        self.held = True

    def active(self) -> bool:
        return self.held

    def lose(self) -> None:
        self.held = False


class LosesOnFirstCall(ScriptedKube):
    """Answers each eviction with the next scripted outcome, and the lease is lost while
    the first is on its way."""

    def __init__(self, outcomes: list[BaseException | None], lease: Lease) -> None:
        super().__init__(outcomes)
        self.lease = lease

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        self.lease.lose()
        await super().evict(namespace, name, uid)


def test_an_eviction_refused_by_a_budget_is_not_tried_again_once_the_lease_is_lost() -> None:
    lease = Lease()
    kube = LosesOnFirstCall([ApiError(429, "TooManyRequests", "budget")] * 3, lease)
    results: list[str] = []
    evictions = Evictions(kube, EvictionConfig(attempts=3, first_delay=0.001),
                          results.append, active=lease.active)

    async def go() -> None:
        evictions.add(EvictPods("ns/g", (PodRef("ns", "g-0", "u0"),), "partial"))
        await evictions.idle()

    asyncio.run(go())
    assert kube.calls == [("evict", "g-0")]
    assert results == []  # neither evicted nor refused: not tried


def test_a_victim_is_not_tried_again_once_the_lease_is_lost_and_the_core_hears_why() -> None:
    lease = Lease()
    kube = LosesOnFirstCall([ApiError(503, "ServiceUnavailable", "restarting")] * 3, lease)
    answers: list[tuple[str, str | None]] = []
    evictions = Evictions(kube, EvictionConfig(preemption_delay=0.001), active=lease.active)

    async def go() -> None:
        evictions.add(EvictPods("ns/low", (PodRef("ns", "low-0", "u0"),), "preempted",
                                preemptor="ns/high"),
                      lambda uid, error: answers.append((uid, error)))
        await evictions.idle()

    asyncio.run(go())
    assert kube.calls == [("evict", "low-0")]
    assert answers == [("u0", NOT_LEADING)]


def test_wakeups_queued_behind_the_rate_limit_are_dropped_once_the_lease_is_lost() -> None:
    lease = Lease()
    manager = GangManager()
    pods = [PodRef("ns", f"p-{i}", f"u{i}") for i in range(3)]
    for p in pods:  # pending: each may still be woken
        manager.on_pod(PodInfo(p.uid, p.namespace, p.name, {"cpu": 100},
                               scheduler_name="gang-scheduler"), 0.0)
    patched: list[str] = []

    class Patches:
        async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
            patched.append(path)
            lease.lose()  # while the first patch is on its way

    wakeups = Wakeups(manager.reads, Patches(), lambda: 100.0, WakeConfig(rate=1000.0))

    async def go() -> None:
        wakeups.add(WakePods("gang complete", tuple(pods)))
        sender = asyncio.create_task(wakeups.run(lease.active))
        await asyncio.sleep(0.1)
        sender.cancel()

    asyncio.run(go())
    assert patched == ["/api/v1/namespaces/ns/pods/p-0"]


def test_status_writes_paced_in_a_round_stop_once_the_lease_is_lost() -> None:
    """A round with a backlog (three PodGroups' statuses due at once) paces its writes;
    the lease is lost while the first is on its way, and the others are not written."""
    lease = Lease()
    manager = GangManager()
    now = time.time()
    patched: list[str] = []

    class Patches:
        async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
            patched.append(path)
            lease.lose()

    writer = StatusWriter(manager.reads, Patches(),
                          config=StatusConfig(settle=0, max_writes_per_second=1000.0))
    for name in ("a", "b", "c"):
        manager.on_group(GroupInfo("ns", name, 2, uid=f"uid-{name}", creation=now - 60), now)
        writer.observe_group({"metadata": {"namespace": "ns", "name": name,
                                           "uid": f"uid-{name}"}})

    async def go() -> None:
        loop = asyncio.create_task(writer.run(lease.active))
        await asyncio.sleep(0.2)
        loop.cancel()

    asyncio.run(go())
    assert len(patched) == 1
    assert writer.dirty == {"ns/a", "ns/b", "ns/c"}  # left for a leader's round


class Events:
    """The Event API: creates named e1, e2, ...; every patch answers 404 (the Event's TTL
    ran out). The lease is lost on the first call of kind `losing` (create or patch)."""

    def __init__(self, lease: Lease, losing: str) -> None:
        self.lease = lease
        self.losing = losing
        self.calls: list[str] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {body['message']}")
        if self.losing == "create":
            self.lease.lose()
        return {"metadata": {"name": f"e{len(self.calls)}"}}

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self.calls.append(f"patch {patch['message']}")
        if self.losing == "patch":
            self.lease.lose()
        raise ApiError(404, "NotFound", "expired")


def ref(name: str) -> ObjectRef:
    return ObjectRef("Pod", "v1", "ns", name, f"uid-{name}")


def test_events_queued_while_leading_are_dropped_once_the_lease_is_lost() -> None:
    """A big commit queues a Scheduled Event per pod (sent at the recorder's rate, in a
    background lane) and a warning: the lease is lost while the first is posted."""
    lease = Lease()
    api = Events(lease, "create")
    recorder = EventRecorder(api, limits=RecorderLimits(rate=1000.0), active=lease.active)

    async def go() -> None:
        recorder.record(ref("a"), "GangTimedOut", "first", warning=True)
        for name in ("b", "c"):
            recorder.record(ref(name), "Scheduled", f"bound {name}", background=True)
        sender = asyncio.create_task(recorder.run())
        await asyncio.sleep(0.1)
        sender.cancel()

    asyncio.run(go())
    assert api.calls == ["create first"]
    assert recorder.debug()["pending"] == recorder.debug()["background"] == 0
    assert recorder.stats.dropped == 2


def test_an_expired_event_is_not_made_again_once_the_lease_is_lost() -> None:
    """A repeat updates the Event sent before; when that Event is gone (404) a new one is
    made, unless the lease was lost while the update was on its way."""
    lease = Lease()
    api = Events(lease, "patch")
    recorder = EventRecorder(api, active=lease.active)

    async def go() -> None:
        recorder.record(ref("a"), "GangWaiting", "first")
        await recorder.flush()
        recorder.record(ref("a"), "GangWaiting", "again")
        await recorder.flush()

    asyncio.run(go())
    assert api.calls == ["create first", "patch again"]
    assert recorder.stats.dropped == 1


class Provisioning:
    """The API server's side for the provisioner: members and our objects are there
    (read back carrying our marker for the gang); each write is recorded and the lease
    lost with the `losing`-th; a create of the ProvisioningRequest is answered 403 when
    `refused`."""

    def __init__(self, lease: Lease, losing: int, refused: bool = False) -> None:
        self.lease = lease
        self.losing = losing
        self.refused = refused
        self.writes: list[str] = []

    def _write(self, verb: str, path: str) -> None:
        self.writes.append(f"{verb} {path.rsplit('/', 1)[1]}")
        if len(self.writes) == self.losing:
            self.lease.lose()

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {"metadata": {"name": name}, "spec": {}}

    async def get(self, path: str) -> dict[str, Any] | None:
        return {"metadata": {"uid": "uid-t", "annotations": {GANG_ANNOTATION: "ns/train"}}}

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._write("create", f"{path}/{name}")
        if self.refused and body["kind"] == "ProvisioningRequest":
            raise ApiError(403, "Forbidden", "no")
        return {"metadata": {"name": name, "uid": f"uid-{name}"}}

    async def delete(self, path: str, uid: str = "") -> None:
        self._write("delete", path)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self._write("patch", path)


TRAIN = [PodRef("ns", "train-0", "u0"), PodRef("ns", "train-3", "u3")]
CREATE = CreateRequest(GroupRef("ns", "train", "uid-train"), "ns/train", "cap",
                       ATOMIC_CLASS, (PodSet(TRAIN[0], 3), PodSet(TRAIN[1], 1)),
                       tuple(TRAIN))
# Each action, whether its request's create is refused, and every write it makes when
# the lease holds throughout.
SCENARIOS: list[tuple[str, ProvisioningAction, bool, list[str]]] = [
    ("create", CREATE, False,
     ["create cap-0", "create cap-1", "create cap", "patch train-0", "patch train-3"]),
    ("create-refused", CREATE, True,  # then the PodTemplates it made are deleted again
     ["create cap-0", "create cap-1", "create cap", "delete cap-0", "delete cap-1"]),
    ("delete", DeleteRequest("ns", "cap", ("cap-0", "cap-1"), "gang deleted", "uid-cap",
                             "ns/train"),
     False, ["delete cap", "delete cap-0", "delete cap-1"]),
]


@pytest.mark.parametrize(("action", "refused", "writes", "losing"), [
    pytest.param(action, refused, writes, losing, id=f"{name}-lost-at-{losing}")
    for name, action, refused, writes in SCENARIOS for losing in range(1, len(writes) + 1)])
def test_a_provisioning_action_under_way_sends_no_write_once_the_lease_is_lost(
        action: ProvisioningAction, refused: bool, writes: list[str], losing: int) -> None:
    lease = Lease()
    kube = Provisioning(lease, losing, refused)
    provisioner = Provisioner(GangManager(), kube, clock=lambda: 0.0, active=lease.active)
    asyncio.run(provisioner.do(action))
    assert kube.writes == writes[:losing]


def test_provisioning_actions_queued_while_leading_are_dropped_once_the_lease_is_lost(
        ) -> None:
    """Scale-down protection of two nodes, queued together: the lease is lost while the
    first node's annotation is on its way."""
    lease = Lease()
    kube = Provisioning(lease, losing=1)
    provisioner = Provisioner(GangManager(), kube, clock=lambda: 0.0, active=lease.active)

    async def go() -> None:
        for node in ("n0", "n1"):
            provisioner.add(ProtectNode(node, True, "ns/train"))
        worker = asyncio.create_task(provisioner.run())
        await asyncio.sleep(0.1)
        worker.cancel()

    asyncio.run(go())
    assert kube.writes == ["patch n0"]


def plain_pods(names: list[str]) -> GangManager:
    """A gang manager that knows node n0 and pending plain pods of ours, `names`."""
    manager = GangManager()
    manager.on_node(NodeInfo("n0", {"cpu": 8000, "pods": 10}))
    for name in names:
        manager.on_pod(PodInfo(f"uid-{name}", "ns", name, {"cpu": 1000, "pods": 1},
                               scheduler_name="gang-scheduler"), 0.0)
    return manager


@pytest.mark.parametrize("second", ["retry", "queued"])
def test_no_binding_try_is_sent_once_the_lease_is_lost(second: str) -> None:
    """Each try of a Binding is decided when it is sent (`BindingCycle._post_due`): the
    retry after a 503, or a post that waited for a slot behind another, comes after the
    lease was lost while the first try was on its way, and is not sent. (A held Binding:
    tests/scheduler/test_post_decided_when_sent.py.)"""
    names = ["p"] if second == "retry" else ["p", "q"]
    manager = plain_pods(names)

    async def go() -> tuple[list[tuple[str, str]], list[str | None]]:
        leader = leadership("me_1")

        class Losing(ScriptedKube):
            async def bind(self, namespace: str, name: str, uid: str, node: str,
                           decided_at: float | None = None) -> None:
                leader.observe(lease("other_1", time.time()))
                await asyncio.sleep(0.01)  # the other post waits for the only slot
                await super().bind(namespace, name, uid, node)

        kube = Losing([ApiError(503, "ServiceUnavailable", "restarting")] * 2)
        dispatcher = Dispatcher(manager, kube, DispatchConfig(binding_concurrency=1),
                                clock=lambda: 0.0, gates=Gates(leader=leader))
        answers = await asyncio.gather(*(dispatcher.bindings.bind("ns", n, f"uid-{n}", "n0")
                                         for n in names))
        return kube.calls, list(answers)

    calls, answers = asyncio.run(go())
    assert [c for c in calls if c[0] == "bind"] == [("bind", "p")]
    assert all(a is not None and "is on standby" in a for a in answers)

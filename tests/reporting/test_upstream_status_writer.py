"""Conditions on upstream PodGroups (scheduling.k8s.io) whose members name this scheduler,
through the status writer (`reporting/status.py`, `reporting/upstream.py`), against a
recording stand-in for the API: what is patched, where, how, how often, and never on a
group whose pods name another scheduler."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.phase import rfc3339
from extender.core.model.types import WAITING_FOR_CAPACITY, WORKLOAD_API, Membership
from extender.core.model.vocabulary import GroupRef, PodRef, Preempting, Report, Victim
from extender.core.wiring import Core
from extender.kube.client import ApiError
from extender.kube.informer import Kind
from extender.kube.recorder import EventRecorder
from extender.reporting.events import GangEvents
from extender.reporting.kinds import source_kinds
from extender.reporting.metrics import Metrics
from extender.reporting.status import StatusConfig, StatusWriter
from tests.core.sim import node, pod
from tests.reporting.status_env import Api, Clock, Env, Sim, conds, writes

BETA = "scheduling.k8s.io/v1beta1"
ALPHA = "scheduling.k8s.io/v1alpha2"


def make(nodes: int = 1) -> tuple[Env, Api]:
    core = Core.wire(Config(default_timeout_seconds=10, backoff=BackoffPolicy(2, 8)))
    manager = GangManager(core)
    api, clock, metrics = Api(), Clock(), Metrics()
    recorder = EventRecorder(api, clock)
    events = GangEvents(recorder, manager.reads)
    writer = StatusWriter(manager.reads, api, clock, StatusConfig(min_interval=1.0, settle=0.0),
                          events=events)

    def forward(report: Report) -> None:
        events.on_report(report)
        writer.on_report(report)

    sim = Sim(core, forward)
    for i in range(nodes):
        sim.add_node(node(f"n{i}", cpu=2000))
    return Env(core, manager, api, clock, writer, recorder, metrics, sim), api


# (env, kind, key) of every group added: deleted through its kind after the test, which
# forgets the version it was read in (kube/source_kinds.py keeps it for the process).
_added: list[tuple[Env, Kind, str]] = []


@pytest.fixture(autouse=True)
def _forget_groups() -> Iterator[None]:
    yield
    while _added:
        env, kind, key = _added.pop()
        kind.delete(env.manager, key, env.clock.now)


def add_upstream(env: Env, name: str, min_count: int, version: str = BETA,
                 status: dict[str, Any] | None = None, generation: int = 1) -> None:
    """Through the informer kind the extender watches that version with."""
    (kind,) = [k for k in source_kinds(env.writer)
               if k.discover is not None and k.discover[0] == f"/apis/{version}"]
    obj: dict[str, Any] = {
        "apiVersion": version, "kind": "PodGroup",
        "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}",
                     "generation": generation, "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}
    if status is not None:
        obj["status"] = status
    kind.apply(env.manager, obj, env.clock.now)
    env.sim.drain()
    _added.append((env, kind, kind.key(obj)))


def add_member(env: Env, name: str, group: str, scheduler: str = "gang-scheduler") -> str:
    p = env.sim.add_pod(pod(name, membership=Membership(WORKLOAD_API, group),
                            scheduler_name=scheduler))
    env.sim.drain()
    env.writer.observe_pod({"metadata": {"namespace": "ns", "name": name, "uid": p.uid},
                            "spec": {"schedulerName": scheduler,
                                     "schedulingGroup": {"podGroupName": group}}})
    return p.uid


@pytest.mark.parametrize("version,type_", [(BETA, "PodGroupInitiallyScheduled"),
                                           (ALPHA, "PodGroupScheduled")])
def test_unschedulable_with_our_message_then_true_once_placed(version: str, type_: str
                                                               ) -> None:
    env, api = make(nodes=2)  # 2 cpu each, one taken: room for 2 of 3
    other = env.sim.add_pod(pod("other", cpu=2000, node_name="n1"))
    env.sim.drain()
    add_upstream(env, "up", 3, version, generation=3)
    uids = [add_member(env, f"up-{i}", "up") for i in range(3)]
    assert [env.sim.schedule(u) for u in uids] == ["rejected"] * 3
    env.step(1)
    ((path, st),) = writes(api, "up")
    assert path == f"/apis/{version}/namespaces/ns/podgroups/up/status"
    assert list(st) == ["conditions"], "only conditions: the rest of the status is not ours"
    c = conds(st)[type_]
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("False", "Unschedulable", 3)
    assert c["message"] == env.sim.status("workload-api:ns/up").message
    assert c["message"].startswith("gang workload-api:ns/up: ") and "3" in c["message"]
    assert api.patches == [], "never a JSON merge patch: it would replace the whole list"
    # Nothing changed: nothing written, even on a resync.
    env.step(60)
    assert len(writes(api, "up")) == 1
    env.sim.delete(other.uid)
    env.sim.run_all()
    assert len(env.sim.bound()) == 3
    env.step(1)
    c = conds(writes(api, "up")[-1][1])[type_]
    assert (c["status"], c["reason"]) == ("True", "Scheduled")
    assert c["message"] == "gang workload-api:ns/up: quorum of 3 bound"


def test_a_group_whose_pods_name_another_scheduler_is_never_written() -> None:
    """The in-tree scheduler's gang (GenericWorkload on): not ours, before or after its
    scheduler wrote the conditions; nor a group with one of its pods beside a quorum of
    ours, which we place (both schedulers would write there)."""
    env, api = make()
    add_upstream(env, "theirs", 2)
    for i in range(2):
        add_member(env, f"theirs-{i}", "theirs", scheduler="default-scheduler")
    env.step(60)
    add_upstream(env, "theirs", 2, status={"conditions": [
        {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available", "lastTransitionTime": "2027-01-15T08:00:00Z"}]})
    env.step(60)
    add_upstream(env, "mixed", 2)
    add_member(env, "mixed-x", "mixed", scheduler="default-scheduler")
    for i in range(2):
        add_member(env, f"mixed-{i}", "mixed")
    env.sim.run_all()
    assert {p.name for p in env.sim.bound()} == {"mixed-0", "mixed-1"}
    env.step(60)
    assert api.strategic == []
    assert env.api.events_for("theirs") == []


def test_nothing_before_the_gang_is_tried_and_nothing_rewritten_after_a_restart() -> None:
    env, api = make(nodes=1)
    add_upstream(env, "up", 3)
    uids = [add_member(env, f"up-{i}", "up") for i in range(2)]
    env.step(60)
    assert writes(api, "up") == [], "2 of 3 members: not tried yet, as in-tree says nothing"
    uids.append(add_member(env, "up-2", "up"))
    for u in uids:
        env.sim.schedule(u)
    env.step(1)
    ((_, st),) = writes(api, "up")
    # A restarted extender reads the same conditions from the API: no write.
    env2, api2 = make(nodes=1)
    add_upstream(env2, "up", 3, status=st)
    uids = [add_member(env2, f"up-{i}", "up") for i in range(3)]
    for u in uids:
        env2.sim.schedule(u)
    env2.step(1)
    env2.step(60)
    assert writes(api2, "up") == []


def test_our_preemption_is_a_disruption_target_and_errors_are_retried() -> None:
    env, api = make(nodes=2)
    add_upstream(env, "low", 2)
    uids = [add_member(env, f"low-{i}", "low") for i in range(2)]
    env.sim.run_all()
    env.step(1)
    assert conds(writes(api, "low")[-1][1])["PodGroupInitiallyScheduled"]["status"] == "True"
    msg = ("gang workload-api:ns/low (priority 0): preempted by gang ns/high (priority 10): "
           "its 2 bound member(s) are evicted; it is placed again whole when there is room")
    low = GroupRef("ns", "low", "uid-low", WORKLOAD_API)
    env.writer.on_report(Preempting(
        "gang ns/high", GroupRef("ns", "high", "g-high"), None, 10, "preempts",
        (Victim("gang workload-api:ns/low", "gang", 0, low,
                tuple(PodRef("ns", f"low-{i}", u) for i, u in enumerate(uids))),), ()))
    api.fail = ApiError(500, "InternalError", "etcd")
    env.step(1)
    assert env.writer.write_errors == 1
    api.fail = None
    for u in uids:  # evicted meanwhile: no member left
        env.sim.delete(u)
        env.writer.pod_deleted(u, None)
    env.step(3)
    dt = conds(writes(api, "low")[-1][1])["DisruptionTarget"]
    assert (dt["status"], dt["reason"], dt["message"]) == ("True", "PreemptionByScheduler", msg)
    assert "PodGroupInitiallyScheduled" not in conds(writes(api, "low")[-1][1]), \
        "True is terminal: not sent again as False"
    # The controller makes the members again; placed again, the disruption is over.
    n = len(writes(api, "low"))
    for i in range(2):
        add_member(env, f"low-new-{i}", "low")
    env.sim.run_all()
    env.step(3)
    assert len(writes(api, "low")) == n + 1
    dt = conds(writes(api, "low")[-1][1])["DisruptionTarget"]
    assert (dt["status"], dt["reason"]) == ("False", "Scheduled")


def test_the_wait_for_capacity_is_kept_in_a_condition_of_ours() -> None:
    """The starvation guard's clock, which a restarted extender reads back
    (`GroupInfo.waiting_since`; tests/core/queue/test_starvation_condition_restart.py): a
    built-in PodGroup's status would drop a `waitingForCapacitySince`, so it is our
    condition, True from when the gang's plan first failed for capacity, False once it
    is placed."""
    env, api = make(nodes=2)  # 2 cpu each, one taken: room for 2 of 3
    other = env.sim.add_pod(pod("other", cpu=2000, node_name="n1"))
    env.sim.drain()
    add_upstream(env, "up", 3)
    for i in range(3):
        add_member(env, f"up-{i}", "up")
    env.sim.run_all()
    began = env.sim.manager.reads.waiting_since("workload-api:ns/up")
    assert began is not None
    env.step(1)
    c = conds(writes(api, "up")[-1][1])[WAITING_FOR_CAPACITY]
    assert (c["status"], c["reason"]) == ("True", "WaitingForCapacity"), c
    assert c["lastTransitionTime"] == rfc3339(math.floor(began)), c
    env.sim.delete(other.uid)
    env.sim.run_all()
    env.step(3)
    c = conds(writes(api, "up")[-1][1])[WAITING_FOR_CAPACITY]
    assert (c["status"], c["reason"]) == ("False", "NotWaitingForCapacity"), c


def test_a_gang_that_becomes_the_in_tree_schedulers_is_let_go_and_comes_back() -> None:
    """Its pods made again naming the default scheduler (GenericWorkload on), which
    writes its own conditions: none of ours over them, and the gang leaves the gangs
    gauge. Made again naming us, it is ours again: our conditions written over
    kube-scheduler's, though they are the ones we set before it changed hands (laid over
    the API's, they had hidden kube-scheduler's, and nothing was written)."""
    env, api = make(nodes=1)  # 2 cpu: 3 members of 1 cpu never fit
    add_upstream(env, "up", 3)

    def remake(uids: list[str], scheduler: str) -> list[str]:
        for u in uids:
            p = env.manager.reads.pod(u)
            env.sim.delete(u)
            env.writer.pod_deleted(u, p)
        made = [add_member(env, f"up-{i}", "up", scheduler=scheduler) for i in range(3)]
        for u in made:
            env.sim.schedule(u)
        return made

    uids = remake([], "gang-scheduler")
    env.step(1)
    ((_, ours),) = writes(api, "up")
    assert conds(ours)["PodGroupInitiallyScheduled"]["reason"] == "Unschedulable"
    key = "workload-api:ns/up"
    assert [k for k in env.writer.counts() if k[2] == WORKLOAD_API]

    uids = remake(uids, "default-scheduler")
    add_upstream(env, "up", 3, status={"conditions": [
        {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available", "lastTransitionTime": "2027-01-15T08:00:00Z"}]})
    for seconds in (1, 60):
        env.step(seconds)
    assert len(writes(api, "up")) == 1, "our conditions over kube-scheduler's"
    assert env.writer.counts() == {}, "the in-tree scheduler's gang counted as ours"
    assert env.writer.groups[key].current is None

    remake(uids, "gang-scheduler")
    env.step(1)
    assert len(writes(api, "up")) == 2, "ours again: kube-scheduler's message left in place"
    c = conds(writes(api, "up")[-1][1])["PodGroupInitiallyScheduled"]
    assert c["message"] == conds(ours)["PodGroupInitiallyScheduled"]["message"]
    assert [k for k in env.writer.counts() if k[2] == WORKLOAD_API]

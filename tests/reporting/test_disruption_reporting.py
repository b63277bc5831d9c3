"""What users see of a gang disrupted whole (core/preemption/disruption.py): the
`DisruptionTarget` condition on its upstream PodGroup, written through the status writer
and read back after a restart; Events on the group and on each evicted member; metrics."""

from __future__ import annotations

import dataclasses
from typing import Any

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.convert_groups import group_from_k8s, workload_group_from_k8s
from extender.core.model.types import DISRUPT_ALL, WORKLOAD_API, Membership, Taint
from extender.core.model.vocabulary import (
    BindPod,
    EvictPods,
    GangBound,
    GangDisrupted,
    GangReserved,
    GroupRef,
    PodRef,
    RejectWaitingBind,
    Report,
    StatusChanged,
)
from extender.core.wiring import Core
from extender.kube.recorder import EventRecorder
from extender.reporting.events import GangEvents
from extender.reporting.kinds import source_kinds
from extender.reporting.metrics import Metrics
from extender.reporting.status import StatusConfig, StatusWriter
from tests.core.sim import node, pod
from tests.reporting.status_env import (
    Api,
    Captured,
    Clock,
    Env,
    Sim,
    cond,
    conds,
    last,
    make_env,
    writes,
)

BETA = "scheduling.k8s.io/v1beta1"


class Forwarding(Sim):
    """The simulator forwarding the disruption's report as the dispatcher does, and
    keeping the evictions asked for."""

    def __init__(self, core: Core, forward: Any) -> None:
        super().__init__(core, forward)
        self.evicted: list[EvictPods] = []

    def drain(self) -> None:
        while out := self.manager.take_actions():
            for a in out:
                if isinstance(a, GangDisrupted | GangReserved | GangBound | StatusChanged):
                    self.forward(a)
                elif isinstance(a, EvictPods):
                    self.evicted.append(a)
                elif isinstance(a, BindPod):
                    self._do_bind(a.pod.uid, a.node)
                elif isinstance(a, RejectWaitingBind):
                    self.held.discard(a.uid)
                    self.assumed.pop(a.uid, None)


def make() -> tuple[Env, Api, Forwarding]:
    core = Core.wire(Config(default_timeout_seconds=10, direct_commit=False))
    manager = GangManager(core)
    api, clock = Api(), Clock()
    recorder = EventRecorder(api, clock)
    events = GangEvents(recorder, manager.reads)
    writer = StatusWriter(manager.reads, api, clock, StatusConfig(min_interval=1.0, settle=0.0),
                          events=events)

    def forward(report: Report) -> None:
        events.on_report(report)
        writer.on_report(report)

    sim = Forwarding(core, forward)
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=2000))
    return Env(core, manager, api, clock, writer, recorder, Metrics(), sim), api, sim


def upstream(name: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": BETA, "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}",
                         "generation": 1, "creationTimestamp": "2027-01-15T08:00:00Z"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                     "disruptionMode": {"all": {}}},
            "status": status or {}}


def member(env: Env, name: str, group: str) -> str:
    p = env.sim.add_pod(pod(name, membership=Membership(WORKLOAD_API, group),
                            creation=env.clock.now))
    env.sim.drain()
    env.writer.observe_pod({"metadata": {"namespace": "ns", "name": name, "uid": p.uid},
                            "spec": {"schedulerName": "gang-scheduler",
                                     "schedulingGroup": {"podGroupName": group}}})
    return p.uid


def test_the_group_is_a_disruption_target_until_placed_again_and_a_restart_reads_it(
        ) -> None:
    env, api, sim = make()
    (kind,) = [k for k in source_kinds(env.writer)
               if k.discover is not None and k.discover[0] == f"/apis/{BETA}"]
    kind.apply(env.manager, upstream("train"), env.clock.now)
    try:
        uids = [member(env, f"train-{i}", "train") for i in range(3)]
        sim.run_all()
        env.step(1)
        assert conds(writes(api, "train")[-1][1])["PodGroupInitiallyScheduled"]["status"] \
            == "True"
        lost_at = env.clock.now
        sim.delete(uids[0])
        env.writer.pod_deleted(uids[0], None)
        [ev] = sim.evicted
        assert {p.uid for p in ev.pods} == set(uids[1:])
        env.step(1)
        dt = conds(writes(api, "train")[-1][1])["DisruptionTarget"]
        assert (dt["status"], dt["reason"]) == ("True", "MemberDisrupted")
        assert dt["message"].startswith(
            "gang workload-api:ns/train: member ns/train-0 was deleted"), dt
        # What a restarted extender reads back: when it was disrupted.
        back = workload_group_from_k8s(upstream("train", writes(api, "train")[-1][1]))
        assert back.disrupted_since == int(lost_at)
        for u in uids[1:]:  # the Eviction API let them go
            sim.delete(u)
            env.writer.pod_deleted(u, None)
        env.step(3)
        assert conds(writes(api, "train")[-1][1])["DisruptionTarget"]["status"] == "True"
        # The owner makes the members again; placed again whole, the disruption is over.
        for i in range(3):
            member(env, f"train-new-{i}", "train")
        sim.run_all()
        env.step(3)
        dt = conds(writes(api, "train")[-1][1])["DisruptionTarget"]
        assert (dt["status"], dt["reason"]) == ("False", "Scheduled")
        assert len(sim.evicted) == 1
    finally:
        kind.delete(env.manager, kind.key(upstream("train")), env.clock.now)


def test_members_still_terminating_keep_the_group_a_disruption_target() -> None:
    """Lost with its node: every member is evicted, and while they terminate they still
    run; the condition must not read that as the gang placed again."""
    env, api, sim = make()
    (kind,) = [k for k in source_kinds(env.writer)
               if k.discover is not None and k.discover[0] == f"/apis/{BETA}"]
    kind.apply(env.manager, upstream("train"), env.clock.now)
    try:
        uids = [member(env, f"train-{i}", "train") for i in range(3)]
        sim.run_all()
        for u in uids:
            env.manager.on_pod(dataclasses.replace(env.core.cache.pods[u], phase="Running"),
                               env.clock.now)
        env.step(1)
        lost = env.core.cache.nodes[env.core.cache.pods[uids[0]].node_name]
        env.manager.on_node(dataclasses.replace(lost, taints=(
            Taint("node.kubernetes.io/not-ready", "", "NoExecute"),)))
        sim.tick(1)
        [ev] = sim.evicted
        assert {p.uid for p in ev.pods} == set(uids)
        for u in uids:
            env.manager.on_pod(dataclasses.replace(env.core.cache.pods[u], deleting=True),
                               env.clock.now)
        sim.drain()
        for _ in range(3):  # each pod event marks the group, as the pod watch does
            env.writer.group_changed("workload-api:ns/train")
            env.step(3)
        dt = conds(writes(api, "train")[-1][1])["DisruptionTarget"]
        assert (dt["status"], dt["reason"]) == ("True", "MemberDisrupted")
        assert "which is not ready" in dt["message"]
    finally:
        kind.delete(env.manager, kind.key(upstream("train")), env.clock.now)


GROUP = GroupRef("ns", "train", "g-train")
REPORT = GangDisrupted(GROUP, "gang ns/train: member ns/train-0 was deleted, ...",
                       (PodRef("ns", "train-0", "u0"),),
                       (PodRef("ns", "train-1", "u1"), PodRef("ns", "train-2", "u2")), 1.0)


def test_events_on_the_group_and_on_every_evicted_member() -> None:
    rec = Captured()
    GangEvents(rec).on_report(REPORT)
    seen = {(obj, reason): (msg, warn) for obj, reason, msg, warn in rec.seen}
    assert seen[("PodGroup ns/train", "Disrupted")] == (REPORT.message, True)
    for name in ("train-1", "train-2"):
        msg, warn = seen[(f"Pod ns/{name}", "Disrupted")]
        assert warn and msg == ("evicted: gang ns/train lost ns/train-0 after it had "
                                "started, and its disruption mode is all")
    assert ("Pod ns/train-0", "Disrupted") not in seen


def test_disruption_metrics() -> None:
    m = Metrics()
    m.on_report(REPORT)
    # Carried over a restart: its pods count, the disruption was counted before.
    m.on_report(GangDisrupted(GROUP, "carried on", (), (PodRef("ns", "train-3", "u3"),), 1.0))
    value = m.registry.get_sample_value
    assert value("gang_extender_gang_disruptions_total", {"source": "scheduler-plugins"}) == 1
    assert value("gang_extender_disrupted_pods_total") == 3
    assert value("gang_extender_gang_transitions_total",
                 {"reason": "Disrupted", "source": "scheduler-plugins"}) == 2


def test_a_scheduler_plugins_podgroup_is_a_disruption_target_until_placed_again() -> None:
    env = make_env()
    sim = env.sim = Forwarding(env.core, env.sim.forward)
    env.add_group("train", 2, disruption_mode=DISRUPT_ALL)
    uids = [env.add_pod(f"train-{i}", "train") for i in range(2)]
    sim.run_all()
    env.step(1)
    env.sim.delete(uids[0])
    env.writer.pod_deleted(uids[0], None)
    [ev] = sim.evicted
    env.step(2)
    dt = cond(last(env, "train"), "DisruptionTarget")
    assert (dt["status"], dt["reason"]) == ("True", "MemberDisrupted")
    assert dt["message"].startswith("gang ns/train: member ns/train-0 was deleted"), dt
    back = group_from_k8s({"metadata": {"name": "train", "namespace": "ns"},
                           "spec": {"minMember": 2}, "status": last(env, "train")})
    assert back.disrupted_since > 0
    env.sim.delete(uids[1])  # the Eviction API let it go
    env.writer.pod_deleted(uids[1], None)
    env.step(2)
    assert cond(last(env, "train"), "DisruptionTarget")["status"] == "True"
    for i in range(2):
        env.add_pod(f"train-new-{i}", "train")
    sim.run_all()
    env.step(2)
    dt = cond(last(env, "train"), "DisruptionTarget")
    assert (dt["status"], dt["reason"]) == ("False", "Scheduled")
    assert len(sim.evicted) == 1 and ev.pods[0].uid == uids[1]

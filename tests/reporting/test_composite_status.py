"""A CompositePodGroup's own conditions (`reporting/composite_status.py`): Unschedulable
while its children wait, `CompositePodGroupInitiallyScheduled` True once minGroupCount
of them are placed, and `DisruptionTarget` when it is disrupted whole (its disruption
mode all); its children get theirs as any upstream PodGroup; and the Events the evicted
pods get name the composite."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import pytest

from extender.core.model.phase import rfc3339
from extender.core.model.types import WORKLOAD_API, Membership
from extender.core.model.vocabulary import (
    GANG,
    RESERVATION,
    GangDisrupted,
    GroupRef,
    PodRef,
    Preempting,
    Report,
    StatusChanged,
    Victim,
)
from extender.kube.informer import Kind
from extender.kube.recorder import EventRecorder, ObjectRef
from extender.reporting.events import GangEvents
from extender.reporting.kinds import source_kinds
from extender.reporting.status import StatusConfig, StatusWriter
from tests.core.sim import SimScheduler, node, pod

BETA, ALPHA3 = "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"


class Api:
    """Takes strategic merge patches (the only kind the conditions are written with)."""

    def __init__(self) -> None:
        self.strategic: list[tuple[str, dict[str, Any]]] = []

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        raise AssertionError(f"a merge patch of {path} would replace the conditions")

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> None:
        self.strategic.append((path, patch))

    def conditions(self, path_part: str) -> dict[str, dict[str, Any]]:
        """The conditions as the API would hold them after every patch to `path_part`."""
        out: dict[str, dict[str, Any]] = {}
        for path, p in self.strategic:
            if path_part in path:
                out.update((c["type"], c) for c in p["status"]["conditions"])
        return out


class Recorded(EventRecorder):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []  # (object name, reason, message)

    def record(self, ref: ObjectRef, reason: str, message: str, warning: bool = False,
               background: bool = False) -> None:
        self.seen.append((ref.name, reason, message))


class World:
    def __init__(self, nodes: int, mode: str) -> None:
        self.sim = SimScheduler()
        self.api = Api()
        self.now = 1_800_000_000.0
        self.sim.now = self.now
        self.writer = StatusWriter(self.sim.manager.reads, self.api, lambda: self.now,
                                   StatusConfig(min_interval=1.0, settle=0.0))
        self.recorder = Recorded()
        self.events = GangEvents(self.recorder, self.sim.manager.reads)
        self.kinds = {k.discover[0]: k for k in source_kinds(self.writer)
                      if k.discover is not None}
        self.added: list[tuple[Kind, str]] = []
        for i in range(nodes):
            self.sim.add_node(node(f"n{i}", cpu=1000))
        self.mode = mode
        self.composite(generation=1)
        self.pods: dict[str, str] = {}
        for name, count in (("leader", 1), ("workers", 2)):
            self.apply(BETA, {
                "apiVersion": BETA, "kind": "PodGroup",
                "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}",
                             "generation": 1, "creationTimestamp": "2027-01-15T08:00:00Z"},
                "spec": {"parentCompositePodGroupName": "lw",
                         "workloadRef": {"workloadName": "lw", "templateName": name},
                         "schedulingPolicy": {"gang": {"minCount": count}}}})
            for i in range(count):
                self.member(f"{name}-{i}", name)

    def composite(self, generation: int) -> None:
        self.apply(ALPHA3, {
            "apiVersion": ALPHA3, "kind": "CompositePodGroup",
            "metadata": {"namespace": "ns", "name": "lw", "uid": "c-lw",
                         "generation": generation, "creationTimestamp": "2027-01-15T08:00:00Z"},
            "spec": {"workloadRef": {"workloadName": "lw", "templateName": "lw"},
                     "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                     "disruptionMode": {self.mode: {}}}})

    def apply(self, version: str, obj: dict[str, Any]) -> None:
        kind = self.kinds[f"/apis/{version}"]
        kind.apply(self.sim.manager, obj, self.now)
        self.added.append((kind, kind.key(obj)))
        self.forward()

    def member(self, name: str, group: str, scheduler: str = "gang-scheduler") -> None:
        p = self.sim.add_pod(pod(name, membership=Membership(WORKLOAD_API, group),
                                 scheduler_name=scheduler, creation=self.now - 60))
        self.pods[name] = p.uid
        self.writer.observe_pod({"metadata": {"namespace": "ns", "name": name, "uid": p.uid},
                                 "spec": {"schedulerName": scheduler,
                                          "schedulingGroup": {"podGroupName": group}}})

    def remake(self, scheduler: str) -> None:
        """Every pod deleted and made again naming `scheduler` (their owner's template
        re-pointed), with no status pass in between."""
        for name, uid in list(self.pods.items()):
            gone = self.sim.manager.reads.pod(uid)
            self.sim.delete(uid)
            self.writer.pod_deleted(uid, gone)
            self.member(name, name.rsplit("-", 1)[0], scheduler)

    def forward(self) -> None:
        """The gang manager's reports to the writer and the Events, as the dispatcher
        hands them on."""
        self.sim.drain()
        for a in self.sim.actions:
            if isinstance(a, StatusChanged | GangDisrupted):
                report: Report = a
                self.writer.on_report(report)
                self.events.on_report(report)
        self.sim.actions.clear()

    def step(self, seconds: float = 1.0) -> None:
        self.forward()
        for _ in range(2):  # a child's status marks its composite for the next round
            self.now += seconds
            self.sim.now = self.now
            asyncio.run(self.writer.step())


_worlds: list[World] = []


@pytest.fixture(autouse=True)
def _forget_groups() -> Iterator[None]:
    """The kinds remember each group's version for the process: forgotten after."""
    yield
    while _worlds:
        w = _worlds.pop()
        for kind, key in reversed(w.added):
            kind.delete(w.sim.manager, key, w.now)


def world(nodes: int = 3, mode: str = "all") -> World:
    w = World(nodes, mode)
    _worlds.append(w)
    return w


COMPOSITE = "/compositepodgroups/lw/status"
TYPE = "CompositePodGroupInitiallyScheduled"


def test_unschedulable_while_the_children_wait_then_scheduled_once_placed() -> None:
    w = world(nodes=2)  # room for two of the three pods: neither group is placed
    w.sim.run_all()
    w.step()
    c = w.api.conditions(COMPOSITE)[TYPE]
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("False", "Unschedulable", 1)
    assert "part of CompositePodGroup ns/lw" in c["message"], c
    [path] = {p for p, _ in w.api.strategic if p.endswith(COMPOSITE)}
    assert path == f"/apis/{ALPHA3}/namespaces/ns{COMPOSITE}"
    w.sim.add_node(node("n2", cpu=1000))
    w.sim.run_all()
    w.step()
    c = w.api.conditions(COMPOSITE)[TYPE]
    assert (c["status"], c["reason"]) == ("True", "Scheduled"), c
    assert c["message"] == ("2 of its 2 groups have their quorum bound (leader, workers); "
                            "2 at least (minGroupCount)")
    for child in ("leader", "workers"):
        cc = w.api.conditions(f"/podgroups/{child}/status")["PodGroupInitiallyScheduled"]
        assert cc["status"] == "True", cc
    # Nothing changed: nothing more written.
    writes = len(w.api.strategic)
    w.step(60)
    assert len(w.api.strategic) == writes


def test_disrupted_whole_the_composite_and_its_children_are_disruption_targets() -> None:
    w = world()
    w.sim.run_all()
    w.step()
    w.sim.delete(w.pods["workers-0"])
    w.step()
    dt = w.api.conditions(COMPOSITE)["DisruptionTarget"]
    assert (dt["status"], dt["reason"]) == ("True", "MemberDisrupted"), dt
    assert dt["message"].startswith(
        "CompositePodGroup ns/lw is disrupted whole (its disruption mode is all), every "
        "child group with it: gang workload-api:ns/workers: part of CompositePodGroup "
        "ns/lw, whose disruption mode is all: member ns/workers-0 was deleted"), dt
    for child in ("leader", "workers"):
        cc = w.api.conditions(f"/podgroups/{child}/status")["DisruptionTarget"]
        assert (cc["status"], cc["reason"]) == ("True", "MemberDisrupted"), (child, cc)
    # The composite stays scheduled: the condition is terminal, as upstream's.
    assert w.api.conditions(COMPOSITE)[TYPE]["status"] == "True"
    said = {(name, msg) for name, reason, msg in w.recorder.seen if reason == "Disrupted"}
    assert ("leader-0", "evicted: CompositePodGroup ns/lw, of gang workload-api:ns/leader, "
            "lost a member after it had started, and its disruption mode is all") in said


def test_a_composite_of_mode_single_is_never_a_disruption_target() -> None:
    w = world(mode="single")
    w.sim.run_all()
    w.step()
    w.sim.delete(w.pods["workers-0"])
    w.step()
    assert "DisruptionTarget" not in w.api.conditions(COMPOSITE)
    assert "DisruptionTarget" not in w.api.conditions("/podgroups/leader/status")


def test_the_wait_for_capacity_is_kept_in_a_condition_of_ours() -> None:
    """The composite's starvation wait, which a restarted extender reads back
    (`CompositeInfo.waiting_since`): True from when its children's plan first failed,
    False once they are placed."""
    w = world(nodes=2)
    w.sim.run_all()
    began = w.now
    w.step()
    c = w.api.conditions(COMPOSITE)["gang-extender.x-k8s.io/WaitingForCapacity"]
    assert (c["status"], c["reason"]) == ("True", "WaitingForCapacity"), c
    assert c["lastTransitionTime"] == rfc3339(math.floor(began)), c
    w.sim.add_node(node("n2", cpu=1000))
    w.sim.run_all()
    w.step()
    c = w.api.conditions(COMPOSITE)["gang-extender.x-k8s.io/WaitingForCapacity"]
    assert (c["status"], c["reason"]) == ("False", "NotWaitingForCapacity"), c


def test_preempted_the_composite_is_a_disruption_target_of_its_own() -> None:
    """Our preemption evicts a composite with a gang policy as one victim, every child's
    bound members (core/preemption/victims.py): upstream makes the composite a
    `DisruptionTarget` (PreemptionByScheduler) as it makes each child, and so does the
    writer, whatever the composite's disruption mode; False once it is placed again."""
    w = world(mode="single")
    w.sim.run_all()
    w.step()
    victims = tuple(
        Victim(f"gang workload-api:ns/{child} (of CompositePodGroup ns/lw)", GANG, 0,
               GroupRef("ns", child, f"uid-{child}", WORKLOAD_API),
               tuple(PodRef("ns", n, u) for n, u in w.pods.items() if n.startswith(child)))
        for child in ("leader", "workers"))
    w.writer.on_report(Preempting("gang ns/high", GroupRef("ns", "high", "g-high"), None, 10,
                                  "preempts", victims, ()))
    for uid in list(w.pods.values()):  # evicted
        w.sim.delete(uid)
        w.writer.pod_deleted(uid, None)
    w.step()
    dt = w.api.conditions(COMPOSITE)["DisruptionTarget"]
    assert (dt["status"], dt["reason"]) == ("True", "PreemptionByScheduler"), dt
    assert dt["message"] == (
        "CompositePodGroup ns/lw (priority 0): preempted by gang ns/high (priority 10) with "
        "every child group: their 3 bound member(s) are evicted; it is placed again whole "
        "when there is room")
    for child in ("leader", "workers"):
        cc = w.api.conditions(f"/podgroups/{child}/status")["DisruptionTarget"]
        assert (cc["status"], cc["reason"]) == ("True", "PreemptionByScheduler"), (child, cc)
    for name, count in (("leader", 1), ("workers", 2)):  # made again by their owner
        for i in range(count):
            w.member(f"{name}-new-{i}", name)
    w.sim.run_all()
    w.step()
    dt = w.api.conditions(COMPOSITE)["DisruptionTarget"]
    assert (dt["status"], dt["reason"]) == ("False", "Scheduled"), dt


def test_a_composite_whose_children_were_only_released_is_not_disrupted() -> None:
    """Reservations released, nothing of it evicted: as for a child, no DisruptionTarget;
    its scheduling condition says why it waits."""
    w = world(mode="single")
    w.sim.run_all()
    w.step()
    victims = tuple(
        Victim(f"reservation of gang workload-api:ns/{child} (of CompositePodGroup ns/lw)",
               RESERVATION, 0, GroupRef("ns", child, f"uid-{child}", WORKLOAD_API), ())
        for child in ("leader", "workers"))
    w.writer.on_report(Preempting("gang ns/high", GroupRef("ns", "high", "g-high"), None, 10,
                                  "preempts", victims, ()))
    w.step()
    assert "DisruptionTarget" not in w.api.conditions(COMPOSITE)


def test_a_composite_whose_children_become_the_in_tree_schedulers_is_let_go() -> None:
    """Its pods made again naming the default scheduler: the composite is that
    scheduler's, as its children are, and nothing of ours is written there, even when
    its generation moves (before, our WaitingForCapacity was set again with the new
    observedGeneration, because we had written the composite once). Made again naming
    us, it is ours again."""
    w = world(nodes=2)  # room for two of the three pods: neither group is placed
    w.sim.run_all()
    w.step()
    assert w.api.conditions(COMPOSITE)[TYPE]["reason"] == "Unschedulable"
    n = len(w.api.strategic)
    w.remake("default-scheduler")
    w.sim.run_all()
    w.step()
    w.composite(generation=2)  # its spec edited: kube-scheduler's to look at now
    w.step(60)
    assert w.api.strategic[n:] == []
    w.remake("gang-scheduler")
    w.sim.run_all()
    w.step()
    c = w.api.conditions(COMPOSITE)[TYPE]
    assert (c["reason"], c["observedGeneration"]) == ("Unschedulable", 2), c

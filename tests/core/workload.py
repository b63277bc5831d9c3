"""A clock-driven workload on the plain-data scheduler (`tests/core/sim.py`): gangs and
plain pods that arrive at given times, run for given times and finish, with the gang
manager ticked and kube-scheduler retrying every pending pod each step. For the
starvation and preemption tests, which are about time: waits, bounds, idle capacity.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from extender.core.model.types import CompositeInfo, PodInfo
from extender.core.model.vocabulary import EvictPods
from tests.core.sim import SimScheduler, group, pod


@dataclass
class Job:
    """A gang (`min_member` members, PodGroup `name`) or, with `plain`, one plain pod."""

    name: str
    at: float  # seconds after the start
    run: float  # seconds each member runs once bound
    cpu: int = 1000
    members: int = 1
    min_member: int | None = None
    priority: int = 0
    never: bool = False  # preemptionPolicy: Never
    plain: bool = False
    required: str = ""  # the PodGroup's topology-required key (docs/topology.md)
    selector: dict[str, str] = field(default_factory=dict)  # the members' nodeSelector
    gpu: int = 0
    uids: list[str] = field(default_factory=list)
    parent: str = ""  # the key of the CompositePodGroup its PodGroup is a child of


class Driver:
    """Steps time by `dt`; each step: pods whose run is over finish, jobs due arrive,
    the manager ticks (its pass runs), every pending pod is offered to the scheduler
    once, and the evictions it asks for are carried out (the victims are deleted)."""

    def __init__(self, sim: SimScheduler, jobs: list[Job], dt: float = 0.1) -> None:
        self.sim = sim
        self.jobs = sorted(jobs, key=lambda j: j.at)
        self.dt = dt
        self.start = sim.now
        self.finish_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}  # pod uid -> when it was bound
        self.job_of: dict[str, Job] = {}
        self.evicted: list[EvictPods] = []
        self.evict_refused: set[str] = set()  # uids whose eviction the "API" refuses
        self.refuse_once = False  # each uid in `evict_refused` is refused once only
        # Evicted pods are deleted at once; False: they stay terminating (`leave`).
        self.leave_now = True
        self._arrived = 0
        self._seen_actions = 0

    @property
    def t(self) -> float:
        return self.sim.now - self.start

    def arrive(self, job: Job) -> None:
        sim = self.sim
        if not job.plain:
            sim.add_group(group(job.name, job.min_member or job.members, creation=sim.now,
                                topology_required=job.required, parent=job.parent))
        for i in range(job.members):
            p = pod(f"{job.name}-{i}", None if job.plain else job.name, cpu=job.cpu,
                    memory=1 << 20, creation=sim.now, priority=job.priority, gpu=job.gpu,
                    node_selector=dict(job.selector),
                    preemption_policy="Never" if job.never else "PreemptLowerPriority")
            sim.add_pod(p)
            job.uids.append(p.uid)
            self.job_of[p.uid] = job

    def arrive_composite(self, composite: CompositeInfo, children: list[Job]) -> None:
        """The CompositePodGroup `composite` now, then each job as a child of it (its
        PodGroup's parent), their members tracked like any job's."""
        self.sim.manager.on_group(composite, self.sim.now)
        for job in children:
            job.parent = composite.key
            self.arrive(job)

    def step(self) -> None:
        sim = self.sim
        sim.now += self.dt
        for uid, at in list(self.finish_at.items()):
            if at <= sim.now:
                del self.finish_at[uid]
                if uid in sim.cache.pods:
                    sim.finish(uid)
        while self._arrived < len(self.jobs) and self.jobs[self._arrived].at <= self.t:
            self.arrive(self.jobs[self._arrived])
            self._arrived += 1
        sim.tick()
        for uid in sorted(sim.cache.pods, key=lambda u: sim.cache.pods[u].name):
            p = sim.cache.pods.get(uid)
            if p is None or p.node_name or p.terminal or p.deleting or uid in sim.held:
                continue
            if sim.schedule(uid) == "rejected" and not p.unschedulable:
                # kube-scheduler writes PodScheduled=False; the watch brings it.
                sim.manager.on_pod(dataclasses.replace(p, unschedulable=True), sim.now)
        self._evictions()
        for uid, p in sim.cache.pods.items():
            if p.node_name and uid not in self.bound_at:
                self.bound_at[uid] = sim.now
                job = self.job_of.get(uid)
                if job is not None and not p.terminal:
                    self.finish_at[uid] = sim.now + job.run

    def _evictions(self) -> None:
        sim = self.sim
        new = sim.actions[self._seen_actions:]
        self._seen_actions = len(sim.actions)
        for a in new:
            if not isinstance(a, EvictPods):
                continue
            self.evicted.append(a)
            for ref in a.pods:
                if ref.uid in self.evict_refused:
                    if self.refuse_once:
                        self.evict_refused.discard(ref.uid)
                    if a.preemptor is not None:
                        sim.manager.eviction_answered(ref.uid, "429: disruption budget",
                                                      sim.now)
                    continue
                p = sim.cache.pods.get(ref.uid)
                if p is not None:
                    if a.preemptor is not None:
                        sim.manager.eviction_answered(ref.uid, None, sim.now)
                    sim.manager.on_pod(dataclasses.replace(p, deleting=True), sim.now)
                    if self.leave_now:
                        sim.delete(ref.uid)
                    self.finish_at.pop(ref.uid, None)
        sim.drain()

    def leave(self) -> None:
        """Every pod being deleted is gone (their grace period is over)."""
        for uid, p in list(self.sim.cache.pods.items()):
            if p.deleting:
                self.sim.delete(uid)

    def run(self, seconds: float) -> None:
        end = self.t + seconds
        while self.t < end - 1e-9:
            self.step()

    def run_until(self, done: object, limit: float) -> float:
        """Step until `done()` is true or `limit` seconds passed; returns the time."""
        assert callable(done)
        end = self.t + limit
        while not done() and self.t < end - 1e-9:
            self.step()
        return self.t

    def gang_bound_at(self, job: Job) -> float | None:
        """When the job's quorum was first bound, in seconds after the start."""
        times = sorted(self.bound_at[u] for u in job.uids if u in self.bound_at)
        need = job.min_member or job.members
        if len(times) < need:
            return None
        return times[need - 1] - self.start

    def pods(self, job: Job) -> list[PodInfo]:
        return [self.sim.cache.pods[u] for u in job.uids if u in self.sim.cache.pods]

"""The soak's gangs on the cluster: PodGroups and members created (in two waves),
evicted members replaced as a Job controller would, completed and impossible gangs
deleted. Apart from the draws (load.py) because this is the part that talks to the
API and follows the checker's view of each gang."""

from __future__ import annotations

import random
import time

from e2e.harness.objects import create_pod, create_podgroup
from e2e.harness.target import kube

from .check.checker import Checker
from .config import SoakConfig
from .load import GangRun, GangSpec, make_gang, priority_classes
from .names import RunNames
from .results import SoakReport
from .retry import retry

PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


class Gangs:
    """The run's gangs, drawn from the seed (`cfg.seed`: the same gangs for one seed),
    told to the checker as they are made, counted in the report. `runs` holds every
    gang made, by `ns/name`, deleted ones included."""

    def __init__(self, cfg: SoakConfig, names: RunNames, checker: Checker,
                 report: SoakReport) -> None:
        self._cfg = cfg
        self._names = names
        self._checker = checker
        self._report = report
        self._rng = random.Random(cfg.seed)  # the load thread's only
        self.runs: dict[str, GangRun] = {}

    def _create_member(self, s: GangSpec, name: str) -> None:
        names = self._names
        retry(lambda: create_pod(
            s.ns, name, cpu=s.cpu, memory=s.memory,
            scheduler_name=names.scheduler_name, pod_group=s.name,
            run_seconds=s.run_seconds,
            rendezvous=s.name if s.rendezvous else None,
            rendezvous_size=s.min_member if s.rendezvous else None,
            labels=names.node_label,
            node_selector=names.node_label, priority_class=s.priority_class,
            tolerations=[names.toleration]), f"create pod {s.ns}/{name}")
        self._report.pods_created += 1

    def _create_pods(self, run: GangRun, upto: int) -> None:
        while run.created_pods < upto:
            self._create_member(run.spec, f"{run.spec.name}-{run.created_pods}")
            run.created_pods += 1
            if run.complete_at is None and run.created_pods >= run.spec.min_member:
                run.complete_at = time.monotonic()
                run.complete_wall = time.time()

    def create(self, index: int) -> None:
        cfg, names = self._cfg, self._names
        ns = names.namespaces[index % len(names.namespaces)]
        spec = make_gang(self._rng, cfg, ns, index, priority_classes(cfg, names.run_id))
        run = GangRun(spec, time.monotonic())
        self.runs[spec.key] = run
        self._checker.register_gang(spec.key, spec.min_member, spec.timeout)
        retry(lambda: create_podgroup(ns, spec.name, spec.min_member, timeout=spec.timeout),
              f"create PodGroup {spec.key}")
        self._report.gangs_created += 1
        self._report.gangs_impossible += spec.impossible
        self._create_pods(run, spec.first_wave)
        if run.created_pods < spec.size:
            run.second_wave_at = time.monotonic() + spec.second_wave_delay

    def delete(self, run: GangRun) -> None:
        s = run.spec
        k = kube()
        self._checker.gang_deleted(s.key)
        retry(lambda: k.core.delete_collection_namespaced_pod(
            s.ns, label_selector=f"scheduling.x-k8s.io/pod-group={s.name}",
            grace_period_seconds=0, _preload_content=False), f"delete pods of {s.key}")
        retry(lambda: k.custom.delete_namespaced_custom_object(
            *PG[:2], s.ns, PG[2], s.name, _preload_content=False), f"delete PodGroup {s.key}")
        run.deleted = True

    def step(self) -> None:
        """Second waves due, evicted members replaced, completed gangs deleted."""
        now = time.monotonic()
        for run in list(self.runs.values()):
            if run.deleted:
                continue
            if run.second_wave_at is not None and now >= run.second_wave_at:
                run.second_wave_at = None
                self._create_pods(run, run.spec.size)
            if run.spec.impossible and now - run.created_at > self._cfg.impossible_lifetime:
                self.delete(run)  # it waited long enough to prove nothing binds
                continue
            # Members someone else deleted (the extender's recovery evicting a partial
            # gang) come back under new names, as a Job controller would make them.
            while run.replaced < self._checker.gang_vanished(run.spec.key):
                self._create_member(run.spec, f"{run.spec.name}-r{run.replaced}")
                run.replaced += 1
                self._report.members_replaced += 1
            if run.created_pods == run.spec.size and not run.spec.impossible:
                pods = self._checker.gang_pods(run.spec.key)
                if len(pods) == run.spec.size and all(p.phase == "Succeeded" for p in pods):
                    run.done_at = now
                    self._report.gangs_completed += 1
                    self.delete(run)

    def active(self) -> int:
        """Gangs that can fit and are not done yet (impossible ones take no turn)."""
        return sum(1 for r in self.runs.values() if not r.deleted and not r.spec.impossible)

    def settled(self) -> bool:
        """Every gang that can fit is done, or deleted."""
        return all(r.deleted or r.spec.impossible for r in self.runs.values())

    def unfinished(self) -> list[str]:
        """The gangs that could fit but are not done, with their pods' phases (the
        drain's failures)."""
        out = []
        for run in self.runs.values():
            if not run.deleted and not run.spec.impossible:
                phases: dict[str, int] = {}
                for p in self._checker.gang_pods(run.spec.key):
                    label = p.phase + ("@node" if p.node else "")
                    phases[label] = phases.get(label, 0) + 1
                out.append(f"{run.spec.key} size={run.spec.size} min={run.spec.min_member} "
                           f"cpu={run.spec.cpu} created={run.created_pods} pods={phases}")
        return out

    def delete_all(self) -> None:
        for run in self.runs.values():
            if not run.deleted:
                self.delete(run)

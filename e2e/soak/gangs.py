"""The soak's gangs on the cluster: PodGroups and members created (in two waves),
evicted members replaced as a Job controller would, completed and impossible gangs
deleted. Apart from the draws (load.py) because this is the part that talks to the
API and follows the checker's view of each gang."""

from __future__ import annotations

import time

from e2e.harness.objects import create_pod, create_podgroup
from e2e.harness.target import kube

from .load import GangRun, GangSpec, make_gang, priority_classes
from .retry import retry
from .state import SoakState

PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


class GangsMixin(SoakState):
    def _create_member(self, s: GangSpec, name: str) -> None:
        retry(lambda: create_pod(
            s.ns, name, cpu=s.cpu, memory=s.memory,
            scheduler_name=self.scheduler_name, pod_group=s.name,
            run_seconds=s.run_seconds,
            rendezvous=s.name if s.rendezvous else None,
            rendezvous_size=s.min_member if s.rendezvous else None,
            labels={"soak": self.run_id},
            node_selector={"soak": self.run_id}, priority_class=s.priority_class,
            tolerations=[self.toleration]), f"create pod {s.ns}/{name}")
        self.report.pods_created += 1

    def _create_pods(self, run: GangRun, upto: int) -> None:
        while run.created_pods < upto:
            self._create_member(run.spec, f"{run.spec.name}-{run.created_pods}")
            run.created_pods += 1
            if run.complete_at is None and run.created_pods >= run.spec.min_member:
                run.complete_at = time.monotonic()
                run.complete_wall = time.time()

    def create_gang(self, index: int) -> None:
        assert self.checker is not None
        ns = self.namespaces[index % len(self.namespaces)]
        spec = make_gang(self.rng, self.cfg, ns, index,
                         priority_classes(self.cfg, self.run_id))
        run = GangRun(spec, time.monotonic())
        self.gangs[spec.key] = run
        self.checker.register_gang(spec.key, spec.min_member, spec.timeout)
        retry(lambda: create_podgroup(ns, spec.name, spec.min_member, timeout=spec.timeout),
              f"create PodGroup {spec.key}")
        self.report.gangs_created += 1
        self.report.gangs_impossible += spec.impossible
        self._create_pods(run, spec.first_wave)
        if run.created_pods < spec.size:
            run.second_wave_at = time.monotonic() + spec.second_wave_delay

    def delete_gang(self, run: GangRun) -> None:
        s = run.spec
        k = kube()
        if self.checker is not None:
            self.checker.gang_deleted(s.key)
        retry(lambda: k.core.delete_collection_namespaced_pod(
            s.ns, label_selector=f"scheduling.x-k8s.io/pod-group={s.name}",
            grace_period_seconds=0, _preload_content=False), f"delete pods of {s.key}")
        retry(lambda: k.custom.delete_namespaced_custom_object(
            *PG[:2], s.ns, PG[2], s.name, _preload_content=False), f"delete PodGroup {s.key}")
        run.deleted = True

    def step(self) -> None:
        """Second waves due, evicted members replaced, completed gangs deleted."""
        assert self.checker is not None
        now = time.monotonic()
        for run in list(self.gangs.values()):
            if run.deleted:
                continue
            if run.second_wave_at is not None and now >= run.second_wave_at:
                run.second_wave_at = None
                self._create_pods(run, run.spec.size)
            if run.spec.impossible and now - run.created_at > self.cfg.impossible_lifetime:
                self.delete_gang(run)  # it waited long enough to prove nothing binds
                continue
            # Members someone else deleted (the extender's recovery evicting a partial
            # gang) come back under new names, as a Job controller would make them.
            while run.replaced < self.checker.gang_vanished(run.spec.key):
                self._create_member(run.spec, f"{run.spec.name}-r{run.replaced}")
                run.replaced += 1
                self.report.members_replaced += 1
            if run.created_pods == run.spec.size and not run.spec.impossible:
                pods = self.checker.gang_pods(run.spec.key)
                if len(pods) == run.spec.size and all(p.phase == "Succeeded" for p in pods):
                    run.done_at = now
                    self.report.gangs_completed += 1
                    self.delete_gang(run)

    def active(self) -> int:
        """Gangs that can fit and are not done yet (impossible ones take no turn)."""
        return sum(1 for r in self.gangs.values() if not r.deleted and not r.spec.impossible)

"""The soak: random gangs on a cluster too small for them all, with neighbours on the same
nodes, while the extender, the gang kube-scheduler, the leader replica and (once)
kube-apiserver are killed and restarted at random moments.

One run, `run_soak(cluster, SoakConfig(...))`:

1. Its own stack on the given local control plane: fake nodes labelled and tainted for
   this run (no pod of another test lands there, no soak pod goes elsewhere; the soak's
   own pods carry the toleration), one or two replicas of (extender + stock
   kube-scheduler with a profile name of its own), and a `Checker`. With two replicas
   each kube-scheduler runs in a UTS namespace of its own (`unshare --uts`) with its own
   hostname, so that their leader-election identities `<hostname>_<uuid>` differ, and
   each extender follows the Lease with `--leader-lease` / `--leader-identity`.
2. **Load** until `minutes` or `max_gangs`: at most `concurrent_gangs` gangs at a time,
   each with a random size (1-`max_size`), `minMember` <= size, per-pod requests, run
   time, rendezvous or not (a rendezvous gang's members finish only once `minMember` of
   them ran together, as a hung MPI job would), a PodGroup timeout, and members that
   may arrive in two waves, and a priority class (`priorities` of them, one more with
   preemptionPolicy Never): higher gangs preempt lower ones whole. A few gangs cannot
   fit at all (they take no turn and are deleted after `impossible_lifetime`). A gang
   whose pods all Succeeded is deleted, which makes room for the next. Members deleted
   by someone else (an eviction) are replaced, as a Job controller would.
3. **Neighbours** meanwhile, on the gangs' nodes: pods of no gang, placed by the
   default scheduler or created with `spec.nodeName` (no scheduler at all); part of the
   latter aim at a node where a gang holds capacity right now (the extender's
   `/debug/gangs`: reservations and held binds) and take most of what is free there.
4. **Chaos** meanwhile, on a timeline drawn from the seed: SIGKILL of the extender or of
   the kube-scheduler, each restarted after a short random outage; with two replicas,
   SIGKILL of the leader pair (found from the Lease's holder), restarted as the
   standby; and one SIGKILL and restart of kube-apiserver.
5. **Drain**: load, neighbours and chaos stop; every gang that can fit must be placed
   and complete; the impossible ones are deleted; the extender's debug view must become
   empty (no queue, reservation, held bind, Binding in flight, backoff or PodGroup of
   the run).

The extender's resident memory is sampled throughout (per incarnation).
Inputs are seeded; timings on a shared machine are not, so two runs with one seed
create the same gangs and chaos timeline but not the same interleavings (nor the same
neighbour sizes, which depend on what is free when each is created).
"""

from __future__ import annotations

import logging
import random
import threading
import time

from e2e.harness.cluster import ControlPlane
from e2e.harness.process import ManagedProcess
from e2e.harness.target import kube

from .chaos import ChaosMixin, chaos_timeline
from .config import SoakConfig
from .gangs import GangsMixin
from .hostile import HostileStream
from .measures import MeasuresMixin
from .neighbours import NeighboursMixin
from .results import SoakReport
from .retry import retry
from .stack import StackMixin

log = logging.getLogger("soak")


class Soak(StackMixin, GangsMixin, NeighboursMixin, ChaosMixin, MeasuresMixin):
    """One run: each job is a mixin in a module of its own over `SoakState` (state.py);
    this class runs them (load, drain, the threads) and fills the report."""

    # ----- run ---------------------------------------------------------------------------------

    def load(self, start: float, seconds: float) -> None:
        """Create gangs until the time or count budget is spent (a worker thread)."""
        try:
            index = 0
            last_log = 0.0
            while time.monotonic() - start < seconds and index < self.cfg.max_gangs:
                if self.active() < self.cfg.concurrent_gangs:
                    self.create_gang(index)
                    index += 1
                self.step()
                if time.monotonic() - last_log > 30:
                    last_log = time.monotonic()
                    log.info("load: %d gangs created, %d completed, %d active, %d neighbours, "
                             "%d violations", self.report.gangs_created,
                             self.report.gangs_completed, self.active(), len(self.neighbours),
                             len(self.checker.violations) if self.checker else 0)
                time.sleep(0.1)
        except Exception as e:
            self.report.errors.append(f"load: {e!r}"[:4000])
            log.exception("load failed")
        finally:
            self._chaos_stop.set()

    def drain(self) -> None:
        """No new gangs or neighbours, no chaos: everything that fits must finish, then
        the extender must forget everything."""
        cfg = self.cfg
        log.info("drain: %d gangs left", self.active())
        self.reap_neighbours(pending_timeout=0.0)  # unbound ones go; bound ones run out
        deadline = time.monotonic() + cfg.drain_timeout
        while time.monotonic() < deadline:
            self.supervise()
            self.step()
            if all(r.deleted or r.spec.impossible for r in self.gangs.values()):
                break
            time.sleep(0.25)
        for run in self.gangs.values():
            if not run.deleted and not run.spec.impossible:
                pods = self.checker.gang_pods(run.spec.key) if self.checker else []
                phases: dict[str, int] = {}
                for p in pods:
                    label = p.phase + ("@node" if p.node else "")
                    phases[label] = phases.get(label, 0) + 1
                self.report.unfinished.append(
                    f"{run.spec.key} size={run.spec.size} min={run.spec.min_member} "
                    f"cpu={run.spec.cpu} created={run.created_pods} pods={phases}")
        for run in self.gangs.values():
            if not run.deleted:
                self.delete_gang(run)
        self._end_hostile()
        retry(lambda: kube().core.delete_collection_namespaced_pod(
            self.aux_ns, grace_period_seconds=0, _preload_content=False), "delete neighbours")
        self.neighbours.clear()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.leftover():
            time.sleep(0.5)
        self.report.debug_leftover = self.leftover()

    def _end_hostile(self) -> None:
        """Hostile mode: none of its pods may have been bound; then they all go, so the
        extender's view can empty like after any other gang."""
        if self.hostile is None or self.checker is None:
            return
        nodes = {(p.ns, p.name): p.node for ns in self.namespaces
                 for p in self.checker.namespace_pods(ns)}
        self.hostile.check_unbound(lambda ns, name: nodes.get((ns, name)))
        self.hostile.delete_all()
        for bound in self.hostile.counts.bound:
            self.report.errors.append(f"hostile pod bound: {bound}")

    def run(self) -> SoakReport:
        """Load and neighbours in worker threads, chaos on this one: processes are
        (re)started from the main thread so they die with it (PR_SET_PDEATHSIG, see
        harness.process)."""
        cfg = self.cfg
        start = time.monotonic()
        seconds = cfg.minutes * 60
        timeline = chaos_timeline(random.Random(cfg.seed * 7919 + 1), cfg, seconds)
        rss = threading.Thread(target=self.sample_rss, daemon=True, name="soak-rss")
        lease = threading.Thread(target=self.watch_lease, daemon=True, name="soak-lease")
        try:
            self.setup()
            log.info("soak %s: %d nodes, %d replica(s), chaos timeline %s", self.run_id,
                     cfg.nodes, cfg.replicas, [(round(t), k) for t, k in timeline])
            rss.start()
            if cfg.replicas > 1:
                lease.start()
            start = time.monotonic()
            load = threading.Thread(target=self.load, args=(start, seconds), daemon=True,
                                    name="soak-load")
            neighbours = threading.Thread(target=self.neighbour_stream, args=(start, seconds),
                                          daemon=True, name="soak-neighbours")
            load.start()
            neighbours.start()
            self.probe.start()
            hostile = None
            if cfg.hostile_every > 0:
                self.hostile = HostileStream(
                    namespaces=self.namespaces, run_id=self.run_id,
                    scheduler_name=self.scheduler_name, toleration=self.toleration,
                    node_label={"soak": self.run_id}, seed=cfg.seed,
                    every=cfg.hostile_every)
                hostile = threading.Thread(
                    target=self.hostile.run, daemon=True, name="soak-hostile",
                    args=(start, seconds, self._chaos_stop, self.report.errors))
                hostile.start()
            self.chaos(timeline, start)
            load.join()
            neighbours.join()
            if hostile is not None:
                hostile.join()
            self.ensure_up()
            self.drain()
        except Exception as e:
            self.report.errors.append(repr(e)[:4000])
            log.exception("soak failed")
        finally:
            self._rss_stop.set()
            self._measures()
            if self.checker is not None:
                self.checker.stop()
                self.report.violations = [str(v) for v in self.checker.violations]
                counts = self.checker.counts()
                self.report.violation_counts = {
                    k: n for k, n in counts.items() if k not in self.checker.note_counts}
                self.report.notes = dict(self.checker.note_counts)
                self.report.note_samples = [str(v) for v in self.checker.notes]
                self.report.checker_events = self.checker.events
                self.report.checker_relists = self.checker.relists
                self.report.decided_at_seen = self.checker.decided_seen
                self.report.decided_at_missing = self.checker.decided_missing
                self.report.decided_lag_max_s = round(self.checker.decided_lag_max, 3)
                self.report.max_burst_seconds = round(self.checker.max_burst, 3)
                self.report.max_partial_seconds = round(self.checker.max_partial, 3)
            self.report.failover_seconds = self._failovers()
            self._rss_summary()
            if self.report.rss_mb_peak > cfg.max_rss_mb:
                self.report.errors.append(
                    f"extender RSS peaked at {self.report.rss_mb_peak:.0f} MiB "
                    f"(limit {cfg.max_rss_mb:.0f})")
            self.report.duration_s = round(time.monotonic() - start, 1)
        return self.report

    def logs(self) -> list[ManagedProcess]:
        return self.processes()


def run_soak(cluster: ControlPlane, cfg: SoakConfig, keep: bool = False) -> SoakReport:
    """Run one soak on `cluster` (helpers must target it: `use_cluster` or the
    `control_plane` fixture) and return its report; cleans up unless `keep`."""
    soak = Soak(cluster, cfg)
    try:
        return soak.run()
    finally:
        if not keep:
            soak.teardown()


__all__ = ["Soak", "run_soak"]

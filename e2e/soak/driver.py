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

Each job is an object of its own module, given what it uses when it is made:
`Stack` (stack.py) first, then, from what it started, `LeaseWatch` (lease.py), `Gangs`,
`Neighbours`, `Chaos` and `Measures`; `Soak` makes them, runs them on their threads
and fills the report. No part reads another's state: a part that needs to know
something (the leader, the nodes, the active extender's view) is given the object or
function that answers it.
Inputs are seeded; timings on a shared machine are not, so two runs with one seed
create the same gangs and chaos timeline but not the same interleavings (nor the same
neighbour sizes, which depend on what is free when each is created).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

from e2e.harness.cluster import ControlPlane
from e2e.harness.k8s import client

from .chaos import Chaos, chaos_timeline
from .check.checker import Checker
from .config import SoakConfig
from .gangs import Gangs
from .hostile import HostileStream, StallProbe
from .lease import LeaseWatch
from .measures import Measures
from .names import RunNames
from .neighbours import Neighbours
from .results import SoakReport
from .stack import Stack

log = logging.getLogger("soak")


@dataclass
class RunParts:
    """The jobs of a run whose stack is up, each made with what it uses."""

    checker: Checker
    leadership: LeaseWatch
    gangs: Gangs
    neighbours: Neighbours
    chaos: Chaos
    measures: Measures
    probe: StallProbe
    hostile: HostileStream | None


class Soak:
    """One run on `cluster`: its stack, then its parts (`RunParts`), run on their threads
    until the load is over, the drain, and the report."""

    def __init__(self, cluster: ControlPlane, cfg: SoakConfig) -> None:
        if cfg.replicas not in (1, 2):
            raise ValueError(f"replicas must be 1 or 2, not {cfg.replicas}")
        self.cluster = cluster
        self.cfg = cfg
        self.names = RunNames.new(cfg.seed)
        self.report = SoakReport(cfg.seed, cfg.minutes, replicas=cfg.replicas,
                                 race_window=cfg.race_window,
                                 extender_args=list(cfg.extender_args))
        self.stack = Stack(cluster, cfg, self.names)
        self.load_over = threading.Event()  # stops chaos, neighbours and hostile work
        self.run_over = threading.Event()  # stops the RSS sampler and the Lease watch

    def parts(self, checker: Checker) -> RunParts:
        """The run's jobs, once the stack is up (they are given the nodes and replicas
        it started)."""
        cfg, names, report, stack = self.cfg, self.names, self.report, self.stack
        leadership = LeaseWatch(
            stack.replicas, client.CoordinationV1Api(self.cluster.api_client()),
            names.aux_ns, report, cfg.lease_duration)
        probe = StallProbe(lambda: leadership.leader().port,
                           pid=lambda: leadership.leader().extender.pid)
        hostile = None
        if cfg.hostile_every > 0:
            hostile = HostileStream(
                namespaces=list(names.namespaces), run_id=names.run_id,
                scheduler_name=names.scheduler_name, toleration=names.toleration,
                node_label=names.node_label, seed=cfg.seed, every=cfg.hostile_every)
        return RunParts(
            checker=checker, leadership=leadership,
            gangs=Gangs(cfg, names, checker, report),
            neighbours=Neighbours(cfg, names, stack.nodes, checker, report,
                                  lambda: stack.debug(leadership.leader())),
            chaos=Chaos(cfg, self.cluster, stack, leadership, report),
            measures=Measures(cfg, report, stack.replicas, names.namespaces, probe),
            probe=probe, hostile=hostile)

    # ----- run ---------------------------------------------------------------------------------

    def load(self, p: RunParts, start: float, seconds: float) -> None:
        """Create gangs until the time or count budget is spent (a worker thread)."""
        try:
            index = 0
            last_log = 0.0
            while time.monotonic() - start < seconds and index < self.cfg.max_gangs:
                if p.gangs.active() < self.cfg.concurrent_gangs:
                    p.gangs.create(index)
                    index += 1
                p.gangs.step()
                if time.monotonic() - last_log > 30:
                    last_log = time.monotonic()
                    log.info("load: %d gangs created, %d completed, %d active, %d neighbours, "
                             "%d violations", self.report.gangs_created,
                             self.report.gangs_completed, p.gangs.active(),
                             len(p.neighbours.pods), len(p.checker.violations))
                time.sleep(0.1)
        except Exception as e:
            self.report.errors.append(f"load: {e!r}"[:4000])
            log.exception("load failed")
        finally:
            self.load_over.set()

    def drain(self, p: RunParts) -> None:
        """No new gangs or neighbours, no chaos: everything that fits must finish, then
        the extender must forget everything."""
        log.info("drain: %d gangs left", p.gangs.active())
        p.neighbours.reap(pending_timeout=0.0)  # unbound ones go; bound ones run out
        deadline = time.monotonic() + self.cfg.drain_timeout
        while time.monotonic() < deadline:
            p.chaos.supervise()
            p.gangs.step()
            if p.gangs.settled():
                break
            time.sleep(0.25)
        self.report.unfinished += p.gangs.unfinished()
        p.gangs.delete_all()
        self.end_hostile(p)
        p.neighbours.delete_all()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.stack.leftover():
            time.sleep(0.5)
        self.report.debug_leftover = self.stack.leftover()

    def end_hostile(self, p: RunParts) -> None:
        """Hostile mode: none of its pods may have been bound; then they all go, so the
        extender's view can empty like after any other gang."""
        if p.hostile is None:
            return
        nodes = {(q.ns, q.name): q.node for ns in self.names.namespaces
                 for q in p.checker.namespace_pods(ns)}
        p.hostile.check_unbound(lambda ns, name: nodes.get((ns, name)))
        p.hostile.delete_all()
        for bound in p.hostile.counts.bound:
            self.report.errors.append(f"hostile pod bound: {bound}")

    def run(self) -> SoakReport:
        """Load and neighbours in worker threads, chaos on this one: processes are
        (re)started from the main thread so they die with it (PR_SET_PDEATHSIG, see
        harness.process)."""
        cfg = self.cfg
        start = time.monotonic()
        seconds = cfg.minutes * 60
        timeline = chaos_timeline(random.Random(cfg.seed * 7919 + 1), cfg, seconds)
        p: RunParts | None = None
        try:
            p = self.parts(self.stack.setup())
            log.info("soak %s: %d nodes, %d replica(s), chaos timeline %s",
                     self.names.run_id, cfg.nodes, cfg.replicas,
                     [(round(t), k) for t, k in timeline])
            threading.Thread(target=p.measures.sample_rss, args=(self.run_over,),
                             daemon=True, name="soak-rss").start()
            if cfg.replicas > 1:
                threading.Thread(target=p.leadership.watch, args=(self.run_over,),
                                 daemon=True, name="soak-lease").start()
            start = time.monotonic()
            workers = [
                threading.Thread(target=self.load, args=(p, start, seconds), daemon=True,
                                 name="soak-load"),
                threading.Thread(target=p.neighbours.stream,
                                 args=(start, seconds, self.load_over), daemon=True,
                                 name="soak-neighbours")]
            if p.hostile is not None:
                workers.append(threading.Thread(
                    target=p.hostile.run, daemon=True, name="soak-hostile",
                    args=(start, seconds, self.load_over, self.report.errors)))
            p.probe.start()
            for w in workers:
                w.start()
            p.chaos.run(timeline, start, self.load_over)
            for w in workers:
                w.join()
            p.chaos.ensure_up()
            self.drain(p)
        except Exception as e:
            self.report.errors.append(repr(e)[:4000])
            log.exception("soak failed")
        finally:
            self.run_over.set()
            if p is not None:
                self.finish(p)
            self.report.duration_s = round(time.monotonic() - start, 1)
        return self.report

    def finish(self, p: RunParts) -> None:
        """What the run's parts measured and saw, into the report."""
        report, checker = self.report, p.checker
        p.measures.finish(p.gangs.runs.values(), checker, p.hostile)
        checker.stop()
        report.violations = [str(v) for v in checker.violations]
        counts = checker.counts()
        report.violation_counts = {
            k: n for k, n in counts.items() if k not in checker.note_counts}
        report.notes = dict(checker.note_counts)
        report.note_samples = [str(v) for v in checker.notes]
        report.checker_events = checker.events
        report.checker_relists = checker.relists
        report.decided_at_seen = checker.decided_seen
        report.decided_at_missing = checker.decided_missing
        report.decided_lag_max_s = round(checker.decided_lag_max, 3)
        report.max_burst_seconds = round(checker.max_burst, 3)
        report.max_partial_seconds = round(checker.max_partial, 3)
        report.failover_seconds = p.leadership.failovers()
        p.measures.rss_summary()

    def teardown(self) -> None:
        self.load_over.set()
        self.run_over.set()
        self.stack.teardown()


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

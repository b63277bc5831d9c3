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

import contextlib
import json
import logging
import random
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from e2e.gang import REPO, scheduler_config
from e2e.harness.cluster import ControlPlane, http_ok
from e2e.harness.fakekubelet import FakeNodes
from e2e.harness.fixtures import create_pod, create_podgroup, kube
from e2e.harness.k8s import ApiException, client
from e2e.harness.process import ManagedProcess, free_port

from .checker import Checker
from .config import SoakConfig
from .hostile import HostileStream, StallProbe, percentile
from .records import NEIGHBOUR_LABEL, Violation
from .report import SoakReport
from .retry import retry
from .starts import list_scheduled, quorum_time
from .workload import GangRun, GangSpec, Neighbour, make_gang, priority_classes

log = logging.getLogger("soak")

PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
LEASE = "gang-scheduler"
"""The replicas' leader-election Lease (in the run's `-nb` namespace, so that a run
never waits for the lease of an earlier one to expire)."""


@dataclass
class Replica:
    """One (extender + kube-scheduler) pair; `hostname` is its kube-scheduler's
    hostname, hence the prefix of its Lease holder identity, and the extender's
    `--leader-identity`."""

    index: int
    hostname: str
    port: int
    extender: ManagedProcess
    scheduler: ManagedProcess


def chaos_timeline(rng: random.Random, cfg: SoakConfig, seconds: float) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    kinds = [("extender", cfg.extender_kill_every), ("scheduler", cfg.scheduler_kill_every)]
    if cfg.replicas > 1:  # drawn last: a one-replica timeline stays what it was
        kinds.append(("leader", cfg.leader_kill_every))
    for kind, every in kinds:
        if every <= 0:
            continue
        t = rng.expovariate(1.0 / every)
        while t < seconds:
            events.append((t, kind))
            t += rng.expovariate(1.0 / every)
    for i in range(cfg.apiserver_restarts):
        lo = (i + 0.3) / cfg.apiserver_restarts
        hi = (i + 0.7) / cfg.apiserver_restarts
        events.append((seconds * rng.uniform(lo, hi), "apiserver"))
    events.sort()
    return events


def _flag(args: tuple[str, ...], name: str, default: float) -> float:
    """The value of `name` in an argv tuple (the extender's --default-timeout, which the
    checker needs for PodGroups without scheduleTimeoutSeconds)."""
    for i, a in enumerate(args[:-1]):
        if a == name:
            return float(args[i + 1])
    return default


def check_unshare() -> None:
    """replicas=2 gives each kube-scheduler a host name of its own (the harness's
    `start_scheduler(hostname=...)`, through `unshare --uts`): fail early and clearly
    where that is not allowed."""
    res = subprocess.run(["unshare", "--uts", "--", "sh", "-c",
                          'hostname soak-probe && hostname'], capture_output=True,
                         text=True, check=False, timeout=30)
    if res.returncode != 0 or res.stdout.strip() != "soak-probe":
        raise RuntimeError("replicas=2 needs `unshare --uts` (root or CAP_SYS_ADMIN): "
                           f"exit {res.returncode}: {res.stderr.strip()[:500]}")


def extender_has_leader_flags() -> bool:
    res = subprocess.run([sys.executable, "-m", "extender.cli", "serve", "--help"],
                         cwd=REPO, capture_output=True, text=True, check=False, timeout=60)
    return "--leader-lease" in res.stdout and "--leader-identity" in res.stdout


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ----- the run ----------------------------------------------------------------------------


class Soak:
    def __init__(self, cluster: ControlPlane, cfg: SoakConfig) -> None:
        if cfg.replicas not in (1, 2):
            raise ValueError(f"replicas must be 1 or 2, not {cfg.replicas}")
        self.cluster = cluster
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)  # gangs (load thread only)
        self.chaos_rng = random.Random(cfg.seed * 7919 + 2)  # outages (chaos only)
        self.run_id = f"soak-{cfg.seed}-{secrets.token_hex(2)}"
        self.scheduler_name = f"{self.run_id}-scheduler"
        self.namespaces = [f"{self.run_id}-{c}" for c in "abc"]
        self.aux_ns = f"{self.run_id}-nb"  # neighbours and the Lease
        self.report = SoakReport(cfg.seed, cfg.minutes, replicas=cfg.replicas,
                                 race_window=cfg.race_window)
        self.gangs: dict[str, GangRun] = {}
        self.nodes: list[str] = []
        self.node_api = FakeNodes(cluster.api_client())
        self.coordination = client.CoordinationV1Api(cluster.api_client())
        self.checker: Checker | None = None
        self.replicas: list[Replica] = []
        self.default_scheduler: ManagedProcess | None = None  # only if the soak started it
        self.neighbours: dict[str, Neighbour] = {}
        self._chaos_stop = threading.Event()
        self._chaos_lock = threading.Lock()
        self._rss_stop = threading.Event()
        self._rss: list[tuple[int, float, float]] = []  # (pid, t, MiB)
        self._leader: int | None = None  # index of the replica holding the Lease
        self._holder = ""
        self._dead_holders: set[str] = set()  # holder identities of killed schedulers
        self._lease_changes: list[tuple[float, str]] = []  # (monotonic, holder)
        self._leader_kills: list[tuple[float, str]] = []  # (monotonic, holder killed)
        self.hostile: HostileStream | None = None
        self.probe = StallProbe(lambda: self.leader().port,
                                pid=lambda: self.leader().extender.pid)

    @property
    def toleration(self) -> dict[str, str]:
        return {"key": "soak", "operator": "Equal", "value": self.run_id,
                "effect": "NoSchedule"}

    # ----- setup and teardown -------------------------------------------------------------

    def setup(self) -> None:
        cfg = self.cfg
        if cfg.replicas > 1:
            check_unshare()
            if cfg.leader_flags and not extender_has_leader_flags():
                raise RuntimeError(
                    "replicas=2 needs the extender's active/standby mode (serve "
                    "--leader-lease NAMESPACE/NAME --leader-identity NAME), which this "
                    "tree does not have yet")
        k = kube()
        for ns in [*self.namespaces, self.aux_ns]:
            k.core.create_namespace({"metadata": {"name": ns, "labels": {"soak": self.run_id}}},
                                    _preload_content=False)
        taint = {"key": "soak", "value": self.run_id, "effect": "NoSchedule"}
        for i in range(cfg.nodes):
            self.nodes.append(self.node_api.add_node(
                f"{self.run_id}-n{i}", cpu=str(cfg.node_cpu),
                memory=f"{cfg.node_memory_gi}Gi", labels={"soak": self.run_id},
                taints=[taint]))
        for ns in [*self.namespaces, self.aux_ns]:  # pods are refused until the SA exists
            deadline = time.monotonic() + 60
            while True:
                try:
                    k.core.read_namespaced_service_account("default", ns,
                                                           _preload_content=False)
                    break
                except ApiException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        self.create_priority_classes()
        self.checker = Checker(
            self.cluster.api_client(), cfg.partial_window,
            node_selector=f"soak={self.run_id}",
            partial_grace_factor=cfg.partial_grace_factor,
            default_timeout=_flag(cfg.extender_args, "--default-timeout", 60.0),
            gang_scheduler=self.scheduler_name, race_window=cfg.race_window).start()
        for i in range(cfg.replicas):
            self.replicas.append(self._start_replica(i))
        if cfg.neighbour_every > 0 and cfg.direct_fraction < 1:
            mine = self.cluster.processes.get("kube-scheduler")  # the session's, in pytest
            if mine is None or not mine.running():
                self.default_scheduler = self.cluster.start_default_scheduler(
                    f"{self.run_id}-default-scheduler")

    def _start_replica(self, i: int) -> Replica:
        cfg = self.cfg
        two = cfg.replicas > 1
        suffix = f"-{i}" if two else ""
        hostname = f"{self.run_id}-r{i}"
        port = free_port()
        args = [*cfg.extender_args, "--scheduler-name", self.scheduler_name]
        if two and cfg.leader_flags:
            args += ["--leader-lease", f"{self.aux_ns}/{LEASE}", "--leader-identity", hostname]
        else:
            # No lease to follow: the shipped default lease does not exist here, and an
            # extender following it would wait as a standby forever.
            args += ["--leader-lease", "off"]
        argv = [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig",
                str(self.cluster.kubeconfig), "--listen", f"127.0.0.1:{port}", *args]
        extender = self.cluster.start_process(
            argv, f"{self.run_id}-extender{suffix}", cwd=REPO,
            ready=http_ok(f"http://127.0.0.1:{port}{cfg.extender_ready_path}"),
            ready_timeout=60)
        config = scheduler_config(port)
        config["profiles"][0]["schedulerName"] = self.scheduler_name
        uts_hostname: str | None = None
        if two:
            d = cfg.lease_duration
            config["leaderElection"] = {
                "leaderElect": True, "resourceLock": "leases", "resourceName": LEASE,
                "resourceNamespace": self.aux_ns, "leaseDuration": f"{d:g}s",
                "renewDeadline": f"{round(d * 0.7, 1):g}s", "retryPeriod": "1s"}
            uts_hostname = hostname
        scheduler = self.cluster.start_scheduler(
            config, f"{self.run_id}-kube-scheduler{suffix}", hostname=uts_hostname)
        return Replica(i, hostname, port, extender, scheduler)

    def processes(self) -> list[ManagedProcess]:
        out: list[ManagedProcess] = []
        for r in self.replicas:
            out += [r.scheduler, r.extender]
        if self.default_scheduler is not None:
            out.append(self.default_scheduler)
        return out

    def create_priority_classes(self) -> None:
        sched = client.SchedulingV1Api(kube().api)
        for i, name in enumerate(priority_classes(self.cfg, self.run_id)):
            never = name.endswith("-never")
            body: dict[str, Any] = {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name, "labels": {"soak": self.run_id}},
                "value": 100 * (self.cfg.priorities if never else i + 1)}
            if never:
                body["preemptionPolicy"] = "Never"
            retry(lambda b=body: sched.create_priority_class(  # type: ignore[misc]
                b, _preload_content=False), f"create PriorityClass {name}")

    def teardown(self) -> None:
        self._chaos_stop.set()
        self._rss_stop.set()
        for p in self.processes():
            with contextlib.suppress(Exception):
                p.stop()
        k = kube()
        for ns in [*self.namespaces, self.aux_ns]:
            with contextlib.suppress(Exception):
                k.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0,
                                                        _preload_content=False)
            with contextlib.suppress(Exception):
                k.core.delete_namespace(ns, _preload_content=False)
        for n in self.nodes:
            with contextlib.suppress(Exception):
                self.node_api.delete_node(n)
        sched = client.SchedulingV1Api(k.api)
        for name in priority_classes(self.cfg, self.run_id):
            with contextlib.suppress(Exception):
                sched.delete_priority_class(name, _preload_content=False)

    # ----- gangs ---------------------------------------------------------------------------

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

    # ----- neighbours ----------------------------------------------------------------------

    def held_nodes(self) -> set[str]:
        """Nodes where a gang holds capacity right now, from the active extender's view:
        its reservations' slots and its held binds."""
        try:
            d = self.debug()
        except Exception:
            return set()
        held = {s.get("node") for r in d.get("reservations") or [] for s in r.get("slots") or []}
        held |= {b.get("node") for b in d.get("waitingBinds") or []}
        return {n for n in held if isinstance(n, str) and n in self.nodes}

    def _wait_held(self) -> list[str]:
        """Nodes a gang holds capacity on, waiting up to `target_wait` for some: holds
        come and go within seconds, and a pod aimed at one is the point."""
        deadline = time.monotonic() + self.cfg.target_wait
        while True:
            held = sorted(self.held_nodes())
            if held or time.monotonic() >= deadline or self._chaos_stop.is_set():
                return held
            time.sleep(0.2)

    def create_neighbour(self, rng: random.Random, index: int) -> None:
        """One pod of no gang on the gangs' nodes: through the default scheduler, or
        created with spec.nodeName (no scheduler, no capacity check), part of those on a
        node where a gang holds capacity, taking most of what is free there."""
        assert self.checker is not None
        cfg, nb = self.cfg, self.report.neighbours
        direct = rng.random() < cfg.direct_fraction
        cpu_m = rng.randint(*cfg.neighbour_cpu_m)
        mem_mi = rng.randint(*cfg.neighbour_memory_mi)
        run_s = round(rng.uniform(*cfg.neighbour_run_seconds), 1)
        name = f"nb{index:05d}"
        kind = "direct" if direct else "scheduled"
        labels = {"soak": self.run_id, NEIGHBOUR_LABEL: kind}
        if direct:
            held = self._wait_held() if rng.random() < cfg.direct_targeted_fraction else []
            node = rng.choice(held or self.nodes)
            free_cpu, free_mem = self.checker.node_free(node)
            if held:
                cpu_m = int(free_cpu * rng.uniform(0.5, 1.0))
            cpu_m = min(cpu_m, free_cpu) // 10 * 10
            mem_mi = min(mem_mi, free_mem >> 20)
            if cpu_m < 100 or mem_mi < 16:
                nb["direct_skipped_full"] += 1
                return
            retry(lambda: create_pod(
                self.aux_ns, name, cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi", run_seconds=run_s,
                labels=labels, tolerations=[self.toleration], spec_extra={"nodeName": node}),
                f"create neighbour {name}")
            nb["direct"] += 1
            nb["direct_at_held"] += bool(held)
        else:
            retry(lambda: create_pod(
                self.aux_ns, name, cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi", run_seconds=run_s,
                labels=labels, scheduler_name="default-scheduler",
                node_selector={"soak": self.run_id}, tolerations=[self.toleration]),
                f"create neighbour {name}")
            nb["scheduled"] += 1
        self.neighbours[name] = Neighbour(name, kind, time.monotonic(), bound=direct)

    def reap_neighbours(self, pending_timeout: float | None = None) -> None:
        """Delete neighbours that finished, and default-scheduler ones still unbound
        after `pending_timeout` (the load must not pile up pods nobody can place)."""
        assert self.checker is not None
        timeout = self.cfg.neighbour_pending_timeout if pending_timeout is None else pending_timeout
        seen = {p.name: p for p in self.checker.namespace_pods(self.aux_ns)}
        now = time.monotonic()
        for nb in list(self.neighbours.values()):
            p = seen.get(nb.name)
            if p is not None and p.node and not nb.bound:
                nb.bound = True
                self.report.neighbours["scheduled_bound"] += 1
            finished = p is not None and p.phase in ("Succeeded", "Failed")
            expired = not nb.bound and now - nb.created_at > timeout
            if not (finished or expired):
                continue
            retry(lambda nb=nb: kube().core.delete_namespaced_pod(  # type: ignore[misc]
                nb.name, self.aux_ns, grace_period_seconds=0, _preload_content=False),
                f"delete neighbour {nb.name}")
            del self.neighbours[nb.name]
            self.report.neighbours["scheduled_expired"] += expired and not finished

    def neighbour_stream(self, start: float, seconds: float) -> None:
        """Create neighbours until the load ends (a worker thread)."""
        cfg = self.cfg
        if cfg.neighbour_every <= 0:
            return
        rng = random.Random(self.cfg.seed * 7919 + 3)
        index = 0
        try:
            while not self._chaos_stop.wait(rng.expovariate(1.0 / cfg.neighbour_every)):
                if time.monotonic() - start >= seconds:
                    break
                self.reap_neighbours()
                if len(self.neighbours) < cfg.max_neighbours:
                    self.create_neighbour(rng, index)
                    index += 1
        except Exception as e:
            self.report.errors.append(f"neighbours: {e!r}"[:4000])
            log.exception("neighbours failed")

    # ----- replicas and the Lease ----------------------------------------------------------

    def leader(self) -> Replica:
        """The replica whose kube-scheduler holds the Lease (the only one with one
        replica; the first while no holder is known)."""
        i = self._leader
        return self.replicas[i if i is not None else 0]

    def _mark_dead(self, r: Replica) -> None:
        """`r`'s kube-scheduler is gone: if it held the Lease, that holder identity
        leads no more, though the Lease names it until it expires."""
        if self._leader == r.index and self._holder:
            self._dead_holders.add(self._holder)

    def _live_leader(self) -> Replica | None:
        """The leader replica, waiting (up to two lease durations) while the Lease still
        names a kube-scheduler the soak killed: killing that replica again would hit
        the restarted standby, not the leader."""
        deadline = time.monotonic() + 2 * self.cfg.lease_duration + 5
        while True:
            if self._leader is not None and self._holder not in self._dead_holders:
                return self.replicas[self._leader]
            if time.monotonic() > deadline or self._chaos_stop.wait(0.5):
                return None

    def watch_lease(self) -> None:
        """Follow the Lease's holder (a worker thread, replicas=2): who leads, and when
        the holder changed (failover times)."""
        while not self._rss_stop.wait(0.5):
            try:
                obj = json.loads(self.coordination.read_namespaced_lease(
                    LEASE, self.aux_ns, _preload_content=False, _request_timeout=3).data)
            except Exception:
                continue
            holder = str((obj.get("spec") or {}).get("holderIdentity") or "")
            host = holder.rsplit("_", 1)[0]
            self._leader = next((r.index for r in self.replicas if r.hostname == host), None)
            if holder and holder != self._holder:
                if self._holder:
                    self.report.leader_changes += 1
                log.info("lease %s: holder %s", LEASE, holder)
                self._lease_changes.append((time.monotonic(), holder))
                self._holder = holder

    def _failovers(self) -> list[float]:
        """Per leader kill: seconds until another holder took the Lease."""
        out = []
        for at, killed in self._leader_kills:
            nxt = next((t for t, h in self._lease_changes if t > at and h != killed), None)
            if nxt is not None:
                out.append(round(nxt - at, 1))
        return out

    # ----- chaos ---------------------------------------------------------------------------

    def _outage(self, procs: list[ManagedProcess], wait_ready: float) -> None:
        for p in procs:
            p.kill()
        time.sleep(self.chaos_rng.uniform(0.0, self.cfg.max_outage))
        for p in reversed(procs):
            p.ready_timeout = wait_ready
            p.start()

    def _kill(self, kind: str) -> None:
        r = self.leader()
        if kind == "extender":
            log.info("chaos: kill extender %d", r.index)
            self._outage([r.extender], 90)
            self.report.extender_kills += 1
        elif kind == "scheduler":
            log.info("chaos: kill kube-scheduler %d", r.index)
            self._mark_dead(r)
            self._outage([r.scheduler], 90)
            self.report.scheduler_kills += 1
        elif kind == "leader":
            live = self._live_leader()
            if live is None:
                log.info("chaos: no live leader, no leader kill")
                return
            r = live
            log.info("chaos: kill leader pair %d (%s)", r.index, self._holder)
            self._mark_dead(r)
            pair = [r.scheduler, r.extender]
            self.chaos_rng.shuffle(pair)  # either may die first
            self._leader_kills.append((time.monotonic(), self._holder))
            self._outage(pair, 90)
            self.report.leader_kills += 1
        elif kind == "apiserver":
            log.info("chaos: kill and restart kube-apiserver")
            self._outage([self.cluster.processes["kube-apiserver"]], 120)
            self.report.apiserver_restarts += 1

    def chaos(self, timeline: list[tuple[float, str]], t0: float) -> None:
        """Kill on the timeline until the load ends; meanwhile restart anything that
        exited by itself (a kube-scheduler that lost its Lease exits, by design)."""
        for at, kind in timeline:
            while (left := t0 + at - time.monotonic()) > 0:
                if self._chaos_stop.wait(min(left, 1.0)):
                    return
                self.supervise()
            if self._chaos_stop.is_set():
                return
            with self._chaos_lock:
                try:
                    self._kill(kind)
                except Exception as e:
                    self.report.errors.append(f"chaos {kind}: {e!r}"[:2000])
                    log.exception("chaos %s failed", kind)
        while not self._chaos_stop.wait(1.0):
            self.supervise()

    def supervise(self) -> None:
        """Restart the soak's components that exited without being killed by chaos
        (recorded in `self_exits`; with one replica such an exit is also an error)."""
        with self._chaos_lock:
            for p in self.processes():
                if p.popen is None or p.running():
                    continue
                for r in self.replicas:
                    if p is r.scheduler:
                        self._mark_dead(r)
                what = f"{p.name} (exit code {p.returncode()})"
                log.warning("%s exited by itself; restarting it", what)
                self.report.self_exits.append(what)
                if self.cfg.replicas == 1:
                    self.report.errors.append(f"{what} exited by itself")
                try:
                    p.ready_timeout = 90
                    p.start()
                except Exception as e:
                    self.report.errors.append(f"restart {p.name}: {e!r}"[:2000])

    def ensure_up(self) -> None:
        with self._chaos_lock:
            api = self.cluster.processes["kube-apiserver"]
            for p, wait in ((api, 120), *((q, 90) for q in self.processes())):
                if not p.running():
                    p.ready_timeout = wait
                    p.start()

    # ----- memory ---------------------------------------------------------------------------

    def sample_rss(self) -> None:
        t0 = time.monotonic()
        while not self._rss_stop.wait(2.0):
            for r in self.replicas:
                pid = r.extender.pid
                mb = rss_mb(pid)
                if pid is not None and mb is not None:
                    self._rss.append((pid, time.monotonic() - t0, mb))

    def _rss_summary(self) -> None:
        by_pid: dict[int, list[tuple[float, float]]] = {}
        for pid, t, mb in self._rss:
            by_pid.setdefault(pid, []).append((t, mb))
        self.report.rss_mb_peak = round(max((mb for _, _, mb in self._rss), default=0.0), 1)
        incarnations = []
        longest: list[tuple[float, float]] = []
        for samples in by_pid.values():
            secs = samples[-1][0] - samples[0][0]
            # First sample after a 20 s warm-up (imports, initial LIST) vs the last.
            warm = next((mb for t, mb in samples if t - samples[0][0] >= 20), samples[0][1])
            incarnations.append((round(secs, 1), round(warm, 1), round(samples[-1][1], 1)))
            if len(samples) > len(longest):
                longest = samples
        self.report.rss_mb_by_incarnation = sorted(incarnations, reverse=True)
        series: list[tuple[float, float]] = []
        for t, mb in longest:
            age = t - longest[0][0]
            if not series or age - series[-1][0] >= 60:
                series.append((round(age), round(mb, 1)))
        self.report.rss_mb_longest_series = series

    # ----- the extender's own view ---------------------------------------------------------------

    def debug(self, path: str = "/debug/gangs", replica: Replica | None = None) -> dict[str, Any]:
        """A debug view of `replica`'s extender (default: the leader's, the active one)."""
        r = replica or self.leader()
        url = f"http://127.0.0.1:{r.port}{path}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    def leftover(self) -> dict[str, Any]:
        """What the extenders still hold about this run: queue, reservations, held binds,
        Bindings in flight, backoffs, and PodGroups of the run's namespaces (keys
        prefixed `r<i>:` with two replicas)."""
        out: dict[str, Any] = {}
        for r in self.replicas:
            pre = f"r{r.index}:" if len(self.replicas) > 1 else ""
            try:
                d = self.debug(replica=r)
                groups = self.debug("/debug/podgroups", replica=r).get("podGroups") or []
            except Exception as e:
                out[pre + "error"] = repr(e)
                continue
            for k, v in d.items():
                if v and k in ("queue", "reservations", "waitingBinds", "bindingsInFlight",
                               "backoff"):
                    out[pre + k] = v
            mine = [g["gang"] for g in groups
                    if str(g.get("gang", "")).startswith(self.run_id)]
            if mine:
                out[pre + "podGroups"] = mine
        return out

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

    def _measures(self) -> None:
        """The stall probe's figures and the gang-start quantiles of completed gangs."""
        self.probe.stop()
        r = self.report
        r.stall_longest_s = round(self.probe.longest, 3)
        r.stall_over_250ms = self.probe.over_250ms
        r.stall_longest_cpu_s = round(self.probe.longest_cpu, 3)
        r.stall_cpu_over_250ms = self.probe.cpu_over_250ms
        r.stall_slow = self.probe.slow
        r.healthz_answered = self.probe.answered
        if self.cfg.max_stall_s and self.probe.longest_cpu > self.cfg.max_stall_s:
            r.errors.append(f"the extender used {self.probe.longest_cpu * 1000:.0f} ms of "
                            f"CPU while one /healthz answer was awaited (limit "
                            f"{self.cfg.max_stall_s * 1000:.0f})")
        if self.cfg.max_stall_wall_s and self.probe.longest > self.cfg.max_stall_wall_s:
            r.errors.append(f"/healthz took {self.probe.longest * 1000:.0f} ms "
                            f"(limit {self.cfg.max_stall_wall_s * 1000:.0f})")
        starts: list[float] = []
        if self.checker is not None:
            for run in self.gangs.values():
                g = self.checker.gangs.get(run.spec.key)
                if (run.done_at is None or run.complete_at is None or g is None
                        or g.quorum_at is None):
                    continue
                starts.append(max(0.0, self.checker.t0 + g.quorum_at - run.complete_at))
        r.gang_start_p50_s = round(percentile(starts, 0.5), 3)
        r.gang_start_p95_s = round(percentile(starts, 0.95), 3)
        r.gang_starts_s = sorted(round(s, 3) for s in starts)
        by_sched = self._starts_by_scheduler()
        r.gang_start_sched_p50_s = round(percentile(by_sched, 0.5), 3)
        r.gang_start_sched_p95_s = round(percentile(by_sched, 0.95), 3)
        r.gang_starts_sched_s = sorted(round(s, 3) for s in by_sched)
        if self.hostile is not None:
            r.hostile = self.hostile.summary()

    def _starts_by_scheduler(self) -> list[float]:
        """Gang starts of completed gangs, to kube-scheduler's Scheduled Events."""
        try:
            scheduled = list_scheduled(kube().events, self.namespaces)
        except Exception as e:  # a measure, not a check: say so and go on
            self.report.errors.append(f"listing Scheduled events: {e!r}"[:500])
            return []
        out: list[float] = []
        for run in self.gangs.values():
            if run.done_at is None or run.complete_wall is None:
                continue
            pods = [f"{run.spec.name}-{i}" for i in range(run.created_pods)]
            t = quorum_time(scheduled, run.spec.ns, pods, run.spec.min_member)
            if t is not None:
                out.append(max(0.0, t - run.complete_wall))
        return out

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


__all__ = ["GangSpec", "Soak", "SoakConfig", "SoakReport", "Violation", "chaos_timeline",
           "make_gang", "run_soak"]

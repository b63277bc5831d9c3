"""The soak: random gangs on a cluster too small for them all, while the extender, the
gang kube-scheduler and (once) kube-apiserver are killed and restarted at random moments.

One run, `run_soak(cluster, SoakConfig(...))`:

1. Its own stack on the given local control plane: fake nodes labelled and tainted for
   this run (no other pod lands there, no soak pod goes elsewhere), an extender and a
   stock kube-scheduler with a profile name of its own, and a `Checker`.
2. **Load** until `minutes` or `max_gangs`: at most `concurrent_gangs` gangs at a time,
   each with a random size (1-`max_size`), `minMember` <= size, per-pod requests, run
   time, rendezvous or not (a rendezvous gang's members finish only once `minMember` of
   them ran together, as a hung MPI job would), a PodGroup timeout, and members that
   may arrive in two waves, and a priority class (`priorities` of them, one with
   preemptionPolicy Never): higher ones preempt lower ones whole, and the soak plays
   their controller, recreating evicted members. A few gangs cannot fit at all (they
   take no turn and are deleted after `impossible_lifetime`). A gang whose pods all
   Succeeded is deleted, which makes room for the next.
3. **Chaos** meanwhile, on a timeline drawn from the seed: SIGKILL of the extender or of
   the kube-scheduler, each restarted after a short random outage, and one SIGKILL and
   restart of kube-apiserver.
4. **Drain**: load and chaos stop; every gang that can fit must be placed and complete;
   the impossible ones are deleted; the extender's debug view must become empty (no
   queue, reservation, held bind, Binding in flight, backoff or PodGroup of the run).

The extender's resident memory is sampled throughout (per incarnation).
Inputs are seeded; timings on a shared machine are not, so two runs with one seed
create the same gangs and chaos timeline but not the same interleavings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from e2e.gang import scheduler_config, start_extender
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeNodes
from e2e.harness.fixtures import create_pod, create_podgroup, kube
from e2e.harness.k8s import ApiException, client
from e2e.harness.process import ManagedProcess, free_port

from .checker import Checker, Violation

log = logging.getLogger("soak")
T = TypeVar("T")

PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


@dataclass
class SoakConfig:
    seed: int = 1
    minutes: float = 10.0
    max_gangs: int = 1_000_000
    nodes: int = 6
    node_cpu: int = 8
    node_memory_gi: int = 16
    concurrent_gangs: int = 10
    max_size: int = 32
    impossible_fraction: float = 0.04
    impossible_lifetime: float = 90.0  # seconds before an impossible gang is deleted
    # Share of gangs with minMember < size (elastic extras bind one by one after the
    # quorum); the others have minMember == size.
    elastic_fraction: float = 0.5
    # Mean seconds between kills (exponential); 0 disables that kind.
    extender_kill_every: float = 60.0
    scheduler_kill_every: float = 60.0
    apiserver_restarts: int = 1
    max_outage: float = 4.0  # a killed component stays down up to this long
    partial_window: float = 30.0
    drain_timeout: float = 600.0
    max_rss_mb: float = 400.0
    # PriorityClasses the gangs draw from (values 100, 200, ...; the highest is also made
    # once more with preemptionPolicy Never); 0: every gang at priority 0.
    priorities: int = 3
    extender_args: tuple[str, ...] = ("--default-timeout", "20", "--backoff-base", "2",
                                      "--backoff-cap", "16")


@dataclass
class GangSpec:
    ns: str
    name: str
    size: int
    min_member: int
    cpu: str
    memory: str
    run_seconds: float
    rendezvous: bool
    timeout: int | None
    first_wave: int  # members created at once; the rest after `second_wave_delay`
    second_wave_delay: float
    impossible: bool = False
    priority_class: str | None = None

    @property
    def key(self) -> str:
        return f"{self.ns}/{self.name}"


@dataclass
class GangRun:
    spec: GangSpec
    created_at: float
    created_pods: int = 0
    created_at_pod: dict[int, float] = field(default_factory=dict)
    recreated: int = 0
    second_wave_at: float | None = None
    done_at: float | None = None
    deleted: bool = False


@dataclass
class SoakReport:
    seed: int
    minutes: float
    duration_s: float = 0.0
    gangs_created: int = 0
    gangs_completed: int = 0
    gangs_impossible: int = 0
    pods_created: int = 0
    pods_recreated: int = 0  # evicted members the soak, as their controller, made again
    extender_kills: int = 0
    scheduler_kills: int = 0
    apiserver_restarts: int = 0
    checker_events: int = 0
    checker_relists: int = 0
    max_burst_seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    debug_leftover: dict[str, Any] = field(default_factory=dict)
    rss_mb_peak: float = 0.0
    rss_mb_by_incarnation: list[tuple[float, float, float]] = field(default_factory=list)
    # The longest incarnation's RSS once a minute: [seconds since it started, MiB].
    rss_mb_longest_series: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not self.violations and not self.unfinished and not self.debug_leftover
                and not self.errors and self.rss_mb_peak > 0)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "ok": self.ok}, indent=2)

    def summary(self) -> str:
        lines = [
            f"soak seed={self.seed}: {self.duration_s / 60:.1f} min, "
            f"{self.gangs_created} gangs ({self.pods_created} pods; "
            f"{self.gangs_completed} completed, {self.gangs_impossible} impossible, "
            f"{self.pods_recreated} evicted pods recreated), "
            f"kills: extender {self.extender_kills}, kube-scheduler {self.scheduler_kills}, "
            f"kube-apiserver restarts {self.apiserver_restarts}",
            f"violations: {len(self.violations)}; unfinished gangs: {len(self.unfinished)}; "
            f"debug view left: {self.debug_leftover or 'empty'}",
            f"extender RSS peak {self.rss_mb_peak:.0f} MiB; longest incarnation "
            f"{self._longest()}; max quorum burst {self.max_burst_seconds:.2f}s; "
            f"checker saw {self.checker_events} pod events, relisted {self.checker_relists}x",
        ]
        lines += [f"  {v}" for v in self.violations[:20]]
        lines += [f"  unfinished {u}" for u in self.unfinished[:20]]
        lines += [f"  error {e}" for e in self.errors[:10]]
        lines.append("RESULT: " + ("OK" if self.ok else "FAILED"))
        return "\n".join(lines)

    def _longest(self) -> str:
        if not self.rss_mb_by_incarnation:
            return "-"
        secs, first, last = max(self.rss_mb_by_incarnation)
        return f"{secs:.0f}s, {first:.0f} -> {last:.0f} MiB"


# ----- generating gangs ------------------------------------------------------------------


def _slots(cfg: SoakConfig, cpu_m: int, mem_mi: int) -> int:
    per_node = min(cfg.node_cpu * 1000 // cpu_m, cfg.node_memory_gi * 1024 // mem_mi)
    return per_node * cfg.nodes


def priority_classes(cfg: SoakConfig, run_id: str) -> list[str]:
    """The names `make_gang` draws from: `{run_id}-p1`.. and `{run_id}-never`."""
    if cfg.priorities <= 0:
        return []
    return [f"{run_id}-p{k}" for k in range(1, cfg.priorities + 1)] + [f"{run_id}-never"]


def make_gang(rng: random.Random, cfg: SoakConfig, ns: str, index: int,
              classes: list[str] | None = None) -> GangSpec:
    cpu_m = rng.choice([250, 500, 500, 1000, 1000, 2000])
    mem_mi = rng.choice([128, 256, 512, 1024])
    impossible = rng.random() < cfg.impossible_fraction
    if impossible:
        # Whole nodes' worth of pods, more of them than the cluster has nodes.
        cpu_m, mem_mi = cfg.node_cpu * 1000, 256
        size = min_member = cfg.nodes + 1 + rng.randrange(3)
    else:
        cap = min(cfg.max_size, _slots(cfg, cpu_m, mem_mi))
        size = rng.randint(1, cap)
        elastic = rng.random() < cfg.elastic_fraction
        min_member = rng.randint(1, size) if elastic else size
    first = size if rng.random() < 0.6 else rng.randint(0, size)
    klass = rng.choice(classes) if classes else None
    return GangSpec(
        ns=ns, name=f"g{index:05d}", size=size, min_member=min_member,
        cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi",
        run_seconds=round(rng.uniform(1.0, 15.0), 1),
        rendezvous=rng.random() < 0.6,
        timeout=rng.choice([None, None, 10, 20, 40]),
        first_wave=first, second_wave_delay=round(rng.uniform(0.5, 12.0), 1),
        impossible=impossible, priority_class=klass,
    )


def chaos_timeline(rng: random.Random, cfg: SoakConfig, seconds: float) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    for kind, every in (("extender", cfg.extender_kill_every),
                        ("scheduler", cfg.scheduler_kill_every)):
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


# ----- API calls that survive an API server restart -----------------------------------------


def retry(fn: Callable[[], T], what: str, timeout: float = 120.0) -> T | None:
    """Call `fn` until it succeeds; 409 AlreadyExists and 404 count as done (a retry of a
    create that went through, a delete of something gone)."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        try:
            return fn()
        except ApiException as e:
            if e.status in (404, 409):
                return None
            err: Exception = e
        except Exception as e:  # connection refused while the API server restarts
            err = e
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: still failing after {timeout:.0f}s: {err!r}")
        time.sleep(delay)
        delay = min(delay * 2, 3.0)


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
        self.cluster = cluster
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)  # gangs (load thread only)
        self.chaos_rng = random.Random(cfg.seed * 7919 + 2)  # outages (chaos only)
        self.run_id = f"soak-{cfg.seed}-{secrets.token_hex(2)}"
        self.scheduler_name = f"{self.run_id}-scheduler"
        self.namespaces = [f"{self.run_id}-{c}" for c in "abc"]
        self.report = SoakReport(cfg.seed, cfg.minutes)
        self.gangs: dict[str, GangRun] = {}
        self.nodes: list[str] = []
        self.node_api = FakeNodes(cluster.api_client())
        self.checker: Checker | None = None
        self.extender: ManagedProcess | None = None
        self.scheduler: ManagedProcess | None = None
        self.port = 0
        self._chaos_stop = threading.Event()
        self._chaos_lock = threading.Lock()
        self._rss_stop = threading.Event()
        self._rss: list[tuple[int, float, float]] = []  # (pid, t, MiB)

    # ----- setup and teardown -------------------------------------------------------------

    def setup(self) -> None:
        k = kube()
        for ns in self.namespaces:
            k.core.create_namespace({"metadata": {"name": ns, "labels": {"soak": self.run_id}}},
                                    _preload_content=False)
        taint = {"key": "soak", "value": self.run_id, "effect": "NoSchedule"}
        for i in range(self.cfg.nodes):
            self.nodes.append(self.node_api.add_node(
                f"{self.run_id}-n{i}", cpu=str(self.cfg.node_cpu),
                memory=f"{self.cfg.node_memory_gi}Gi", labels={"soak": self.run_id},
                taints=[taint]))
        for ns in self.namespaces:  # pods are refused until the default SA exists
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
        sched = client.SchedulingV1Api(k.api)
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
        self.checker = Checker(self.cluster.api_client(), self.cfg.partial_window,
                               node_selector=f"soak={self.run_id}").start()
        self.port = free_port()
        args = [*self.cfg.extender_args, "--scheduler-name", self.scheduler_name]
        self.extender = start_extender(self.cluster, self.port, args, f"{self.run_id}-extender")
        config = scheduler_config(self.port)
        config["profiles"][0]["schedulerName"] = self.scheduler_name
        self.scheduler = self.cluster.start_scheduler(config, f"{self.run_id}-kube-scheduler")

    def teardown(self) -> None:
        self._chaos_stop.set()
        self._rss_stop.set()
        for p in (self.scheduler, self.extender):
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stop()
        k = kube()
        for ns in self.namespaces:
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

    def _create_pod(self, run: GangRun, i: int) -> None:
        s = run.spec
        retry(lambda: create_pod(
            s.ns, f"{s.name}-{i}", cpu=s.cpu, memory=s.memory,
            scheduler_name=self.scheduler_name, pod_group=s.name,
            run_seconds=s.run_seconds,
            rendezvous=s.name if s.rendezvous else None,
            rendezvous_size=s.min_member if s.rendezvous else None,
            labels={"soak": self.run_id},
            node_selector={"soak": self.run_id}, priority_class=s.priority_class,
            tolerations=[{"key": "soak", "operator": "Equal", "value": self.run_id,
                          "effect": "NoSchedule"}]), f"create pod {s.key}-{i}")
        run.created_at_pod[i] = time.monotonic()

    def _create_pods(self, run: GangRun, upto: int) -> None:
        while run.created_pods < upto:
            self._create_pod(run, run.created_pods)
            run.created_pods += 1
            self.report.pods_created += 1

    def _recreate_evicted(self, run: GangRun, now: float) -> None:
        """Their controller's part: a member that vanished before its gang finished was
        evicted (a preemption, or a partial gang's eviction): make it again. Only pods
        created a while ago, so the checker's watch has seen them."""
        assert self.checker is not None
        present = {p.name for p in self.checker.gang_pods(run.spec.key)}
        for i in range(run.created_pods):
            if (f"{run.spec.name}-{i}" not in present
                    and now - run.created_at_pod.get(i, now) > 5.0):
                self._create_pod(run, i)
                run.recreated += 1
                self.report.pods_recreated += 1

    def create_gang(self, index: int) -> None:
        assert self.checker is not None
        ns = self.namespaces[index % len(self.namespaces)]
        spec = make_gang(self.rng, self.cfg, ns, index,
                         priority_classes(self.cfg, self.run_id))
        run = GangRun(spec, time.monotonic())
        self.gangs[spec.key] = run
        self.checker.register_gang(spec.key, spec.min_member)
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
        retry(lambda: k.core.delete_collection_namespaced_pod(
            s.ns, label_selector=f"scheduling.x-k8s.io/pod-group={s.name}",
            grace_period_seconds=0, _preload_content=False), f"delete pods of {s.key}")
        retry(lambda: k.custom.delete_namespaced_custom_object(
            *PG[:2], s.ns, PG[2], s.name, _preload_content=False), f"delete PodGroup {s.key}")
        run.deleted = True

    def step(self) -> None:
        """Second waves due, completed gangs deleted."""
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
            if not run.spec.impossible:
                self._recreate_evicted(run, now)
            if run.created_pods == run.spec.size and not run.spec.impossible:
                pods = self.checker.gang_pods(run.spec.key)
                if len(pods) == run.spec.size and all(p.phase == "Succeeded" for p in pods):
                    run.done_at = now
                    self.report.gangs_completed += 1
                    self.delete_gang(run)

    def active(self) -> int:
        """Gangs that can fit and are not done yet (impossible ones take no turn)."""
        return sum(1 for r in self.gangs.values() if not r.deleted and not r.spec.impossible)

    # ----- chaos ---------------------------------------------------------------------------

    def _outage(self, proc: ManagedProcess, wait_ready: float) -> None:
        proc.kill()
        time.sleep(self.chaos_rng.uniform(0.0, self.cfg.max_outage))
        proc.ready_timeout = wait_ready
        proc.start()

    def chaos(self, timeline: list[tuple[float, str]], t0: float) -> None:
        for at, kind in timeline:
            if self._chaos_stop.wait(max(0.0, t0 + at - time.monotonic())):
                return
            with self._chaos_lock:
                try:
                    if kind == "extender" and self.extender is not None:
                        log.info("chaos: kill extender")
                        self._outage(self.extender, 90)
                        self.report.extender_kills += 1
                    elif kind == "scheduler" and self.scheduler is not None:
                        log.info("chaos: kill kube-scheduler")
                        self._outage(self.scheduler, 90)
                        self.report.scheduler_kills += 1
                    elif kind == "apiserver":
                        log.info("chaos: kill and restart kube-apiserver")
                        self._outage(self.cluster.processes["kube-apiserver"], 120)
                        self.report.apiserver_restarts += 1
                except Exception as e:
                    self.report.errors.append(f"chaos {kind}: {e!r}"[:2000])
                    log.exception("chaos %s failed", kind)

    def ensure_up(self) -> None:
        with self._chaos_lock:
            api = self.cluster.processes["kube-apiserver"]
            for p, wait in ((api, 120), (self.extender, 90), (self.scheduler, 90)):
                if p is not None and not p.running():
                    p.ready_timeout = wait
                    p.start()

    # ----- memory ---------------------------------------------------------------------------

    def sample_rss(self) -> None:
        t0 = time.monotonic()
        while not self._rss_stop.wait(2.0):
            pid = self.extender.pid if self.extender is not None else None
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

    def debug(self, path: str = "/debug/gangs") -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    def leftover(self) -> dict[str, Any]:
        """What the extender still holds about this run: queue, reservations, held binds,
        Bindings in flight, backoffs, and PodGroups of the run's namespaces."""
        try:
            d = self.debug()
            groups = self.debug("/debug/podgroups").get("podGroups") or []
        except Exception as e:
            return {"error": repr(e)}
        left = {k: v for k, v in d.items() if v and k in (
            "queue", "reservations", "heldBinds", "bindingsInFlight", "backoff")}
        mine = [g["gang"] for g in groups if str(g.get("gang", "")).startswith(self.run_id)]
        if mine:
            left["podGroups"] = mine
        return left

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
                    log.info("load: %d gangs created, %d completed, %d active, %d violations",
                             self.report.gangs_created, self.report.gangs_completed,
                             self.active(), len(self.checker.violations) if self.checker else 0)
                time.sleep(0.1)
        except Exception as e:
            self.report.errors.append(f"load: {e!r}"[:4000])
            log.exception("load failed")
        finally:
            self._chaos_stop.set()

    def drain(self) -> None:
        """No new gangs, no chaos: everything that fits must finish, then the extender
        must forget everything."""
        cfg = self.cfg
        log.info("drain: %d gangs left", self.active())
        deadline = time.monotonic() + cfg.drain_timeout
        while time.monotonic() < deadline:
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
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.leftover():
            time.sleep(0.5)
        self.report.debug_leftover = self.leftover()

    def run(self) -> SoakReport:
        """Load in a worker thread, chaos on this one: processes are (re)started from the
        main thread so they die with it (PR_SET_PDEATHSIG, see harness.process)."""
        cfg = self.cfg
        start = time.monotonic()
        seconds = cfg.minutes * 60
        timeline = chaos_timeline(random.Random(cfg.seed * 7919 + 1), cfg, seconds)
        rss = threading.Thread(target=self.sample_rss, daemon=True, name="soak-rss")
        try:
            self.setup()
            log.info("soak %s: %d nodes, chaos timeline %s", self.run_id, cfg.nodes,
                     [(round(t), k) for t, k in timeline])
            rss.start()
            start = time.monotonic()
            load = threading.Thread(target=self.load, args=(start, seconds), daemon=True,
                                    name="soak-load")
            load.start()
            self.chaos(timeline, start)
            self._chaos_stop.wait()
            load.join()
            self.ensure_up()
            self.drain()
        except Exception as e:
            self.report.errors.append(repr(e)[:4000])
            log.exception("soak failed")
        finally:
            self._rss_stop.set()
            if self.checker is not None:
                self.checker.stop()
                self.report.violations = [str(v) for v in self.checker.violations]
                self.report.checker_events = self.checker.events
                self.report.checker_relists = self.checker.relists
                self.report.max_burst_seconds = round(self.checker.max_burst, 3)
            self._rss_summary()
            if self.report.rss_mb_peak > cfg.max_rss_mb:
                self.report.errors.append(
                    f"extender RSS peaked at {self.report.rss_mb_peak:.0f} MiB "
                    f"(limit {cfg.max_rss_mb:.0f})")
            self.report.duration_s = round(time.monotonic() - start, 1)
        return self.report

    def logs(self) -> list[ManagedProcess]:
        return [p for p in (self.extender, self.scheduler) if p is not None]


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

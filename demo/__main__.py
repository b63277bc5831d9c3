"""The demo: the classic gang deadlock, replayed with the stock scheduler and then with ours.

    .venv/bin/python -m demo [--out demo-out] [--stock-wait 40]

One local control plane (etcd, kube-apiserver, kube-controller-manager, the stock
kube-scheduler) with 4 fake nodes. The same workload is submitted twice, all at once:

* job-a and job-b: two Jobs of 20 rendezvous pods (a pod finishes only once all 20 pods of
  its Job have run for the run time, like an MPI or all-reduce job), each sized to need
  75 % of the cluster's memory, so one fits but not both;
* quick: a 50-pod Job of small independent pods that run 2 s each.

Run A ("stock") uses ``schedulerName: default-scheduler``: the stock scheduler places pods
one by one, both big Jobs end up partially placed and neither can ever finish. The demo
observes that for ``--stock-wait`` seconds, reports it and cleans up.

Run B ("gang") starts the gang stack (our extender plus a kube-scheduler with the single
profile ``gang-scheduler``) and submits the same workload with ``schedulerName:
gang-scheduler``: each big Job gets a PodGroup with ``minMember`` 20 and the PodGroup label
in its pod template. The quick Job stays plain pods of the gang scheduler (no PodGroup):
its pods are independent, so all-or-nothing would buy nothing, and it shows that ordinary
pods still flow around the capacity held for gangs. Expected: job-a placed whole, job-b
placed whole only once job-a finished, everything completes.

Output: a timeline and a summary table on stdout, ``<out>/timeline.json`` (per-pod times)
and ``<out>/demo.png`` (Gantt chart, stock vs gang). The whole demo is bounded by
``--timeout``; if something hangs it fails with the components' log tails, and the logs are
copied to ``<out>/logs``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2e.gang import DEFAULT_ARGS, Recorder, scheduler_config, start_extender
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.fixtures import (
    GANG_SCHEDULER,
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    NotYet,
    create_job,
    create_podgroup,
    get_job,
    job_condition,
    kube,
    list_pods,
    use_cluster,
    wait_for,
)
from e2e.harness.k8s import ApiException
from e2e.harness.process import free_port

STOCK_SCHEDULER = "default-scheduler"
BIG_JOBS = ("job-a", "job-b")
QUICK_JOB = "quick"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
COLORS = {"job-a": "#1f77b4", "job-b": "#e8710a", QUICK_JOB: "#2ca02c"}
BURST_GAP = 1.0
"""Binds of one Job closer than this (seconds) are reported as one step of the timeline."""


class DemoError(RuntimeError):
    """The demo could not show what it should (a hang, a broken expectation)."""


# ----------------------------------------------------------------------------------------
# Workload


@dataclass(frozen=True)
class Workload:
    nodes: int = 4
    node_cpu: int = 8
    node_memory_mi: int = 16 * 1024
    big_pods: int = 20
    share: float = 0.75
    big_cpu: str = "250m"
    run_seconds: float = 5.0
    quick_pods: int = 50
    quick_cpu: str = "100m"
    quick_memory_mi: int = 64
    quick_seconds: float = 2.0

    @property
    def pod_memory_mi(self) -> int:
        """Memory of one big pod: the Job's share of the cluster's memory, in whole Mi."""
        return math.floor(self.share * self.nodes * self.node_memory_mi / self.big_pods)

    @property
    def slots(self) -> int:
        """How many big pods fit in the cluster (per node, no fractions)."""
        return self.nodes * (self.node_memory_mi // self.pod_memory_mi)

    def check(self) -> None:
        """The sizes must make the deadlock possible and the gang run feasible."""
        if not self.big_pods <= self.slots < 2 * self.big_pods:
            raise SystemExit(
                f"sizes give {self.slots} slots of {self.pod_memory_mi}Mi for Jobs of "
                f"{self.big_pods} pods: need one Job to fit and two not to")
        slack = self.node_memory_mi - (self.node_memory_mi // self.pod_memory_mi
                                       * self.pod_memory_mi)
        if slack < self.quick_memory_mi:
            raise SystemExit(f"no room for quick pods next to the big ones ({slack}Mi)")

    def describe(self) -> str:
        share = self.big_pods * self.pod_memory_mi / (self.nodes * self.node_memory_mi)
        return (f"{self.nodes} nodes × {{cpu: {self.node_cpu}, memory: "
                f"{self.node_memory_mi // 1024}Gi}}; job-a and job-b: {self.big_pods} "
                f"rendezvous pods × {self.pod_memory_mi}Mi ({share:.0%} of the cluster's "
                f"memory each, run {self.run_seconds:g} s once all are up); quick: "
                f"{self.quick_pods} pods × {self.quick_memory_mi}Mi, {self.quick_seconds:g} s")


# ----------------------------------------------------------------------------------------
# Observation


@dataclass
class PodTimes:
    """One pod's life, in seconds since the run's submission (None: did not happen)."""

    job: str
    node: str = ""
    created: float | None = None
    bound: float | None = None
    running: float | None = None
    finished: float | None = None
    phase: str = "Pending"


@dataclass
class JobSummary:
    pods: int
    bound: int
    running: int
    succeeded: int
    first_bound: float | None
    all_bound: float | None
    complete_at: float | None


@dataclass
class RunResult:
    name: str
    scheduler: str
    namespace: str
    window: float
    """Seconds observed after submission."""
    pods: dict[str, PodTimes]
    jobs: dict[str, JobSummary]
    events: list[tuple[float, str]]
    verdict: str
    ok: bool
    """True when the run showed what it should: a deadlock for stock, a clean gang run."""
    problems: list[str] = field(default_factory=list)
    attempt: int = 1
    """Which attempt this is (the stock run is retried when the race avoids the deadlock)."""


def job_of(pod: Any) -> str:
    labels = pod.metadata.labels or {}
    for key in JOB_NAME_LABELS:
        if key in labels:
            return str(labels[key])
    return str(pod.metadata.name).rsplit("-", 1)[0]


class DemoRecorder(Recorder):
    """:class:`e2e.gang.Recorder` plus when each pod was first seen and its Job."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.first_seen: dict[str, float] = {}
        self.job: dict[str, str] = {}

    def _observe(self, pod: Any) -> None:
        now = time.monotonic()
        with self._lock:
            self.first_seen.setdefault(pod.metadata.name, now)
            self.job.setdefault(pod.metadata.name, job_of(pod))
        super()._observe(pod)

    def snapshot(self, t0: float) -> dict[str, PodTimes]:
        def rel(t: float | None) -> float | None:
            return None if t is None else round(t - t0, 3)

        with self._lock:
            out = {}
            for name, r in self.pods.items():
                done = r.phase_at.get("Succeeded", r.phase_at.get("Failed"))
                out[name] = PodTimes(
                    job=self.job.get(name, "?"), node=r.node,
                    created=rel(self.first_seen.get(name)), bound=rel(r.bound_at),
                    running=rel(r.phase_at.get("Running")), finished=rel(done),
                    phase=r.phase)
            return out


def quorum_present_at(pods: dict[str, PodTimes], job: str, size: int) -> float | None:
    """When the Job's ``size``-th pod was first seen (all members exist)."""
    created = sorted(p.created for p in pods.values() if p.job == job and p.created is not None)
    return created[size - 1] if len(created) >= size else None


def summarize(pods: dict[str, PodTimes], sizes: dict[str, int]) -> dict[str, JobSummary]:
    out = {}
    for job, size in sizes.items():
        mine = [p for p in pods.values() if p.job == job]
        bound = sorted(p.bound for p in mine if p.bound is not None)
        done = sorted(p.finished for p in mine if p.finished is not None
                      and p.phase == "Succeeded")
        out[job] = JobSummary(
            pods=size, bound=len(bound),
            running=sum(1 for p in mine if p.phase == "Running"),
            succeeded=len(done),
            first_bound=bound[0] if bound else None,
            all_bound=bound[size - 1] if len(bound) >= size else None,
            complete_at=done[size - 1] if len(done) >= size else None)
    return out


def timeline(pods: dict[str, PodTimes], jobs: dict[str, JobSummary], window: float,
             stuck_note: bool) -> list[tuple[float, str]]:
    """Readable events: bind bursts per big Job, all running, completion; first and last of
    the quick Job; at the end of a window with stuck Jobs, where they stand."""
    events: list[tuple[float, str]] = []
    for job, s in jobs.items():
        mine = [p for p in pods.values() if p.job == job]
        binds = sorted(p.bound for p in mine if p.bound is not None)
        if job == QUICK_JOB:
            if binds:
                events.append((binds[0], f"{job}: first pod bound"))
        else:
            present = quorum_present_at(pods, job, s.pods)
            if present is not None:
                events.append((present, f"{job}: all {s.pods} pods created"))
            burst_start = 0
            for i, t in enumerate(binds):
                count = i + 1
                if count == len(binds) or binds[i + 1] - t > BURST_GAP:
                    whole = " (whole Job)" if count == s.pods and burst_start == 0 else ""
                    burst_start = count
                    events.append((t, f"{job}: {count}/{s.pods} bound{whole}"))
            running = sorted(p.running for p in mine if p.running is not None)
            if len(running) >= s.pods:
                events.append((running[s.pods - 1], f"{job}: {s.pods}/{s.pods} running"))
        if s.complete_at is not None:
            events.append((s.complete_at, f"{job} complete ({s.pods}/{s.pods} succeeded)"))
    if stuck_note:
        for job, s in jobs.items():
            if s.complete_at is None and job != QUICK_JOB:
                events.append((window, f"{job}: {s.bound}/{s.pods} bound, {s.running} running, "
                                       f"{s.succeeded} done (stuck)"))
    events.sort(key=lambda e: e[0])
    return events


# ----------------------------------------------------------------------------------------
# Running one workload


class Demo:
    def __init__(self, wl: Workload, out: Path, stock_wait: float, timeout: float,
                 stock_attempts: int = 3) -> None:
        self.wl = wl
        self.out = out
        self.stock_wait = stock_wait
        self.stock_attempts = stock_attempts
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.cp: ControlPlane | None = None

    def remaining(self, what: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DemoError(f"the demo ran out of its {self.timeout:.0f} s bound {what}")
        return left

    def sizes(self) -> dict[str, int]:
        return {"job-a": self.wl.big_pods, "job-b": self.wl.big_pods,
                QUICK_JOB: self.wl.quick_pods}

    # -- cluster ---------------------------------------------------------------------

    def start_cluster(self) -> ControlPlane:
        t = time.monotonic()
        cp = self.cp = ControlPlane().start()
        use_cluster(cp)
        cp.start_default_scheduler()
        fk = FakeKubelet(cp).start()
        for i in range(self.wl.nodes):
            fk.add_node(f"node-{i}", cpu=str(self.wl.node_cpu),
                        memory=f"{self.wl.node_memory_mi}Mi")
        print(f"control plane, stock scheduler, fake kubelet and {self.wl.nodes} nodes up "
              f"in {time.monotonic() - t:.1f} s ({cp.workdir})", flush=True)
        return cp

    def start_gang_stack(self) -> None:
        assert self.cp is not None
        t = time.monotonic()
        port = free_port()
        start_extender(self.cp, port, list(DEFAULT_ARGS), "gang-extender")
        self.cp.start_scheduler(scheduler_config(port), "gang-kube-scheduler")
        print(f"gang stack (extender :{port} + kube-scheduler profile {GANG_SCHEDULER}) up "
              f"in {time.monotonic() - t:.1f} s", flush=True)

    def create_namespace(self, ns: str) -> None:
        k = kube()
        k.core.create_namespace({"metadata": {"name": ns}}, _preload_content=False)

        def sa_ready() -> bool:
            k.core.read_namespaced_service_account("default", ns, _preload_content=False)
            return True

        wait_for(sa_ready, min(30, self.remaining("creating a namespace")),
                 f"service account default in {ns}")

    def delete_namespace(self, ns: str) -> None:
        """Jobs and PodGroups first (so nothing recreates pods), then the pods with grace 0
        until none is left, then the namespace itself."""
        k = kube()

        def attempt(fn: Callable[[], Any]) -> None:
            try:
                fn()
            except ApiException as e:
                if e.status not in (404, 405):
                    raise

        t = time.monotonic()
        attempt(lambda: k.batch.delete_collection_namespaced_job(
            ns, propagation_policy="Background", _preload_content=False))
        attempt(lambda: k.custom.delete_collection_namespaced_custom_object(
            PG_GROUP, PG_VERSION, ns, PG_PLURAL, _preload_content=False))

        def gone() -> bool | NotYet:
            attempt(lambda: k.core.delete_collection_namespaced_pod(
                ns, grace_period_seconds=0, _preload_content=False))
            left = len(list_pods(ns))
            return left == 0 or NotYet(f"{left} pods left in {ns}")

        wait_for(gone, min(60, self.remaining(f"deleting {ns}")), f"pods of {ns} gone",
                 interval=0.5)
        attempt(lambda: k.core.delete_namespace(ns, _preload_content=False))
        print(f"cleaned up namespace {ns} in {time.monotonic() - t:.1f} s", flush=True)

    # -- one run ---------------------------------------------------------------------

    def submit(self, ns: str, scheduler: str, gang: bool) -> None:
        """Create the three Jobs at once (one thread each, released together), as users
        submitting at the same moment would; PodGroups first, job-a's before job-b's."""
        wl = self.wl
        if gang:
            for job in BIG_JOBS:
                create_podgroup(ns, job, wl.big_pods)

        def big(job: str) -> Callable[[], Any]:
            return lambda: create_job(
                ns, job, wl.big_pods, cpu=wl.big_cpu, memory=f"{wl.pod_memory_mi}Mi",
                scheduler_name=scheduler, pod_group=job if gang else None,
                run_seconds=wl.run_seconds, rendezvous=job, rendezvous_size=wl.big_pods)

        def quick() -> Any:
            return create_job(ns, QUICK_JOB, wl.quick_pods, cpu=wl.quick_cpu,
                              memory=f"{wl.quick_memory_mi}Mi", scheduler_name=scheduler,
                              run_seconds=wl.quick_seconds)

        calls = [*(big(j) for j in BIG_JOBS), quick]
        barrier = threading.Barrier(len(calls))
        errors: list[BaseException] = []

        def call(fn: Callable[[], Any]) -> None:
            try:
                barrier.wait(10)
                fn()
            except BaseException as e:  # re-raised below, in the caller's thread
                errors.append(e)

        threads = [threading.Thread(target=call, args=(fn,)) for fn in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        if errors:
            raise DemoError(f"submitting the Jobs failed: {errors[0]!r}") from errors[0]

    def progress(self, name: str, t0: float, rec: DemoRecorder) -> str:
        jobs = summarize(rec.snapshot(t0), self.sizes())
        parts = [f"{j} {s.bound}/{s.pods} bound {s.succeeded} done" for j, s in jobs.items()]
        return f"  [{name} t={time.monotonic() - t0:4.0f}s] " + ", ".join(parts)

    def some_big_job_whole(self, rec: DemoRecorder, t0: float) -> bool:
        jobs = summarize(rec.snapshot(t0), self.sizes())
        return any(jobs[j].bound == jobs[j].pods for j in BIG_JOBS)

    def jobs_complete(self, ns: str, names: Sequence[str]) -> bool:
        return all(job_condition(get_job(ns, j), "Complete") for j in names)

    def run(self, name: str, gang: bool) -> RunResult:
        """One run; the stock one is repeated (in a fresh namespace) while the race that
        causes the deadlock goes one Job's way, up to ``stock_attempts`` times."""
        scheduler = GANG_SCHEDULER if gang else STOCK_SCHEDULER
        print(f"\n=== run {'B' if gang else 'A'} ({name}): schedulerName {scheduler}"
              + (", PodGroups job-a and job-b with minMember "
                 f"{self.wl.big_pods}" if gang else ", no PodGroups") + " ===", flush=True)
        attempts = 1 if gang else self.stock_attempts
        for attempt in range(1, attempts + 1):
            ns = f"demo-{name}" + (f"-{attempt}" if attempt > 1 else "")
            res = self.run_once(name, ns, gang, last=attempt == attempts)
            res.attempt = attempt
            if gang or res.ok or attempt == attempts:
                return res
            print(f"  attempt {attempt}: {res.verdict}. Whether the stock scheduler "
                  "deadlocks is a race (the order in which the job controller creates the "
                  "two Jobs' pods); trying again in a fresh namespace.", flush=True)
            self.delete_namespace(ns)
        raise AssertionError("unreachable")

    def run_once(self, name: str, ns: str, gang: bool, last: bool) -> RunResult:
        scheduler = GANG_SCHEDULER if gang else STOCK_SCHEDULER
        self.create_namespace(ns)
        with DemoRecorder(ns) as rec:
            t0 = time.monotonic()
            self.submit(ns, scheduler, gang)
            last_print = t0
            if gang:
                end_by = t0 + self.remaining("before the gang run")
            else:
                end_by = min(t0 + self.stock_wait, t0 + self.remaining("before the stock run"))
            finished = False
            while time.monotonic() < end_by:
                if self.jobs_complete(ns, (*BIG_JOBS, QUICK_JOB)):
                    finished = True
                    break
                if not gang and not last and self.some_big_job_whole(rec, t0):
                    break  # that Job will finish and free the room: no deadlock this time
                if time.monotonic() - last_print >= 5:
                    last_print = time.monotonic()
                    print(self.progress(name, t0, rec), flush=True)
                time.sleep(0.25)
            time.sleep(0.3)  # let the recorder see the last events
            window = round(time.monotonic() - t0, 3)
            pods = rec.snapshot(t0)
        if gang and not finished:
            assert self.cp is not None
            raise DemoError(f"the gang run did not complete within the demo's bound:\n"
                            f"{self.progress(name, t0, rec)}\n{self.cp.log_tails(40)}")
        jobs = summarize(pods, self.sizes())
        events = timeline(pods, jobs, window, stuck_note=not gang)
        res = (self.judge_gang if gang else self.judge_stock)(pods, jobs, window)
        res.namespace, res.events = ns, events
        return res

    def judge_stock(self, pods: dict[str, PodTimes], jobs: dict[str, JobSummary],
                    window: float) -> RunResult:
        a, b = jobs["job-a"], jobs["job-b"]
        hung = [j for j in BIG_JOBS if jobs[j].complete_at is None]
        ok = len(hung) == 2 and all(0 < jobs[j].bound < jobs[j].pods for j in BIG_JOBS)
        if ok:
            verdict = (f"DEADLOCK: job-a {a.bound}/{a.pods} and job-b {b.bound}/{b.pods} "
                       f"placed; neither can ever finish (observed {window:.0f} s)")
        elif any(jobs[j].bound == jobs[j].pods for j in BIG_JOBS):
            whole = next(j for j in BIG_JOBS if jobs[j].bound == jobs[j].pods)
            verdict = (f"no deadlock this time: {whole} got all {jobs[whole].pods} pods "
                       f"placed before the other Job took enough room (job-a {a.bound}, "
                       f"job-b {b.bound} placed)")
        else:
            verdict = (f"{', '.join(hung)} did not finish: job-a {a.bound}/{a.pods}, "
                       f"job-b {b.bound}/{b.pods} placed")
        return RunResult("stock", STOCK_SCHEDULER, "", window, pods, jobs, [], verdict, ok)

    def judge_gang(self, pods: dict[str, PodTimes], jobs: dict[str, JobSummary],
                   window: float) -> RunResult:
        problems: list[str] = []
        first, second = (sorted(BIG_JOBS, key=lambda j: jobs[j].first_bound or math.inf))
        for j in BIG_JOBS:
            s = jobs[j]
            if s.complete_at is None or s.all_bound is None or s.first_bound is None:
                problems.append(f"{j} did not complete")
            elif s.all_bound - s.first_bound > 2.0:
                problems.append(f"{j} was bound over {s.all_bound - s.first_bound:.1f} s "
                                "(partially placed in between)")
        f, s2 = jobs[first], jobs[second]
        first_done = max((p.finished for p in pods.values()
                          if p.job == first and p.finished is not None), default=None)
        # Which gang goes first: the older PodGroup (job-a, created first) among those
        # whose members all exist. The job controller creates the two Jobs' pods in a
        # race, so job-b goes first when all its pods existed before job-a's did.
        exists = {j: quorum_present_at(pods, j, jobs[j].pods) for j in BIG_JOBS}
        note = ""
        if first == "job-b":
            qa, qb = exists["job-a"], exists["job-b"]
            if qa is not None and qb is not None and qa < qb - 0.2:
                problems.append(f"job-b was placed first although job-a (the older "
                                f"PodGroup) had all its pods first ({qa:.1f} s vs {qb:.1f} s)")
            else:
                note = (f" (job-b first: all its pods existed at {fmt(qb)} s, job-a's only "
                        f"at {fmt(qa)} s, and a gang is placed once all its members exist)")
        if first_done is not None and s2.first_bound is not None \
                and s2.first_bound < first_done - 0.5:
            problems.append(f"{second} was bound at {s2.first_bound:.1f} s, before {first} "
                            f"finished at {first_done:.1f} s")
        if jobs[QUICK_JOB].complete_at is None:
            problems.append("the quick Job did not complete")
        if problems:
            verdict = "GANG RUN FAILED: " + "; ".join(problems)
        else:
            last = max(s.complete_at or 0.0 for s in jobs.values())
            verdict = (f"{first} placed whole at {f.all_bound:.1f} s, {second} placed whole "
                       f"at {s2.all_bound:.1f} s after {first} finished at "
                       f"{first_done:.1f} s; every pod done at {last:.1f} s{note}")
        return RunResult("gang", GANG_SCHEDULER, "", window, pods, jobs, [], verdict,
                         not problems, problems)


# ----------------------------------------------------------------------------------------
# Output


def print_run(res: RunResult) -> None:
    print(f"\n--- timeline, {res.name} run (schedulerName {res.scheduler}) ---")
    for t, text in res.events:
        print(f"  t={t:6.1f}s  {text}")
    print(f"  => {res.verdict}{attempt_note(res)}")


def attempt_note(res: RunResult) -> str:
    if res.attempt == 1:
        return ""
    return (f" [attempt {res.attempt}: in the earlier one(s) one Job won the race "
            "for room and no deadlock formed]")


def fmt(t: float | None) -> str:
    return "-" if t is None else f"{t:.1f}"


def print_summary(runs: Sequence[RunResult]) -> None:
    print("\n--- summary (times in seconds since submission) ---")
    head = ("run", "job", "pods", "bound", "running", "done", "first bind", "all bound",
            "complete")
    rows = [head]
    for r in runs:
        for j, s in r.jobs.items():
            complete = fmt(s.complete_at) if s.complete_at is not None else (
                "never (hung)" if j != QUICK_JOB else "no")
            rows.append((r.name, j, str(s.pods), str(s.bound), str(s.running),
                         str(s.succeeded), fmt(s.first_bound), fmt(s.all_bound), complete))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for i, row in enumerate(rows):
        print("  " + "  ".join(c.ljust(w) if k < 2 else c.rjust(w)
                               for k, (c, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
    for r in runs:
        print(f"  {r.name}: {r.verdict}{attempt_note(r)}")


def write_json(path: Path, wl: Workload, runs: Sequence[RunResult]) -> None:
    doc = {
        "workload": {**asdict(wl), "pod_memory_mi": wl.pod_memory_mi, "slots": wl.slots},
        "runs": {r.name: {
            "scheduler": r.scheduler, "namespace": r.namespace, "window": r.window,
            "ok": r.ok, "verdict": r.verdict, "problems": r.problems, "attempt": r.attempt,
            "jobs": {j: asdict(s) for j, s in r.jobs.items()},
            "events": [{"t": t, "event": e} for t, e in r.events],
            "pods": {n: asdict(p) for n, p in sorted(r.pods.items())},
        } for r in runs},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


def read_json(path: Path) -> tuple[Workload, list[RunResult]]:
    """The inverse of :func:`write_json` (for ``--replot``)."""
    doc = json.loads(path.read_text())
    w = doc["workload"]
    wl = Workload(**{k: v for k, v in w.items() if k in Workload.__dataclass_fields__})
    runs = [RunResult(
        name, r["scheduler"], r["namespace"], r["window"],
        {n: PodTimes(**p) for n, p in r["pods"].items()},
        {j: JobSummary(**s) for j, s in r["jobs"].items()},
        [(e["t"], e["event"]) for e in r["events"]], r["verdict"], r["ok"], r["problems"],
        r.get("attempt", 1),
    ) for name, r in doc["runs"].items()]
    return wl, runs


def plot(path: Path, wl: Workload, runs: Sequence[RunResult]) -> None:
    """Gantt chart, one panel per run side by side, one row per pod grouped by Job."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    order = [*BIG_JOBS, QUICK_JOB]
    sizes = {"job-a": wl.big_pods, "job-b": wl.big_pods, QUICK_JOB: wl.quick_pods}
    gap = 2
    offsets, y = {}, 0
    for j in order:
        offsets[j] = y
        y += sizes[j] + gap
    total_rows = y - gap
    height = min(14.0, max(6.0, 2.0 + total_rows * 0.085))
    # Same time axis for both panels: the gang run is over before the stock one is
    # even given up on, and a shared scale shows that at a glance.
    fig, axes = plt.subplots(1, len(runs), figsize=(8 * len(runs), height), sharey=True,
                             sharex=True, squeeze=False)
    xmax = max(r.window for r in runs)
    for ax, res in zip(axes[0], runs, strict=True):
        end = res.window
        for j in order:
            mine = [p for p in res.pods.values() if p.job == j]
            mine.sort(key=lambda p: (p.bound if p.bound is not None else math.inf,
                                     p.created or 0.0))
            color = COLORS[j]
            for i, p in enumerate(mine[:sizes[j]]):
                row = offsets[j] + i
                start = p.created if p.created is not None else 0.0
                wait_end = p.bound if p.bound is not None else end
                ax.hlines(row, start, wait_end, colors="#b0b0b0", linewidth=1.0,
                          linestyles="solid" if p.bound is not None else (0, (2, 2)))
                if p.bound is None:
                    continue
                if p.finished is not None:
                    ax.barh(row, p.finished - p.bound, left=p.bound, height=0.8,
                            color=color, edgecolor="none")
                else:
                    ax.barh(row, end - p.bound, left=p.bound, height=0.8, color=color,
                            alpha=0.45, hatch="////", edgecolor=color, linewidth=0)
            s = res.jobs[j]
            mid = offsets[j] + sizes[j] / 2
            x = end
            if s.complete_at is not None:
                ax.vlines(s.complete_at, offsets[j] - 1, offsets[j] + sizes[j], colors=color,
                          linestyles=":", linewidth=1.2)
                label, x = f"done {s.complete_at:.1f} s", s.complete_at
                if j != QUICK_JOB and (s.first_bound or 0) > 2:
                    label = (f"pending {s.first_bound:.1f} s, until all\n{s.pods} fit at once "
                             f"(never partial);\n{label}")
            elif j != QUICK_JOB:
                label = f"HUNG\n{s.bound}/{s.pods} placed\n{s.pods - s.bound} pending"
            else:
                label = f"{s.succeeded}/{s.pods} done"
            ax.text(x + xmax * 0.01, mid, label, va="center", ha="left", fontsize=9,
                    color=color, fontweight="bold" if label.startswith("HUNG") else "normal",
                    clip_on=False, bbox={"facecolor": "white", "edgecolor": "none",
                                         "alpha": 0.85, "pad": 1})
        for j in order[1:]:
            ax.axhline(offsets[j] - gap / 2 - 0.5, color="#dddddd", linewidth=0.8)
        ax.axvline(end, color="#555555", linewidth=0.8, linestyle="--")
        ax.text(end, total_rows, "watching stopped " if res.name == "stock"
                else " all Jobs Complete", fontsize=8, color="#555555", va="bottom",
                ha="right" if res.name == "stock" else "left")
        ax.set_xlim(0, xmax * 1.01)
        ax.set_xlabel("seconds since all three Jobs were submitted")
        ax.grid(axis="x", color="#eeeeee")
        ax.set_axisbelow(True)
        if res.name == "stock":
            title = ("Stock kube-scheduler: deadlock\n" if res.ok else
                     "Stock kube-scheduler\n") + res.verdict.split(":", 1)[-1].strip()
        else:
            title = ("Gang scheduler: whole Jobs, one after the other\n" if res.ok else
                     "Gang scheduler: FAILED\n") + res.verdict.split("FAILED:")[-1].strip()
        ax.set_title(_wrap(title, 80), fontsize=11, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    ax0 = axes[0][0]
    ax0.set_ylim(total_rows + 0.5, -1.5)
    ax0.set_yticks([offsets[j] + (sizes[j] - 1) / 2 for j in order])
    ax0.set_yticklabels([f"{j}\n{sizes[j]} pods" for j in order], fontsize=10)
    ax0.set_ylabel("one row per pod")
    handles: list[Artist] = [Patch(color=COLORS[j], label=f"{j}: bound → finished")
                             for j in order]
    handles += [
        Patch(facecolor="#999999", alpha=0.45, hatch="////", edgecolor="#666666",
              label="bound, never finishes (hung)"),
        Line2D([], [], color="#b0b0b0", label="pending (created, not bound)"),
        Line2D([], [], color="#b0b0b0", linestyle=(0, (2, 2)), label="never bound"),
        Line2D([], [], color="#555555", linestyle=":", label="Job complete"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9,
               frameon=False)
    fig.suptitle(f"Gang deadlock demo, same workload twice\n{wl.describe()}", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 0.97, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.fill(line, width) for line in text.splitlines())


# ----------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m demo",
                                 description=(__doc__ or "").split("\n\n")[0])
    d = Workload()
    ap.add_argument("--out", type=Path, default=Path("demo-out"),
                    help="directory for timeline.json and demo.png (default demo-out)")
    ap.add_argument("--stock-wait", type=float, default=40.0,
                    help="seconds to watch the stock run hang (default 40)")
    ap.add_argument("--stock-attempts", type=int, default=3,
                    help="repeat the stock run up to this many times while the race goes "
                         "one Job's way and no deadlock forms (default 3)")
    ap.add_argument("--timeout", type=float, default=180.0,
                    help="bound of the whole demo in seconds (default 180)")
    ap.add_argument("--nodes", type=int, default=d.nodes)
    ap.add_argument("--big-pods", type=int, default=d.big_pods,
                    help=f"pods per big Job (default {d.big_pods})")
    ap.add_argument("--quick-pods", type=int, default=d.quick_pods,
                    help=f"pods of the quick Job (default {d.quick_pods})")
    ap.add_argument("--run-seconds", type=float, default=d.run_seconds,
                    help="run time of a big Job once all its pods are up (default 5)")
    ap.add_argument("--share", type=float, default=d.share,
                    help="share of the cluster's memory each big Job needs (default 0.75)")
    ap.add_argument("--replot", type=Path, metavar="TIMELINE_JSON",
                    help="only redraw <out>/demo.png from a timeline.json of an earlier run")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    wl = Workload(nodes=args.nodes, big_pods=args.big_pods, quick_pods=args.quick_pods,
                  run_seconds=args.run_seconds, share=args.share)
    wl.check()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        wl, saved = read_json(args.replot)
        plot(out / "demo.png", wl, saved)
        print(f"wrote {out / 'demo.png'}")
        return 0
    demo = Demo(wl, out, args.stock_wait, args.timeout, args.stock_attempts)
    print(f"gang deadlock demo: {wl.describe()}", flush=True)

    # SIGTERM should stop the components like Ctrl-C does (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Last resort if a call blocks past the bound: report, stop everything, exit.
    def watchdog() -> None:
        print(f"\nDEMO HUNG: still running {args.timeout + 30:.0f} s after start",
              file=sys.stderr, flush=True)
        if demo.cp is not None:
            print(demo.cp.log_tails(40), file=sys.stderr, flush=True)
            save_logs(demo.cp, out)
            demo.cp.stop()
        os._exit(3)

    timer = threading.Timer(args.timeout + 30, watchdog)
    timer.daemon = True
    timer.start()
    t_start = time.monotonic()
    runs: list[RunResult] = []
    failed = True
    try:
        demo.start_cluster()
        t = time.monotonic()
        stock = demo.run("stock", gang=False)
        runs.append(stock)
        print_run(stock)
        demo.delete_namespace(stock.namespace)
        t_stock = time.monotonic() - t
        t = time.monotonic()
        demo.start_gang_stack()
        gang = demo.run("gang", gang=True)
        runs.append(gang)
        print_run(gang)
        t_gang = time.monotonic() - t
        print_summary(runs)
        write_json(out / "timeline.json", wl, runs)
        plot(out / "demo.png", wl, runs)
        print(f"\nwrote {out / 'timeline.json'} and {out / 'demo.png'}")
        print(f"took {time.monotonic() - t_start:.0f} s: stock part {t_stock:.0f} s "
              f"(incl. cleanup), gang part {t_gang:.0f} s (incl. starting the gang stack)")
        if not stock.ok:
            print(f"WARNING: the stock run did not show the deadlock: {stock.verdict}")
        failed = not gang.ok
        return 0 if gang.ok else 1
    except Exception as e:
        print(f"\nDEMO FAILED: {e}", file=sys.stderr, flush=True)
        if runs:
            with contextlib.suppress(Exception):
                write_json(out / "timeline.json", wl, runs)
        return 2
    finally:
        timer.cancel()
        if demo.cp is not None:
            if failed:
                save_logs(demo.cp, out)
            with contextlib.suppress(Exception):
                kube().api.close()
            demo.cp.stop()


def save_logs(cp: ControlPlane, out: Path) -> None:
    with contextlib.suppress(OSError):
        dest = out / "logs"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(cp.log_dir, dest)
        print(f"component logs copied to {dest}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

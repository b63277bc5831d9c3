"""Running the workload against the local control plane: the cluster, the gang stack, a
namespace per run, submitting the Jobs at once and watching until they finish or hang.

Why the stock run may be repeated: whether the stock scheduler deadlocks is a race (the
order in which the job controller creates the two Jobs' pods). When one Job gets all its
pods placed first there is no deadlock to show, so the run is tried again in a fresh
namespace, up to ``stock_attempts`` times, and the output says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from demo.jobs import BIG_JOBS, QUICK_JOB, STOCK_SCHEDULER, Workload
from demo.recorder import DemoRecorder
from demo.timeline import RunResult, summarize, timeline
from demo.verdict import judge_gang, judge_stock
from e2e.gang import DEFAULT_ARGS, scheduler_config, start_extender
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.k8s import ApiException
from e2e.harness.objects import (
    GANG_SCHEDULER,
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    create_job,
    create_podgroup,
)
from e2e.harness.process import free_port
from e2e.harness.queries import get_job, job_condition, list_pods
from e2e.harness.target import kube, use_cluster
from e2e.harness.waiting import NotYet, wait_for


class DemoError(RuntimeError):
    """The demo could not show what it should (a hang, a broken expectation)."""


class Demo:
    """One control plane, used by both runs in turn; everything bounded by ``timeout``.

    Why one cluster for both runs: starting a control plane takes seconds, and the same
    nodes make the comparison fair; each run gets its own namespace, emptied afterwards.
    """

    def __init__(self, wl: Workload, stock_wait: float, timeout: float,
                 stock_attempts: int = 3) -> None:
        self.wl = wl
        self.stock_wait = stock_wait
        self.stock_attempts = stock_attempts
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.cp: ControlPlane | None = None

    def remaining(self, what: str) -> float:
        """Seconds left of the demo's bound; a :class:`DemoError` once it is spent."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DemoError(f"the demo ran out of its {self.timeout:.0f} s bound {what}")
        return left

    def sizes(self) -> dict[str, int]:
        """Pods per Job (what the summaries count against)."""
        return self.wl.job_sizes()

    # -- cluster ---------------------------------------------------------------------

    def start_cluster(self) -> ControlPlane:
        """The control plane with the stock scheduler, the fake kubelet and the nodes."""
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
        """Our extender and a second kube-scheduler with the profile that calls it (only
        for run B, so run A shows the stock scheduler alone)."""
        assert self.cp is not None
        t = time.monotonic()
        port = free_port()
        start_extender(self.cp, port, list(DEFAULT_ARGS), "gang-extender")
        self.cp.start_scheduler(scheduler_config(port), "gang-kube-scheduler")
        print(f"gang stack (extender :{port} + kube-scheduler profile {GANG_SCHEDULER}) up "
              f"in {time.monotonic() - t:.1f} s", flush=True)

    def create_namespace(self, ns: str) -> None:
        """A fresh namespace, once its default service account exists (pods are refused
        until then)."""
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
        """A one-line status, printed every 5 s while a run is watched."""
        jobs = summarize(rec.snapshot(t0), self.sizes())
        parts = [f"{j} {s.bound}/{s.pods} bound {s.succeeded} done" for j, s in jobs.items()]
        return f"  [{name} t={time.monotonic() - t0:4.0f}s] " + ", ".join(parts)

    def some_big_job_whole(self, rec: DemoRecorder, t0: float) -> bool:
        """A big Job got all its pods placed: in the stock run, no deadlock this time."""
        jobs = summarize(rec.snapshot(t0), self.sizes())
        return any(jobs[j].bound == jobs[j].pods for j in BIG_JOBS)

    def jobs_complete(self, ns: str, names: Sequence[str]) -> bool:
        """Every named Job has its Complete condition (from the job controller)."""
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
        """Submit in ``ns`` and watch until everything completes, the stock run's window
        ends, or (stock, not the ``last`` attempt) a big Job got placed whole."""
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
        res = (judge_gang if gang else judge_stock)(pods, jobs, window)
        res.namespace, res.events = ns, events
        return res

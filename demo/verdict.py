"""Did a run show what it should? The stock run must deadlock; the gang run must place
each big Job whole, one after the other, and complete everything.

Why explicit checks rather than just printing numbers: the demo is also an e2e test
(``e2e/tests/install/test_demo.py``), and the deadlock is a race the stock run can lose, so the
demo must recognise both a broken gang run and a stock run that happened not to deadlock.
"""

from __future__ import annotations

import math

from demo.jobs import BIG_JOBS, QUICK_JOB, STOCK_SCHEDULER
from demo.timeline import JobSummary, PodTimes, RunResult, fmt, quorum_present_at
from e2e.harness.objects import GANG_SCHEDULER


def judge_stock(pods: dict[str, PodTimes], jobs: dict[str, JobSummary],
                window: float) -> RunResult:
    """A deadlock: both big Jobs partly placed, neither complete."""
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


def judge_gang(pods: dict[str, PodTimes], jobs: dict[str, JobSummary],
               window: float) -> RunResult:
    """Each big Job bound in one burst, the second only after the first finished, the
    older PodGroup first unless the other's members all existed earlier; all complete."""
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

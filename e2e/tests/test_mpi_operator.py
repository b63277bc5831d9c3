"""A real operator, unchanged: the Kubeflow MPI Operator v0.6.0 with its scheduler-plugins
gang option pointed at ``gang-scheduler`` (issue 19, item 5). See :mod:`e2e.mpi_operator`
for how it is built and run.

Each scenario runs twice, with only the operator's ``--gang-scheduling`` changed:

* ``gang-scheduler``: the claims hold: an MPIJob whose workers cannot all fit gets no pod
  bound, two MPIJobs of 75 % of the cluster each run one after the other, and the
  PodGroups the operator created say why they wait;
* ``default-scheduler`` (the operator still creates its PodGroups, the stock scheduler
  ignores them): the control. The same checks find the jobs half-placed, which is what
  makes the first run mean something.

Cluster: 4 fake nodes of 4 CPUs. Launcher and workers form one fake-kubelet rendezvous,
so a job missing a rank hangs, as ``mpirun`` does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import deploy_kit as dk
from e2e.gang import GangStack, Recorder
from e2e.harness.cluster import Cluster, ControlPlane, HarnessError
from e2e.harness.fixtures import (
    GANG_SCHEDULER,
    POD_GROUP_LABEL,
    NodeSet,
    NotYet,
    get_podgroup,
    list_pods,
    wait_for,
)
from e2e.harness.process import ManagedProcess
from e2e.mpi_operator import (
    MpiOperator,
    create_mpijob,
    delete_mpijobs,
    find_mpi_operator,
    get_mpijob,
    install_release,
    mpijob,
    mpijob_condition,
    release_docs,
)

pytestmark = pytest.mark.e2e

DEFAULT_SCHEDULER = "default-scheduler"
NODES, NODE_CPU = 4, "4"
HOLD = 3.0
"""Seconds a placement is watched after it settled, to show it does not change."""
WAITING_REASONS = {"InsufficientCapacity", "WaitingBehindOlderGang"}


# ----------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def mpi_release(control_plane: Cluster) -> tuple[Path, list[dk.Doc]]:
    """The built operator and its release manifest, applied (CRD, RBAC, namespace)."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the operator as a local process on the local control plane")
    try:
        bin_dir = find_mpi_operator()
    except HarnessError as e:
        if os.environ.get("E2E_SKIP") == "1":
            pytest.skip(f"E2E_SKIP=1 and the MPI Operator is unavailable: {e}")
        pytest.fail(f"cannot build the MPI Operator: {e}", pytrace=False)
    docs = release_docs(bin_dir)
    install_release(docs)
    return bin_dir, docs


@pytest.fixture(scope="module")
def mpi_operator(
    control_plane: Cluster, mpi_release: tuple[Path, list[dk.Doc]]
) -> Iterator[MpiOperator]:
    assert isinstance(control_plane, ControlPlane)
    op = MpiOperator(control_plane, *mpi_release)
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture(scope="module", params=[GANG_SCHEDULER, DEFAULT_SCHEDULER])
def scheduler(request: pytest.FixtureRequest, mpi_operator: MpiOperator) -> str:
    """The scheduler the operator hands its pods to. Module scope, so pytest runs every
    gang-scheduler test before the operator is restarted for the control runs."""
    name: str = request.param
    if name == GANG_SCHEDULER:
        stack: GangStack = request.getfixturevalue("gang_stack")
        for p, wait in ((stack.extender, 30), (stack.scheduler, 60)):
            if not p.running():  # an earlier test may have killed it, as `gang` handles
                p.restart()
                p.wait_ready(wait)
    else:
        sched: ManagedProcess | None = request.getfixturevalue("default_scheduler")
        assert sched is not None and sched.running()
    mpi_operator.start(name)
    return name


@pytest.fixture
def mpi_ns(namespace: str, fake_nodes: NodeSet) -> Iterator[str]:
    """A namespace on 4 nodes of 4 CPUs; its MPIJobs are deleted first at the end (the
    namespace fixture does not know them, and the operator would recreate their pods)."""
    fake_nodes.add_nodes(NODES, prefix=namespace, cpu=NODE_CPU, memory="16Gi")
    try:
        yield namespace
    finally:
        delete_mpijobs(namespace)


# ----------------------------------------------------------------------------------------
# Helpers


def scheduled_condition(ns: str, group: str) -> tuple[str, str] | None:
    """(reason, message) of the PodGroup's ``Scheduled`` condition, if written yet."""
    pg = get_podgroup(ns, group) or {}
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Scheduled":
            return str(c.get("reason")), str(c.get("message"))
    return None


def pods_of(ns: str, group: str) -> list[dict[str, Any]]:
    return list_pods(ns, f"{POD_GROUP_LABEL}={group}")


def check_podgroup(pg: dict[str, Any] | None, group: str, min_member: int) -> None:
    """The PodGroup is the operator's: owned by the MPIJob, minMember = workers + 1."""
    assert pg is not None, f"the operator made no PodGroup {group}"
    owners = [(o["kind"], o["name"]) for o in pg["metadata"].get("ownerReferences", [])]
    assert owners == [("MPIJob", group)], owners
    assert pg["spec"]["minMember"] == min_member, pg["spec"]


def check_pods(ns: str, group: str, min_member: int, scheduler: str) -> None:
    """The operator labelled launcher and workers and set their schedulerName."""
    pods = pods_of(ns, group)
    roles = sorted(p["metadata"]["labels"].get("training.kubeflow.org/job-role", "?")
                   for p in pods)
    assert roles == ["launcher"] + ["worker"] * (min_member - 1), roles
    assert {p["spec"]["schedulerName"] for p in pods} == {scheduler}


def wait_all_pods(ns: str, group: str, count: int) -> None:
    """Until the operator (workers) and the job controller (launcher) made every pod."""
    def made() -> object:
        n = len(pods_of(ns, group))
        return n >= count or NotYet({"pods of " + group: n})

    wait_for(made, 60, f"{count} pods of MPIJob {group}", logs=["mpi-operator"])


def half_placed(rec: Recorder, group: str, min_member: int) -> str | None:
    """A description of how the gang is partly bound now, or None if it is not."""
    n = len(rec.bound(group))
    if 0 < n < min_member:
        return f"{group}: {n} of {min_member} pods bound"
    return None


def wait_settled(rec: Recorder, count: int) -> None:
    """Until ``count`` pods are bound (the cluster is full), then ``HOLD`` more seconds."""
    wait_for(lambda: len(rec.bound()) >= count or NotYet(
        {n: r.node for n, r in rec.bound().items()}), 60, f"{count} pods bound")
    time.sleep(HOLD)


# ----------------------------------------------------------------------------------------
# Scenarios


def test_mpijob_whose_workers_cannot_all_fit_is_never_half_placed(
    scheduler: str, mpi_ns: str
) -> None:
    """4 workers of 4 CPUs and a launcher of 1 CPU (17 CPUs) on 16 CPUs.

    Gang: nothing is bound, and the PodGroup says the job does not fit. Default: 4 of the 5
    pods are bound (4 workers, or the launcher and 3 workers) and hang.
    """
    ns, name, members = mpi_ns, "big", 5
    with Recorder(ns) as rec:
        create_mpijob(ns, mpijob(name, workers=4, worker_resources={"cpu": "4", "memory": "1Gi"},
                                 launcher_resources={"cpu": "1", "memory": "1Gi"}))
        wait_all_pods(ns, name, members)
        check_podgroup(get_podgroup(ns, name), name, members)
        check_pods(ns, name, members, scheduler)
        if scheduler == GANG_SCHEDULER:
            def explained() -> tuple[str, str] | NotYet:
                c = scheduled_condition(ns, name)
                return c if c is not None and c[0] == "InsufficientCapacity" else NotYet(c)

            cond = wait_for(explained, 30, f"PodGroup {name} explains why it waits")
            time.sleep(HOLD)
            assert rec.bound() == {}, f"gang scheduler bound part of {name}: {rec.history}"
            assert half_placed(rec, name, members) is None
            print(f"\n[gang] PodGroup {name}: {cond[0]}: {cond[1]}; 0 of 5 pods bound")
        else:
            wait_settled(rec, 4)
            partial = half_placed(rec, name, members)
            assert partial is not None, (
                f"control: the default scheduler was expected to half-place {name}, "
                f"bound: {rec.bound()}")
            assert not mpijob_condition(get_mpijob(ns, name), "Succeeded")
            print(f"\n[default] half-placed, hung: {partial}: "
                  f"{sorted(rec.bound())}")


def test_two_mpijobs_of_75_percent_run_one_after_the_other(
    scheduler: str, mpi_ns: str
) -> None:
    """Two MPIJobs of 11 workers and a launcher, 1 CPU each (12 of 16 CPUs), at once.

    Gang: one is bound whole and runs; the other's PodGroup says why it waits; it is bound
    whole once the first finished; both succeed. Default: the two interleave and at least
    one is half-placed (both, typically, and then both hang).
    """
    ns, members = mpi_ns, 12
    jobs = ("alpha", "beta")
    res = {"cpu": "1", "memory": "256Mi"}
    # Long enough that the operator (5 API calls/s by default) has made all of the second
    # job's pods while the first still runs: then its PodGroup waits for capacity, not for
    # members, and says so. With 2 s it sometimes only ever said WaitingForMembers.
    run_seconds = 6.0
    reasons: dict[str, set[tuple[str, str]]] = {j: set() for j in jobs}
    # The operator deletes its PodGroups once a job finished (cleanPodPolicy): keep them.
    pgs: dict[str, dict[str, Any] | None] = dict.fromkeys(jobs)
    with Recorder(ns) as rec:
        for j in jobs:
            create_mpijob(ns, mpijob(j, workers=members - 1, worker_resources=res,
                                     launcher_resources=res, run_seconds=run_seconds))
        if scheduler != GANG_SCHEDULER:
            wait_settled(rec, 16)
            partial = [p for j in jobs if (p := half_placed(rec, j, members))]
            assert partial, (f"control: the default scheduler was expected to half-place "
                             f"one of {jobs}; bound: {rec.bound()}")
            hung = [j for j in jobs if not mpijob_condition(get_mpijob(ns, j), "Succeeded")]
            print(f"\n[default] half-placed: {partial}; not succeeded after "
                  f"{HOLD:.0f}s settled: {hung}")
            return

        def both_succeeded() -> object:
            for j in jobs:
                pgs[j] = pgs[j] or get_podgroup(ns, j)
                if not rec.bound(j) and (c := scheduled_condition(ns, j)):
                    reasons[j].add(c)
            done = [j for j in jobs if mpijob_condition(get_mpijob(ns, j), "Succeeded")]
            return len(done) == len(jobs) or NotYet(
                {"succeeded": done, "bound": {j: len(rec.bound(j)) for j in jobs},
                 "conditions": {j: scheduled_condition(ns, j) for j in jobs}})

        wait_for(both_succeeded, 120, "both MPIJobs Succeeded", logs=["mpi-operator",
                 "gang-extender", "gang-kube-scheduler"])
        for j in jobs:
            check_podgroup(pgs[j], j, members)
            check_pods(ns, j, members, scheduler)
            rec.assert_never_partial(j, members)
            assert len(rec.bound(j)) == members, rec.bound(j)
        first, second = sorted(jobs, key=lambda j: rec.bind_times(j)[0])
        first_done = min(r.phase_at["Succeeded"] for r in rec.bound(first).values()
                         if "Succeeded" in r.phase_at)
        assert rec.bind_times(second)[0] >= first_done, (
            f"{second} was bound before {first} finished: {rec.history}")
        seen = {r for r, _ in reasons[second]}
        assert seen & WAITING_REASONS, (
            f"PodGroup {second} never said why it waited: {reasons[second]}")
        print(f"\n[gang] {first} ran first; {second} bound "
              f"{rec.bind_times(second)[0] - first_done:.1f}s after {first} finished; "
              f"PodGroup {second} said: {sorted(reasons[second])}")


def test_wait_for_workers_ready_needs_min_available(scheduler: str, mpi_ns: str) -> None:
    """``launcherCreationPolicy: WaitForWorkersReady`` creates the launcher once the workers
    are ready, but the operator's ``minMember`` still counts it: without
    ``schedulingPolicy.minAvailable`` = workers the gang never forms (and its PodGroup says
    so); with it, the job runs. What docs/install.md tells MPI Operator users."""
    if scheduler != GANG_SCHEDULER:
        pytest.skip("a gang-scheduler interaction; the default scheduler has no quorum")
    ns, workers = mpi_ns, 3
    res = {"cpu": "1", "memory": "256Mi"}
    stuck = mpijob("stuck", workers, res, res)
    fixed = mpijob("fixed", workers, res, res)
    for job in (stuck, fixed):
        job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    fixed["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": workers}
    with Recorder(ns) as rec:
        create_mpijob(ns, stuck)
        create_mpijob(ns, fixed)

        def fixed_done_stuck_explained() -> object:
            c = scheduled_condition(ns, "stuck")
            done = mpijob_condition(get_mpijob(ns, "fixed"), "Succeeded")
            if done and c is not None and c[0] == "WaitingForMembers":
                return c
            return NotYet({"fixed succeeded": done, "stuck condition": c})

        cond = wait_for(fixed_done_stuck_explained, 60, "fixed succeeded, stuck explained")
        assert isinstance(cond, tuple)
        assert f"{workers} of {workers + 1} members exist" in cond[1], cond
        assert len(rec.bound("fixed")) == workers + 1
        assert rec.bound("stuck") == {}, rec.bound("stuck")
        print(f"\n[gang] WaitForWorkersReady without minAvailable: {cond[0]}: {cond[1]}")

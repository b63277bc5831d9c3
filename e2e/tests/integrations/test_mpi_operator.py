"""A real operator, unchanged: the Kubeflow MPI Operator v0.6.0 with its scheduler-plugins
gang option pointed at ``gang-scheduler`` (issue 19, item 5). How it is built and run:
:mod:`e2e.integrations.mpi_operator`; the scenarios, shared with the Training Operator's
test, and the control runs against the default scheduler: :mod:`e2e.integrations.operators`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import deploy_kit as dk
from e2e.gang import Recorder
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.mpi_operator import MPIJOB, MpiOperator, install_release, mpijob, release_docs
from e2e.integrations.operators import (
    DEFAULT_SCHEDULER,
    NODE_CPU,
    NODE_MEMORY,
    NODES,
    obtain_operator,
    scenario_too_big,
    scenario_two_at_75_percent,
    scheduled_condition,
    use_scheduler,
)

pytestmark = pytest.mark.e2e

LOGS = ["mpi-operator", "gang-extender", "gang-kube-scheduler"]


@pytest.fixture(scope="module")
def mpi_release(control_plane: Cluster) -> tuple[Path, list[dk.Doc]]:
    """The built operator and its release manifest, applied (CRD, RBAC, namespace)."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the operator as a local process on the local control plane")
    bin_dir = obtain_operator("mpi-operator")
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
    """The scheduler the operator hands its pods to (``--gang-scheduling``). Module scope,
    so pytest runs every gang-scheduler test before the operator restarts for the control."""
    name: str = request.param
    use_scheduler(request, name)
    mpi_operator.start(name)
    return name


@pytest.fixture
def mpi_ns(namespace: str, fake_nodes: NodeSet) -> Iterator[str]:
    """A namespace on 4 nodes of 4 CPUs; its MPIJobs are deleted first at the end."""
    fake_nodes.add_nodes(NODES, prefix=namespace, cpu=NODE_CPU, memory=NODE_MEMORY)
    try:
        yield namespace
    finally:
        MPIJOB.delete_all(namespace)


def test_mpijob_whose_workers_cannot_all_fit_is_never_half_placed(
    scheduler: str, mpi_ns: str
) -> None:
    print("\n" + scenario_too_big(MPIJOB, scheduler, mpi_ns, "mpi-operator"))


def test_two_mpijobs_of_75_percent_run_one_after_the_other(scheduler: str, mpi_ns: str) -> None:
    print("\n" + scenario_two_at_75_percent(MPIJOB, scheduler, mpi_ns, LOGS))


def test_wait_for_workers_ready_needs_min_available(scheduler: str, mpi_ns: str) -> None:
    """``launcherCreationPolicy: WaitForWorkersReady`` creates the launcher once the workers
    are ready, but the operator's ``minMember`` still counts it: without
    ``schedulingPolicy.minAvailable`` = workers the gang never forms (and its PodGroup says
    so); with it, the job runs. What docs/integrations.md tells MPI Operator users."""
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
        MPIJOB.create(ns, stuck)
        MPIJOB.create(ns, fixed)

        def fixed_done_stuck_explained() -> object:
            c = scheduled_condition(ns, "stuck")
            done = MPIJOB.succeeded(ns, "fixed")
            if done and c is not None and c[0] == "WaitingForMembers":
                return c
            return NotYet({"fixed succeeded": done, "stuck condition": c})

        cond = wait_for(fixed_done_stuck_explained, 60, "fixed succeeded, stuck explained",
                        logs=LOGS)
        assert isinstance(cond, tuple)
        assert f"{workers} of {workers + 1} members exist" in cond[1], cond
        assert len(rec.bound("fixed")) == workers + 1
        assert rec.bound("stuck") == {}, rec.bound("stuck")
        print(f"\n[gang] WaitForWorkersReady without minAvailable: {cond[0]}: {cond[1]}")

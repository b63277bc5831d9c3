"""A second real operator, unchanged: the Kubeflow Training Operator v1.7.0 with
``--gang-scheduler-name=gang-scheduler``, driven through PyTorchJobs (issue 19, item 5).
How it is built and run: :mod:`e2e.integrations.training_operator`; the scenarios, the same
as the MPI Operator's, and the control runs against the default scheduler:
:mod:`e2e.integrations.operators`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER
from e2e.integrations.operators import (
    DEFAULT_SCHEDULER,
    NODE_CPU,
    NODE_MEMORY,
    NODES,
    obtain_operator,
    scenario_too_big,
    scenario_two_at_75_percent,
    use_scheduler,
)
from e2e.integrations.training_operator import PYTORCHJOB, TrainingOperator, install

pytestmark = pytest.mark.e2e

LOGS = ["training-operator", "gang-extender", "gang-kube-scheduler"]


@pytest.fixture(scope="module")
def training_bin(control_plane: Cluster) -> Path:
    """The built operator, its CRD and RBAC applied."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the operator as a local process on the local control plane")
    bin_dir = obtain_operator("training-operator")
    install(bin_dir)
    return bin_dir


@pytest.fixture(scope="module")
def training_operator(control_plane: Cluster, training_bin: Path) -> Iterator[TrainingOperator]:
    assert isinstance(control_plane, ControlPlane)
    op = TrainingOperator(control_plane, training_bin)
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture(scope="module", params=[GANG_SCHEDULER, DEFAULT_SCHEDULER])
def scheduler(request: pytest.FixtureRequest, training_operator: TrainingOperator) -> str:
    """The scheduler the operator hands its pods to (``--gang-scheduler-name``). Module
    scope, so every gang-scheduler test runs before the operator restarts for the control."""
    name: str = request.param
    use_scheduler(request, name)
    training_operator.start(name)
    return name


@pytest.fixture
def torch_ns(namespace: str, fake_nodes: NodeSet) -> Iterator[str]:
    """A namespace on 4 nodes of 4 CPUs; its PyTorchJobs are deleted first at the end."""
    fake_nodes.add_nodes(NODES, prefix=namespace, cpu=NODE_CPU, memory=NODE_MEMORY)
    try:
        yield namespace
    finally:
        PYTORCHJOB.delete_all(namespace)


def test_pytorchjob_whose_workers_cannot_all_fit_is_never_half_placed(
    scheduler: str, torch_ns: str
) -> None:
    print("\n" + scenario_too_big(PYTORCHJOB, scheduler, torch_ns, "training-operator"))


def test_two_pytorchjobs_of_75_percent_run_one_after_the_other(
    scheduler: str, torch_ns: str
) -> None:
    print("\n" + scenario_two_at_75_percent(PYTORCHJOB, scheduler, torch_ns, LOGS))

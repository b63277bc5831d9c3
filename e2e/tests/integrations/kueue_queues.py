"""Real Kueue in front of the gang scheduler, set up for a test: the Kueue process for the
module, and per test a Kueue-managed namespace on 4 fake nodes of 4 CPUs with a
ResourceFlavor, a ClusterQueue of the quota asked for and the LocalQueue ``team``. The
Kueue tests and the JobSet-under-Kueue tests both run on it, so it is a module of its
own rather than a test module the other imports from. How Kueue itself runs:
:mod:`e2e.integrations.kueue`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.gang import GangStack
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.target import kube
from e2e.integrations.kueue import Kueue
from e2e.integrations.kueue_objects import (
    create_cluster_queue,
    create_flavor,
    create_local_queue,
    create_topology,
    delete_cluster_objects,
    managed_namespace,
)
from e2e.integrations.operators import obtain_operator

NODES, NODE_CPU = 4, "4"
LOCAL_QUEUE = "team"
TAS_NODE_LABEL = "e2e.gang-extender.io/tas"


@pytest.fixture(scope="module")
def kueue(control_plane: Cluster) -> Iterator[Kueue]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs Kueue as a local process on the local control plane")
    k = Kueue(control_plane, obtain_operator("kueue"))
    k.install()
    try:
        yield k
    finally:
        k.stop()


@dataclass
class Queues:
    """What a test's set-up made: its namespace and its ClusterQueue."""

    ns: str
    cluster_queue: str


SetUp = Callable[..., Queues]


@pytest.fixture
def queues(kueue: Kueue, gang: GangStack, namespace: str,
           fake_nodes: NodeSet) -> Iterator[SetUp]:
    """``set_up(cpu_quota=12, config=None, node_labels=None, topology=None)``: Kueue
    running with ``config`` merged into its Configuration; a Kueue-managed namespace on 4
    nodes of 4 CPUs (node ``i`` labelled ``node_labels[i]``); a ResourceFlavor (of the
    Topology ``topology``, with its levels, and selecting this test's nodes, if given); a
    ClusterQueue of ``cpu_quota`` CPUs for this namespace only; the LocalQueue ``team``."""
    made: list[tuple[str, str, str | None]] = []

    def set_up(cpu_quota: int = 12, config: dict[str, Any] | None = None,
               node_labels: list[dict[str, str]] | None = None,
               topology: list[str] | None = None) -> Queues:
        kueue.start(config)
        for i in range(NODES):
            labels = dict(node_labels[i]) if node_labels else {}
            if topology:
                labels[TAS_NODE_LABEL] = namespace
            fake_nodes.add_node(f"{namespace}-{i}", cpu=NODE_CPU, memory="16Gi",
                                labels=labels)
        managed_namespace(namespace)
        flavor, cq = f"{namespace}-flavor", f"{namespace}-cq"
        topo = f"{namespace}-topology" if topology else None
        if topo and topology:
            create_topology(topo, topology)
            create_flavor(flavor, {TAS_NODE_LABEL: namespace}, topology=topo)
        else:
            create_flavor(flavor)
        create_cluster_queue(cq, flavor, cpu=str(cpu_quota), memory="64Gi",
                             namespaces=[namespace])
        create_local_queue(namespace, LOCAL_QUEUE, cq)
        made.append((flavor, cq, topo))
        return Queues(namespace, cq)

    try:
        yield set_up
    finally:
        kube().batch.delete_collection_namespaced_job(
            namespace, propagation_policy="Background", _preload_content=False)
        for flavor, cq, topo in made:
            delete_cluster_objects("clusterqueues", [cq])
            delete_cluster_objects("resourceflavors", [flavor])
            if topo:
                delete_cluster_objects("topologies", [topo])

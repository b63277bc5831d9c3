"""The fake kubelet's rendezvous: a pod of a group of N completes only once N pods of the
group have each run their time. Gang tests rely on it to show that a half-placed job hangs.
"""

from __future__ import annotations

import time

import pytest

from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import create_pod, delete_pod
from e2e.harness.queries import pod_phases
from e2e.harness.waiting import wait_for, wait_pods_phase

pytestmark = pytest.mark.e2e


def test_rendezvous_completes_only_when_all_members_ran(
    namespace: str, fake_nodes: NodeSet
) -> None:
    nodes = fake_nodes.add_nodes(3, prefix=namespace)

    def worker(i: int) -> None:
        # Bound directly (spec.nodeName): this exercises the kubelet, not a scheduler.
        create_pod(namespace, f"worker-{i}", run_seconds=1, rendezvous="allreduce",
                   rendezvous_size=3, spec_extra={"nodeName": nodes[i]})

    worker(0)
    worker(1)
    wait_pods_phase(namespace, "Running", 2, timeout=20)
    time.sleep(2.5)  # well past run-seconds: without the third worker nobody finishes
    assert sorted(pod_phases(namespace).values()) == ["Running", "Running"]

    worker(2)
    wait_pods_phase(namespace, "Succeeded", 3, timeout=20)


def test_rendezvous_member_deleted_before_quorum_does_not_count(
    namespace: str, fake_nodes: NodeSet
) -> None:
    node = fake_nodes.add_node(f"{namespace}-0")
    for i in range(2):
        create_pod(namespace, f"w-{i}", run_seconds=0.5, rendezvous="g", rendezvous_size=2,
                   spec_extra={"nodeName": node})
    # Delete one before it can have run its time, then replace it.
    delete_pod(namespace, "w-1")
    wait_for(lambda: "w-1" not in pod_phases(namespace), 10, "w-1 deleted")
    time.sleep(1.5)
    assert pod_phases(namespace) == {"w-0": "Running"}
    create_pod(namespace, "w-2", run_seconds=0.5, rendezvous="g", rendezvous_size=2,
               spec_extra={"nodeName": node})
    wait_pods_phase(namespace, "Succeeded", 2, timeout=20)

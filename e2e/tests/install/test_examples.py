"""Every manifest in examples/ is applied as a user would (``kubectl apply -n <ns> -f``),
scheduled by the gang scheduler as a whole gang, and runs to completion.

The only change to the manifests is the fake kubelet's run-time annotation on each pod (the
local control plane runs no containers); schedulerName, labels, PodGroups and resources are
exactly what users read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import deploy_kit as dk
from e2e.fakedra import FakeDriver, delete_cluster_object
from e2e.gang import GangStack, Recorder
from e2e.harness.base import REPO_ROOT
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.kubelet.pod import ANN_RUN_SECONDS
from e2e.harness.objects import GANG_SCHEDULER, POD_GROUP_LABEL
from e2e.harness.queries import get_job, job_condition, list_pods
from e2e.harness.target import ClusterApis
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.jobset import (
    JobSetController,
    delete_jobsets,
    get_jobset,
    jobset_condition,
)
from e2e.integrations.operators import obtain_operator
from extender.core.model.sources import jobset_gang_name

pytestmark = pytest.mark.e2e

EXAMPLES = REPO_ROOT / "examples"

# Nodes each example gets: enough for its gang, GPU nodes tainted as GPU nodes usually are.
NODES: dict[str, dict[str, Any]] = {
    "mpi-indexed-job.yaml": {"count": 2, "cpu": "4", "memory": "8Gi"},
    "bare-pods-gang.yaml": {"count": 2, "cpu": "1", "memory": "1Gi"},
    "gpu-gang.yaml": {"count": 2, "cpu": "16", "memory": "64Gi", "gpus": 4,
                      "taints": [{"key": "nvidia.com/gpu", "value": "present",
                                  "effect": "NoSchedule"}]},
    "elastic-job.yaml": {"count": 2, "cpu": "2", "memory": "2Gi"},
    # One rack of two nodes: the gang asks for one.
    "topology-rack-gang.yaml": {"count": 2, "cpu": "16", "memory": "64Gi",
                                "labels": {"topology.example.com/rack": "r1"}},
    # Five pods of half a CPU: three nodes of one CPU hold them (and the JobSet controller).
    "jobset.yaml": {"count": 3, "cpu": "1", "memory": "1Gi"},
    # Two nodes of 2 GPUs each (DEVICES): one worker's claim per node.
    "gpu-gang-dra.yaml": {"count": 2, "cpu": "16", "memory": "64Gi"},
}
# Examples whose devices (DRA) a stand-in driver publishes for their nodes: the driver
# their DeviceClass selects, devices per node, and the DeviceClass they create.
DEVICES = {"gpu-gang-dra.yaml": ("gpu.nvidia.com", 2, "training-gpu")}
# Examples of objects an operator turns into pods, with a test of their own below.
OPERATOR_EXAMPLES = {"jobset.yaml"}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(NODES)


def _load(path: Path) -> list[dk.Doc]:
    docs = dk.load_docs(path.read_text())
    for d in docs:
        meta = None
        if d["kind"] == "Pod":
            meta = d["metadata"]
        elif d["kind"] == "Job":
            meta = d["spec"]["template"].setdefault("metadata", {})
        elif d["kind"] == "JobSet":
            for rjob in d["spec"]["replicatedJobs"]:
                pod = rjob["template"]["spec"]["template"].setdefault("metadata", {})
                pod.setdefault("annotations", {})[ANN_RUN_SECONDS] = "1"
        if meta is not None:
            meta.setdefault("annotations", {})[ANN_RUN_SECONDS] = "1"
    return docs


def _expected_pods(docs: list[dk.Doc]) -> int:
    return sum(1 if d["kind"] == "Pod" else d["spec"].get("completions", 1)
               for d in docs if d["kind"] in ("Pod", "Job"))


@pytest.mark.parametrize("example", sorted(set(NODES) - OPERATOR_EXAMPLES))
def test_example_gang_is_scheduled_and_completes(
    example: str, gang: GangStack, fake_nodes: NodeSet, namespace: str, kube: ClusterApis,
    request: pytest.FixtureRequest,
) -> None:
    docs = _load(EXAMPLES / example)
    shape = dict(NODES[example])
    nodes = fake_nodes.add_nodes(shape.pop("count"), prefix=namespace, **shape)
    if example in DEVICES:
        _publish_devices(request, nodes, *DEVICES[example])
    groups = {d["metadata"]["name"]: d["spec"]["minMember"]
              for d in docs if d["kind"] == "PodGroup"}
    assert groups, f"{example} has no PodGroup"
    for d in docs:
        if d["kind"] in ("Pod", "Job"):
            spec = d["spec"] if d["kind"] == "Pod" else d["spec"]["template"]["spec"]
            assert spec["schedulerName"] == GANG_SCHEDULER, example

    with Recorder(namespace) as rec:
        errors = dk.apply(dk.dynamic_client(kube.api), docs, namespace=namespace)
        assert not errors, "\n".join(errors)
        jobs = [d["metadata"]["name"] for d in docs if d["kind"] == "Job"]
        want = _expected_pods(docs)

        def done() -> object:
            pods = list_pods(namespace)
            phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
            jobs_done = all(job_condition(get_job(namespace, j), "Complete") for j in jobs)
            succeeded = sum(1 for ph in phases.values() if ph == "Succeeded")
            if jobs_done and succeeded >= want:
                return phases
            return NotYet({"pods": phases, "jobs complete": jobs_done})

        wait_for(done, 90, f"{example}: every gang scheduled and complete", logs=gang.logs())

        for group, min_member in groups.items():
            rec.assert_never_partial(group, min_member)
        bound = rec.bound()
        assert len(bound) == want, f"bound {sorted(bound)}, expected {want} pods"
        assert all(r.group in groups for r in bound.values()), {
            n: r.group for n, r in bound.items()}
        assert {r.node for r in bound.values()} <= set(fake_nodes.added)


def _publish_devices(request: pytest.FixtureRequest, nodes: list[str], driver: str,
                     count: int, device_class: str) -> None:
    """`count` devices of `driver` on each node (e2e/fakedra.py), and once the test is
    done, the example's cluster-scoped DeviceClass and the slices deleted."""
    fake = FakeDriver(driver)
    request.addfinalizer(fake.close)
    request.addfinalizer(lambda: delete_cluster_object("deviceclasses", device_class))
    for n in nodes:
        fake.publish(n, count)


def test_examples_label_pods_with_their_podgroup() -> None:
    """Static: each pod (or pod template) names a PodGroup of the same file."""
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs = dk.load_docs(path.read_text())
        groups = {d["metadata"]["name"] for d in docs if d["kind"] == "PodGroup"}
        for d in docs:
            if d["kind"] == "Pod":
                labels = d["metadata"].get("labels", {})
            elif d["kind"] == "Job":
                labels = d["spec"]["template"]["metadata"].get("labels", {})
            else:
                continue
            assert labels.get(POD_GROUP_LABEL) in groups, (path.name, d["metadata"]["name"])


@pytest.fixture(scope="module")
def jobset_controller(control_plane: Cluster) -> Iterator[JobSetController]:
    """The JobSet controller v0.11.1 (e2e/integrations/jobset.py), for the JobSet example."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the JobSet controller as a local process on the local control plane")
    c = JobSetController(control_plane, obtain_operator("jobset"))
    c.install()
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_the_jobset_example_is_one_gang_and_completes(
    jobset_controller: JobSetController, gang: GangStack, fake_nodes: NodeSet,
    namespace: str, kube: ClusterApis
) -> None:
    """examples/jobset.yaml, applied as is (no PodGroup in it): its five pods are bound as
    one gang, and the JobSet completes."""
    docs = _load(EXAMPLES / "jobset.yaml")
    shape = dict(NODES["jobset.yaml"])
    fake_nodes.add_nodes(shape.pop("count"), prefix=namespace, **shape)
    (js,) = docs
    name = js["metadata"]["name"]
    want = sum(r["replicas"] * r["template"]["spec"]["parallelism"]
               for r in js["spec"]["replicatedJobs"])
    try:
        with Recorder(namespace) as rec:
            errors = dk.apply(dk.dynamic_client(kube.api), docs, namespace=namespace)
            assert not errors, "\n".join(errors)
            wait_for(lambda: jobset_condition(namespace, name, "Completed") or NotYet(
                {n: r.node for n, r in rec.bound().items()}), 90,
                "jobset.yaml: the JobSet Completed", logs=gang.logs())
            uid = (get_jobset(namespace, name) or {})["metadata"]["uid"]
            group = jobset_gang_name(name, uid, 0)
            rec.assert_never_partial(group, want)
            assert len(rec.bound(group)) == want == len(rec.bound()), rec.history
            assert {r.node for r in rec.bound().values()} <= set(fake_nodes.added)
    finally:
        delete_jobsets(namespace)

"""Job-made gangs (issue 28, item 4): with the `WorkloadWithJob` gate on, kube-controller-
manager's Job controller creates a Workload and a PodGroup (scheduling.k8s.io) for a Job
and sets `spec.schedulingGroup.podGroupName` on its pods; the user writes a plain Indexed
Job with `schedulerName: gang-scheduler` (on 1.37 also `spec.scheduling` asking for a
gang) and no PodGroup, and it is placed whole.

What the Job controller does differs by release (its job_scheduling_manager.go):

* 1.36: only an Indexed Job with parallelism > 1 and completions == parallelism, always a
  gang of `parallelism` (v1alpha2 PodGroup, `spec.podGroupTemplateRef`);
* 1.37: every Job without a controller owner; the policy is the Job's
  `spec.scheduling.schedulingPolicy` (`gang: {}` makes it a gang of `parallelism`), and
  without it `basic`: a PodGroup whose pods are placed one by one (v1beta1 PodGroup,
  `spec.workloadRef`).

The gate is needed on kube-apiserver too, on both releases: it grants the Job
controller's bootstrap role the Workloads and PodGroups, and on 1.37 it keeps the Job's
`spec.scheduling` (without it the field is dropped on create).

The gate is off on the session's control plane (on 1.37 it would give every Job of the
other tests a PodGroup), so this module runs a control plane of its own with it on the API
server and the controller manager, and the gang stack as shipped (deploy/).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.gang import DEFAULT_ARGS, Recorder, scheduler_config, start_extender
from e2e.harness.base import HarnessError
from e2e.harness.binaries import find_etcd, find_k8s_bin
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.fixtures import NodeSet
from e2e.harness.k8s import client
from e2e.harness.objects import GANG_SCHEDULER, create_job, delete_pod
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.queries import get_job, get_pod, job_condition, list_pods, pod_phases
from e2e.harness.target import cluster_in_use, kube
from e2e.harness.versions import k8s_minor, workload_api_version
from e2e.harness.waiting import NotYet, wait_for, wait_pods_phase

pytestmark = pytest.mark.e2e

# One pod per node: 1 CPU asked of nodes of 1.5.
POD_CPU, NODE_CPU = "1", "1500m"


@dataclass
class JobPlane:
    cluster: ControlPlane
    fake_kubelet: FakeKubelet
    extender: ManagedProcess
    scheduler: ManagedProcess
    minor: tuple[int, int]

    @property
    def logs(self) -> list[ManagedProcess | str]:
        return [self.extender, self.scheduler, "kube-controller-manager"]

    @property
    def version(self) -> str:
        """The scheduling.k8s.io version the Job controller writes PodGroups in."""
        return workload_api_version(self.minor)

    def job_extra(self) -> dict[str, Any]:
        """What the Job needs to be a gang: nothing on 1.36 (an Indexed Job of
        completions == parallelism always is one); `spec.scheduling` asking for the gang
        policy on 1.37, whose default is `basic`."""
        if self.minor >= (1, 37):
            return {"scheduling": {"schedulingPolicy": {"gang": {}}}}
        return {}


@pytest.fixture(scope="module")
def job_plane() -> Iterator[JobPlane]:
    """The local control plane with WorkloadWithJob, the fake kubelet and the gang stack;
    the binaries are obtained (or their absence handled) as for the session's."""
    if os.environ.get("E2E_KUBECONFIG"):
        pytest.skip("needs the local control plane with the WorkloadWithJob gate "
                    "(E2E_KUBECONFIG is set)")
    try:
        bin_dir, etcd = find_k8s_bin(), find_etcd()
    except HarnessError as e:
        if os.environ.get("E2E_SKIP") == "1":
            pytest.skip(f"E2E_SKIP=1 and control-plane binaries unavailable: {e}")
        pytest.fail(f"cannot obtain control-plane binaries: {e}", pytrace=False)
    cp = ControlPlane(bin_dir, etcd, workload_api=True, workload_with_job=True).start()
    procs: list[Any] = []
    try:
        with cluster_in_use(cp):
            fk = FakeKubelet(cp).start()
            procs.append(fk)
            port = free_port()
            ext = start_extender(cp, port, DEFAULT_ARGS, "gang-extender")
            procs.append(ext)
            sched = cp.start_scheduler(scheduler_config(port), "gang-kube-scheduler")
            procs.append(sched)
            yield JobPlane(cp, fk, ext, sched, k8s_minor(bin_dir))
    finally:
        for p in reversed(procs):
            with contextlib.suppress(Exception):
                p.stop()
        cp.stop()


@pytest.fixture
def ns(request: pytest.FixtureRequest, job_plane: JobPlane) -> str:
    """A namespace of the module's cluster (which goes away with the cluster)."""
    test: str = request.node.name
    name = "jobgang-" + test.removeprefix("test_")[:30].replace("_", "-").strip("-")
    k = kube()
    k.core.create_namespace({"metadata": {"name": name}}, _preload_content=False)

    def sa_ready() -> bool:
        k.core.read_namespaced_service_account("default", name, _preload_content=False)
        return True

    wait_for(sa_ready, 30, f"service account default in {name}",
             logs=["kube-controller-manager"])
    return name


@pytest.fixture
def nodes(job_plane: JobPlane) -> Iterator[NodeSet]:
    ns_ = NodeSet(job_plane.fake_kubelet)
    try:
        yield ns_
    finally:
        ns_.cleanup()


def run_indexed_job(plane: JobPlane, ns: str, name: str, n: int,
                    extra: dict[str, Any] | None = None) -> None:
    """An Indexed Job of `n` pods (one per node), our schedulerName, no PodGroup of its
    own: whatever makes it a gang is the Job controller's doing."""
    create_job(ns, name, parallelism=n, completions=n, cpu=POD_CPU, memory="64Mi",
               scheduler_name=GANG_SCHEDULER, run_seconds=1, completion_mode="Indexed",
               job_extra=plane.job_extra() if extra is None else extra)


def job_podgroup(plane: JobPlane, ns: str, n: int) -> dict[str, Any]:
    """The one PodGroup the Job controller made, once all `n` pods exist naming it in
    spec.schedulingGroup (so the gang is the Job controller's, not a test's)."""

    def made() -> dict[str, Any] | NotYet:
        raw = kube().custom.list_namespaced_custom_object(
            "scheduling.k8s.io", plane.version, ns, "podgroups", _preload_content=False)
        groups = json.loads(raw.data)["items"]
        pods = list_pods(ns)
        named = {((p["spec"].get("schedulingGroup") or {}).get("podGroupName") or "")
                 for p in pods}
        if len(groups) != 1 or len(pods) != n or named != {groups[0]["metadata"]["name"]}:
            return NotYet({"podgroups": [g["metadata"]["name"] for g in groups],
                           "pods' schedulingGroup": sorted(named), "pods": len(pods)})
        out: dict[str, Any] = groups[0]
        return out

    pg = wait_for(made, 30, f"the Job controller's PodGroup and {n} pods naming it",
                  logs=plane.logs)
    assert isinstance(pg, dict)
    return pg


def scheduled_message(ns: str, pod: str) -> str:
    for c in ((get_pod(ns, pod) or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message", ""))
    return ""


def wait_complete(plane: JobPlane, ns: str, name: str, n: int) -> None:
    def complete() -> dict[str, Any] | NotYet:
        job = get_job(ns, name)
        if job_condition(job, "Complete"):
            assert job is not None
            return job
        return NotYet({"job status": (job or {}).get("status"), "pods": pod_phases(ns)})

    job = wait_for(complete, 60, f"Job {name} reaches condition Complete", logs=plane.logs)
    assert isinstance(job, dict)
    assert job["status"]["succeeded"] == n


def wait_turned_away(plane: JobPlane, ns: str, name: str, n: int) -> None:
    """Until a pod of the gang of PodGroup `name` is turned away by the extender, saying
    the gang's size and that n - 1 fit ("gang workload-api:<ns>/<name>: can never be
    placed ...: needs 3 × {cpu: 1, ...}; 2 fit; ...")."""
    pods = sorted(p["metadata"]["name"] for p in list_pods(ns))
    want = (f"gang workload-api:{ns}/{name}: ", f"needs {n} × ", f"; {n - 1} fit")

    def turned_away() -> str | NotYet:
        msg = scheduled_message(ns, pods[0])
        return msg if all(w in msg for w in want) else NotYet(msg)

    wait_for(turned_away, 30, f"{pods[0]} waits, saying {n - 1} of {n} fit",
             logs=plane.logs)


def waits_whole_then_runs(plane: JobPlane, ns: str, nodes: NodeSet, job: str,
                          start: Callable[[], None], n: int = 3) -> None:
    """`n` pods, room for `n - 1`: none is bound (the message says n - 1 fit); one more
    node lets all of them in as one burst, and the Job completes. `start` makes the
    Job's pods come."""
    for i in range(n - 1):
        nodes.add_node(f"{ns}-{i}", cpu=NODE_CPU, memory="4Gi")
    with Recorder(ns) as rec:
        start()
        pg = job_podgroup(plane, ns, n)
        name = pg["metadata"]["name"]
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == n, pg["spec"]
        owners = {o["kind"]: o["name"] for o in pg["metadata"].get("ownerReferences") or []}
        assert owners.get("Job") == job, owners
        wait_turned_away(plane, ns, name, n)
        assert rec.bound() == {}, f"bound before the whole Job fit: {rec.history}"
        nodes.add_node(f"{ns}-{n - 1}", cpu=NODE_CPU, memory="4Gi")
        added = time.monotonic()
        wait_for(lambda: len(rec.bound()) == n or NotYet(rec.history), 30,
                 f"all {n} pods of the Job bound", logs=plane.logs)
        rec.assert_never_partial(name, n)
    assert len({r.node for r in rec.bound().values()}) == n
    times = rec.bind_times(name)
    print(f"Job {job}: {n} pods bound {times[-1] - added:.2f} s after the node was added, "
          f"within {times[-1] - times[0]:.2f} s of each other")
    wait_complete(plane, ns, job, n)


def test_job_gang_waits_whole_until_a_node_is_added(
        job_plane: JobPlane, ns: str, nodes: NodeSet) -> None:
    waits_whole_then_runs(job_plane, ns, nodes, "train",
                          lambda: run_indexed_job(job_plane, ns, "train", 3))


def test_job_created_suspended_is_a_gang_once_resumed(
        job_plane: JobPlane, ns: str, nodes: NodeSet) -> None:
    """What Kueue does to a Job: create it suspended, resume it once admitted. The Job
    controller makes the Workload and PodGroup only for a Job that never started (no
    pods, no startTime, no Suspended condition: isNewJob), on its first sync; the gang
    must survive the suspension."""

    def start() -> None:
        run_indexed_job(job_plane, ns, "queued", 3,
                        extra={**job_plane.job_extra(), "suspend": True})

        def suspended() -> bool | NotYet:
            job = get_job(ns, "queued")
            return job_condition(job, "Suspended") or NotYet((job or {}).get("status"))

        wait_for(suspended, 30, "Job queued has condition Suspended", logs=job_plane.logs)
        kube().batch.patch_namespaced_job("queued", ns, {"spec": {"suspend": False}},
                                          _preload_content=False)

    waits_whole_then_runs(job_plane, ns, nodes, "queued", start)


def test_job_gang_that_fits_is_placed_whole(
        job_plane: JobPlane, ns: str, nodes: NodeSet) -> None:
    n = 4
    for i in range(n):
        nodes.add_node(f"{ns}-{i}", cpu=NODE_CPU, memory="4Gi")
    with Recorder(ns) as rec:
        run_indexed_job(job_plane, ns, "fits", n)
        name = job_podgroup(job_plane, ns, n)["metadata"]["name"]
        wait_for(lambda: len(rec.bound()) == n or NotYet(rec.history), 30,
                 f"all {n} pods of the Job bound", logs=job_plane.logs)
        rec.assert_never_partial(name, n)
    wait_complete(job_plane, ns, "fits", n)


def test_job_gang_member_replaced_is_placed_alone(
        job_plane: JobPlane, ns: str, nodes: NodeSet) -> None:
    """A member of a running Job-made gang is lost (deleted, as an eviction or a lost node
    would): the Job controller's replacement names the same PodGroup, and the gang's
    other members are bound, so the quorum needs only it: it is placed on its own, and
    the Job completes."""
    n = 3
    for i in range(n):
        nodes.add_node(f"{ns}-{i}", cpu=NODE_CPU, memory="4Gi")
    create_job(ns, "lossy", parallelism=n, completions=n, cpu=POD_CPU, memory="64Mi",
               scheduler_name=GANG_SCHEDULER, run_seconds=20, completion_mode="Indexed",
               job_extra=job_plane.job_extra())
    name = job_podgroup(job_plane, ns, n)["metadata"]["name"]
    wait_pods_phase(ns, "Running", n, timeout=30, logs=job_plane.logs)
    first = sorted(p["metadata"]["name"] for p in list_pods(ns))
    delete_pod(ns, first[0])

    def replaced() -> dict[str, Any] | NotYet:
        new = [p for p in list_pods(ns) if p["metadata"]["name"] not in first]
        return new[0] if len(new) == 1 and new[0]["spec"].get("nodeName") else NotYet(
            pod_phases(ns))

    pod = wait_for(replaced, 60, f"a replacement of {first[0]} bound", logs=job_plane.logs)
    assert isinstance(pod, dict)
    assert pod["spec"]["schedulingGroup"]["podGroupName"] == name, pod["spec"]
    phases = pod_phases(ns)
    assert [phases.get(k) for k in first[1:]] == ["Running"] * (n - 1), phases
    wait_complete(job_plane, ns, "lossy", n)


def test_job_without_gang_policy_on_1_37_is_placed_pod_by_pod(
        job_plane: JobPlane, ns: str, nodes: NodeSet) -> None:
    """What docs/workload-api.md warns of: on 1.37 a Job without `spec.scheduling` still gets
    a PodGroup from the Job controller, with the `basic` policy, so it is no gang: of
    three pods with room for two, two are bound."""
    if job_plane.minor < (1, 37):
        pytest.skip("1.36's Job controller has no spec.scheduling: an Indexed Job of "
                    "completions == parallelism is always a gang there")
    n = 3
    for i in range(n - 1):
        nodes.add_node(f"{ns}-{i}", cpu=NODE_CPU, memory="4Gi")
    with Recorder(ns) as rec:
        run_indexed_job(job_plane, ns, "basic", n, extra={})
        pg = job_podgroup(job_plane, ns, n)
        assert "basic" in pg["spec"]["schedulingPolicy"], pg["spec"]
        wait_for(lambda: len(rec.bound()) == n - 1 or NotYet(rec.history), 30,
                 f"{n - 1} pods of the basic Job bound one by one", logs=job_plane.logs)


def test_job_gang_scaled_down_on_1_37_is_placed_at_its_new_size(
        job_plane: JobPlane, ns: str, nodes: NodeSet) -> None:
    """1.37's Job controller follows a change of parallelism into the PodGroup's
    minCount (1.36's API server refuses the change for a gang Job: `cannot change
    parallelism for a Job referencing gang-scheduled PodGroup`); the extender follows the
    PodGroup: a Job of 3 waiting with room for 2, scaled to 2, is placed at once."""
    if job_plane.minor < (1, 37):
        pytest.skip("1.36's JobValidation admission refuses a change of parallelism of a "
                    "Job whose PodGroup is a gang")
    n = 3
    for i in range(n - 1):
        nodes.add_node(f"{ns}-{i}", cpu=NODE_CPU, memory="4Gi")
    with Recorder(ns) as rec:
        run_indexed_job(job_plane, ns, "elastic", n)
        name = job_podgroup(job_plane, ns, n)["metadata"]["name"]
        wait_turned_away(job_plane, ns, name, n)
        assert rec.bound() == {}, f"bound before the whole Job fit: {rec.history}"
        kube().batch.patch_namespaced_job(
            "elastic", ns, {"spec": {"parallelism": n - 1, "completions": n - 1}},
            _preload_content=False)
        wait_for(lambda: len(rec.bound()) == n - 1 or NotYet(rec.history), 30,
                 f"the {n - 1} pods left bound once the Job is scaled to {n - 1}",
                 logs=job_plane.logs)
        rec.assert_never_partial(name, n - 1)
        pg = kube().custom.get_namespaced_custom_object(
            "scheduling.k8s.io", job_plane.version, ns, "podgroups", name)
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == n - 1, pg["spec"]
    wait_complete(job_plane, ns, "elastic", n - 1)


def test_job_controller_is_granted_workloads_and_podgroups(job_plane: JobPlane) -> None:
    """Why kube-apiserver needs WorkloadWithJob on both releases: the bootstrap role of
    the Job controller (system:controller:job-controller, used when the controllers run
    with their own service accounts, as kubeadm runs them) gets the rules for Workloads
    and PodGroups only from an API server with the gate. This control plane runs the
    controllers with admin credentials, so the Job tests above would pass without it."""
    raw = client.RbacAuthorizationV1Api(kube().api).read_cluster_role(
        "system:controller:job-controller", _preload_content=False)
    rules = [r for r in json.loads(raw.data)["rules"]
             if "scheduling.k8s.io" in (r.get("apiGroups") or [])]
    assert any({"workloads", "podgroups"} <= set(r.get("resources") or [])
               and "create" in r.get("verbs", []) for r in rules), rules

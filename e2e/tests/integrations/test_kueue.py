"""Real Kueue v0.17.0 in front of the gang scheduler (issue 28, item 6): Kueue admits by
ClusterQueue quota, we place what it admitted, whole or not at all. How Kueue runs here:
:mod:`e2e.integrations.kueue`.

A Kueue-managed Job forms a gang with us the way any Job does: the scheduler-plugins
label on its pod template and a PodGroup of the Job's size. Kueue's own plain pod groups
(pods labelled ``kueue.x-k8s.io/pod-group-name``) need nothing else: the extender reads
those labels (core/model/sources.py). Nodes: 4 fake nodes of 4 CPUs; every member asks 3 CPUs,
so each node holds one member and 4 members fit at once. A job's pods form one
fake-kubelet rendezvous, so a job missing a member hangs, as a distributed job does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from e2e.gang import Recorder
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import (
    GANG_SCHEDULER,
    create_pod,
    create_podgroup,
    delete_pod,
    pod_metadata,
    pod_spec,
)
from e2e.harness.queries import get_job, job_condition
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.kueue import (
    ADMISSION_GATE,
    GROUP_LABEL,
    QUEUE_LABEL,
    TOPOLOGY_GATE,
    TOTAL_ANNOTATION,
)
from e2e.integrations.kueue_objects import (
    WorkloadTimeline,
    is_true,
    workloads,
)
from e2e.integrations.operators import scheduled_condition
from e2e.tests.integrations.kueue_queues import LOCAL_QUEUE, NODES, SetUp, kueue, queues

pytestmark = pytest.mark.e2e

__all__ = ["kueue", "queues"]  # the fixtures of kueue_queues.py, used by name below

LOGS = ["kueue", "gang-extender", "gang-kube-scheduler"]
MEMBER_CPU, MEMBERS = "3", 3
BLOCK_LABEL = "e2e.gang-extender.io/block"
HOSTNAME = "kubernetes.io/hostname"


def queued_job(ns: str, name: str, members: int, run_seconds: float,
               annotations: dict[str, str] | None = None) -> None:
    """A Job in the LocalQueue, its pods a gang of ours (a PodGroup of ``members``)."""
    create_podgroup(ns, name, members)
    template = {
        "metadata": pod_metadata(pod_group=name, annotations=annotations,
                                 rendezvous=name, rendezvous_size=members,
                                 run_seconds=run_seconds),
        "spec": pod_spec(cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER,
                         run_seconds=run_seconds)}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
            "spec": {"parallelism": members, "completions": members, "backoffLimit": 0,
                     "template": template}}
    kube().batch.create_namespaced_job(ns, body, _preload_content=False)


def job_done(ns: str, name: str) -> bool:
    return job_condition(get_job(ns, name), "Complete")


def admitted(ns: str) -> dict[str, bool]:
    """Kueue's verdict per Workload, keyed by the Workload's owner (Job) or pod group."""
    out: dict[str, bool] = {}
    for wl in workloads(ns):
        owners = wl["metadata"].get("ownerReferences") or []
        key = (wl["metadata"].get("labels") or {}).get(GROUP_LABEL) or wl["metadata"]["name"]
        if owners and owners[0]["kind"] == "Job":
            key = owners[0]["name"]
        out[key] = is_true(wl, "Admitted")
    return out


def two_gangs_one_waits(rec: Recorder, ns: str, gangs: tuple[str, str],
                        done: Callable[[str], bool]) -> str:
    """Both gangs admitted by Kueue at once; one is bound whole, the other is never
    partly bound, waits until the first finished, then is bound whole; both finish."""
    seen_admitted: set[str] = set()
    first_done: dict[str, float] = {}

    def both_done() -> object:
        seen_admitted.update(g for g, ok in admitted(ns).items() if ok)
        for g in gangs:
            if g not in first_done and done(g):
                first_done[g] = time.monotonic()
        return len(first_done) == 2 or NotYet({
            "admitted": sorted(seen_admitted), "done": sorted(first_done),
            "bound": {g: len(rec.bound(g)) for g in gangs}})

    # Both admitted before anything ran: quota does not stand between them.
    wait_for(lambda: set(gangs) <= {g for g, ok in admitted(ns).items() if ok}
             or NotYet(admitted(ns)), 30, f"Kueue admits both {gangs}", logs=LOGS)
    wait_for(both_done, 90, f"{gangs} both finish", logs=LOGS)
    for g in gangs:
        rec.assert_never_partial(g, MEMBERS)
        assert len(rec.bound(g)) == MEMBERS, rec.bound(g)
    first, second = sorted(gangs, key=lambda g: rec.bind_times(g)[0])
    finished = min(r.phase_at["Succeeded"] for r in rec.bound(first).values()
                   if "Succeeded" in r.phase_at)
    waited = rec.bind_times(second)[0] - finished
    assert waited >= 0, f"{second} was bound before {first} finished: {rec.history}"
    return f"{first} ran first; {second} bound whole {waited:.1f}s after {first} finished"


def test_job_in_local_queue_is_admitted_by_quota_then_placed_whole(queues: SetUp) -> None:
    """Quota of 12 CPUs: ``train`` (9) is admitted, ``later`` (9 more) waits in Kueue,
    suspended and without pods; ``train``'s pods name us and are bound in one burst,
    its PodGroup says ``Bound``; when it finished ``later`` is admitted and runs."""
    ns = queues().ns
    with Recorder(ns) as rec:
        queued_job(ns, "train", MEMBERS, run_seconds=3)
        wait_for(lambda: admitted(ns).get("train") or NotYet(admitted(ns)), 30,
                 "Kueue admits train", logs=LOGS)
        queued_job(ns, "later", MEMBERS, run_seconds=1)
        wait_for(lambda: len(rec.bound("train")) == MEMBERS or NotYet(rec.history), 30,
                 "train bound", logs=LOGS)
        def says_bound() -> object:
            c = scheduled_condition(ns, "train")
            return (c is not None and c[0] == "Bound") or NotYet(c)

        wait_for(says_bound, 15, "PodGroup train says Bound", logs=LOGS)
        wait_for(lambda: admitted(ns).get("later") is False or NotYet(admitted(ns)), 15,
                 "Kueue holds later back (a Workload, not admitted)", logs=LOGS)
        assert not job_done(ns, "train"), "train finished before later was seen held"
        assert (get_job(ns, "later") or {})["spec"].get("suspend") is True
        assert rec.bound("later") == {}
        wait_for(lambda: (job_done(ns, "train") and job_done(ns, "later"))
                 or NotYet(admitted(ns)), 60, "train then later complete", logs=LOGS)
    rec.assert_never_partial("train", MEMBERS)
    rec.assert_never_partial("later", MEMBERS)
    pods = kube().core.list_namespaced_pod(ns, label_selector="job-name=train").items
    assert {p.spec.scheduler_name for p in pods} == {GANG_SCHEDULER}
    assert min(rec.bind_times("later")) >= max(rec.bind_times("train"))


def test_two_admitted_jobs_that_do_not_fit_together_run_one_after_the_other(
        queues: SetUp) -> None:
    """The seed's deadlock with Kueue on top: quota admits both Jobs (18 of 24 CPUs) but
    the nodes hold 4 of their 6 members. One Job is bound whole, the other waits whole,
    its PodGroup saying why, and runs when the first finished."""
    ns = queues(cpu_quota=24).ns
    reasons: set[str] = set()

    def done(job: str) -> bool:
        if (c := scheduled_condition(ns, job)) is not None:
            reasons.add(c[0])
        return job_done(ns, job)

    with Recorder(ns) as rec:
        for j in ("alpha", "beta"):
            queued_job(ns, j, MEMBERS, run_seconds=4)
        print(two_gangs_one_waits(rec, ns, ("alpha", "beta"), done))
    assert reasons & {"InsufficientCapacity", "WaitingBehindOlderGang"}, reasons


def pod_group(ns: str, group: str, members: int, run_seconds: float) -> list[dict[str, Any]]:
    """A Kueue plain pod group: ``members`` pods in the LocalQueue, labelled with the
    group's name and annotated with its size, naming our scheduler."""
    out = []
    for i in range(members):
        md = pod_metadata(labels={QUEUE_LABEL: LOCAL_QUEUE, GROUP_LABEL: group},
                          annotations={TOTAL_ANNOTATION: str(members)},
                          rendezvous=group, rendezvous_size=members, run_seconds=run_seconds)
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{group}-{i}", "namespace": ns, **md},
                "spec": pod_spec(cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER,
                                 run_seconds=run_seconds)}
        out.append(kube().core.create_namespaced_pod(ns, body).to_dict())
    return out


def test_kueue_pod_groups_are_admitted_and_placed_whole(queues: SetUp) -> None:
    """Two Kueue pod groups of 3 pods (the pod integration: gated at creation by Kueue's
    pod webhook, ungated on admission). Both admitted; one is bound whole, the other is
    never partly bound and runs when the first finished."""
    ns = queues(cpu_quota=24).ns
    with Recorder(ns) as rec:
        created = pod_group(ns, "left", MEMBERS, 4) + pod_group(ns, "right", MEMBERS, 4)
        gates = {p["metadata"]["name"]: [g["name"] for g in p["spec"]["scheduling_gates"] or []]
                 for p in created}
        assert all(ADMISSION_GATE in g for g in gates.values()), gates

        def group_done(group: str) -> bool:
            phases = [p.status.phase for p in kube().core.list_namespaced_pod(
                ns, label_selector=f"{GROUP_LABEL}={group}").items]
            return len(phases) == MEMBERS and set(phases) == {"Succeeded"}

        print(two_gangs_one_waits(rec, ns, ("left", "right"), group_done))


def test_pods_kueue_topology_ungates_are_placed_only_on_their_selected_nodes(
        queues: SetUp) -> None:
    """Topology Aware Scheduling: blocks b1 (nodes 0, 1) and b2 (nodes 2, 3); a plain pod
    outside Kueue fills node 0. A Job of 2 that requires one block is admitted with b2
    (b1 has room for one member only); Kueue creates its pods gated and ungates each with
    a node selector on one host of b2. Every member is bound to its own selected host: a
    plan that swapped two members, or used node 1, would never be bound."""
    blocks = [{BLOCK_LABEL: "b1"}, {BLOCK_LABEL: "b1"}, {BLOCK_LABEL: "b2"},
              {BLOCK_LABEL: "b2"}]
    q = queues(node_labels=blocks, topology=[BLOCK_LABEL, HOSTNAME])
    ns, nodes = q.ns, [f"{q.ns}-{i}" for i in range(NODES)]
    members = 2
    with Recorder(ns) as rec:
        create_pod(ns, "outside", cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER,
                   node_selector={HOSTNAME: nodes[0]})
        wait_for(lambda: len(rec.bound()) == 1 or NotYet(rec.history), 30, "outside bound")
        queued_job(ns, "tas", members, run_seconds=2,
                   annotations={"kueue.x-k8s.io/podset-required-topology": BLOCK_LABEL})
        wait_for(lambda: len(rec.bound("tas")) == members or NotYet(
            {"admitted": admitted(ns), "history": rec.history}), 45, "tas bound", logs=LOGS)
        wait_for(lambda: job_done(ns, "tas") or NotYet(admitted(ns)), 30, "tas completes",
                 logs=LOGS)
    rec.assert_never_partial("tas", members)
    template = (get_job(ns, "tas") or {})["spec"]["template"]["spec"]
    assert TOPOLOGY_GATE in [g["name"] for g in template.get("schedulingGates") or []], (
        f"Kueue did not gate the Job's pods for TAS: {template.get('schedulingGates')}")
    placed = {}
    for p in kube().core.list_namespaced_pod(ns, label_selector="job-name=tas").items:
        selector = p.spec.node_selector or {}
        assert selector.get(HOSTNAME) == p.spec.node_name, (
            f"{p.metadata.name}: selected {selector}, bound to {p.spec.node_name}")
        placed[p.metadata.name] = p.spec.node_name
    assert sorted(placed.values()) == nodes[2:], placed


# ----------------------------------------------------------------------------------------
# Kueue's waitForPodsReady beside our bind barrier (measured; docs/integrations.md quotes it).
# Kueue restarts once with this Configuration; these tests come last in the module so
# the tests above run against the defaults.

PODS_READY_TIMEOUT = 8
WAIT_FOR_PODS_READY = {"waitForPodsReady": {
    "timeout": f"{PODS_READY_TIMEOUT}s", "blockAdmission": True,
    "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 1,
                          "backoffMaxSeconds": 2}}}


def test_block_admission_admits_the_second_job_once_the_first_is_ready(
        queues: SetUp) -> None:
    """waitForPodsReady with blockAdmission: the two Jobs of the test above, but Kueue
    admits the second only once every pod of the first is Ready. Measured: admission to
    bound (our barrier) and to PodsReady for the first; when the second was admitted,
    and bound, after that."""
    ns = queues(cpu_quota=24, config=WAIT_FOR_PODS_READY).ns
    jobs = ("alpha", "beta")
    with Recorder(ns) as rec, WorkloadTimeline(ns) as tl:
        for j in jobs:
            queued_job(ns, j, MEMBERS, run_seconds=4)
        wait_for(lambda: all(job_done(ns, j) for j in jobs) or NotYet(
            {"admitted": admitted(ns), "bound": {j: len(rec.bound(j)) for j in jobs}}),
            90, "both Jobs complete", logs=LOGS)
    first, second = sorted(jobs, key=lambda j: tl.at(j, "Admitted=True") or float("inf"))
    t = {(j, s): tl.at(j, s) for j in jobs for s in ("Admitted=True", "PodsReady=True")}
    assert all(v is not None for v in t.values()), t
    a1, r1 = t[(first, "Admitted=True")], t[(first, "PodsReady=True")]
    a2 = t[(second, "Admitted=True")]
    assert a1 is not None and r1 is not None and a2 is not None
    assert a2 >= r1, f"{second} admitted {r1 - a2:.1f}s before {first} was ready"
    for j in jobs:
        rec.assert_never_partial(j, MEMBERS)
    finished = min(r.phase_at["Succeeded"] for r in rec.bound(first).values()
                   if "Succeeded" in r.phase_at)
    print(f"{first}: admitted -> all bound {max(rec.bind_times(first)) - a1:.2f}s, "
          f"-> PodsReady {r1 - a1:.2f}s; {second} admitted {a2 - r1:.2f}s after that, "
          f"bound whole {min(rec.bind_times(second)) - finished:.2f}s after {first} "
          f"finished")


def test_pods_ready_timeout_evicts_a_gang_that_cannot_be_placed_and_nothing_was_bound(
        queues: SetUp, fake_nodes: NodeSet) -> None:
    """Two plain pods outside Kueue take 2 of the 4 nodes; the Job of 3 is admitted by
    quota but cannot be placed: we bind none of it. After the PodsReady timeout Kueue
    evicts it (the Job is suspended, its pods deleted) and requeues it; once the plain
    pods are gone it is admitted again and placed whole. Measured: admission to eviction,
    requeues, blockers gone to bound."""
    ns = queues(cpu_quota=24, config=WAIT_FOR_PODS_READY).ns
    blockers = [f"blocker-{i}" for i in range(2)]
    with Recorder(ns) as rec, WorkloadTimeline(ns) as tl:
        for b in blockers:
            create_pod(ns, b, cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER)
        wait_for(lambda: len(rec.bound()) == 2 or NotYet(rec.history), 30, "blockers bound")
        queued_job(ns, "gamma", MEMBERS, run_seconds=2)
        wait_for(lambda: tl.requeues.get("gamma", 0) >= 1 or NotYet(
            {"requeues": tl.requeues, "admitted": admitted(ns)}),
            PODS_READY_TIMEOUT + 30, "Kueue evicts and requeues gamma", logs=LOGS)
        assert rec.bound("gamma") == {}, f"part of gamma was bound: {rec.history}"
        freed = time.monotonic()
        for b in blockers:
            delete_pod(ns, b)
        wait_for(lambda: job_done(ns, "gamma") or NotYet(
            {"bound": len(rec.bound("gamma")), "admitted": admitted(ns)}),
            60, "gamma completes", logs=LOGS)
    rec.assert_never_partial("gamma", MEMBERS)
    admitted_at = tl.at("gamma", "Admitted=True")
    evicted_at = tl.at("gamma", "Evicted=True:PodsReadyTimeout")
    assert admitted_at is not None and evicted_at is not None, tl.first
    print(f"gamma: admitted -> evicted (PodsReadyTimeout) {evicted_at - admitted_at:.2f}s "
          f"(timeout {PODS_READY_TIMEOUT}s); requeues {tl.requeues.get('gamma')}; "
          f"blockers deleted -> bound whole {min(rec.bind_times('gamma')) - freed:.2f}s")

"""A real JobSet controller v0.11.1 beside the gang scheduler (issue 45, item 1): a JobSet
whose pods name ``gang-scheduler`` is one gang, with no PodGroup written by anyone. How
the controller runs here: :mod:`e2e.integrations.jobset`.

The JobSet of the issue: a driver (1 Job x 1 pod) and workers (2 Jobs x 2 pods), every
pod 4 CPUs, on fake nodes of 4 CPUs. Before JobSets were read, 4 of its 5 pods were bound
on four nodes and the fifth stayed pending.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet
from e2e.harness.kubelet.pod import ANN_FAIL, ANN_RUN_SECONDS
from e2e.harness.queries import list_pods
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.jobset import (
    ATTEMPT_LABEL,
    NAME_LABEL,
    JobSetController,
    create_jobset,
    delete_jobsets,
    get_jobset,
    jobset,
    jobset_condition,
    replicated_job,
)
from e2e.tests.integrations.jobset_controller import controller, wait_known
from extender.core.model.sources import (
    JOBSET_GANG_ANNOTATION,
    jobset_gang_name,
    jobset_job_gang_name,
    jobset_rjob_gang_name,
)

pytestmark = pytest.mark.e2e

__all__ = ["controller"]  # the fixture of jobset_controller.py, used by js_ns

LOGS = ["jobset", "gang-extender", "gang-kube-scheduler"]
NODE_CPU, POD_CPU = "4", "4"
HOLD = 3.0
"""Seconds a placement is watched after it settled, to show it does not change."""


@pytest.fixture
def js_ns(controller: JobSetController, gang: GangStack, namespace: str) -> Iterator[str]:
    """A namespace whose JobSets are deleted first at the end (the namespace fixture does
    not know them, and the controller would recreate the Jobs it deletes)."""
    try:
        yield namespace
    finally:
        delete_jobsets(namespace)


def gang_of(ns: str, name: str, attempt: int = 0) -> str:
    """The gang (Recorder group) of one attempt of a JobSet, as its pods name it."""
    js = wait_for(lambda: get_jobset(ns, name) or NotYet(None), 30, f"JobSet {name}")
    return jobset_gang_name(name, js["metadata"]["uid"], attempt)


def pods_of(ns: str, name: str, attempt: int | None = None) -> list[dict[str, Any]]:
    selector = f"{NAME_LABEL}={name}"
    if attempt is not None:
        selector += f",{ATTEMPT_LABEL}={attempt}"
    return list_pods(ns, selector)


def wait_pods(ns: str, name: str, count: int, attempt: int | None = None) -> None:
    """Until the JobSet's Jobs made ``count`` pods (of ``attempt``)."""
    def made() -> object:
        n = len(pods_of(ns, name, attempt))
        return n >= count or NotYet({f"pods of {name}": n})

    wait_for(made, 60, f"{count} pods of JobSet {name}", logs=LOGS)


def the_issues_jobset(name: str, run_seconds: float) -> dict[str, object]:
    ann = {ANN_RUN_SECONDS: str(run_seconds)}
    return jobset(name, [replicated_job("driver", 1, 1, POD_CPU, ann),
                         replicated_job("workers", 2, 2, POD_CPU, ann)])


def test_a_jobset_is_placed_whole_once_a_fifth_node_appears(
        js_ns: str, fake_nodes: NodeSet, gang: GangStack) -> None:
    """Four 4-CPU nodes for five 4-CPU pods: nothing bound (before: 4 of 5). A fifth
    node: all five, in one burst."""
    ns = js_ns
    fake_nodes.add_nodes(4, prefix=ns, cpu=NODE_CPU, memory="16Gi")
    with Recorder(ns) as rec:
        create_jobset(ns, the_issues_jobset("train", 120.0))
        wait_pods(ns, "train", 5)
        group = gang_of(ns, "train")
        wait_known(gang, ns, group, 5)
        time.sleep(HOLD)
        assert rec.bound() == {}, f"part of the JobSet was bound: {rec.history}"
        fake_nodes.add_node(f"{ns}-4", cpu=NODE_CPU, memory="16Gi")
        wait_for(lambda: len(rec.bound(group)) == 5 or NotYet(
            {n: r.node for n, r in rec.bound().items()}), 60, "all 5 pods bound", logs=LOGS)
        rec.assert_never_partial(group, 5)
        assert len({r.node for r in rec.bound(group).values()}) == 5
    print(f"\n[gang] JobSet train: 0 of 5 bound on 4 nodes; 5 of 5 once a fifth appeared "
          f"(gang {group})")


def test_two_jobsets_needing_most_of_the_cluster_run_one_after_the_other(
        js_ns: str, fake_nodes: NodeSet) -> None:
    """Two JobSets of 3 pods (a driver and 1 Job x 2 workers), 4 CPUs each, created at
    once on four 4-CPU nodes: their pods interleave in the queue, yet one is bound whole,
    and the other whole once the first has finished."""
    ns = js_ns
    fake_nodes.add_nodes(4, prefix=ns, cpu=NODE_CPU, memory="16Gi")
    ann = {ANN_RUN_SECONDS: "5"}
    names = ("alpha", "beta")
    with Recorder(ns) as rec:
        for n in names:
            create_jobset(ns, jobset(n, [replicated_job("driver", 1, 1, POD_CPU, ann),
                                         replicated_job("workers", 1, 2, POD_CPU, ann)]))
        groups = {n: gang_of(ns, n) for n in names}

        def both_completed() -> object:
            done = [n for n in names if jobset_condition(ns, n, "Completed")]
            return len(done) == 2 or NotYet(
                {"completed": done, "bound": {n: len(rec.bound(g)) for n, g in groups.items()}})

        wait_for(both_completed, 120, "both JobSets Completed", logs=LOGS)
        for n in names:
            rec.assert_never_partial(groups[n], 3)
            assert len(rec.bound(groups[n])) == 3, rec.bound(groups[n])
        first, second = sorted(names, key=lambda n: rec.bind_times(groups[n])[0])
        first_done = min(r.phase_at["Succeeded"] for r in rec.bound(groups[first]).values()
                         if "Succeeded" in r.phase_at)
        assert rec.bind_times(groups[second])[0] >= first_done, (
            f"{second} was bound before {first} finished: {rec.history}")
    print(f"\n[gang] {first} ran whole first; {second} bound whole "
          f"{rec.bind_times(groups[second])[0] - first_done:.1f}s after {first} finished")


def test_a_restarted_jobset_is_placed_whole_again(js_ns: str, fake_nodes: NodeSet,
                                                  gang: GangStack) -> None:
    """A worker of the first attempt fails (its Job has no retries); the JobSet's failure
    policy (maxRestarts 1) recreates every Job. The new attempt's five pods are a gang of
    their own, which none of the old attempt's pods (running, then deleted) counts
    toward: with one of the five nodes cordoned meanwhile, none of them is bound (before
    JobSets were read: four); uncordoned, all five, in one burst."""
    ns = js_ns
    nodes = fake_nodes.add_nodes(5, prefix=ns, cpu=NODE_CPU, memory="16Gi")
    ok = {ANN_RUN_SECONDS: "120"}
    failing = {ANN_RUN_SECONDS: "6", ANN_FAIL: "true"}
    body = jobset("flaky", [replicated_job("driver", 1, 1, POD_CPU, ok),
                            replicated_job("workers", 1, 3, POD_CPU, ok),
                            replicated_job("faulty", 1, 1, POD_CPU, failing)],
                  max_restarts=1)
    with Recorder(ns) as rec:
        create_jobset(ns, body)
        first, second = gang_of(ns, "flaky", 0), gang_of(ns, "flaky", 1)
        wait_for(lambda: len(rec.bound(first)) == 5 or NotYet(rec.history), 60,
                 "attempt 0 bound", logs=LOGS)
        fake_nodes.cordon(nodes[0])
        wait_pods(ns, "flaky", 5, attempt=1)
        wait_known(gang, ns, second, 5)
        time.sleep(HOLD)
        assert rec.bound(second) == {}, f"part of attempt 1 was bound: {rec.history}"
        fake_nodes.uncordon(nodes[0])
        wait_for(lambda: len(rec.bound(second)) == 5 or NotYet(sorted(rec.bound(second))),
                 60, "attempt 1 bound whole", logs=LOGS)
        rec.assert_never_partial(first, 5)
        rec.assert_never_partial(second, 5)
        new = pods_of(ns, "flaky", 1)
        assert len(new) == 5 and all(p["spec"]["nodeName"] for p in new), new
    print(f"\n[gang] JobSet flaky: attempt 0 bound whole ({first}); restarted; attempt 1 "
          f"bound whole as its own gang ({second}), only once all 5 nodes were schedulable")


def test_in_order_stages_are_each_placed_whole(js_ns: str, fake_nodes: NodeSet,
                                               gang: GangStack) -> None:
    """``startupPolicy: InOrder``: JobSet creates the workers only once the driver is
    ready, so a quorum of all five would wait forever for pods never made. The driver
    is placed alone; then the four workers, beside it, all together: with three nodes
    left none is bound, with a fifth node all four at once."""
    ns = js_ns
    fake_nodes.add_nodes(4, prefix=ns, cpu=NODE_CPU, memory="16Gi")
    body = the_issues_jobset("staged", 120.0)
    body["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}  # type: ignore[index]
    with Recorder(ns) as rec:
        create_jobset(ns, body)
        group = gang_of(ns, "staged")
        wait_for(lambda: len(rec.bound(group)) == 1 or NotYet(rec.history), 60,
                 "the driver bound alone", logs=LOGS)
        wait_pods(ns, "staged", 5)  # the workers, made once the driver was ready
        wait_known(gang, ns, group, 5)  # the driver and, now, the workers
        time.sleep(HOLD)
        assert len(rec.bound(group)) == 1, f"part of the workers were bound: {rec.history}"
        fake_nodes.add_node(f"{ns}-4", cpu=NODE_CPU, memory="16Gi")
        wait_for(lambda: len(rec.bound(group)) == 5 or NotYet(sorted(rec.bound(group))),
                 60, "the four workers bound", logs=LOGS)
        workers = sorted(r.bound_at for n, r in rec.bound(group).items()
                         if "-workers-" in n and r.bound_at is not None)
        assert len(workers) == 4 and workers[-1] - workers[0] <= 2.0, rec.history
    print(f"\n[gang] InOrder JobSet staged: the driver bound alone, then its 4 workers "
          f"together once they fit (gang {group})")


def test_per_job_gangs_are_each_placed_whole(js_ns: str, fake_nodes: NodeSet) -> None:
    """The workers' pod template says ``gang-extender.x-k8s.io/jobset-gang: per-job``: each
    of their two Jobs is a gang of its own. On three 4-CPU nodes the driver and one worker
    Job are bound, the other Job none of its pods (not one of each); two more nodes, and
    it is bound whole."""
    ns = js_ns
    fake_nodes.add_nodes(3, prefix=ns, cpu=NODE_CPU, memory="16Gi")
    ann = {ANN_RUN_SECONDS: "120"}
    body = jobset("split", [replicated_job("driver", 1, 1, POD_CPU, ann),
                            replicated_job("workers", 2, 2, POD_CPU,
                                           {**ann, JOBSET_GANG_ANNOTATION: "per-job"})])
    with Recorder(ns) as rec:
        create_jobset(ns, body)
        base = gang_of(ns, "split")
        jobs = [jobset_job_gang_name(base, "workers", i) for i in range(2)]
        wait_pods(ns, "split", 5)
        wait_for(lambda: len(rec.bound()) == 3 or NotYet(rec.history), 60, "3 pods bound",
                 logs=LOGS)
        time.sleep(HOLD)
        counts = sorted(len(rec.bound(j)) for j in jobs)
        assert len(rec.bound(base)) == 1 and counts == [0, 2], rec.history
        fake_nodes.add_nodes(2, prefix=f"{ns}-more", cpu=NODE_CPU, memory="16Gi")
        wait_for(lambda: len(rec.bound()) == 5 or NotYet(rec.history), 60, "all 5 bound",
                 logs=LOGS)
        for j in jobs:
            rec.assert_never_partial(j, 2)
    print(f"\n[gang] JobSet split, workers per Job: the driver and one worker Job bound on 3 "
          f"nodes, the other Job whole once 2 more nodes came ({', '.join(jobs)})")



def test_a_jobset_split_per_replicated_job_places_each_whole_on_its_own(
        js_ns: str, fake_nodes: NodeSet, gang: GangStack) -> None:
    """``gang-extender.x-k8s.io/jobset-gang: per-replicated-job`` on the JobSet itself
    (which its controller copies to no pod): its replicated Jobs ``a`` and ``b``, each
    2 Jobs x 1 pod, are a gang each, of both their Jobs. On two 4-CPU nodes one is
    bound whole and the other none of its pods (not one Job of each); two more nodes,
    and the other is bound whole. Before, the JobSet was refused for this annotation and
    none of its pods bound."""
    ns = js_ns
    fake_nodes.add_nodes(2, prefix=ns, cpu=NODE_CPU, memory="16Gi")
    ann = {ANN_RUN_SECONDS: "120"}
    body = jobset("pair", [replicated_job("a", 2, 1, POD_CPU, ann),
                           replicated_job("b", 2, 1, POD_CPU, ann)],
                  annotations={JOBSET_GANG_ANNOTATION: "per-replicated-job"})

    def bound_of(rec: Recorder) -> dict[str, list[float]]:
        """Bind times of each replicated Job's pods (named pair-<rjob>-<job>-<pod>-...)."""
        out: dict[str, list[float]] = {"a": [], "b": []}
        for name, r in rec.bound().items():
            if r.bound_at is not None:
                out[name.split("-")[1]].append(r.bound_at)
        return out

    with Recorder(ns) as rec:
        create_jobset(ns, body)
        base = gang_of(ns, "pair")
        for r in ("a", "b"):
            wait_known(gang, ns, jobset_rjob_gang_name(base, r), 2)
        wait_pods(ns, "pair", 4)
        wait_for(lambda: len(rec.bound()) == 2 or NotYet(rec.history), 60, "2 pods bound",
                 logs=LOGS)
        time.sleep(HOLD)
        counts = {r: len(t) for r, t in bound_of(rec).items()}
        assert sorted(counts.values()) == [0, 2], f"not one gang whole: {rec.history}"
        first = max(counts, key=lambda r: counts[r])
        fake_nodes.add_nodes(2, prefix=f"{ns}-more", cpu=NODE_CPU, memory="16Gi")
        wait_for(lambda: len(rec.bound()) == 4 or NotYet(rec.history), 60, "all 4 bound",
                 logs=LOGS)
        for r, times in bound_of(rec).items():
            assert len(times) == 2 and max(times) - min(times) <= 2.0, (r, rec.history)
    print(f"\n[gang] JobSet pair, per-replicated-job on the JobSet: {first} bound whole on "
          f"2 nodes, the other none; it whole once 2 more nodes came "
          f"({jobset_rjob_gang_name(base, 'a')}, {jobset_rjob_gang_name(base, 'b')})")


RACK = "example.com/rack"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def test_exclusive_topology_places_each_job_in_a_rack_of_its_own(
        js_ns: str, fake_nodes: NodeSet, gang: GangStack) -> None:
    """``exclusive-topology: example.com/rack`` on a JobSet of 3 Jobs x 2 pods, on 3 racks
    of two 4-CPU nodes: JobSet's webhook makes each Job's pods affine to each other and
    repelling the other Jobs on the rack key, and creates a Job's second pod only once
    its leader is bound. The three leaders are the gang: one per rack, then each Job's
    second pod beside its leader."""
    ns = js_ns
    for r in range(3):
        for i in range(2):
            fake_nodes.add_node(f"{ns}-r{r}-{i}", cpu=NODE_CPU, memory="16Gi",
                                labels={RACK: f"r{r}"})
    body = jobset("excl", [replicated_job("workers", 3, 2, POD_CPU, {ANN_RUN_SECONDS: "120"})],
                  annotations={EXCLUSIVE: RACK})
    with Recorder(ns) as rec:
        create_jobset(ns, body)
        group = gang_of(ns, "excl")
        wait_for(lambda: len(rec.bound()) == 6 or NotYet(rec.history), 90, "all 6 bound",
                 logs=LOGS)
        rec.assert_never_partial(group, 3)
        racks: dict[str, set[str]] = {}
        for p in pods_of(ns, "excl"):
            job = p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
            racks.setdefault(job, set()).add(p["spec"]["nodeName"].rsplit("-", 2)[-2])
        assert sorted(map(sorted, racks.values())) == [["r0"], ["r1"], ["r2"]], racks
    print(f"\n[gang] JobSet excl, exclusive per rack: 3 Jobs x 2 pods, one rack each "
          f"({racks})")

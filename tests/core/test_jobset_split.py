"""A JobSet that splits itself (`gang-extender.x-k8s.io/jobset-gang` on the JobSet:
"per-job" or "per-replicated-job"): its pods, which carry none of the JobSet's
annotations, are moved by the core to the gangs its split gives (watch_input.py,
`sources.jobset_resolve`), whether the JobSet is read before or after them, or its split
changes; and each gang is placed whole on its own."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from extender.core.model.convert_jobset import JOBSET_GANG_ANNOTATION, jobset_groups_from_k8s
from extender.core.model.sources import (
    JOBSET,
    JOBSET_ATTEMPT_LABEL,
    JOBSET_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_RJOB_LABEL,
    JOBSET_UID_LABEL,
    membership,
)
from extender.core.model.types import GroupInfo, PodInfo, gang_key
from tests.core.sim import SimScheduler, node, pod

UID = "5b1d9e0a-77c2-4f3e-8a6b-2d4e6f8a0c1e"
SET = "train.0.5b1d9e0a"
SET_KEY = gang_key(JOBSET, "ml", SET)


def key(name: str) -> str:
    return gang_key(JOBSET, "ml", name)


def the_jobset(split: str | None, restarts: int = 0) -> list[GroupInfo]:
    """Two replicated Jobs, "a" and "b", each 1 Job x 2 pods."""
    tpl = {"spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    obj: dict[str, Any] = {
        "metadata": {"name": "train", "namespace": "ml", "uid": UID,
                     "annotations": {JOBSET_GANG_ANNOTATION: split} if split else {}},
        "spec": {"replicatedJobs": [{"name": r, "replicas": 1, "template": copy.deepcopy(tpl)}
                                    for r in ("a", "b")]},
        "status": {"restarts": restarts},
    }
    return jobset_groups_from_k8s(obj)


def jobset_pod(rjob: str, k: int, attempt: int = 0) -> PodInfo:
    labels = {JOBSET_NAME_LABEL: "train", JOBSET_UID_LABEL: UID,
              JOBSET_ATTEMPT_LABEL: str(attempt), JOBSET_RJOB_LABEL: rjob,
              JOBSET_INDEX_LABEL: "0"}
    return pod(f"train-{rjob}-0-{k}-{attempt}", cpu=4000, ns="ml", labels=labels,
               membership=membership(labels, {}, ""))


def read(sim: SimScheduler, groups: list[GroupInfo]) -> None:
    """As the JobSet informer applies them: the set's gang first."""
    for g in groups:
        sim.add_group(g)


def gang_of(sim: SimScheduler) -> dict[str, str | None]:
    return {p.name: p.gang for p in sim.cache.pods.values()}


def test_pods_seen_before_their_jobset_move_to_its_split_gangs() -> None:
    """The pods come first (the set's gang: the JobSet not read yet); the JobSet says
    per-replicated-job: each pod moves to its replicated Job's gang, tallies with it."""
    sim = SimScheduler()
    pods = [sim.add_pod(jobset_pod(r, k)) for r in ("a", "b") for k in range(2)]
    assert set(gang_of(sim).values()) == {SET_KEY}
    read(sim, the_jobset("per-replicated-job"))
    assert gang_of(sim) == {p.name: key(f"{SET}.{p.name.split('-')[1]}") for p in pods}
    assert sim.cache.gang_pods(SET_KEY) == []
    for r in ("a", "b"):
        g = sim.cache.groups[key(f"{SET}.{r}")]
        assert g.min_member == 2 and sim.cache.tally(g).members == 2
    assert sim.cache.tally(sim.cache.groups[SET_KEY]).members == 0


def test_pods_seen_after_their_jobset_join_its_split_gangs_at_once() -> None:
    sim = SimScheduler()
    read(sim, the_jobset("per-job"))
    p = sim.add_pod(jobset_pod("b", 1))
    assert sim.cache.pods[p.uid].gang == key(f"{SET}.b-0")


def test_each_replicated_job_is_placed_whole_on_its_own() -> None:
    """Two 4-CPU nodes, each replicated Job 2 pods of 4 CPU: as one gang of 4, nothing
    is bound; split per replicated Job, one is bound whole and the other not at all."""
    whole = SimScheduler()
    for i in range(2):
        whole.add_node(node(f"n{i}", cpu=4000))
    read(whole, the_jobset(None))
    for r in ("a", "b"):
        for k in range(2):
            whole.add_pod(jobset_pod(r, k))
    whole.run_all()
    assert whole.bound() == []

    sim = SimScheduler()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    pods = [sim.add_pod(jobset_pod(r, k)) for r in ("a", "b") for k in range(2)]
    read(sim, the_jobset("per-replicated-job"))
    sim.run_all()
    bound = {p.name.split("-")[1] for p in sim.bound()}
    assert len(sim.bound()) == 2 and len(bound) == 1, [p.name for p in sim.bound()]
    sim.add_node(node("n2", cpu=4000))
    sim.add_node(node("n3", cpu=4000))
    sim.run_all()
    assert {p.uid for p in sim.bound()} == {p.uid for p in pods}


def test_a_split_undone_moves_the_pods_back_to_the_set() -> None:
    sim = SimScheduler()
    read(sim, the_jobset("per-replicated-job"))
    for r in ("a", "b"):
        sim.add_pod(jobset_pod(r, 0))
    assert sim.cache.gang_pods(SET_KEY) == []
    for g in the_jobset(None):  # the annotation removed; its split gangs are dropped
        sim.add_group(g)
    for r in ("a", "b"):
        sim.manager.on_group_deleted(key(f"{SET}.{r}"))
    assert set(gang_of(sim).values()) == {SET_KEY}
    assert sim.cache.tally(sim.cache.groups[SET_KEY]).members == 2


def test_a_pod_the_filter_tells_of_first_is_filtered_in_its_split_gang() -> None:
    """kube-scheduler asks about a pod the watch has not delivered: it is a member of
    its replicated Job's gang (2 pods), not of the set's (1 pod here, all split off),
    so it is not let through alone."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=16000))
    read(sim, the_jobset("per-replicated-job"))
    p = jobset_pod("a", 0)
    result = sim.manager.filter(p, ["n0"], sim.now)
    assert sim.cache.pods[p.uid].gang == key(f"{SET}.a")
    assert result.nodes == [], result
    assert f"gang {key(SET)}.a: 1 of 2 members" in result.unresolvable["n0"], result


def test_an_old_attempts_pods_stay_out_of_the_new_attempts_gangs() -> None:
    sim = SimScheduler()
    read(sim, the_jobset("per-replicated-job"))
    old = sim.add_pod(jobset_pod("a", 0))
    read(sim, the_jobset("per-replicated-job", restarts=1))
    new = sim.add_pod(jobset_pod("a", 0, attempt=1))
    assert sim.cache.pods[old.uid].gang == key(f"{SET}.a")
    assert sim.cache.pods[new.uid].gang == key("train.1.5b1d9e0a.a")
    assert [q.uid for q in sim.cache.gang_pods(key("train.1.5b1d9e0a.a"))] == [new.uid]


def test_pods_moved_by_the_split_keep_their_arrival_in_their_new_gang() -> None:
    """The filter's assembly wait reads each gang's arrival clock: pods created just now
    and moved by the split arrive in their replicated Job's gang when they arrived in the
    set's (our own split moved them, their creator did not), and the set's gang, left
    with none of them, is no longer arriving."""
    sim = SimScheduler()
    t = sim.now
    for k, r in enumerate(("a", "a", "b")):
        sim.now = t + 0.01 * k
        sim.add_pod(dataclasses.replace(jobset_pod(r, k), creation=sim.now))
    assert sim.core.arrivals.get(SET_KEY) is not None
    read(sim, the_jobset("per-replicated-job"))
    a = sim.core.arrivals.get(key(f"{SET}.a"))
    b = sim.core.arrivals.get(key(f"{SET}.b"))
    assert a is not None and (a.count, a.first, a.last) == (2, t, t + 0.01)
    assert b is not None and (b.count, b.first, b.last) == (1, t + 0.02, t + 0.02)
    assert sim.core.arrivals.get(SET_KEY) is None

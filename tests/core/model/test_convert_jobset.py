"""A JobSet as a gang (core/model/convert_jobset.py, the JobSet keys of sources.py): its
quorum from its replicated Jobs, stages, exclusive placement, the opt-out annotation,
one gang per restart attempt, and the pods that join it; then in the simulator, the
5-pod JobSet of issue 45 placed whole or not at all."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.model.convert import pod_from_k8s
from extender.core.model.convert_jobset import (
    JOBSET_GANG_ANNOTATION,
    jobset_group_from_k8s,
    jobset_groups_from_k8s,
)
from extender.core.model.sources import (
    JOBSET,
    JOBSET_ATTEMPT_LABEL,
    JOBSET_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_RJOB_LABEL,
    JOBSET_UID_LABEL,
    jobset_gang_name,
    jobset_resolve,
)
from extender.core.model.types import Membership
from tests.core.model.samples import TRAIN, TRAIN_UID, rjob
from tests.core.sim import SimScheduler, node, pod


def jobset(**changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(TRAIN)
    for path, value in changes.items():
        *head, last = path.split("__")
        at = obj
        for part in head:
            at = at.setdefault(part, {})
        at[last] = value
    return obj


def test_the_quorum_is_every_pod_of_every_replicated_job() -> None:
    """1 x 1 + 2 x 2; the success policy (the driver alone) does not lower it."""
    g = jobset_group_from_k8s(TRAIN)
    assert (g.source, g.namespace, g.min_member, g.uid) == (JOBSET, "ml", 5, TRAIN_UID)
    assert g.name == jobset_gang_name("train", TRAIN_UID, 0) == "train.0.0f6a3c2e"
    assert g.key == "jobset:ml/train.0.0f6a3c2e"


@pytest.mark.parametrize("replicas,parallelism,completions,quorum", [
    (None, None, None, 1),  # both default to 1
    (3, 4, None, 12),
    (3, 4, 2, 6),  # completions caps the pods a Job starts
    (2, 0, None, 1),  # no pod at all: a gang of one, never "short" of nothing
])
def test_replicas_times_parallelism(replicas: int | None, parallelism: int | None,
                                    completions: int | None, quorum: int) -> None:
    obj = jobset(spec__replicatedJobs=[rjob("w", replicas, parallelism, completions=completions)])
    assert jobset_group_from_k8s(obj).min_member == quorum


def test_each_restart_attempt_is_its_own_gang() -> None:
    first = jobset_group_from_k8s(TRAIN)
    again = jobset_group_from_k8s(jobset(status__restarts=1))
    assert again.name == "train.1.0f6a3c2e" and again.key != first.key
    assert again.min_member == 5  # placed whole again
    other = jobset(metadata__uid="9b2e" + TRAIN_UID[4:])  # made again under its name
    assert jobset_group_from_k8s(other).key != first.key


def test_off_makes_each_pod_its_own() -> None:
    obj = jobset(metadata__annotations={JOBSET_GANG_ANNOTATION: "off"})
    assert jobset_group_from_k8s(obj).min_member == 1
    obj = jobset(metadata__annotations={JOBSET_GANG_ANNOTATION: " set "})
    assert jobset_group_from_k8s(obj).min_member == 5


def test_an_unknown_gang_mode_is_refused_naming_the_allowed_ones() -> None:
    obj = jobset(metadata__annotations={JOBSET_GANG_ANNOTATION: "of"})
    with pytest.raises(ValueError, match=r"jobset ml/train: .*jobset-gang\]: 'of' is not one "
                                         r"of 'set', 'off', 'per-job', 'per-replicated-job'"):
        jobset_group_from_k8s(obj)


@pytest.mark.parametrize("path,value,field", [
    ("spec__replicatedJobs", "x", "spec.replicatedJobs"),
    ("spec__replicatedJobs", [{"name": "w", "replicas": -1}], r"spec.replicatedJobs\[0\].replicas"),
    ("spec__replicatedJobs", [rjob("w", 1, -2)], r"parallelism must be >= 0"),
    ("status__restarts", "one", "status.restarts"),
    ("metadata__uid", "", "metadata.uid is missing"),
    ("status__replicatedJobsStatus", [{"name": "w", "ready": "x"}],
     r"replicatedJobsStatus\[w\].ready"),
])
def test_malformed_jobsets_are_errors_naming_the_field(path: str, value: Any, field: str) -> None:
    obj = jobset(**{path: value})
    if path == "status__replicatedJobsStatus":
        obj["spec"]["replicatedJobs"] = [rjob("w", 1), rjob("v", 1, dependsOn=[
            {"name": "w", "status": "Ready"}])]
    with pytest.raises(ValueError, match=field):
        jobset_group_from_k8s(obj)


def status(**ready: int) -> list[dict[str, Any]]:
    return [{"name": n, "ready": r, "succeeded": 0, "failed": 0, "active": r}
            for n, r in ready.items()]


def test_in_order_each_stage_joins_when_the_controller_creates_it() -> None:
    """InOrder: the workers' Jobs are made once the driver's are ready; until then a
    quorum of all five would never be met."""
    obj = jobset(spec__startupPolicy={"startupPolicyOrder": "InOrder"})
    assert jobset_group_from_k8s(obj).min_member == 1  # the driver alone
    obj["status"] = {"replicatedJobsStatus": status(driver=0, workers=0)}
    assert jobset_group_from_k8s(obj).min_member == 1
    obj["status"] = {"replicatedJobsStatus": status(driver=1, workers=0)}
    assert jobset_group_from_k8s(obj).min_member == 5  # the workers, beside the driver
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    obj.pop("status")
    assert jobset_group_from_k8s(obj).min_member == 5


def test_depends_on_waits_for_the_status_named() -> None:
    obj = jobset(spec__replicatedJobs=[
        rjob("init", 1, 1),
        rjob("workers", 2, 2, dependsOn=[{"name": "init", "status": "Complete"}])])
    assert jobset_group_from_k8s(obj).min_member == 1
    obj["status"] = {"replicatedJobsStatus": status(init=1)}  # ready is not complete
    assert jobset_group_from_k8s(obj).min_member == 1
    obj["status"]["replicatedJobsStatus"][0].update(ready=0, succeeded=1)
    # The init pod has succeeded (it counts toward the quorum as a succeeded member).
    assert jobset_group_from_k8s(obj).min_member == 5


def test_exclusive_placement_counts_one_leader_per_job() -> None:
    """JobSet's webhook creates a Job's other pods only once its leader is bound, so
    only the leaders (one per Job) exist before anything binds."""
    excl = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}
    assert jobset_group_from_k8s(jobset(metadata__annotations=excl)).min_member == 3
    per_rjob = jobset(spec__replicatedJobs=[rjob("driver", 1, 1),
                                            rjob("workers", 2, 2, annotations=excl)])
    assert jobset_group_from_k8s(per_rjob).min_member == 3  # 1 + 2 leaders
    strategy = {**excl, "alpha.jobset.sigs.k8s.io/node-selector": "true"}
    assert jobset_group_from_k8s(jobset(metadata__annotations=strategy)).min_member == 5


def test_the_topology_annotations_are_the_whole_sets() -> None:
    obj = jobset(metadata__annotations={"gang-extender.x-k8s.io/topology-required": "rack"})
    g = jobset_group_from_k8s(obj)
    assert g.topology_required == "rack" and g.min_member == 5


# ----- the pods that join it ------------------------------------------------------------

POD: dict[str, Any] = {
    "metadata": {"name": "train-workers-0-0-x", "namespace": "ml", "uid": "p-0",
                 "creationTimestamp": "2026-11-29T03:00:01Z",
                 "labels": {JOBSET_NAME_LABEL: "train", JOBSET_UID_LABEL: TRAIN_UID,
                            JOBSET_ATTEMPT_LABEL: "0"}},
    "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c"}]},
}


def pod_json(**labels: str | None) -> dict[str, Any]:
    obj = copy.deepcopy(POD)
    for k, v in labels.items():
        key = {"attempt": JOBSET_ATTEMPT_LABEL, "uid": JOBSET_UID_LABEL}[k]
        if v is None:
            del obj["metadata"]["labels"][key]
        else:
            obj["metadata"]["labels"][key] = v
    return obj


def test_a_jobset_pod_joins_its_attempts_gang() -> None:
    p = pod_from_k8s(POD)
    assert p.gang == jobset_group_from_k8s(TRAIN).key
    old = pod_from_k8s(pod_json(attempt="1"))
    assert old.gang == jobset_group_from_k8s(jobset(status__restarts=1)).key != p.gang


@pytest.mark.parametrize("labels", [{"attempt": None}, {"uid": None}, {"attempt": "01"},
                                    {"attempt": "-1"}, {"attempt": " 1"}, {"uid": ""}])
def test_a_pod_without_the_controllers_three_labels_is_no_member(
        labels: dict[str, str | None]) -> None:
    assert pod_from_k8s(pod_json(**labels)).gang is None


# ----- in the simulator -----------------------------------------------------------------


def jobset_pods(attempt: int = 0) -> list[Any]:
    name = jobset_gang_name("train", TRAIN_UID, attempt)
    return [pod(f"train-{r}-{attempt}", cpu=4000, ns="ml", membership=Membership(JOBSET, name))
            for r in ("driver-0-0", "workers-0-0", "workers-0-1", "workers-1-0", "workers-1-1")]


def test_the_five_pod_jobset_is_placed_whole_or_not_at_all() -> None:
    """Issue 45: on four 4-CPU nodes, 4 of its 5 pods were bound. Now none is, until a
    fifth node appears; then all five."""
    sim = SimScheduler()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.add_group(jobset_group_from_k8s(TRAIN))
    pods = [sim.add_pod(p) for p in jobset_pods()]
    sim.run_all()
    assert sim.bound() == []
    sim.add_node(node("n4", cpu=4000))
    sim.run_all()
    assert sorted(p.name for p in sim.bound()) == sorted(p.name for p in pods)


def test_an_old_attempts_pods_never_count_toward_the_new_one() -> None:
    """Attempt 0's five pods are bound; the JobSet restarts. Its new gang counts only
    attempt 1's pods: with four of them, none is bound, though nine pods carry the
    JobSet's name; the fifth, once the old ones are gone, completes it."""
    sim = SimScheduler()
    for i in range(10):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.add_group(jobset_group_from_k8s(TRAIN))
    for p in jobset_pods(0):
        sim.add_pod(p)
    sim.run_all()
    assert len(sim.bound()) == 5
    sim.add_group(jobset_group_from_k8s(jobset(status__restarts=1)))
    new = [sim.add_pod(p) for p in jobset_pods(1)[:4]]
    sim.run_all()
    assert not any(p.node_name for p in (sim.manager.reads.pod(q.uid) for q in new) if p)
    last = sim.add_pod(jobset_pods(1)[4])
    sim.run_all()
    bound = {p.uid for p in sim.bound()}
    assert {p.uid for p in (*new, last)} <= bound


def test_a_pod_whose_jobset_is_unknown_waits_saying_why() -> None:
    """No JobSet of its attempt read (deleted, restarted since, or refused for a bad
    annotation): the pod is turned away naming the JobSet's labels and the causes."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=8000))
    p = sim.add_pod(jobset_pods()[0])
    assert sim.schedule(p.uid) == "rejected"
    msg = sim.last_filter[p.uid]
    assert "jobset.sigs.k8s.io/jobset-name" in msg and "jobset-gang" in msg, msg


# ----- a gang per Job -------------------------------------------------------------------

PER_JOB = {JOBSET_GANG_ANNOTATION: "per-job"}


def per_job_workers(**kw: Any) -> dict[str, Any]:
    r = rjob("workers", 2, 2, **kw)
    r["template"]["spec"]["template"]["metadata"] = {"annotations": dict(PER_JOB)}
    return r


def test_per_job_makes_each_job_of_the_replicated_job_its_own_gang() -> None:
    """The workers' pod template says per-job: each of their 2 Jobs is a gang of its 2
    pods; the driver alone stays in the set's gang."""
    obj = jobset(spec__replicatedJobs=[rjob("driver", 1, 1), per_job_workers()])
    groups = jobset_groups_from_k8s(obj)
    assert [(g.name, g.min_member) for g in groups] == [
        ("train.0.0f6a3c2e", 1), ("train.0.0f6a3c2e.workers-0", 2),
        ("train.0.0f6a3c2e.workers-1", 2)]
    assert jobset_group_from_k8s(obj) == groups[0]
    excl = jobset(spec__replicatedJobs=[rjob("driver", 1, 1), per_job_workers()],
                  metadata__annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": "r"})
    assert [g.min_member for g in jobset_groups_from_k8s(excl)] == [1, 1, 1]  # leaders


def test_another_value_on_a_template_is_refused() -> None:
    bad = per_job_workers()
    bad["template"]["spec"]["template"]["metadata"]["annotations"] = {
        JOBSET_GANG_ANNOTATION: "off"}
    with pytest.raises(ValueError, match=r"template.metadata.annotations\[.*\]: 'off' is not "
                                         r"'per-job' or 'per-replicated-job'.*'set' and "
                                         r"'off' go on the JobSet's own"):
        jobset_group_from_k8s(jobset(spec__replicatedJobs=[bad]))


def test_a_pod_of_a_per_job_template_joins_its_jobs_gang() -> None:
    obj = copy.deepcopy(POD)
    obj["metadata"]["labels"].update({JOBSET_RJOB_LABEL: "workers", JOBSET_INDEX_LABEL: "1"})
    assert pod_from_k8s(obj).gang == jobset_group_from_k8s(TRAIN).key  # no annotation
    obj["metadata"]["annotations"] = dict(PER_JOB)
    assert pod_from_k8s(obj).gang == "jobset:ml/train.0.0f6a3c2e.workers-1"
    del obj["metadata"]["labels"][JOBSET_INDEX_LABEL]  # not the controller's: the set's
    assert pod_from_k8s(obj).gang == jobset_group_from_k8s(TRAIN).key


def driver_and(workers: dict[str, Any]) -> SimScheduler:
    """Three 4-CPU nodes and the gangs of the JobSet of a driver (1 pod) and the
    replicated Job `workers`."""
    sim = SimScheduler()
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=4000))
    for g in jobset_groups_from_k8s(jobset(spec__replicatedJobs=[rjob("driver", 1, 1),
                                                                 workers])):
        sim.add_group(g)
    return sim


def test_per_job_gangs_are_placed_each_whole_on_their_own() -> None:
    """Three 4-CPU nodes: the driver's gang (1) and one worker Job (2) fit, the other
    worker Job waits whole; two more nodes, and it is bound."""
    sim = driver_and(per_job_workers())
    base = jobset_gang_name("train", TRAIN_UID, 0)
    pods = [sim.add_pod(pod("train-driver-0-0", cpu=4000, ns="ml",
                            membership=Membership(JOBSET, base)))]
    for j in range(2):
        for k in range(2):
            pods.append(sim.add_pod(pod(f"train-workers-{j}-{k}", cpu=4000, ns="ml",
                                        membership=Membership(JOBSET, f"{base}.workers-{j}"))))
    sim.run_all()
    bound = sorted(p.name for p in sim.bound())
    assert len(bound) == 3 and "train-driver-0-0" in bound, bound
    jobs = {n.rsplit("-", 1)[0] for n in bound if "workers" in n}
    assert len(jobs) == 1, f"a worker Job was bound in part: {bound}"
    sim.add_node(node("n3", cpu=4000))
    sim.add_node(node("n4", cpu=4000))
    sim.run_all()
    assert len(sim.bound()) == 5


def test_off_places_each_pod_of_the_jobset_on_its_own() -> None:
    """Opted out: on four 4-CPU nodes four of the five pods are bound, as without a gang."""
    sim = SimScheduler()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.add_group(jobset_group_from_k8s(
        jobset(metadata__annotations={JOBSET_GANG_ANNOTATION: "off"})))
    for p in jobset_pods():
        sim.add_pod(p)
    sim.run_all()
    assert len(sim.bound()) == 4


# ----- the JobSet splits itself -----------------------------------------------------------

PER_RJOB = {JOBSET_GANG_ANNOTATION: "per-replicated-job"}
SET = "train.0.0f6a3c2e"


def gangs(obj: dict[str, Any]) -> list[tuple[str, int]]:
    return [(g.name, g.min_member) for g in jobset_groups_from_k8s(obj)]


def test_per_job_on_the_jobset_makes_every_job_its_own_gang() -> None:
    """Before, refused (it had to go on each pod template); now the set's gang keeps no
    pod (a quorum of one) and carries the split its pods' gangs are resolved from."""
    obj = jobset(metadata__annotations=PER_JOB)
    assert gangs(obj) == [(SET, 1), (f"{SET}.driver-0", 1), (f"{SET}.workers-0", 2),
                          (f"{SET}.workers-1", 2)]
    assert jobset_group_from_k8s(obj).jobset_split == (("driver", "per-job"),
                                                       ("workers", "per-job"))
    assert all(g.jobset_split is None for g in jobset_groups_from_k8s(obj)[1:])


def test_per_replicated_job_makes_each_replicated_job_one_gang() -> None:
    """All the Jobs of a replicated Job together: replicas x parallelism."""
    obj = jobset(metadata__annotations=PER_RJOB)
    assert gangs(obj) == [(SET, 1), (f"{SET}.driver", 1), (f"{SET}.workers", 4)]
    assert jobset_group_from_k8s(obj).jobset_split == (("driver", "per-replicated-job"),
                                                       ("workers", "per-replicated-job"))
    # Exclusive placement: the leaders alone, one per Job, as for the set.
    excl = jobset(metadata__annotations={**PER_RJOB,
                                         "alpha.jobset.sigs.k8s.io/exclusive-topology": "r"})
    assert gangs(excl) == [(SET, 1), (f"{SET}.driver", 1), (f"{SET}.workers", 2)]
    # The set's topology holds for each gang it is split into.
    topo = jobset(metadata__annotations={**PER_RJOB,
                                         "gang-extender.x-k8s.io/topology-required": "rack"})
    assert {g.topology_required for g in jobset_groups_from_k8s(topo)} == {"rack"}


def test_the_split_gangs_are_of_one_attempt() -> None:
    obj = jobset(metadata__annotations=PER_RJOB, status__restarts=2)
    assert [n for n, _ in gangs(obj)] == ["train.2.0f6a3c2e", "train.2.0f6a3c2e.driver",
                                          "train.2.0f6a3c2e.workers"]


def test_a_templates_per_job_wins_over_the_jobsets_split() -> None:
    obj = jobset(metadata__annotations=PER_RJOB,
                 spec__replicatedJobs=[rjob("driver", 1, 1), per_job_workers()])
    assert gangs(obj) == [(SET, 1), (f"{SET}.driver", 1), (f"{SET}.workers-0", 2),
                          (f"{SET}.workers-1", 2)]
    assert jobset_group_from_k8s(obj).jobset_split == (("driver", "per-replicated-job"),
                                                       ("workers", "per-job"))
    # The JobSet's "set" keeps only the driver in the set's gang, as before.
    assert jobset_group_from_k8s(jobset(spec__replicatedJobs=[
        rjob("driver", 1, 1), per_job_workers()])).jobset_split == (("workers", "per-job"),)


def test_two_gangs_of_one_name_are_refused_naming_the_jobset() -> None:
    """`workers` split per Job has a Job gang `workers-0`; a replicated Job of that name
    split whole would share it."""
    obj = jobset(metadata__annotations=PER_RJOB,
                 spec__replicatedJobs=[per_job_workers(), rjob("workers-0", 1, 1)])
    with pytest.raises(ValueError, match=r"jobset ml/train: .*'train.0.0f6a3c2e.workers-0'"):
        jobset_groups_from_k8s(obj)


def test_a_split_covers_stages_not_yet_created() -> None:
    """InOrder: only the driver's gang exists until its Jobs are ready, but the split
    names the workers already, so a pod's gang never moves as the status does."""
    obj = jobset(metadata__annotations=PER_RJOB,
                 spec__startupPolicy={"startupPolicyOrder": "InOrder"})
    assert gangs(obj) == [(SET, 1), (f"{SET}.driver", 1)]
    assert jobset_group_from_k8s(obj).jobset_split == (("driver", "per-replicated-job"),
                                                       ("workers", "per-replicated-job"))
    obj["status"] = {"replicatedJobsStatus": status(driver=1)}
    assert gangs(obj) == [(SET, 1), (f"{SET}.driver", 1), (f"{SET}.workers", 4)]


def controller_pod(rjob_name: str, index: int, **annotations: str) -> dict[str, Any]:
    obj = copy.deepcopy(POD)
    obj["metadata"]["labels"].update({JOBSET_RJOB_LABEL: rjob_name,
                                      JOBSET_INDEX_LABEL: str(index)})
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return obj


def test_a_pods_gang_is_resolved_from_its_jobsets_split() -> None:
    """Read alone, a JobSet's pod is in the set's gang and keeps its replicated Job and
    Job index; the split of the JobSet's gang moves it."""
    m = pod_from_k8s(controller_pod("workers", 1)).membership
    assert m is not None and m.name == SET and m.jobset is not None
    assert jobset_resolve(m, None) is m  # the JobSet not known yet
    per_rjob = jobset_group_from_k8s(jobset(metadata__annotations=PER_RJOB)).jobset_split
    assert jobset_resolve(m, per_rjob).name == f"{SET}.workers"
    per_job = jobset_group_from_k8s(jobset(metadata__annotations=PER_JOB)).jobset_split
    moved = jobset_resolve(m, per_job)
    assert moved.name == f"{SET}.workers-1"
    assert jobset_resolve(moved, ()).name == SET  # split no more: back to the set's
    # The template's own per-job is on the pod: its gang needs no JobSet.
    t = pod_from_k8s(controller_pod("workers", 1, **PER_JOB)).membership
    assert t is not None and t.name == f"{SET}.workers-1" and t.jobset is None


# ----- one replicated Job split off whole, by its pod template --------------------------


def per_rjob_workers() -> dict[str, Any]:
    r = rjob("workers", 2, 2)
    r["template"]["spec"]["template"]["metadata"] = {"annotations": dict(PER_RJOB)}
    return r


def test_per_replicated_job_on_a_template_splits_that_replicated_job_alone() -> None:
    """The workers' 2 Jobs x 2 pods are one gang of 4; the driver stays in the set's
    gang. On the JobSet the value would split the driver off too; before, it was refused
    on a template (the JobSet not read at all)."""
    obj = jobset(spec__replicatedJobs=[rjob("driver", 1, 1), per_rjob_workers()])
    assert gangs(obj) == [(SET, 1), (f"{SET}.workers", 4)]
    assert jobset_group_from_k8s(obj).jobset_split == (("workers", "per-replicated-job"),)
    # It wins over the JobSet's own split, as a template's per-job does.
    per_job = jobset(metadata__annotations=PER_JOB,
                     spec__replicatedJobs=[rjob("driver", 1, 1), per_rjob_workers()])
    assert gangs(per_job) == [(SET, 1), (f"{SET}.driver-0", 1), (f"{SET}.workers", 4)]


def test_a_pod_of_a_per_replicated_job_template_joins_its_replicated_jobs_gang() -> None:
    """The template's annotation is on the pod: its gang needs no JobSet, as per-job's."""
    t = pod_from_k8s(controller_pod("workers", 1, **PER_RJOB)).membership
    assert t is not None and t.name == f"{SET}.workers" and t.jobset is None


def test_a_replicated_job_split_off_by_its_template_is_placed_whole_on_its_own() -> None:
    """Three 4-CPU nodes, 4-CPU pods: the driver (the set's gang) is bound, the 4 workers
    (one gang) none; two more nodes, and they are bound whole."""
    sim = driver_and(per_rjob_workers())
    driver = controller_pod("driver", 0)
    workers = [controller_pod("workers", j, **PER_RJOB) for j in range(2) for _ in range(2)]
    for i, obj in enumerate([driver, *workers]):
        obj["metadata"].update(name=f"p{i}", uid=f"u{i}")
        obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
        sim.add_pod(pod_from_k8s(obj))
    sim.run_all()
    assert [p.name for p in sim.bound()] == ["p0"]
    sim.add_node(node("n3", cpu=4000))
    sim.add_node(node("n4", cpu=4000))
    sim.run_all()
    assert len(sim.bound()) == 5

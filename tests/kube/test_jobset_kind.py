"""The JobSet informer kind (kube/source_kinds.py JOBSETS): a JobSet read is its gang,
a restart replaces the old attempt's gang with the new one's, and a deletion removes
whichever attempt is current."""

from __future__ import annotations

import copy
from typing import Any

from extender.core.manager import GangManager
from extender.kube.source_kinds import JOBSETS, SOURCE_GROUP_KINDS

UID = "0f6a3c2e-8d41-4b7a-9e10-5c2d7f3b9a61"
JOBSET: dict[str, Any] = {
    "metadata": {"name": "train", "namespace": "ml", "uid": UID,
                 "creationTimestamp": "2026-11-29T03:00:00Z"},
    "spec": {"replicatedJobs": [
        {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1}}},
        {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2}}}]},
}


def attempt(n: int) -> dict[str, Any]:
    obj = copy.deepcopy(JOBSET)
    obj["status"] = {"restarts": n}
    return obj


def test_a_jobset_is_watched_while_its_api_is_served() -> None:
    assert JOBSETS in SOURCE_GROUP_KINDS
    assert JOBSETS.discover == ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets")


def test_a_restart_replaces_the_old_attempts_gang() -> None:
    manager = GangManager()
    JOBSETS.apply(manager, attempt(0), 0.0)
    first = JOBSETS.key(attempt(0))
    assert first == "jobset:ml/train.0.0f6a3c2e"
    g = manager.reads.group(first)
    assert g is not None and g.min_member == 5
    JOBSETS.apply(manager, attempt(1), 1.0)
    second = JOBSETS.key(attempt(1))
    assert manager.reads.group(first) is None, "the old attempt's gang is gone"
    assert manager.reads.group(second) is not None
    # A relist drops the old key the informer still knew: the current gang stays.
    JOBSETS.delete(manager, first, 2.0)
    assert manager.reads.group(second) is not None
    JOBSETS.delete(manager, second, 3.0)
    assert manager.reads.group(second) is None


def test_gangs_per_job_go_with_their_attempt_and_their_jobset() -> None:
    manager = GangManager()
    obj = attempt(0)
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"] = {
        "metadata": {"annotations": {"gang-extender.x-k8s.io/jobset-gang": "per-job"}}}
    JOBSETS.apply(manager, obj, 0.0)
    jobs = [f"jobset:ml/train.0.0f6a3c2e.workers-{i}" for i in range(2)]
    assert all(manager.reads.group(k) is not None for k in jobs)
    again = copy.deepcopy(obj)
    again["status"] = {"restarts": 1}
    JOBSETS.apply(manager, again, 1.0)
    assert all(manager.reads.group(k) is None for k in jobs), "the old attempt's are gone"
    new = [k.replace(".0.", ".1.") for k in jobs]
    assert all(manager.reads.group(k) is not None for k in new)
    JOBSETS.delete(manager, JOBSETS.key(again), 2.0)
    assert all(manager.reads.group(k) is None for k in new), "gone with their JobSet"

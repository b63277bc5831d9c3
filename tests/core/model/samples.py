"""Valid group objects as each API server returns them (PodGroups of the Workload API in
both versions, a CompositePodGroup, a Volcano PodGroup, a JobSet), shared by the model
tests that read what each field becomes (test_workload_versions.py,
test_composite_model.py, test_sources.py, test_convert_jobset.py) and by
test_convert_hostile.py, which starts its mutations from them: a field the converters
learn to read is then both checked and mutated from one object. A test that changes
one works on a deep copy.
"""

from __future__ import annotations

from typing import Any

META = {"name": "train", "namespace": "ml", "uid": "pg-1",
        "creationTimestamp": "2026-11-24T10:25:29Z",
        "finalizers": ["scheduling.k8s.io/podgroup-protection"]}

# As each API server returns them (field names from k8s.io/api v0.36.3 and v0.37.2,
# scheduling/v1alpha2 and scheduling/v1beta1 types.go; kube-apiserver v1.37.2 added the
# finalizer, disruptionMode {"single": {}} and priority 0 to a v1beta1 one on create):
# v1alpha2 names its Workload by podGroupTemplateRef and has a string disruptionMode;
# v1beta1 by workloadRef, with a one-of object disruptionMode and a priority of its own.
V1ALPHA2: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": META,
    "spec": {"disruptionMode": "Pod",
             "podGroupTemplateRef": {"workload": {"workloadName": "train",
                                                  "podGroupTemplateName": "workers"}},
             "schedulingPolicy": {"gang": {"minCount": 4}},
             "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]}},
    "status": {},
}
V1BETA1: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": META,
    "spec": {"disruptionMode": {"single": {}},
             "workloadRef": {"workloadName": "train", "templateName": "workers"},
             "schedulingPolicy": {"gang": {"minCount": 4}},
             "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]},
             "priorityClassName": "batch-high", "priority": 1000},
    "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "False",
                               "reason": "Unschedulable", "message": "m",
                               "lastTransitionTime": "2026-11-24T10:25:30Z"}]},
}


# As the 1.37.2 API server returns one (defaults filled in).
LEADER_WORKERS: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
    "metadata": {"name": "lw", "namespace": "ml", "uid": "c-1",
                 "creationTimestamp": "2026-11-29T03:10:08Z"},
    "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
             "schedulingPolicy": {"gang": {"minGroupCount": 2}},
             "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
             "disruptionMode": {"single": {}}, "priority": 0},
    "status": {},
}


VOLCANO_PG: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
    "metadata": {"name": "mpi", "namespace": "ml", "uid": "v-1",
                 "creationTimestamp": "2026-11-24T10:00:00Z"},
    "spec": {"minMember": 5, "minResources": {"cpu": "10", "memory": "20Gi"},
             "priorityClassName": "high", "queue": "default"},
}


TRAIN_UID = "0f6a3c2e-8d41-4b7a-9e10-5c2d7f3b9a61"


def job_template(parallelism: int | None = None, completions: int | None = None,
                 annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A replicated Job's template; a count left None is left out, so that the tests
    see the API's default for it."""
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    t: dict[str, Any] = {"spec": spec}
    if annotations:
        t["metadata"] = {"annotations": annotations}
    return t


def rjob(name: str, replicas: int | None, parallelism: int | None = None,
         **kw: Any) -> dict[str, Any]:
    """A replicated Job of `replicas` Jobs (left out when None) of `parallelism` pods;
    `completions` and `annotations` go to its template, other keys (`dependsOn`) to it."""
    template = job_template(parallelism, kw.pop("completions", None), kw.pop("annotations", None))
    r: dict[str, Any] = {"name": name, "template": template}
    if replicas is not None:
        r["replicas"] = replicas
    r.update(kw)
    return r


# The JobSet of issue 45: a driver (1 Job x 1 pod) and workers (2 Jobs x 2 pods).
TRAIN: dict[str, Any] = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
    "metadata": {"name": "train", "namespace": "ml", "uid": TRAIN_UID,
                 "creationTimestamp": "2026-11-29T03:00:00Z"},
    "spec": {"replicatedJobs": [rjob("driver", 1, 1), rjob("workers", 2, 2)],
             "successPolicy": {"operator": "Any", "targetReplicatedJobs": ["driver"]}},
}

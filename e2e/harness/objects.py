"""The objects e2e tests submit, built and created as JSON: bare pods, Jobs, PodGroups,
with the PodGroup label and the fake kubelet's annotations (and deleting a pod).

Why apart: these builders are the vocabulary of every gang test, demo and benchmark, and
they are the same on any cluster (the container really sleeps ``run_seconds`` on kind);
they need the current cluster's client and nothing of pytest or of the fake kubelet but
its annotation names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .k8s import ApiException
from .kubelet.pod import ANN_FAIL, ANN_RENDEZVOUS, ANN_RENDEZVOUS_SIZE, ANN_RUN_SECONDS
from .target import kube

GANG_SCHEDULER = "gang-scheduler"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
DEFAULT_IMAGE = os.environ.get("E2E_IMAGE", "busybox:1.36")
"""Ignored by the fake kubelet; on a real cluster (kind) the container really runs."""


def json_body(resp: Any) -> Any:
    """The decoded body of a kubernetes-client call made with ``_preload_content=False``
    (the objects here and the queries of :mod:`.queries` are read as plain JSON)."""
    return json.loads(resp.data)


def pod_spec(
    cpu: str = "100m",
    memory: str = "64Mi",
    gpus: int = 0,
    scheduler_name: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    image: str = DEFAULT_IMAGE,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str | None = None,
    restart_policy: str = "Never",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A one-container pod spec requesting ``cpu``/``memory``/``gpus`` (limits for GPUs).

    The container really sleeps ``run_seconds`` (then exits 0, or 1 with ``fail``) so the
    same test behaves alike on kind; the fake kubelet reads the annotations instead.
    """
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    script = f"sleep {run_seconds:g}" if run_seconds is not None else "sleep 2147483647"
    if fail:
        script += "; exit 1"
    container: dict[str, Any] = {
        "name": "main", "image": image, "command": ["sh", "-c", script],
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }
    spec: dict[str, Any] = {
        "containers": [container], "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 1,
    }
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority_class:
        spec["priorityClassName"] = priority_class
    spec.update(extra or {})
    return spec


def pod_metadata(
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    pod_group: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    rendezvous: str | None = None,
    rendezvous_size: int | None = None,
) -> dict[str, Any]:
    """Labels and annotations, including the fake-kubelet and PodGroup conventions."""
    lab = dict(labels or {})
    if pod_group:
        lab[POD_GROUP_LABEL] = pod_group
    ann = dict(annotations or {})
    if run_seconds is not None:
        ann[ANN_RUN_SECONDS] = f"{run_seconds:g}"
    if fail:
        ann[ANN_FAIL] = "true"
    if rendezvous is not None:
        if rendezvous_size is None:
            raise ValueError("rendezvous needs rendezvous_size")
        ann[ANN_RENDEZVOUS] = rendezvous
        ann[ANN_RENDEZVOUS_SIZE] = str(rendezvous_size)
    md: dict[str, Any] = {}
    if lab:
        md["labels"] = lab
    if ann:
        md["annotations"] = ann
    return md


def create_pod(
    ns: str,
    name: str,
    cpu: str = "100m",
    memory: str = "64Mi",
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    pod_group: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    rendezvous: str | None = None,
    rendezvous_size: int | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str | None = None,
    image: str = DEFAULT_IMAGE,
    spec_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Create a bare pod and return it as JSON.

    ``pod_group`` sets the ``scheduling.x-k8s.io/pod-group`` label; ``run_seconds``,
    ``fail``, ``rendezvous``/``rendezvous_size`` set the fake-kubelet annotations;
    ``scheduler_name`` e.g. :data:`GANG_SCHEDULER`; ``spec_extra`` merges into the spec
    (affinity, overhead, ...).
    """
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **pod_metadata(
            labels, annotations, pod_group, run_seconds, fail, rendezvous, rendezvous_size)},
        "spec": pod_spec(cpu, memory, gpus, scheduler_name, run_seconds, fail, image,
                         node_selector, tolerations, priority_class, extra=spec_extra),
    }
    out: dict[str, Any] = json_body(kube().core.create_namespaced_pod(
        ns, body, _preload_content=False))
    return out


def create_job(
    ns: str,
    name: str,
    parallelism: int,
    completions: int | None = None,
    template: Mapping[str, Any] | None = None,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    pod_group: str | None = None,
    run_seconds: float | None = None,
    fail: bool = False,
    rendezvous: str | None = None,
    rendezvous_size: int | None = None,
    backoff_limit: int = 6,
    completion_mode: str | None = None,
    job_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Create a batch/v1 Job (the shape gang users submit) and return it as JSON.

    ``template`` replaces the generated pod template entirely; otherwise one is built from
    the same keywords as :func:`create_pod` (restartPolicy Never). ``completions`` defaults
    to ``parallelism``.
    """
    if template is None:
        template = {
            "metadata": pod_metadata(labels, annotations, pod_group, run_seconds, fail,
                                     rendezvous, rendezvous_size),
            "spec": pod_spec(cpu, memory, gpus, scheduler_name, run_seconds, fail),
        }
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "completions": completions if completions is not None else parallelism,
        "backoffLimit": backoff_limit,
        "template": dict(template),
    }
    if completion_mode:
        spec["completionMode"] = completion_mode
    spec.update(job_extra or {})
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}
    out: dict[str, Any] = json_body(kube().batch.create_namespaced_job(
        ns, body, _preload_content=False))
    return out


def create_podgroup(
    ns: str,
    name: str,
    min_member: int,
    timeout: int | None = None,
    min_resources: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Create a ``scheduling.x-k8s.io/v1alpha1`` PodGroup; ``timeout`` is
    ``spec.scheduleTimeoutSeconds``; ``annotations``, e.g. the topology ones."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    if min_resources:
        spec["minResources"] = dict(min_resources)
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    body = {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": meta,
            "spec": spec}
    out: dict[str, Any] = json_body(kube().custom.create_namespaced_custom_object(
        PG_GROUP, PG_VERSION, ns, PG_PLURAL, body, _preload_content=False))
    return out

def delete_pod(ns: str, name: str, grace_seconds: int = 0) -> None:
    """Delete a pod (404 ignored)."""
    try:
        kube().core.delete_namespaced_pod(name, ns, grace_period_seconds=grace_seconds,
                                          _preload_content=False)
    except ApiException as e:
        if e.status != 404:
            raise

"""A Job runs to completion through the real job controller, default scheduler and the fake
kubelet: the baseline every gang test builds on (pods scheduled, Running, Succeeded, counted).
"""

from __future__ import annotations

import pytest

from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import create_job
from e2e.harness.process import ManagedProcess
from e2e.harness.queries import get_job, job_condition, pod_phases
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e


def test_job_with_three_pods_completes(
    namespace: str, default_scheduler: ManagedProcess | None, fake_nodes: NodeSet
) -> None:
    if not fake_nodes.external:  # on kind the real nodes run the pods
        fake_nodes.add_nodes(2, prefix=namespace, cpu="4", memory="8Gi")
    create_job(namespace, "train", parallelism=3, completions=3, run_seconds=1,
               cpu="500m", memory="256Mi")

    def complete() -> object:
        job = get_job(namespace, "train")
        if job_condition(job, "Complete"):
            return job
        return NotYet({"job status": (job or {}).get("status"), "pods": pod_phases(namespace)})

    job = wait_for(complete, 60, "Job train reaches condition Complete")
    assert isinstance(job, dict)
    assert job["status"]["succeeded"] == 3
    phases = pod_phases(namespace)
    assert sorted(phases.values()) == ["Succeeded"] * 3, phases

"""A JobSet admitted by real Kueue v0.17.0 and placed by the gang scheduler (issue 45,
item 1): quota in front, the gang behind. Kueue suspends the JobSet at creation, admits
it as one Workload by ClusterQueue quota and resumes it; JobSet v0.11.1 then makes its
Jobs, and the gang scheduler binds its pods all together or none. How the two run here:
:mod:`e2e.integrations.kueue`, :mod:`e2e.integrations.jobset`; the fixtures are those of
kueue_queues.py and jobset_controller.py, which the Kueue and JobSet tests use too.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet
from e2e.harness.kubelet.pod import ANN_RUN_SECONDS
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.jobset import (
    JobSetController,
    create_jobset,
    delete_jobsets,
    get_jobset,
    jobset,
    replicated_job,
)
from e2e.integrations.kueue import FRAMEWORKS, QUEUE_LABEL
from e2e.integrations.kueue_objects import is_true, workloads
from e2e.tests.integrations.jobset_controller import controller, wait_known  # noqa: F401
from e2e.tests.integrations.kueue_queues import (  # noqa: F401 (fixtures)
    LOCAL_QUEUE,
    SetUp,
    kueue,
    queues,
)
from extender.core.model.sources import jobset_gang_name

pytestmark = pytest.mark.e2e

LOGS = ["kueue", "jobset", "gang-extender", "gang-kube-scheduler"]
# Kueue's JobSet integration, beside the frameworks the Kueue tests use.
CONFIG: dict[str, Any] = {"integrations": {"frameworks": [*FRAMEWORKS, "jobset.x-k8s.io/jobset"]}}
HOLD = 3.0


def test_a_jobset_admitted_by_kueue_is_placed_whole(
        controller: JobSetController, queues: SetUp,  # noqa: F811
        fake_nodes: NodeSet, gang: GangStack) -> None:
    """Quota of 20 CPUs: Kueue admits the 5-pod JobSet of 4-CPU pods at once. On four
    4-CPU nodes the gang scheduler binds none of its pods; a fifth node: all five."""
    q = queues(cpu_quota=20, config=CONFIG)
    ns = q.ns
    ann = {ANN_RUN_SECONDS: "120"}
    body = jobset("train", [replicated_job("driver", 1, 1, "4", ann),
                            replicated_job("workers", 2, 2, "4", ann)])
    body["metadata"]["labels"] = {QUEUE_LABEL: LOCAL_QUEUE}
    try:
        with Recorder(ns) as rec:
            create_jobset(ns, body)

            def admitted_and_made() -> object:
                wls = workloads(ns)
                made = len(rec.pods)
                ok = wls and all(is_true(w, "Admitted") for w in wls) and made >= 5
                return ok or NotYet({"admitted": [is_true(w, "Admitted") for w in wls],
                                     "pods": made})

            wait_for(admitted_and_made, 60, "Kueue admits the JobSet, its 5 pods made",
                     logs=LOGS)
            js = get_jobset(ns, "train") or {}
            assert not js["spec"].get("suspend"), "Kueue resumed the JobSet"
            group = jobset_gang_name("train", js["metadata"]["uid"], 0)
            wait_known(gang, ns, group, 5)
            time.sleep(HOLD)
            assert rec.bound() == {}, f"part of the admitted JobSet was bound: {rec.history}"
            fake_nodes.add_node(f"{ns}-4", cpu="4", memory="16Gi")
            wait_for(lambda: len(rec.bound(group)) == 5 or NotYet(sorted(rec.bound())),
                     60, "all 5 pods bound", logs=LOGS)
            rec.assert_never_partial(group, 5)
    finally:
        delete_jobsets(ns)
    print(f"\n[gang] JobSet train admitted by Kueue (quota 20 CPUs): 0 of 5 bound on 4 "
          f"nodes; 5 of 5 once a fifth appeared (gang {group})")

"""A poisoned object in a watch (issue 27, "one object that fails conversion for any
reason is logged, counted in a metric and skipped, never stalls an informer").

The object: a scheduler-plugins PodGroup whose `minResources` names a resource of 400
characters. The CRD bounds the amounts, not the keys (a custom resource's map keys are not
validated by the API server), so it is stored; no Kubernetes resource name is that long,
and the converter refuses it. Beside it an ordinary gang must be placed as usual, the
object must be counted in `gang_extender_skipped_objects_total{kind="podgroups"}`, and the
PodGroup watch must not fail and start over because of it.
"""

from __future__ import annotations

import re
import time

import pytest

from e2e.gang import GangStack, Recorder, time_ordinary_gang
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e

POISON = "x" * 400
PLACED_WITHIN = 8.0  # seconds; kube-scheduler asks within a second or two


def skipped(gang: GangStack, kind: str) -> float:
    text = str(gang.get("/metrics"))
    m = re.search(rf'^gang_extender_skipped_objects_total\{{kind="{kind}"\}} (\S+)$', text,
                  re.M)
    return float(m.group(1)) if m else 0.0


def test_a_poisoned_podgroup_is_skipped_counted_and_costs_the_others_nothing(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    ns = namespace
    fake_nodes.add_nodes(2, prefix="po", cpu="4", memory="8Gi")
    before = skipped(gang, "podgroups")
    with Recorder(ns) as rec:
        create_podgroup(ns, "poisoned", 1, min_resources={POISON: "1"})
        create_pod(ns, "poisoned-0", cpu="100m", scheduler_name=GANG_SCHEDULER,
                   pod_group="poisoned")
        latency = time_ordinary_gang(rec, gang, ns)
        wait_for(lambda: skipped(gang, "podgroups") > before or NotYet(
            gang.get("/metrics")), 20, "the poisoned PodGroup counted as skipped",
            logs=gang.logs())
        time.sleep(1)
    log = gang.extender.log_path.read_text(errors="replace")
    print(f"MEASURED poisoned object: ordinary gang bound {latency:.2f}s after creation")
    assert latency <= PLACED_WITHIN, f"the ordinary gang took {latency:.1f}s"
    assert not rec.bound("poisoned"), rec.history
    # Logged, naming the object and why, and the watch went on: no relist for it.
    assert re.search(r"skipping podgroups .*poisoned.*longer than 317", log), log[-3000:]
    assert "podgroups list/watch failed" not in log, log[-3000:]

"""A poisoned object in a watch (issue 27, "one object that fails conversion for any
reason is logged, counted in a metric and skipped, never stalls an informer").

The object: a scheduler-plugins PodGroup whose `minResources` names a resource of 400
characters. The CRD bounds the amounts, not the keys (a custom resource's map keys are not
validated by the API server), so it is stored; no Kubernetes resource name is that long,
and the converter refuses it. Beside it an ordinary gang must be placed as usual, the
object must be counted in `gang_extender_skipped_objects_total{kind="podgroups"}`, and the
PodGroup watch must not fail and start over because of it.

And one that cannot even be decoded (issue 42, "one deep object stops everyone"): a Volcano
PodGroup nested 2,000 levels deep, in its spec and in its status written through the
status subresource. kube-apiserver stores it; orjson refuses nesting beyond 1,024 levels,
and a list page was decoded whole, so after a restart the extender never finished its
Volcano list, never became ready, and no gang of any source was placed.
"""

from __future__ import annotations

import re
import time

import pytest

from e2e.gang import GangStack, Recorder, time_ordinary_gang
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.rawapi import RawApi
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.volcano import volcano_crd

__all__ = ["volcano_crd"]  # the fixture of e2e/tests/volcano.py, used by name below


pytestmark = pytest.mark.e2e

POISON = "x" * 400
PLACED_WITHIN = 8.0  # seconds; kube-scheduler asks within a second or two


def skipped(gang: GangStack, kind: str, reason: str = "convert") -> float:
    text = str(gang.get("/metrics"))
    m = re.search(rf'^gang_extender_skipped_objects_total\{{kind="{kind}",reason="{reason}"\}}'
                  r' (\S+)$', text, re.M)
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


VOLCANO_PATH = "/apis/scheduling.volcano.sh/v1beta1"
DEPTH = 2000  # orjson stops at 1,024


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def create_deep_volcano_podgroup(ns: str, name: str, depth: int) -> None:
    """Written as bytes: every JSON encoder of the harness refuses such nesting too."""
    raw = RawApi(kube().api)
    base = f"{VOLCANO_PATH}/namespaces/{ns}/podgroups"
    body = (b'{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"PodGroup","metadata":'
            b'{"name":"' + name.encode() + b'"},"spec":{"minMember":1,"queue":"default",'
            b'"deep":' + _deep(depth) + b"}}")
    created = raw.pool.request("POST", raw.url(base), body=body,
                               headers=raw.headers("application/json"))
    assert created.status == 201, created.data[:300]
    status = b'{"status":{"deep":' + _deep(depth) + b"}}"
    patched = raw.pool.request("PATCH", raw.url(f"{base}/{name}/status"), body=status,
                               headers=raw.headers("application/merge-patch+json"))
    assert patched.status == 200, patched.data[:300]
    stored = raw.pool.request("GET", raw.url(f"{base}/{name}"), headers=raw.headers())
    # Stored as sent (not pruned): both are there, as deep as written.
    assert stored.data.count(b'{"a":') == 2 * depth, stored.data[:300]


def test_a_volcano_podgroup_2000_levels_deep_stops_no_one_after_a_restart(
        gang: GangStack, fake_nodes: NodeSet, namespace: str, volcano_crd: None) -> None:
    ns = namespace
    fake_nodes.add_nodes(2, prefix="deep", cpu="4", memory="8Gi")
    create_deep_volcano_podgroup(ns, "deep", DEPTH)
    # A restart lists every kind afresh: the Volcano list meets the object in a page.
    gang.extender.restart()
    with Recorder(ns) as rec:
        latency = time_ordinary_gang(rec, gang, ns)
        wait_for(lambda: skipped(gang, "volcano-podgroups", "decode") > 0 or NotYet(
            gang.get("/metrics")), 20, "the deep PodGroup counted as skipped",
            logs=gang.logs())
    log = gang.extender.log_path.read_text(errors="replace")
    print(f"MEASURED deep object: ordinary gang bound {latency:.2f}s after creation")
    assert latency <= PLACED_WITHIN, f"the ordinary gang took {latency:.1f}s"
    assert re.search(rf"skipping volcano-podgroups {ns}/deep: undecodable: .*depth limit",
                     log), log[-3000:]
    assert "volcano-podgroups list/watch failed" not in log.split("serving on")[-1], (
        log[-3000:])

"""A commit's Bindings in flight keep their capacity whatever happens to their gang
(architecture.md, "A Binding in flight"), on the real control plane.

The window is made wide on purpose, the way a slow admission webhook makes it in a real
cluster: a validating webhook on `pods/binding` (served by this test over TLS on
loopback) answers the gang's Bindings only after a few seconds, so they stay in flight
while the test deletes the PodGroup and lets kube-scheduler schedule plain pods of the
gang scheduler, each as big as what a node has free without the gang. Before the fix the
deletion freed the capacity of every member in flight, the extender bound plain pods onto
it, and both landed: more CPU bound to a node than it has.
"""

from __future__ import annotations

import time

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.faults.commit_faults import cpu_bound_per_node, kube_scheduler_paused, slow_bindings

pytestmark = pytest.mark.e2e

_NODE_CPU_MILLI = 16_000
_HOLD_SECONDS = 5.0  # how long the webhook keeps each of the gang's Bindings


def test_a_podgroup_deleted_mid_commit_frees_no_capacity_still_in_flight(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    fake_nodes.add_nodes(20, prefix="race", cpu="16", memory="64Gi")
    with Recorder(ns) as rec, slow_bindings(ns, "race-", _HOLD_SECONDS):
        with kube_scheduler_paused(gang):
            # First in kube-scheduler's queue once it runs again: 8 CPU each, which a
            # node holding its 10 members (15 CPU) cannot take, and one without them can.
            for i in range(40):
                create_pod(ns, f"plain-{i}", cpu="8", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER)
            create_podgroup(ns, "race", 200, timeout=120)
            for i in range(200):
                create_pod(ns, f"race-{i}", cpu="1500m", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER, pod_group="race")
            wait_for(lambda: gang.debug()["bindingsInFlight"] or NotYet(gang.debug()), 60,
                     "the commit's Bindings in flight", interval=0.02, logs=gang.logs())
            kube().custom.delete_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "race")
            wait_for(lambda: not gang.debug()["reservations"] or NotYet(gang.debug()), 10,
                     "the extender saw the PodGroup go", interval=0.02, logs=gang.logs())
            assert not rec.bound("race")  # every member's Binding is still in flight
        # kube-scheduler runs again: the plain pods race onto the members' nodes.

        def settled() -> bool | NotYet:
            flying = gang.debug()["bindingsInFlight"]
            return not flying or NotYet(flying)

        wait_for(settled, 60, "no Binding in flight", logs=gang.logs())
        time.sleep(3)  # kube-scheduler's retries of the plain pods
    used = cpu_bound_per_node(ns)
    over = {n: u for n, u in used.items() if u > _NODE_CPU_MILLI}
    plain = len(rec.bound()) - len(rec.bound("race"))
    print(f"MEASURED podgroup deleted with its 200-pod gang's Bindings in flight: "
          f"{len(rec.bound('race'))} members landed, {plain} plain pods bound, "
          f"{len(over)} node(s) over-committed")
    assert not over, f"CPU bound beyond 16 on {over}"

"""What the cluster's default scheduler makes of `status.nominatedNodeName` (issue 16,
item 4; measured with `python -m lab.experiments.nominate`, written down in docs/sharing-nodes.md,
"What a nomination does").

The extender's reservations live in its memory, so the default scheduler may put its
pods on capacity held for a gang. kube-scheduler counts nominated pods of equal or higher
priority when it filters a node, which made nominating gang members to their reserved
nodes look like a way to keep other pods off. It is not one: a kube-scheduler's nominator
is fed by its own scheduling queue, and a pod of another schedulerName never enters that
queue. So the extender does not nominate.

These tests pin both halves on the Kubernetes version the suite runs. The control shows
that the check can see the rule at work; the second fails the day a default scheduler
starts counting other schedulers' nominations, which is when nominating reserved members
becomes worth shipping.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.gang import GangStack, block_ports, port_pod
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_pod
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e


def nominate(ns: str, name: str, node: str) -> None:
    """A merge patch of pods/status, as an extender would send it."""
    out = kube().core.patch_namespaced_pod_status(
        name, ns, {"status": {"nominatedNodeName": node}},
        _content_type="application/merge-patch+json", _preload_content=False)
    assert json.loads(out.data)["status"].get("nominatedNodeName") == node


def decided(ns: str, name: str) -> dict[str, Any] | NotYet:
    """The pod once the default scheduler has placed it or said why not."""
    pod = get_pod(ns, name) or {}
    if (pod.get("spec") or {}).get("nodeName"):
        return pod
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return pod
    return NotYet(pod.get("status"))


def test_control_default_scheduler_counts_its_own_nominated_pod(
    fake_nodes: Nodes, namespace: str, default_scheduler: object
) -> None:
    """P, the default scheduler's own pending pod (kept pending by a nodeSelector no node
    matches), is nominated to N; D of equal priority fits N only if P is ignored, and
    stays pending."""
    ns = namespace
    node = fake_nodes.add_node("nominate-own", cpu="3", memory="8Gi")
    create_pod(ns, "p", cpu="2", node_selector={"nominate/never": "true"})
    wait_for(lambda: decided(ns, "p"), 20, "the default scheduler tried p")
    nominate(ns, "p", node)
    create_pod(ns, "d", cpu="2", node_selector={"kubernetes.io/hostname": node})
    d = wait_for(lambda: decided(ns, "d"), 20, "the default scheduler decided on d")
    assert not d["spec"].get("nodeName"), "the control failed: its own nomination ignored"
    assert (get_pod(ns, "p") or {})["status"].get("nominatedNodeName") == node


def test_default_scheduler_ignores_a_reserved_gang_members_nomination(
    gang: GangStack, fake_nodes: Nodes, namespace: str, default_scheduler: object
) -> None:
    """Gang g: a (1 cpu) waits at the permit barrier, b (2 cpu) holds a hostPort taken on
    the node, so it is never offered to the extender; both slots are on N (4 cpu) and
    both are nominated to N. D (3 cpu, default-scheduler) fits N only if they are
    ignored, and is placed there."""
    ns = namespace
    node = fake_nodes.add_node("nominate-gang", cpu="4", memory="8Gi")
    block_ports(ns, [node])
    create_podgroup(ns, "g", 2, timeout=60)
    create_pod(ns, "g-a", cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="g")
    port_pod(ns, "g-b", group="g", cpu="2")

    def slots() -> dict[str, str] | NotYet:
        d = gang.debug()
        held = {h["pod"] for h in d["waitingBinds"]}
        for r in d["reservations"]:
            if r["gang"] == f"{ns}/g" and f"{ns}/g-a" in held:
                return {s["pod"].split("/")[1]: s["node"] for s in r["slots"]}
        return NotYet(d)

    reserved = wait_for(slots, 20, "g reserved on the node, a's bind held", logs=gang.logs())
    assert reserved == {"g-a": node, "g-b": node}
    for pod in reserved:
        nominate(ns, pod, node)
    create_pod(ns, "d", cpu="3", node_selector={"kubernetes.io/hostname": node})
    d = wait_for(lambda: decided(ns, "d"), 20, "the default scheduler decided on d")
    assert (get_pod(ns, "g-b") or {})["status"].get("nominatedNodeName") == node, (
        "b's nomination was gone when d was decided: the check proves nothing")
    assert d["spec"].get("nodeName") == node, (
        "the default scheduler now keeps its pods off a node another scheduler's pod is "
        "nominated to: nominating reserved gang members would protect reservations. "
        "Re-measure with `python -m lab.experiments.nominate` and revisit issue 16, item 4.")


def test_a_gang_is_not_committed_onto_capacity_nominated_to_another_pod(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """What the extender makes of a nomination (architecture.md §11). P, pending (its
    scheduler serves no one), is nominated to N (4 cpu) as kube-scheduler's preemption
    nominates the pod it evicted victims for; gang g (2 × 1.5 cpu, pinned to N, the same
    priority) fits N only if P's 2 cpu are ignored. The direct commit does not bind it
    while the nomination stands; once the nomination is cleared, the gang is bound."""
    ns = namespace
    node = fake_nodes.add_node("nominated", cpu="4", memory="8Gi")
    create_pod(ns, "p", cpu="2", scheduler_name="no-such-scheduler")
    nominate(ns, "p", node)
    create_podgroup(ns, "g", 2, timeout=30)
    for i in range(2):
        create_pod(ns, f"g-{i}", cpu="1500m", scheduler_name=GANG_SCHEDULER, pod_group="g",
                   node_selector={"kubernetes.io/hostname": node})

    def bound() -> list[str]:
        return [name for name in ("g-0", "g-1")
                if ((get_pod(ns, name) or {}).get("spec") or {}).get("nodeName")]

    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        assert not bound(), (
            f"members {bound()} were bound onto {node}, whose free capacity is nominated "
            f"to pod p")
        time.sleep(0.5)
    kube().core.patch_namespaced_pod_status(
        "p", ns, {"status": {"nominatedNodeName": None}},
        _content_type="application/merge-patch+json")
    # Within moments (0.4 s measured), not at the reservation's 30 s deadline: the end
    # of a nomination wakes the members turned away for it.
    wait_for(lambda: len(bound()) == 2 or NotYet(bound()), 15,
             "the gang bound once the nomination ended", logs=gang.logs())

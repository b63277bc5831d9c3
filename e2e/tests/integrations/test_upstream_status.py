"""Conditions on upstream PodGroups (scheduling.k8s.io v1beta1 on 1.37, v1alpha2 on 1.36)
whose members name the gang scheduler, as kube-scheduler writes them on its own gangs
(issue 28 item 3; extender/core/model/upstream_status.py): `Unschedulable` with our message
while the gang does not fit, then True once it is placed; `DisruptionTarget` once our
preemption evicts it; nothing on a group whose pods name another scheduler.

The scheduling condition is `PodGroupInitiallyScheduled` in v1beta1 and
`PodGroupScheduled` in v1alpha2 (each version's own name). Runs on the session's gang stack
(`gang-scheduler`, preemption on); nodes are labelled per test and the pods select them.
Each test fails without its feature: the first two with the writer's upstream branch
removed (no condition appears), the third with the other-scheduler check removed
(`StatusWriter._recompute`: our condition appears on the mixed group).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet
from e2e.harness.k8s import client
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_pod
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.integrations.upstream_podgroups import (
    EXTENDER_MANAGER,
    conditions,
    create_upstream,
    get_upstream,
    member,
    scheduled_type,
    status_managers,
    version,
)

pytestmark = pytest.mark.e2e


def wait_condition(ns: str, name: str, v: str, type_: str, status: str, reason: str,
                   stack: GangStack, timeout: float = 30) -> dict[str, Any]:
    def check() -> dict[str, Any] | NotYet:
        c = conditions(ns, name, v).get(type_)
        ok = c is not None and (c["status"], c["reason"]) == (status, reason)
        return c if ok and c is not None else NotYet(conditions(ns, name, v))

    out: dict[str, Any] = wait_for(check, timeout, f"{type_}={status} ({reason}) on {name}",
                                   logs=stack.logs())
    return out


def test_unschedulable_with_our_message_then_true_once_placed(
        gang: GangStack, fake_nodes: NodeSet, namespace: str) -> None:
    v, ns = version(), namespace
    sel = {"upstream-status-e2e": ns}
    fake_nodes.add_node(f"{ns}-a", cpu="2", memory="4Gi", labels=sel)
    create_upstream(ns, "up", 3, v)
    for i in range(3):
        member(ns, f"up-{i}", "up", "1", sel)
    c = wait_condition(ns, "up", v, scheduled_type(v), "False", "Unschedulable", gang)
    # Our message: the gang, the members and the number that did not fit.
    assert c["message"].startswith(f"gang workload-api:{ns}/up: "), c
    assert "3" in c["message"] and "2 fit" in c["message"], c
    # As kube-scheduler sets it, when the API keeps a generation (neither 1.36.3's v1alpha2
    # nor 1.37.2's v1beta1 PodGroups have one: then none).
    assert c.get("observedGeneration") == get_upstream(ns, "up", v)["metadata"].get("generation")
    assert EXTENDER_MANAGER in status_managers(get_upstream(ns, "up", v))
    fake_nodes.add_node(f"{ns}-b", cpu="2", memory="4Gi", labels=sel)
    c = wait_condition(ns, "up", v, scheduled_type(v), "True", "Scheduled", gang)
    assert c["message"] == f"gang workload-api:{ns}/up: quorum of 3 bound", c
    assert all((get_pod(ns, f"up-{i}") or {}).get("spec", {}).get("nodeName")
               for i in range(3))
    assert "DisruptionTarget" not in conditions(ns, "up", v)


@pytest.fixture
def priority_classes() -> Iterator[dict[str, str]]:
    api = client.SchedulingV1Api(kube().api)
    suffix = os.urandom(3).hex()
    made = {}
    for key, value in (("low", 1000), ("high", 2000)):
        name = f"e2e-up-{key}-{suffix}"
        api.create_priority_class({"apiVersion": "scheduling.k8s.io/v1",
                                   "kind": "PriorityClass", "metadata": {"name": name},
                                   "value": value}, _preload_content=False)
        made[key] = name
    yield made
    for name in made.values():
        with contextlib.suppress(Exception):
            api.delete_priority_class(name, _preload_content=False)


def test_our_preemption_makes_the_gang_a_disruption_target(
        gang: GangStack, fake_nodes: NodeSet, namespace: str,
        priority_classes: dict[str, str]) -> None:
    """A low-priority upstream gang placed first, then a high-priority gang that needs
    its nodes: the extender evicts the low gang whole, and its PodGroup says so."""
    v, ns = version(), namespace
    sel = {"upstream-status-e2e": ns}
    fake_nodes.add_nodes(2, prefix=f"{ns}-p", cpu="4", memory="8Gi", labels=sel)
    with Recorder(ns) as rec:
        create_upstream(ns, "low", 2, v)
        for i in range(2):
            member(ns, f"low-{i}", "low", "3", sel, klass=priority_classes["low"])
        wait_condition(ns, "low", v, scheduled_type(v), "True", "Scheduled", gang)
        create_podgroup(ns, "high", 2)
        for i in range(2):
            create_pod(ns, f"high-{i}", cpu="3", scheduler_name=GANG_SCHEDULER,
                       pod_group="high", node_selector=sel, labels=sel,
                       priority_class=priority_classes["high"])
        dt = wait_condition(ns, "low", v, "DisruptionTarget", "True", "PreemptionByScheduler",
                            gang)
        assert f"preempted by gang {ns}/high (priority 2000)" in dt["message"], dt
        assert dt["message"].startswith(f"gang workload-api:{ns}/low (priority 1000)"), dt
        wait_for(lambda: len(rec.bound("high")) == 2 or NotYet(rec.bound()), 30,
                 "the high gang bound", logs=gang.logs())
    # Placed once: the scheduling condition stays True (terminal in v1beta1).
    assert conditions(ns, "low", v)[scheduled_type(v)]["status"] == "True"


def test_nothing_on_a_group_whose_pods_name_another_scheduler(
        gang: GangStack, default_scheduler: Any, fake_nodes: NodeSet, namespace: str) -> None:
    """Two groups the default scheduler has pods in: one all its own, placed pod by pod
    by it (its gang scheduling off here; test_in_tree_gangs.py runs it on); one with a
    pod of it beside a quorum of ours, which we place. Neither is ours to write: no
    condition, no status field managed by the extender."""
    v, ns = version(), namespace
    sel = {"upstream-status-e2e": ns}
    fake_nodes.add_nodes(2, prefix=f"{ns}-d", cpu="4", memory="8Gi", labels=sel)
    create_upstream(ns, "theirs", 2, v)
    create_upstream(ns, "mixed", 2, v)
    with Recorder(ns) as rec:
        for i in range(2):
            member(ns, f"theirs-{i}", "theirs", "1", sel, scheduler="default-scheduler")
        member(ns, "mixed-x", "mixed", "1", sel, scheduler="default-scheduler")
        for i in range(2):
            member(ns, f"mixed-{i}", "mixed", "1", sel)
        wait_for(lambda: len(rec.bound()) == 5 or NotYet(rec.bound()), 30, "every pod bound",
                 logs=gang.logs())
    # Our gang in "mixed" was placed: a condition, were it ours, would be due by now;
    # the writer's settle (0.5 s) and interval (1 s) are well inside 5 s.
    time.sleep(5)
    for name in ("theirs", "mixed"):
        obj = get_upstream(ns, name, v)
        assert not (obj.get("status") or {}).get("conditions"), (name, obj.get("status"))
        assert EXTENDER_MANAGER not in status_managers(obj), name

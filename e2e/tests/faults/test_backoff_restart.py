"""A gang's backoff survives a restart of the extender, on the real control plane: the
active extender keeps it in the PodGroup's `status.requeueState`, and a restarted one
carries it on. Before, a restarted extender retried a timed-out gang at once and a
Failed one as if it had never failed.

As in test_gang_lifecycle, one member asks for a hostPort taken on every node, so the
gang's reservation times out; the blockers are deleted after the restart, so a gang the
restarted extender retried too early would bind at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from e2e.gang import PORT, GangStack, Recorder, block_ports, port_pod, start_extender
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup, delete_pod
from e2e.harness.process import ManagedProcess
from e2e.harness.queries import get_podgroup, pod_nodes
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.integrations.upstream_podgroups import conditions, create_upstream, member
from e2e.tests.integrations.upstream_podgroups import version as upstream_version

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def extender_with(gang: GangStack, *args: str) -> Iterator[ManagedProcess]:
    """The stack's extender, replaced by one with `args` on top of the stack's own."""
    gang.extender.stop()
    ext = start_extender(gang.cluster, gang.port, [*gang.extra_args, *args],
                         "gang-extender-backoff")
    try:
        yield ext
    finally:
        ext.stop()
        gang.extender.restart()
        gang.extender.wait_ready(30)


def requeue_state(ns: str, name: str) -> dict[str, Any] | NotYet:
    status = (get_podgroup(ns, name) or {}).get("status") or {}
    state = status.get("requeueState")
    return {"phase": status.get("phase"), **state} if state else NotYet(status)


BACKING_OFF = "gang-extender.x-k8s.io/BackingOff"


def upstream_requeue_state(ns: str, name: str, v: str) -> dict[str, Any] | NotYet:
    """An upstream PodGroup's backoff, from the head of our condition's message
    (`count=N requeueAt=T; ...`), in `requeue_state`'s shape."""
    found = conditions(ns, name, v)
    c = found.get(BACKING_OFF) or {}
    if c.get("status") != "True":
        return NotYet(found)
    head = dict(f.split("=", 1) for f in str(c["message"]).split(";", 1)[0].split())
    return {"count": int(head["count"]), "requeueAt": head["requeueAt"]}


def timed_out_upstream_gang(fake_nodes: Nodes, ns: str, name: str, v: str) -> list[str]:
    """`timed_out_gang` with an upstream PodGroup; it has no timeout of its own, so the
    extender's --default-timeout (3 s) is the reservation's."""
    nodes = fake_nodes.add_nodes(2, prefix=name, cpu="4", memory="8Gi")
    blockers = block_ports(ns, nodes)
    create_upstream(ns, name, 2, v)
    member(ns, f"{name}-0", name, "1", {})
    kube().core.create_namespaced_pod(ns, {  # never offered to the extender
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-1"},
        "spec": {"schedulerName": GANG_SCHEDULER, "schedulingGroup": {"podGroupName": name},
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox:1.36",
                                 "command": ["sleep", "1d"],
                                 "ports": [{"containerPort": PORT, "hostPort": PORT}],
                                 "resources": {"requests": {"cpu": "1", "memory": "0"}}}]}},
        _preload_content=False)
    return blockers


def timed_out_gang(fake_nodes: Nodes, ns: str, name: str) -> list[str]:
    """A gang of two whose reservation times out (3 s): returns the port blockers."""
    nodes = fake_nodes.add_nodes(2, prefix=name, cpu="4", memory="8Gi")
    blockers = block_ports(ns, nodes)
    create_podgroup(ns, name, 2, timeout=3)
    create_pod(ns, f"{name}-0", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
               pod_group=name)
    port_pod(ns, f"{name}-1", group=name, cpu="1")  # never offered to the extender
    return blockers


def test_a_failed_gang_stays_failed_when_the_extender_restarts(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    with extender_with(gang, "--backoff-limit", "1") as ext, Recorder(ns) as rec:
        blockers = timed_out_gang(fake_nodes, ns, "lim")
        state = wait_for(lambda: requeue_state(ns, "lim"), 30,
                         "the timeout recorded in the PodGroup's status", logs=[ext])
        wait_for(lambda: (get_podgroup(ns, "lim") or {}).get("status", {}).get("phase")
                 == "Failed" or NotYet(get_podgroup(ns, "lim")), 15, "the group Failed",
                 logs=[ext])
        ext.restart()
        ext.wait_ready(30)
        for name in blockers:  # the gang would fit now, if it were tried
            delete_pod(ns, name)
        time.sleep(6)
        assert not rec.bound("lim"), f"a Failed gang was retried: {rec.history}"
        status = (get_podgroup(ns, "lim") or {}).get("status") or {}
        assert status.get("phase") == "Failed", status
        assert status.get("requeueState") == {"count": 1}, (state, status)
        backoff = {b["gang"]: b for b in gang.debug()["backoff"]}
        assert backoff[f"{ns}/lim"]["failed"] is True, backoff


@pytest.mark.parametrize("kind", ["podgroup", "upstream"])
def test_a_restarted_extender_waits_out_the_recorded_backoff(
    gang: GangStack, fake_nodes: Nodes, namespace: str, kind: str
) -> None:
    """An upstream PodGroup (scheduling.k8s.io), whose built-in status would drop a
    `requeueState`, keeps its backoff in our condition `gang-extender.x-k8s.io/BackingOff`,
    which the API keeps."""
    ns = namespace
    v = upstream_version() if kind == "upstream" else ""
    key = f"{ns}/wait" if kind == "podgroup" else f"workload-api:{ns}/wait"

    def recorded() -> dict[str, Any] | NotYet:
        return (requeue_state(ns, "wait") if kind == "podgroup"
                else upstream_requeue_state(ns, "wait", v))

    with (extender_with(gang, "--backoff-base", "12", "--backoff-cap", "12",
                        "--default-timeout", "3") as ext,
          Recorder(ns) as rec):
        blockers = (timed_out_gang(fake_nodes, ns, "wait") if kind == "podgroup"
                    else timed_out_upstream_gang(fake_nodes, ns, "wait", v))
        state = wait_for(recorded, 30,
                         "the backoff recorded in the PodGroup's status", logs=[ext])
        ext.restart()
        ext.wait_ready(30)
        ends = datetime.fromisoformat(state["requeueAt"]).timestamp()
        ends_mono = time.monotonic() + ends - time.time()
        assert ends_mono > time.monotonic() + 2, "the restart took the whole backoff"
        for name in blockers:  # a cluster event, and room for the gang
            delete_pod(ns, name)
        backoff = {b["gang"]: b for b in gang.debug()["backoff"]}
        assert backoff[key]["attempts"] == 1, backoff
        wait_for(lambda: len(rec.bound("wait")) == 2 or NotYet(pod_nodes(ns)), 40,
                 "the gang bound after the recorded backoff", logs=[ext, gang.scheduler])
        first = min(r.bound_at or 0.0 for r in rec.bound("wait").values())
        print(f"MEASURED {kind}: bound {first - ends_mono:+.1f}s after the recorded "
              f"backoff's end")
        assert first >= ends_mono - 0.5, (
            f"bound {ends_mono - first:.1f}s before the recorded backoff ended")
        rec.assert_never_partial("wait", 2)
        if kind == "upstream":
            wait_for(lambda: conditions(ns, "wait", v).get(BACKING_OFF, {}).get("status")
                     == "False" or NotYet(conditions(ns, "wait", v)), 15,
                     "our condition False once the gang is bound", logs=[ext])
            return
        wait_for(lambda: "requeueState" not in ((get_podgroup(ns, "wait") or {})
                                                .get("status") or {})
                 or NotYet(get_podgroup(ns, "wait")), 15,
                 "the requeue state removed once the gang is bound", logs=[ext])

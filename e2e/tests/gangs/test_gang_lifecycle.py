"""Reservations over time on the real control plane: deadlines, backoff, restarts,
holds against other pods, wake-ups, bad input (issue 3, scenarios 5, 6, 7, 9, 10).

To keep a reservation assembling on purpose, one member asks for a hostPort that is
taken on every node: kube-scheduler's own NodePorts filter then never offers that
member to the extender, which does not model ports, so its slot stays unclaimed.
Removing the port blockers lets the member through.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder, block_ports, port_pod
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup, delete_pod
from e2e.harness.queries import get_pod, pod_nodes
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.gang_reads import held, member, message

pytestmark = pytest.mark.e2e


def test_deadline_releases_capacity_to_waiting_gang_and_backs_off(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(2, prefix="dl", cpu="4", memory="8Gi")
    block_ports(ns, nodes)
    create_podgroup(ns, "big", 3, timeout=6)
    time.sleep(1.1)
    create_podgroup(ns, "small", 2)
    with Recorder(ns) as rec:
        member(ns, "big-0", "big", "2")
        member(ns, "big-1", "big", "2")
        port_pod(ns, "big-2", group="big", cpu="2")  # never offered to the extender
        wait_for(lambda: held(gang, f"{ns}/big") == 2 or NotYet(gang.debug()), 20,
                 "big's two schedulable members held", logs=gang.logs())
        reserved_at = time.monotonic()
        member(ns, "small-0", "small", "2")
        member(ns, "small-1", "small", "2")
        wait_for(lambda: any("waiting behind older gang" in message(ns, f"small-{i}")
                             for i in range(2)), 20,
                 "small waits behind big", logs=gang.logs())
        assert not rec.bound("small")
        wait_for(lambda: len(rec.bound("small")) == 2 or NotYet(pod_nodes(ns)), 30,
                 "small bound after big's deadline", logs=gang.logs())
        small_bound = max(rec.bind_times("small"))
        waited = small_bound - reserved_at
        print(f"MEASURED deadline: small bound {waited:.2f}s after big's reservation "
              f"(timeout 6s)")
        assert waited >= 4.5, "small must not run while big's reservation holds"
        assert waited <= 6 + 4, "small must be woken promptly once the capacity is free"
        dbg = gang.debug()
        backoff = {b["gang"]: b for b in dbg["backoff"]}
        assert backoff[f"{ns}/big"]["attempts"] >= 1, dbg
        assert not any(r["gang"] == f"{ns}/big" for r in dbg["reservations"]), dbg
        time.sleep(3)
        assert not rec.bound("big"), f"no member of big may ever bind: {rec.history}"
        rec.assert_never_partial("small", 2)


def test_backoff_end_wakes_the_gang_without_a_cluster_event(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(2, prefix="bo", cpu="4", memory="8Gi")
    blockers = block_ports(ns, nodes)
    create_podgroup(ns, "retry", 2, timeout=4)
    with Recorder(ns) as rec:
        member(ns, "retry-0", "retry", "1")
        port_pod(ns, "retry-1", group="retry", cpu="1")

        def backing_off() -> dict[str, Any] | NotYet:
            entries: list[dict[str, Any]] = gang.debug()["backoff"]
            for b in entries:
                if b["gang"] == f"{ns}/retry" and b["secondsLeft"] > 0.5:
                    return b
            return NotYet(gang.debug())

        b = wait_for(backing_off, 20, "retry timed out and backing off", logs=gang.logs())
        backoff_ends = time.monotonic() + float(b["secondsLeft"])
        for name in blockers:  # a cluster event now, while the gang still backs off
            delete_pod(ns, name)
        wait_for(lambda: len(rec.bound("retry")) == 2 or NotYet(pod_nodes(ns)), 30,
                 "retry bound after its backoff", logs=gang.logs())
        first = min(rec.bind_times("retry"))
        assert first >= backoff_ends - 0.3, "bound before the backoff ended"
        delay = max(rec.bind_times("retry")) - backoff_ends
        print(f"MEASURED wake-up: backoff end -> gang bound in {delay:.2f}s")
        assert delay <= 5.0, f"gang sat {delay:.1f}s after its backoff ended"
        rec.assert_never_partial("retry", 2)


def test_restart_while_binds_held_never_half_binds(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(3, prefix="rs", cpu="4", memory="8Gi")
    blockers = block_ports(ns, nodes)
    create_podgroup(ns, "rs", 3, timeout=120)
    with Recorder(ns) as rec:
        member(ns, "rs-0", "rs", "1")
        member(ns, "rs-1", "rs", "1")
        port_pod(ns, "rs-2", group="rs", cpu="1")
        wait_for(lambda: held(gang, f"{ns}/rs") == 2 or NotYet(gang.debug()), 20,
                 "two binds held", logs=gang.logs())
        gang.extender.kill()
        time.sleep(2)
        assert not rec.bound("rs"), "killing the extender must not bind anyone"
        for name in blockers:
            delete_pod(ns, name)
        time.sleep(2)
        assert not rec.bound("rs"), "no member may bind while the extender is down"
        restarted = time.monotonic()
        gang.extender.restart()
        gang.extender.wait_ready(30)
        wait_for(lambda: len(rec.bound("rs")) == 3 or NotYet(pod_nodes(ns)), 30,
                 "gang bound whole after the restart", logs=gang.logs())
        took = max(rec.bind_times("rs")) - restarted
        print(f"MEASURED restart: extender restart -> gang of 3 bound in {took:.2f}s")
        rec.assert_never_partial("rs", 3)


def test_reserved_capacity_is_not_taken_by_plain_pods(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(2, prefix="hold", cpu="4", memory="8Gi")
    block_ports(ns, nodes)
    create_podgroup(ns, "hold", 3, timeout=60)
    with Recorder(ns) as rec:
        member(ns, "hold-0", "hold", "2")
        member(ns, "hold-1", "hold", "2")
        port_pod(ns, "hold-2", group="hold", cpu="2")
        wait_for(lambda: held(gang, f"{ns}/hold") == 2 or NotYet(gang.debug()), 20,
                 "hold's members held", logs=gang.logs())
        create_pod(ns, "intruder", cpu="3", scheduler_name=GANG_SCHEDULER)
        wait_for(lambda: "held for gang" in message(ns, "intruder"), 20,
                 "plain pod turned away from held capacity", logs=gang.logs())
        time.sleep(2)
        assert "intruder" not in rec.bound(), "a plain pod took capacity held for a gang"
        assert not rec.bound("hold")


def test_default_scheduler_pods_are_counted(
    gang: GangStack, fake_nodes: Nodes, namespace: str, default_scheduler: object
) -> None:
    """With one node filled by a default-scheduler pod, a gang that needs both nodes gets
    no reservation at all (rather than a hung half of one)."""
    ns = namespace
    ns2_nodes = fake_nodes.add_nodes(2, prefix="acct", cpu="4", memory="8Gi")
    create_pod(ns, "default-pod", cpu="4", node_selector={"kubernetes.io/hostname":
                                                         ns2_nodes[0]})
    wait_for(lambda: (get_pod(ns, "default-pod") or {}).get("spec", {}).get("nodeName"), 20,
             "default-scheduler pod bound")
    create_podgroup(ns, "acct", 2)
    for i in range(2):
        create_pod(ns, f"acct-{i}", cpu="4", scheduler_name=GANG_SCHEDULER, pod_group="acct",
                   node_selector={"kubernetes.io/hostname": ns2_nodes[i]})

    def explained() -> str | NotYet:
        msg = message(ns, "acct-0") + message(ns, "acct-1")
        return msg if "fit" in msg else NotYet(msg)

    wait_for(explained, 20, "acct explained as not fitting", logs=gang.logs())
    assert not any(r["gang"] == f"{ns}/acct" for r in gang.debug()["reservations"])
    assert not (get_pod(ns, "acct-1") or {}).get("spec", {}).get("nodeName")


def test_bad_input_on_every_route_keeps_server_and_state(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    node = fake_nodes.add_node("bad-0", cpu="4", memory="8Gi")
    create_pod(ns, "placed", cpu="1", scheduler_name=GANG_SCHEDULER)
    wait_for(lambda: (get_pod(ns, "placed") or {}).get("spec", {}).get("nodeName"), 20,
             "plain pod bound", logs=gang.logs())
    pod = get_pod(ns, "placed") or {}
    uid = pod["metadata"]["uid"]
    before = gang.debug()
    cases: list[tuple[str, bytes, str]] = [
        ("/filter", b"{not json", "malformed JSON"),
        ("/filter", b'{"Pod": 7, "NodeNames": []}', "invalid request"),
        ("/filter", json.dumps({"Pod": {"metadata": {"name": "x"}},
                                "NodeNames": [node]}).encode(), "invalid request"),
        ("/prioritize", b"[1,2", "malformed JSON"),
        ("/bind", b"{}", "PodName"),
        ("/bind", json.dumps({"PodName": "ghost", "PodNamespace": ns, "PodUID": "nope",
                              "Node": node}).encode(), "not known"),
        ("/bind", json.dumps({"PodName": "placed", "PodNamespace": ns, "PodUID": uid,
                              "Node": "elsewhere"}).encode(), "already bound to node"),
        ("/bind", b"x" * (1 << 20), "invalid request"),
    ]
    for path, body, needle in cases:
        status, reply = gang.post(path, body)
        assert status in (200, 400), (path, status, reply)
        assert needle in reply["Error"], (path, reply)
    assert gang.get("/healthz") == "ok"
    after = gang.debug()
    assert after["reservations"] == before["reservations"]
    assert after["waitingBinds"] == before["waitingBinds"]
    assert (get_pod(ns, "placed") or {})["spec"]["nodeName"] == node

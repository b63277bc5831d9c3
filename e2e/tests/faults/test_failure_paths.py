"""Failure paths on the real control plane (issue 7, part 3).

* The API server becomes unreachable for the extender (a TCP proxy between the two is
  cut): filter still answers from the cache, a bind fails cleanly, kube-scheduler
  retries the pod, and once the API is back it is bound, a gang created meanwhile too.
* A PodGroup deleted, or its minMember lowered or raised, while its gang assembles.
* A member deleted while the binds of the others are held.
* A node deleted under a reservation.
* Bindings the API server rejects (pod already bound elsewhere, UID mismatch), through
  the extender's own runtime talking to the real API server.

Assembling gangs are held open with the hostPort trick of test_gang_lifecycle: one member
asks for a host port taken on every node, so kube-scheduler never offers it to the
extender; removing the blockers lets it through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.gang import REPO, GangStack, Recorder, block_ports, port_pod, scheduler_config
from e2e.harness.cluster import ControlPlane
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import (
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    create_pod,
    create_podgroup,
    delete_pod,
)
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.queries import get_pod, pod_nodes
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.faults.tcp_proxy import TcpProxy
from e2e.tests.gangs.gang_reads import held, member, message
from tests.core.sim import in_flight

pytestmark = pytest.mark.e2e


def bound(ns: str, name: str) -> str:
    return str(((get_pod(ns, name) or {}).get("spec") or {}).get("nodeName") or "")


def reservation(gang: GangStack, key: str) -> dict[str, Any] | None:
    return next((r for r in gang.debug()["reservations"] if r["gang"] == key), None)


def patch_min_member(ns: str, name: str, value: int) -> None:
    kube().custom.patch_namespaced_custom_object(
        PG_GROUP, PG_VERSION, ns, PG_PLURAL, name, {"spec": {"minMember": value}},
        _preload_content=False)


def delete_podgroup(ns: str, name: str) -> None:
    kube().custom.delete_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name,
                                                  _preload_content=False)


# ----- the API server unavailable ----------------------------------------------------------


@dataclass
class ProxiedStack:
    proxy: TcpProxy
    extender: ManagedProcess
    scheduler: ManagedProcess
    port: int
    name: str

    def logs(self) -> list[ManagedProcess]:
        return [self.extender, self.scheduler]


@pytest.fixture
def proxied_stack(local_control_plane: ControlPlane, tmp_path: Path) -> Iterator[ProxiedStack]:
    """An extender that reaches the API server only through a TcpProxy, and a
    kube-scheduler (own profile name) that reaches it directly."""
    cp = local_control_plane
    proxy = TcpProxy(cp.apiserver_port).restore()
    cfg = yaml.safe_load(cp.kubeconfig.read_text())
    for c in cfg["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kubeconfig = tmp_path / "via-proxy.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(cfg))
    name = f"gang-proxied-{free_port()}"
    port = free_port()
    ext = cp.start_process(
        [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig", str(kubeconfig),
         "--listen", f"127.0.0.1:{port}", "--scheduler-name", name, "--default-timeout", "60",
         "--leader-lease", "off"],  # its kube-scheduler runs without leader election
        name + "-extender", cwd=REPO, ready=http_ok(f"http://127.0.0.1:{port}/readyz"),
        ready_timeout=60)
    config = scheduler_config(port)
    config["profiles"][0]["schedulerName"] = name
    sched = cp.start_scheduler(config, name + "-kube-scheduler")
    try:
        yield ProxiedStack(proxy, ext, sched, port, name)
    finally:
        proxy.cut()
        for p in (sched, ext):
            with contextlib.suppress(Exception):
                p.stop()


def test_api_server_unavailable_filter_from_cache_bind_refused_then_retried(
    proxied_stack: ProxiedStack, fake_nodes: NodeSet, namespace: str
) -> None:
    import httpx

    st, ns = proxied_stack, namespace
    nodes = fake_nodes.add_nodes(2, prefix="apidown", cpu="4", memory="8Gi")
    # Known to the extender before the outage: a pending pod no node can take (so the
    # scheduler never binds it) and a gang member waiting for its second member.
    create_pod(ns, "known", cpu="1", scheduler_name=st.name,
               node_selector={"no-such-label": "x"})
    create_podgroup(ns, "pair", 2)
    create_pod(ns, "pair-0", cpu="1", scheduler_name=st.name, pod_group="pair")
    url = f"http://127.0.0.1:{st.port}"

    def debug_has(name: str) -> bool:
        return any(q["gang"] == f"{ns}/pair" for q in httpx.get(
            url + "/debug/gangs", timeout=5).json()["queue"]) and bool(get_pod(ns, name))

    wait_for(lambda: debug_has("known"), 30, "extender saw the pods", logs=st.logs())
    time.sleep(1)  # the watch delivers "known" too (same stream as pair-0)

    st.proxy.cut()
    with Recorder(ns) as rec:
        # filter answers from memory, at once, with the API unreachable.
        known = get_pod(ns, "known") or {}
        t0 = time.monotonic()
        r = httpx.post(url + "/filter", json={"Pod": known, "NodeNames": nodes}, timeout=10)
        took = time.monotonic() - t0
        assert r.status_code == 200 and r.json()["Error"] == "", r.text
        assert sorted(r.json()["NodeNames"]) == sorted(nodes)
        assert took < 2.0, f"filter took {took:.1f}s with the API down"
        pair0 = get_pod(ns, "pair-0") or {}
        r = httpx.post(url + "/filter", json={"Pod": pair0, "NodeNames": nodes}, timeout=10)
        assert "1 of 2 members exist" in str(r.json()["FailedAndUnresolvableNodes"]), r.text

        # A pod created now: the extender learns it from the filter request and approves
        # it, but refuses its bind while its own pod and node watches are broken (its
        # cache could miss a pod bound meanwhile) or, once it tries, the Binding fails;
        # either way kube-scheduler must retry, not lose it.
        create_pod(ns, "during", cpu="1", scheduler_name=st.name)
        # A gang created now: the extender cannot see its PodGroup yet.
        create_podgroup(ns, "late", 2)
        for i in range(2):
            create_pod(ns, f"late-{i}", cpu="1", scheduler_name=st.name, pod_group="late")

        def bind_turned_down() -> bool:
            log = st.extender.log_path.read_text(errors="replace")
            refused = f"bind refused pod={ns}/during" in log and "after its watch broke" in log
            return refused or f"bind failed pod={ns}/during" in log

        wait_for(bind_turned_down, 60, "the bind of 'during' refused or failed with the API "
                 "down", logs=st.logs())
        time.sleep(2)
        assert not rec.bound(), f"nothing can be bound while the API is down: {rec.history}"
        assert st.extender.running() and httpx.get(url + "/healthz", timeout=5).text == "ok"

        st.proxy.restore()
        wait_for(lambda: bound(ns, "during") or NotYet(pod_nodes(ns)), 90,
                 "'during' bound after the API came back", logs=st.logs())
        wait_for(lambda: (bound(ns, "late-0") and bound(ns, "late-1")) or NotYet(pod_nodes(ns)),
                 90, "gang 'late' bound whole after the API came back", logs=st.logs())
        rec.assert_never_partial("late", 2)
        assert not bound(ns, "pair-0") and not bound(ns, "known")


# ----- PodGroup deleted or re-specified while its gang assembles ------------------------------


def _assembling(gang: GangStack, fake_nodes: NodeSet, ns: str, prefix: str, group: str,
                min_member: int, held_count: int, nodes: int = 2) -> list[str]:
    """A gang with `held_count` members whose binds are held and one blocked member."""
    names = fake_nodes.add_nodes(nodes, prefix=prefix, cpu="4", memory="8Gi")
    blockers = block_ports(ns, names)
    create_podgroup(ns, group, min_member, timeout=120)
    for i in range(held_count):
        member(ns, f"{group}-{i}", group, "1")
    port_pod(ns, f"{group}-{held_count}", group=group, cpu="1")
    wait_for(lambda: held(gang, f"{ns}/{group}-") == held_count or NotYet(gang.debug()), 30,
             f"{held_count} binds of {group} held", logs=gang.logs())
    return blockers


def test_podgroup_deleted_while_binds_held_releases_everything(
    gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    ns = namespace
    with Recorder(ns) as rec:
        _assembling(gang, fake_nodes, ns, "pgdel", "pgdel", 3, 2)
        delete_podgroup(ns, "pgdel")
        wait_for(lambda: (held(gang, f"{ns}/pgdel-") == 0
                          and reservation(gang, f"{ns}/pgdel") is None) or NotYet(gang.debug()),
                 30, "held binds answered and the reservation released", logs=gang.logs())
        wait_for(lambda: "PodGroup" in message(ns, "pgdel-0") or NotYet(message(ns, "pgdel-0")),
                 30, "members told their PodGroup is gone", logs=gang.logs())
        time.sleep(2)
        assert not rec.bound("pgdel"), f"no member may bind: {rec.history}"
        assert not any(q["gang"] == f"{ns}/pgdel" for q in gang.debug()["queue"])


def test_min_member_lowered_while_assembling_binds_the_held_members(
    gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    ns = namespace
    with Recorder(ns) as rec:
        _assembling(gang, fake_nodes, ns, "pglow", "pglow", 3, 2)
        assert not rec.bound("pglow")
        patch_min_member(ns, "pglow", 2)
        wait_for(lambda: len(rec.bound("pglow")) == 2 or NotYet(pod_nodes(ns)), 30,
                 "the two held members bound once minMember is 2", logs=gang.logs())
        rec.assert_never_partial("pglow", 2)
        assert "pglow-2" not in rec.bound(), "the blocked member cannot have been placed"
        assert reservation(gang, f"{ns}/pglow") is None


def test_min_member_raised_while_assembling_waits_for_the_new_quorum(
    gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    ns = namespace
    with Recorder(ns) as rec:
        blockers = _assembling(gang, fake_nodes, ns, "pgraise", "pgraise", 3, 2, nodes=3)
        patch_min_member(ns, "pgraise", 4)
        for b in blockers:  # the third member can be placed now: 3 of 4 is not a quorum
            delete_pod(ns, b)
        wait_for(lambda: held(gang, f"{ns}/pgraise-") == 3 or NotYet(gang.debug()), 30,
                 "three binds held under minMember 4", logs=gang.logs())
        time.sleep(2)
        assert not rec.bound("pgraise"), f"3 of 4 must not bind: {rec.history}"
        member(ns, "pgraise-3", "pgraise", "1")
        wait_for(lambda: len(rec.bound("pgraise")) == 4 or NotYet(pod_nodes(ns)), 30,
                 "all four bound together", logs=gang.logs())
        rec.assert_never_partial("pgraise", 4)


# ----- a member deleted while binds are held ------------------------------------------------


def test_member_deleted_while_binds_held_then_replaced(
    gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    ns = namespace
    with Recorder(ns) as rec:
        blockers = _assembling(gang, fake_nodes, ns, "mdel", "mdel", 3, 2)
        delete_pod(ns, "mdel-0")
        wait_for(lambda: held(gang, f"{ns}/mdel-") == 1 or NotYet(gang.debug()), 30,
                 "the deleted member's held bind answered, the other still held",
                 logs=gang.logs())
        time.sleep(2)
        assert not rec.bound("mdel"), f"one held member must not bind alone: {rec.history}"
        member(ns, "mdel-r", "mdel", "1")
        for b in blockers:
            delete_pod(ns, b)
        wait_for(lambda: len(rec.bound("mdel")) == 3 or NotYet(pod_nodes(ns)), 60,
                 "the gang bound whole with the replacement", logs=gang.logs())
        rec.assert_never_partial("mdel", 3)
        assert "mdel-0" not in rec.bound()


# ----- a node deleted under a reservation ---------------------------------------------------


def test_node_deleted_under_a_reservation(
    gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    ns = namespace
    with Recorder(ns) as rec:
        blockers = _assembling(gang, fake_nodes, ns, "ndel", "ndel", 3, 2, nodes=3)
        res = reservation(gang, f"{ns}/ndel")
        assert res is not None
        victim = next(s["node"] for s in res["slots"] if s["pod"] == f"{ns}/ndel-0")
        fake_nodes.delete_node(victim)  # also force-deletes the blocker pod there

        def released() -> bool | NotYet:
            r = reservation(gang, f"{ns}/ndel")
            on_victim = [s for s in (r or {}).get("slots", []) if s["node"] == victim]
            return (not on_victim and held(gang, f"{ns}/ndel-0") == 0) or NotYet(gang.debug())

        wait_for(released, 30, f"no slot or held bind left on deleted node {victim}",
                 logs=gang.logs())
        time.sleep(2)
        assert not rec.bound("ndel"), f"nothing may bind short of quorum: {rec.history}"
        for b in blockers:
            if not b.endswith(victim):
                delete_pod(ns, b)
        wait_for(lambda: len(rec.bound("ndel")) == 3 or NotYet(pod_nodes(ns)), 90,
                 "the gang bound whole on the remaining nodes", logs=gang.logs())
        rec.assert_never_partial("ndel", 3)
        assert victim not in {r.node for r in rec.bound("ndel").values()}


# ----- Bindings the API server rejects --------------------------------------------------------


def _runtime(cp: ControlPlane) -> Any:
    from extender.core.manager import GangManager
    from extender.core.wiring import Core
    from extender.kube.client import make_kube
    from extender.scheduler.dispatch import Dispatcher

    core = Core.wire()
    # The client the CLI builds: Bindings through the transport's raw write path.
    client = make_kube(str(cp.kubeconfig))
    return Dispatcher(GangManager(core), client), core, client


def _read_node(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kube().core.read_node(name, _preload_content=False).data)
    return out


def _feed(rt: Any, ns: str, names: list[str], nodes: list[str]) -> None:
    """The framework's view as an informer would have built it, taken now."""
    from extender.core.model.convert import node_from_k8s, pod_from_k8s

    for n in nodes:
        rt.manager.on_node(node_from_k8s(_read_node(n)))
    for name in names:
        rt.manager.on_pod(pod_from_k8s(get_pod(ns, name)), time.time())


def _bind_directly(ns: str, name: str, node: str) -> None:
    pod = get_pod(ns, name) or {}
    kube().core.create_namespaced_pod_binding(name, ns, {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "uid": pod["metadata"]["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}}, _preload_content=False)


def test_binding_rejected_by_the_api_server(
    local_control_plane: ControlPlane, fake_nodes: NodeSet, namespace: str
) -> None:
    """The extender's view is a moment old (its watch has not delivered the change): the
    API server is the judge. Already bound to another node: an error naming it. Already
    bound to the same node: success (bind is idempotent). Recreated under the same name
    (UID mismatch): an error, and the new pod is left alone."""
    ns = namespace
    n1, n2 = fake_nodes.add_nodes(2, prefix="rej", cpu="4", memory="8Gi")
    for name in ("elsewhere", "same", "recreated"):
        create_pod(ns, name, cpu="1", scheduler_name="nobody")  # no scheduler touches them
    rt, core, client = _runtime(local_control_plane)
    _feed(rt, ns, ["elsewhere", "same", "recreated"], [n1, n2])
    uids = {n: (get_pod(ns, n) or {})["metadata"]["uid"] for n in ("elsewhere", "same",
                                                                    "recreated")}
    _bind_directly(ns, "elsewhere", n1)
    _bind_directly(ns, "same", n2)
    delete_pod(ns, "recreated")
    wait_for(lambda: get_pod(ns, "recreated") is None, 30, "old 'recreated' gone")
    create_pod(ns, "recreated", cpu="1", scheduler_name="nobody")

    async def go() -> dict[str, str | None]:
        try:
            return {
                "elsewhere": await rt.bindings.bind(ns, "elsewhere", uids["elsewhere"], n2),
                "same": await rt.bindings.bind(ns, "same", uids["same"], n2),
                "recreated": await rt.bindings.bind(ns, "recreated", uids["recreated"], n1),
            }
        finally:
            await client.http.aclose()

    errors = asyncio.run(go())
    print(f"MEASURED rejected bindings: {errors}")
    assert errors["elsewhere"] and n2 in errors["elsewhere"], errors
    assert "already" in errors["elsewhere"] or "409" in errors["elsewhere"], errors
    assert errors["same"] is None, errors
    assert errors["recreated"] and "recreated" in errors["recreated"], errors
    assert bound(ns, "elsewhere") == n1 and bound(ns, "same") == n2
    assert bound(ns, "recreated") == "", "the new pod must not be bound by a stale request"
    # The framework did not record a binding the API refused.
    assert core.cache.pods[uids["elsewhere"]].node_name in ("", n1)
    assert core.cache.pods[uids["recreated"]].node_name == ""
    assert not in_flight(core.ledger.binds) and not core.ledger.binds.waiting

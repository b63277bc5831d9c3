"""Supervised work on the real control plane (issue 27, item 4).

* A loop made to raise: the extender runs with the test-only fault injection
  GANG_EXTENDER_TEST_TICK_FAULTS, so its tick raises for the first N iterations after the
  sync (well over 10 s). A reservation whose deadline passes meanwhile cannot expire; the
  error is logged once with its traceback, counted, /healthz says the tick is not
  running. Once the faults are spent the same loop expires that reservation and places a
  new gang: it went on.
* Not synced: an extender whose API server is unreachable at start answers the verbs
  with a retriable "not synced" error; kube-scheduler retries the pod, and once the
  lists are applied it is bound.

Each runs its own extender and kube-scheduler (profile names of their own), so the
session's gang stack never sees their pods.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from e2e.gang import GANG_LABEL, PORT, REPO, Recorder, block_ports, scheduler_config
from e2e.harness.cluster import ControlPlane
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import create_pod, create_podgroup
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.queries import get_pod, pod_nodes
from e2e.harness.readiness import http_ok
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.faults.tcp_proxy import TcpProxy

pytestmark = pytest.mark.e2e

TICK_FAULTS = 200  # 0.1 s apart at least: 20 s or more of a tick that raises


@dataclass
class Stack:
    extender: ManagedProcess
    scheduler: ManagedProcess
    url: str
    name: str

    def logs(self) -> list[ManagedProcess]:
        return [self.extender, self.scheduler]

    def metric(self, name: str) -> float:
        text = httpx.get(self.url + "/metrics", timeout=5).text
        m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def debug(self) -> dict[str, Any]:
        out: dict[str, Any] = httpx.get(self.url + "/debug/gangs", timeout=5).json()
        return out


def start_stack(cp: ControlPlane, kubeconfig: Path, env: dict[str, str], ready: str,
                name: str) -> Stack:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ext = cp.start_process(
        [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig", str(kubeconfig),
         "--listen", f"127.0.0.1:{port}", "--scheduler-name", name, "--leader-lease", "off",
         "--backoff-base", "2", "--backoff-cap", "8"],
        name + "-extender", cwd=REPO, env=env, ready=http_ok(url + ready), ready_timeout=60)
    config = scheduler_config(port)
    config["profiles"][0]["schedulerName"] = name
    sched = cp.start_scheduler(config, name + "-kube-scheduler")
    return Stack(ext, sched, url, name)


def stop(stack: Stack) -> None:
    for p in (stack.scheduler, stack.extender):
        with contextlib.suppress(Exception):
            p.stop()


def port_member(ns: str, name: str, group: str, scheduler: str) -> None:
    """A gang member asking for the host port every node's blocker holds: kube-scheduler
    never offers it to the extender, so its gang's reservation waits for its deadline."""
    kube().core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {GANG_LABEL: group}},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox:1.36",
                                 "command": ["sleep", "1d"],
                                 "ports": [{"containerPort": PORT, "hostPort": PORT}],
                                 "resources": {"requests": {"cpu": "1", "memory": "0"}}}]}},
        _preload_content=False)


def test_a_tick_that_raises_is_logged_counted_and_the_loop_goes_on(
    local_control_plane: ControlPlane, fake_nodes: NodeSet, namespace: str
) -> None:
    cp, ns = local_control_plane, namespace
    name = f"gang-faults-{free_port()}"
    nodes = fake_nodes.add_nodes(2, prefix="faults", cpu="4", memory="8Gi")
    block_ports(ns, nodes)
    # The gang exists before the stack starts, so that it is reserved while the faults
    # (from the first tick after the sync on) still fire.
    create_podgroup(ns, "stuck", 3, timeout=2)
    for i in range(2):
        create_pod(ns, f"stuck-{i}", cpu="1", scheduler_name=name, pod_group="stuck")
    port_member(ns, "stuck-2", "stuck", name)
    st = start_stack(cp, cp.kubeconfig, {"GANG_EXTENDER_TEST_TICK_FAULTS": str(TICK_FAULTS)},
                     "/readyz", name)
    try:
        check_faulty_stack(st, ns)
    finally:
        stop(st)


def check_faulty_stack(st: Stack, ns: str) -> None:
    errors = 'gang_extender_loop_errors_total{loop="tick"}'
    timed_out = f"gang={ns}/stuck reason=TimedOut"

    def log() -> str:
        return st.extender.log_path.read_text(errors="replace")

    def reserved() -> bool:
        return any(r["gang"] == f"{ns}/stuck" for r in st.debug()["reservations"])

    with Recorder(ns) as rec:
        wait_for(lambda: reserved() or NotYet(st.debug()), 30, "stuck's reservation",
                 logs=st.logs())
        reserved_at = time.monotonic()
        faults = st.metric(errors)
        assert 0 < faults < TICK_FAULTS, (
            f"the faults ({faults:g} of {TICK_FAULTS}) must still be firing: the machine "
            "was too slow for this test's timing")

        # Its 2 s deadline passes while every tick raises: nothing expires it. (The log
        # is read first: a count still short of TICK_FAULTS after it means the faults
        # were firing all along.)
        time.sleep(max(0.0, reserved_at + 4 - time.monotonic()))
        before = log()
        if st.metric(errors) < TICK_FAULTS:
            assert timed_out not in before and reserved(), "expired while the tick raised"
        # Persistently raising, the tick loop is not running: /healthz says so.
        health = wait_for(
            lambda: (lambda r: r if r.status_code == 503 else NotYet(r.text))(
                httpx.get(st.url + "/healthz", timeout=5)),
            30, "/healthz failing while every tick raises", logs=st.logs())
        assert "iteration(s) raised, the last: RuntimeError: injected tick fault" in \
            health.text, health.text

        # The faults run out; the same loop goes on: the reservation expires ...
        wait_for(lambda: st.metric(errors) == TICK_FAULTS or NotYet(st.metric(errors)), 60,
                 "every injected fault counted", logs=st.logs())
        wait_for(lambda: timed_out in log() or NotYet(st.debug()), 20,
                 "stuck's reservation expired after the faults", logs=st.logs())
        wait_for(lambda: httpx.get(st.url + "/healthz", timeout=5).text == "ok"
                 or NotYet("still failing"), 10, "/healthz ok again", logs=st.logs())
        # ... and a gang created now is placed whole.
        create_podgroup(ns, "after", 2)
        for i in range(2):
            create_pod(ns, f"after-{i}", cpu="1", scheduler_name=st.name, pod_group="after")
        wait_for(lambda: len(rec.bound("after")) == 2 or NotYet(pod_nodes(ns)), 60,
                 "gang 'after' bound", logs=st.logs())
        rec.assert_never_partial("after", 2)
        assert not rec.bound("stuck")
    assert st.extender.running()
    assert st.metric(errors) == TICK_FAULTS
    text = log()
    assert text.count("tick loop iteration failed") == 1, "rate-limited: one line per 30 s"
    assert "Traceback" in text and "RuntimeError: injected tick fault" in text


@pytest.fixture
def unsynced_stack(local_control_plane: ControlPlane, tmp_path: Path
                   ) -> Iterator[tuple[Stack, TcpProxy]]:
    """An extender that reaches the API server only through a proxy that is not
    listening yet: its first lists cannot be made."""
    cp = local_control_plane
    proxy = TcpProxy(cp.apiserver_port)  # not restored: connections refused
    cfg = yaml.safe_load(cp.kubeconfig.read_text())
    for c in cfg["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kubeconfig = tmp_path / "via-proxy.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(cfg))
    stack = start_stack(cp, kubeconfig, {}, "/healthz", f"gang-unsynced-{free_port()}")
    try:
        yield stack, proxy
    finally:
        proxy.cut()
        stop(stack)


def test_verbs_answer_not_synced_until_the_first_lists_and_the_pod_is_retried(
    unsynced_stack: tuple[Stack, TcpProxy], fake_nodes: NodeSet, namespace: str
) -> None:
    (st, proxy), ns = unsynced_stack, namespace
    fake_nodes.add_nodes(1, prefix="unsynced", cpu="4", memory="8Gi")
    create_pod(ns, "early", cpu="1", scheduler_name=st.name)

    def refused() -> str | NotYet:
        for c in ((get_pod(ns, "early") or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and "not synced" in str(c.get("message")):
                return str(c["message"])
        return NotYet(get_pod(ns, "early"))

    message = wait_for(refused, 60, "kube-scheduler told 'not synced'", logs=st.logs())
    assert "retried after its backoff" in message
    assert httpx.get(st.url + "/readyz", timeout=5).status_code == 503
    assert httpx.get(st.url + "/healthz", timeout=5).text == "ok"
    assert not pod_nodes(ns)["early"]

    proxy.restore()
    wait_for(lambda: httpx.get(st.url + "/readyz", timeout=5).status_code == 200
             or NotYet("unready"), 60, "the extender synced", logs=st.logs())
    wait_for(lambda: pod_nodes(ns)["early"] or NotYet(pod_nodes(ns)), 90,
             "'early' bound once the extender synced", logs=st.logs())
    metrics = httpx.get(st.url + "/metrics", timeout=5).text
    assert 'gang_extender_verb_duration_seconds_count{result="not_synced",verb="filter"}' \
        in metrics

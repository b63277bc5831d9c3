"""`gang-extender serve` supervised, against a stand-in API server: the verbs, the tick
and the status writer wait for the first lists, and a long-running task that ends makes
the process exit non-zero."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from e2e.harness.process import free_port
from extender.kube.source_kinds import VOLCANO_PATH, WORKLOAD_PATH
from extender.scheduler.http import NOT_SYNCED
from extender.scheduler.supervise import EXIT_TASK_ENDED, TICK_FAULTS_ENV
from tests.support.serve_process import stand_in, start_serve, wait_until, write_kubeconfig

PODGROUP = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
    "metadata": {"name": "pg", "namespace": "ns", "uid": "g1", "resourceVersion": "1",
                 "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"minMember": 2},
}
POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "1"},
    "spec": {"schedulerName": "gang-scheduler", "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {"phase": "Pending"},
}
NODE = {"metadata": {"name": "n0", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}


class SlowListApi(BaseHTTPRequestHandler):
    """Lists of one node and one PodGroup at once; the list of pods only once `release`
    is set; watches open and silent; the optional APIs not served. Writes are recorded."""

    release: ClassVar[threading.Event] = threading.Event()
    stop: ClassVar[threading.Event] = threading.Event()
    writes: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in (VOLCANO_PATH, WORKLOAD_PATH):
            self._json(404, {"kind": "Status", "code": 404})
            return
        if "watch=1" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.stop.wait(60)
            return
        items: list[object] = []
        if path == "/api/v1/pods":
            self.release.wait(60)
            items = [POD]
        elif path == "/api/v1/nodes":
            items = [NODE]
        elif path.endswith("/podgroups"):
            items = [PODGROUP]
        self._json(200, {"metadata": {"resourceVersion": "1"}, "items": items})

    def _write(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.writes.append(f"{self.command} {self.path}")
        self._json(201, {})

    do_POST = do_PATCH = _write


@pytest.fixture
def slow_list_api(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for the stand-in API server."""
    SlowListApi.release.clear()
    SlowListApi.stop.clear()
    SlowListApi.writes.clear()
    def release() -> None:
        SlowListApi.release.set()
        SlowListApi.stop.set()

    with stand_in(SlowListApi, release) as url:
        yield write_kubeconfig(tmp_path / "kubeconfig", url)


def test_nothing_acts_before_the_first_lists_are_applied(slow_list_api: Path,
                                                         tmp_path: Path) -> None:
    """The pods' list is held: the verbs answer "not synced" (and change nothing),
    /readyz fails, /healthz does not (the tick loop runs, it waits), no PodGroup status
    is written, no tick acts (the test-only fault injected into the first tick that acts
    fires only after the sync). Once the list arrives, the same filter call places the
    pod."""
    log_path = tmp_path / "extender.log"
    proc, url = start_serve(slow_list_api, log_path, "--leader-lease", "off",
                            env={**os.environ, TICK_FAULTS_ENV: "1"})
    tick_errors = 'gang_extender_loop_errors_total{loop="tick"}'
    try:
        wait_until(lambda: httpx.get(url + "/healthz", timeout=1).status_code == 200, 30,
                   "the extender did not start", log_path)
        args = {"Pod": POD, "NodeNames": ["n0"]}
        r = httpx.post(url + "/filter", json=args, timeout=5)
        assert (r.status_code, r.json()["Error"], r.json()["NodeNames"]) == (
            200, NOT_SYNCED, None)
        r = httpx.post(url + "/bind", json={"PodName": "p", "PodNamespace": "ns",
                                            "PodUID": "u1", "Node": "n0"}, timeout=5)
        assert r.json() == {"Error": NOT_SYNCED}
        time.sleep(2)  # the status writer runs every 0.25 s: it would have written by now
        assert httpx.get(url + "/readyz", timeout=5).status_code == 503
        assert httpx.get(url + "/healthz", timeout=5).text == "ok"
        assert httpx.get(url + "/debug/gangs", timeout=5).json()["reservations"] == []
        assert SlowListApi.writes == [], SlowListApi.writes
        assert tick_errors not in httpx.get(url + "/metrics", timeout=5).text

        SlowListApi.release.set()
        wait_until(lambda: httpx.get(url + "/readyz", timeout=1).status_code == 200, 30,
                   "the extender did not sync", log_path)
        r = httpx.post(url + "/filter", json=args, timeout=5)
        assert (r.json()["Error"], r.json()["NodeNames"]) == ("", ["n0"]), r.text
        wait_until(lambda: any("/podgroups/pg/status" in w for w in SlowListApi.writes), 10,
                   "the status writer never wrote after the sync", log_path)
        metrics = wait_until(lambda: (lambda t: tick_errors + " 1.0" in t and t)(
            httpx.get(url + "/metrics", timeout=5).text), 10, "no tick acted", log_path)
        assert 'gang_extender_verb_duration_seconds_count{result="not_synced",verb="filter"}' \
            in metrics
        assert "gang_extender_event_loop_lag_seconds_count" in metrics
    finally:
        proc.terminate()
        code = proc.wait(15)
    output = log_path.read_text()
    assert code == 0, output
    assert "tick loop iteration failed; going on" in output
    assert "RuntimeError: injected tick fault (GANG_EXTENDER_TEST_TICK_FAULTS, 0 left)" \
        in output


def test_a_long_running_task_that_ends_makes_the_process_exit_non_zero(
        slow_list_api: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Before, the wake-up task died silently and the process served on without it."""
    from extender import cli
    from extender.scheduler.wakeups import Wakeups

    SlowListApi.release.set()

    async def broken(self: Wakeups, active: Callable[[], bool]) -> None:
        await asyncio.sleep(0.5)
        raise RuntimeError("wake loop broke")

    monkeypatch.setattr(Wakeups, "run", broken)
    port = free_port()
    # Without the supervision it would serve on: stopped by a SIGTERM (status 0) then.
    stopper = threading.Timer(20, lambda: os.kill(os.getpid(), signal.SIGTERM))
    stopper.start()
    try:
        with caplog.at_level(logging.INFO):
            code = cli.main(["serve", "--kubeconfig", str(slow_list_api), "--listen",
                             f"127.0.0.1:{port}", "--leader-lease", "off"])
    finally:
        stopper.cancel()
    assert code == EXIT_TASK_ENDED
    record = next(r for r in caplog.records if r.levelno == logging.CRITICAL)
    assert "task wake raised RuntimeError: wake loop broke" in record.getMessage()
    assert record.exc_info is not None
    assert f"exiting (status {EXIT_TASK_ENDED}): 0 waiting bind(s)" in caplog.text

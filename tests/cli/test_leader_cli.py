"""`gang-extender serve` and leadership: the flags, and the exit.

It exits, logged and with status 1, when its kube-scheduler loses the lease while it was
active (as kube-scheduler itself does), so that its container restarts as a standby and
its held binds die with it. Runs the real command against a stand-in API server whose
lease watch hands the lease to another holder when the test says so."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from extender.cli import DEFAULT_LEASE, build_parser
from extender.kube.leader import LeaseRef
from tests.kube.leases import lease
from tests.support.serve_process import stand_in, start_serve, wait_until, write_kubeconfig


def test_leader_flags() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve"])
    # The shipped scheduler configuration's lease, so two replicas never both act by default.
    assert args.leader_lease == DEFAULT_LEASE == LeaseRef("gang-scheduler-system",
                                                          "gang-scheduler")
    assert args.leader_identity is None  # the host name, kube-scheduler's own prefix
    assert parser.parse_args(["serve", "--leader-lease", "off"]).leader_lease is None
    assert parser.parse_args(["serve", "--leader-lease", "a/b"]).leader_lease == LeaseRef(
        "a", "b")
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--leader-lease", "nonamespace"])


class LeaseApi(BaseHTTPRequestHandler):
    """Empty lists of nodes, pods and PodGroups whose watches stay open and silent; the
    lease ns/gang-scheduler held by `me_1`; its watch sends `other_2` once `handover` is
    set."""

    handover: ClassVar[threading.Event] = threading.Event()
    paths: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self.paths.append(self.path)
        if "watch=1" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if "/leases" in self.path:
                self.handover.wait(30)
                event = {"type": "MODIFIED", "object": lease("other_2", time.time())}
                self.wfile.write(json.dumps(event).encode() + b"\n")
                self.wfile.flush()
            time.sleep(30)
            return
        items = [lease("me_1", time.time())] if "/leases" in self.path else []
        body = json.dumps({"metadata": {"resourceVersion": "1"}, "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def lease_api() -> Iterator[str]:
    LeaseApi.handover.clear()
    LeaseApi.paths.clear()
    with stand_in(LeaseApi, release=LeaseApi.handover.set) as url:
        yield url


def test_losing_the_lease_while_active_exits_with_status_1(lease_api: str,
                                                          tmp_path: Path) -> None:
    log_path = tmp_path / "extender.log"
    proc, url = start_serve(write_kubeconfig(tmp_path / "kubeconfig", lease_api), log_path,
                            "--leader-lease", "ns/gang-scheduler", "--leader-identity", "me")
    try:
        wait_until(lambda: httpx.get(url + "/debug/gangs", timeout=1).json()["leader"][
            "mode"] == "active", 30, "the extender never became active", log_path, proc)
        assert "gang_extender_leader 1.0" in httpx.get(url + "/metrics", timeout=5).text
        LeaseApi.handover.set()
        code = proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    output = log_path.read_text()
    assert code == 1, output
    assert "active: kube-scheduler me_1 holds lease ns/gang-scheduler" in output
    assert "lost leadership of lease ns/gang-scheduler (holder: other_2)" in output
    assert "exiting (status 1) after losing leadership: 0 waiting bind(s)" in output
    assert "Traceback" not in output, output
    lease_paths = [p for p in LeaseApi.paths if "/leases" in p]
    assert lease_paths and all("fieldSelector=metadata.name%3Dgang-scheduler" in p
                               for p in lease_paths), lease_paths


def test_binding_concurrency_flag() -> None:
    """`--binding-concurrency` (a what-if for big gangs' Binding phase) defaults to the
    dispatcher's 128 and refuses anything below one."""
    from extender.scheduler.dispatch import DispatchConfig

    parse = build_parser().parse_args
    assert parse(["serve"]).binding_concurrency == DispatchConfig().binding_concurrency == 128
    assert parse(["serve", "--binding-concurrency", "16"]).binding_concurrency == 16
    for bad in ("0", "-3", "1.5"):
        with pytest.raises(SystemExit):
            parse(["serve", "--binding-concurrency", bad])


def test_commit_wait_flag() -> None:
    """`--commit-wait` defaults to the dispatcher's second, takes 0 (off), and refuses
    a negative or a word."""
    from extender.scheduler.dispatch import DispatchConfig

    parse = build_parser().parse_args
    assert parse(["serve"]).commit_wait == DispatchConfig().commit_wait == 1.0
    assert parse(["serve", "--commit-wait", "0"]).commit_wait == 0.0
    for bad in ("-1", "soon"):
        with pytest.raises(SystemExit):
            parse(["serve", "--commit-wait", bad])


def test_warm_connections_flag_decides_whether_the_warmer_runs() -> None:
    """On by default, sized to the Binding concurrency; off: no warmer at all, and each
    Binding opens its own connection as before (scheduler/warm.py)."""
    from extender.core.manager import GangManager
    from extender.kube.client import Kube
    from extender.serve import _warmer

    parse = build_parser().parse_args
    kube = Kube(httpx.AsyncClient(base_url="https://127.0.0.1:1"))
    warmer = _warmer(parse(["serve", "--binding-concurrency", "32"]), kube, GangManager())
    assert warmer is not None and warmer.limit == 32
    assert _warmer(parse(["serve", "--warm-connections", "off"]), kube, GangManager()) is None
    with pytest.raises(SystemExit):
        parse(["serve", "--warm-connections", "maybe"])

"""`serve` hands the lease to every part that writes to the API server: the dispatcher
(Bindings, and the routes to the wake-ups, evictions and provisioning), and each writer
its own gate, asked again before each write (tests/scheduler/test_lease_lost.py). A
writer made or run without its gate would act on standby, its default being "always
active" (one replica without election, the tests): this checks every gate `serve`
wires, on standby and once the replica leads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from extender import serve as serve_module
from extender.cli import build_parser, core_config
from extender.kube.leader import Leadership
from extender.reporting.status import StatusWriter
from extender.scheduler.dispatch import Dispatcher
from extender.scheduler.wakeups import Wakeups
from extender.scheduler.warm import ConnectionWarmer
from tests.kube.leases import lease
from tests.support.serve_process import write_kubeconfig


def test_every_writer_serve_starts_acts_only_while_its_replica_leads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    args = build_parser().parse_args([
        "serve", "--kubeconfig", str(kubeconfig), "--leader-lease", "ns/gang-scheduler",
        "--leader-identity", "me"])  # the servers are not started: `until_exit` below
    made: list[serve_module.Parts] = []
    run_gates: dict[str, Callable[[], bool]] = {}
    checked: list[dict[str, bool]] = []

    wire = serve_module.wire

    def spy_wire(*a: Any) -> serve_module.Parts:
        parts = wire(*a)
        made.append(parts)
        return parts

    def spy_run(name: str) -> Any:
        async def run(self: object, active: Callable[[], bool] = lambda: True) -> None:
            run_gates[name] = active
        return run

    async def until_exit(servers: Any, lost: Any, tasks: list[asyncio.Task[None]],
                         dispatcher: Dispatcher, leader: Leadership) -> int:
        await asyncio.sleep(0.05)  # every task has started: its gate is handed over
        (parts,) = made
        parts.synced.set()  # the first lists applied: only the lease decides now
        outlets = dispatcher.outlets
        assert outlets.evictions is not None and parts.recorder.active is not None
        gates = {
            "dispatcher": lambda: dispatcher.leader.active,
            "evictions": outlets.evictions.active,
            "provisioner": parts.provisioner.active,
            "events": parts.recorder.active,
            **run_gates,
        }
        checked.append({name: gate() for name, gate in gates.items()})
        leader.observe(lease("me_1", time.time()))  # its kube-scheduler leads
        checked.append({name: gate() for name, gate in gates.items()})
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return 0

    monkeypatch.setattr(serve_module, "wire", spy_wire)
    monkeypatch.setattr(serve_module, "_until_exit", until_exit)
    monkeypatch.setattr(Wakeups, "run", spy_run("wakeups"))
    monkeypatch.setattr(StatusWriter, "run", spy_run("status"))
    monkeypatch.setattr(ConnectionWarmer, "run", spy_run("warmer"))

    assert asyncio.run(serve_module.serve(args, core_config(args))) == 0
    standby, leading = checked
    assert set(standby) == {"dispatcher", "evictions", "provisioner", "events", "wakeups",
                            "status", "warmer"}
    assert not any(standby.values()), standby
    assert all(leading.values()), leading

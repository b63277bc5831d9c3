"""Question: the same as `lab.experiments.history` at 100,000 PodGroups and 200,000 pods,
which a real API server on this machine cannot create in time; and what freezing the
objects that arrive by watch does to the stalls? Answer: docs/reliability.md, "In
process, 100,000 PodGroups and 200,000 pods" and "A history that arrives while the
extender runs".

The extender's informers, status writer and gang manager listing a long history from a
stand-in API server, in this process: memory and the event loop's longest stall.

    PYTHONPATH=TREE .venv/bin/python -m lab.experiments.history_inprocess [--groups 100000]

Why beside `lab.experiments.history`: creating 100,000 PodGroups and 200,000 pods through a real
API server takes hours on a small machine; this serves the same objects (as the API
server returns them: metadata, defaulted specs, a finished group's status) page by page
from memory, through the code the CLI wires (`Informer` with `observed_kinds`, the
`StatusWriter`), and runs with whichever checkout PYTHONPATH names, so an older revision
is measured with its own code. It prints the time to sync, the longest stall of the
event loop (in CPU time, so that other processes on the machine do not count) while
syncing and during the status writer's first round, the RSS the history added, and the
first tick's time.

`--arrive watch` serves the same history as watch events after an empty list (a history
created while the extender runs) and prints the longest stall while it arrives;
`--freeze-every N` sets the informer's freezing of what arrives by watch (a huge N: none,
as before it existed), so both are measured in one checkout:

    .venv/bin/python -m lab.experiments.history_inprocess --arrive watch --freeze-every 1000000000
    .venv/bin/python -m lab.experiments.history_inprocess --arrive watch
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from bench.common import rss_mib
from extender.core.manager import GangManager
from extender.core.model.phase import compute_status
from extender.core.model.types import GROUP_LABEL, GroupInfo, PodInfo
from extender.kube.gc_freeze import FREEZE_EVERY
from extender.kube.informer import Informer, InformerOptions
from extender.reporting.kinds import observed_kinds
from extender.reporting.status import StatusWriter

NS = "history"
NODE = "history-node"


def _pod(i: int, m: int) -> dict[str, Any]:
    name = f"done-{i}-{m}"
    return {
        "metadata": {
            "name": name, "namespace": NS, "uid": f"0b7c1f0e-{i:08d}-{m:04d}-9f1e-1c2d3e4f5a6b",
            "resourceVersion": str(100000 + i), "creationTimestamp": "2026-11-26T20:00:00Z",
            "labels": {GROUP_LABEL: f"done-{i}"},
            "managedFields": [{"manager": "python", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-26T20:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {}}}}]},
        "spec": {
            "containers": [{"name": "c", "image": "busybox",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "nodeName": NODE,
            "securityContext": {}, "schedulerName": "gang-scheduler", "priority": 0,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"},
        "status": {"phase": "Succeeded", "qosClass": "Burstable"},
    }


def _group(i: int, per: int) -> dict[str, Any]:
    name = f"done-{i}"
    done = [PodInfo(f"u{m}", NS, f"p{m}", {"pods": 1}, {GROUP_LABEL: name},
                    phase="Succeeded", node_name=NODE, scheduler_name="gang-scheduler")
            for m in range(per)]
    status = compute_status(GroupInfo(NS, name, per), done, None, 1.8e9)
    assert status is not None
    return {"metadata": {"name": name, "namespace": NS, "generation": 1,
                         "uid": f"1b7c1f0e-{i:08d}-0000-9f1e-1c2d3e4f5a6b",
                         "resourceVersion": str(i), "creationTimestamp": "2026-11-26T20:00:00Z"},
            "spec": {"minMember": per}, "status": status.to_k8s()}


class FakeApi:
    """Lists pods and PodGroups page by page, each page parsed from its JSON as the
    client does (the JSON is made beforehand: making it is not the extender's work);
    watches never end. With `by_watch`, the lists are empty and, once `go` is set, the
    watches send every object as an ADDED event instead, 10 per read of the stream
    (about what one chunk of a watch response holds)."""

    def __init__(self, groups: int, per: int, limit: int = 500, by_watch: bool = False
                 ) -> None:
        self.by_watch = by_watch
        self.arrived = 0
        self.total = groups * (per + 1)
        self.all_arrived = asyncio.Event()
        self.go = asyncio.Event()
        self.pages: dict[str, list[bytes]] = {"podgroups": [], "pods": []}
        for start in range(0, groups, limit):
            self.pages["podgroups"].append(orjson.dumps(
                [_group(k, per) for k in range(start, min(groups, start + limit))]))
        for start in range(0, groups * per, limit):
            self.pages["pods"].append(orjson.dumps(
                [_pod(k // per, k % per) for k in range(start, min(groups * per, start + limit))]))

    async def list_pages(self, path: str, limit: int = 500, params: object = None
                         ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        pages = [] if self.by_watch else self.pages.get(path.rsplit("/", 1)[-1], [])
        if not pages:
            yield [], "1"
        for raw in pages:
            await asyncio.sleep(0)  # the request's round trip
            page: list[dict[str, Any]] = orjson.loads(raw)
            yield page, "1"

    async def list(self, path: str, limit: int = 500, params: object = None
                   ) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        async for page, _ in self.list_pages(path, limit, params):
            items.extend(page)
        return items, "1"

    async def watch(self, path: str, *args: Any, **kw: Any
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        if self.by_watch:
            await self.go.wait()
            for raw in self.pages.get(path.rsplit("/", 1)[-1], []):
                for i, obj in enumerate(orjson.loads(raw)):
                    if i % 10 == 0:
                        await asyncio.sleep(0)  # a read of the stream
                    yield "ADDED", obj
                    self.arrived += 1
            if self.arrived >= self.total:
                self.all_arrived.set()
        await asyncio.sleep(1e6)
        yield "", {}


async def _measure(groups: int, per: int, by_watch: bool, freeze_every: int
                   ) -> dict[str, Any]:
    api = FakeApi(groups, per, by_watch=by_watch)
    manager = GangManager()
    writer = StatusWriter(manager.reads, None, time.time)
    informer = Informer(api, manager, time.time,  # type: ignore[arg-type]
                        lambda: None, kinds=observed_kinds(writer),
                        options=InformerOptions(freeze_every=freeze_every))
    base = rss_mib()
    # The loop's CPU time between two turns of a task that only sleeps: what a verb
    # would wait for, on a machine of its own (wall time on a shared one adds the
    # other processes' turns).
    stalls: list[float] = []

    async def watch_loop() -> None:
        last = time.thread_time()
        while True:
            await asyncio.sleep(0.005)
            now = time.thread_time()
            stalls.append(now - last)
            last = now

    watcher = asyncio.create_task(watch_loop())
    run = asyncio.create_task(informer.run())
    t0 = time.monotonic()
    await informer.synced.wait()
    sync = time.monotonic() - t0
    await asyncio.sleep(0.05)  # the watcher sees the last stretch
    sync_stall = max(stalls, default=0.0)
    stalls.clear()
    arrival: dict[str, Any] = {}
    if by_watch:
        t3 = time.monotonic()
        api.go.set()
        await api.all_arrived.wait()
        await asyncio.sleep(0.05)
        arrival = {"arrival_s": round(time.monotonic() - t3, 1),
                   "longest_stall_arrival_ms": round(max(stalls, default=0.0) * 1000)}
        stalls.clear()
    t1 = time.monotonic()
    await writer.step()
    step = time.monotonic() - t1
    await asyncio.sleep(0.05)
    step_stall = max(stalls, default=0.0)
    t2 = time.monotonic()
    manager.tick(time.time())
    tick = time.monotonic() - t2
    rss = rss_mib() - base
    run.cancel()
    watcher.cancel()
    await asyncio.sleep(0)
    # What the freezes kept from being freed: garbage in reference cycles that was
    # alive at a freeze (the price of freezing, which never frees it).
    gc.unfreeze()
    kept = gc.collect()
    return {"groups": groups, "pods": groups * per, "arrive": "watch" if by_watch else "list",
            "sync_s": round(sync, 1), "longest_stall_sync_ms": round(sync_stall * 1000),
            **arrival,
            "writer_round_s": round(step, 1),
            "longest_stall_writer_ms": round(step_stall * 1000),
            "first_tick_ms": round(tick * 1000), "rss_added_mib": round(rss),
            "garbage_kept_by_freezes": kept}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--pods-per-group", type=int, default=2)
    ap.add_argument("--arrive", choices=("list", "watch"), default="list",
                    help="the history is in the first lists, or arrives by watch after them")
    ap.add_argument("--freeze-every", type=int, default=FREEZE_EVERY,
                    help="the informer's freezing of objects added by watch")
    args = ap.parse_args(argv)
    print(json.dumps(asyncio.run(_measure(args.groups, args.pods_per_group,
                                          args.arrive == "watch", args.freeze_every))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Question: does a long history of finished PodGroups and their Succeeded pods (issue 27)
grow the extender's sync, memory, `/healthz` stalls or an ordinary gang's start, on a real
API server? Answer: docs/reliability.md, "On the local control plane" (in its section
"History at scale").

The extender beside years of history, on the local control plane: finished PodGroups
and their Succeeded pods, left behind.

    .venv/bin/python -m lab.experiments.history [--groups 100000] [--pods-per-group 2] \\
        [--trees ../old,.] [--creation-tree .] [--steady 30] [--probes 5]

Why: a finished Job leaves its PodGroup (and, until their TTL, its pods) behind, so a
long-lived cluster holds far more groups and pods than wait. Every extender lists and
keeps them all; what it does with them must not grow the event loop's stalls, the
placement of an ordinary gang or the memory without bound.

What it does (kube-apiserver, etcd and a stock kube-scheduler wired to the extender, as
`deploy/` ships it; no kube-controller-manager, whose pod GC would delete finished pods):

1. starts the extender of `--creation-tree`, then creates `--groups` PodGroups, each
   with `--pods-per-group` pods bound to a cordoned node and marked Succeeded (pods
   first, then the PodGroup with the status an extender writes for a finished gang),
   and `--empty-groups` PodGroups whose pods are gone, `--concurrency` requests in
   flight;
2. for each tree of `--trees` in turn: starts its extender on the same port (a fresh
   process lists everything), and measures the time to `/readyz`, the RSS once synced,
   then `--steady` seconds of steady state during which `--probes` ordinary gangs (4
   pods of 1 CPU on 4 free nodes) are created one after the other and timed from
   creation to all members bound.

`/healthz` is asked every 50 ms throughout; the longest answer of each phase is printed.
A tree is a checkout of this project (an older one, `.`): its extender runs with
PYTHONPATH set to it, so an older revision is measured with its own code.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from bench.common import md_table, rss_mib
from e2e.gang import scheduler_config
from e2e.harness.binaries import find_k8s_bin
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakenodes import FakeNodes
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.readiness import http_ok
from extender.core.model.phase import compute_status
from extender.core.model.types import GROUP_LABEL, GroupInfo, PodInfo
from extender.kube.client import PODGROUP_PATH, Kube, make_kube

NS = "history"
PROBE_NS = "probe"
HISTORY_NODE = "history-node"
PROBE_NODES = 4
SCHEDULER = "gang-scheduler"


class HealthPoller(threading.Thread):
    """Asks /healthz every `interval` seconds; keeps (start time, seconds to answer)."""

    def __init__(self, port: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.port, self.interval = port, interval
        self.samples: list[tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            t0 = time.monotonic()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                conn.close()
                self.samples.append((t0, time.monotonic() - t0))
            except OSError:
                pass  # not listening (between two extenders)
            self.stopped.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def longest(self, since: float, until: float) -> float:
        return max((d for t, d in self.samples if since <= t < until), default=float("nan"))


def _written_status(name: str, pods: int, min_member: int) -> dict[str, Any]:
    """The status an extender writes for group `name` with `pods` Succeeded pods (none:
    a group whose pods are gone), so that an extender that lists it has nothing to
    write."""
    group = GroupInfo(NS, name, min_member)
    done = [PodInfo(f"u{i}", NS, f"p{i}", {"pods": 1}, {GROUP_LABEL: name}, phase="Succeeded",
                    node_name=HISTORY_NODE, scheduler_name=SCHEDULER) for i in range(pods)]
    status = compute_status(group, done, None, time.time())
    assert status is not None
    return status.to_k8s()


def _pod(name: str, group: str, node: str = "", cpu: str = "100m") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER, "automountServiceAccountToken": False,
        "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {GROUP_LABEL: group}}, "spec": spec}


def _group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": min_member}}


async def _create_history(kube: Kube, groups: int, per: int, empty: int, concurrency: int,
                          progress: bool) -> float:
    """`groups` finished groups of `per` Succeeded pods each, then `empty` groups whose
    pods are gone (minMember 2)."""
    pods_path = f"/api/v1/namespaces/{NS}/pods"
    groups_path = f"{PODGROUP_PATH}/namespaces/{NS}/podgroups"
    next_i = iter(range(groups + empty))
    done = 0
    t0 = time.monotonic()

    async def job(i: int) -> None:
        name = f"done-{i}" if i < groups else f"empty-{i}"
        pods = per if i < groups else 0
        for m in range(pods):
            pod = f"{name}-{m}"
            await kube.create(pods_path, _pod(pod, name, HISTORY_NODE))
            await kube.merge_patch(f"{pods_path}/{pod}/status",
                                   {"status": {"phase": "Succeeded"}})
        await kube.create(groups_path, _group(name, per if pods else 2))
        await kube.merge_patch(f"{groups_path}/{name}/status",
                               {"status": _written_status(name, pods, per if pods else 2)})

    async def worker() -> None:
        nonlocal done
        for i in next_i:
            for attempt in range(5):
                try:
                    await job(i)
                    break
                except Exception as exc:  # a conflict on a retry: already made
                    if "AlreadyExists" in str(exc) or attempt == 4:
                        if attempt == 4:
                            print(f"job {i}: {exc}", file=sys.stderr)
                        break
                    await asyncio.sleep(0.5)
            done += 1
            if progress and done % 5000 == 0:
                rate = done / (time.monotonic() - t0)
                print(f"  {done}/{groups + empty} groups ({rate:.0f}/s)", file=sys.stderr)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.monotonic() - t0


async def _probe(kube: Kube, n: int, size: int = PROBE_NODES) -> float:
    """An ordinary gang: seconds from its creation to every member bound."""
    name = f"probe-{n}"
    pods_path = f"/api/v1/namespaces/{PROBE_NS}/pods"
    await kube.create(f"{PODGROUP_PATH}/namespaces/{PROBE_NS}/podgroups", _group(name, size))
    t0 = time.monotonic()
    await asyncio.gather(*(kube.create(pods_path, _pod(f"{name}-{m}", name, cpu="1"))
                           for m in range(size)))
    selector = {"labelSelector": f"{GROUP_LABEL}={name}"}
    while True:
        items, _ = await kube.list(pods_path, params=selector)
        if len(items) == size and all(p.get("spec", {}).get("nodeName") for p in items):
            took = time.monotonic() - t0
            break
        if time.monotonic() - t0 > 120:
            took = float("inf")
            break
        await asyncio.sleep(0.02)
    for m in range(size):
        await kube.http.delete(f"{pods_path}/{name}-{m}", params={"gracePeriodSeconds": "0"})
    await kube.http.delete(f"{PODGROUP_PATH}/namespaces/{PROBE_NS}/podgroups/{name}")
    return took


def _metric(port: int, name: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def _start_extender(cp: ControlPlane, tree: Path, port: int, name: str) -> ManagedProcess:
    argv = [sys.executable, "-m", "extender.cli", "serve", "--kubeconfig", str(cp.kubeconfig),
            "--listen", f"127.0.0.1:{port}", "--leader-lease", "off"]
    return cp.start_process(argv, name, env={"PYTHONPATH": str(tree)}, cwd=tree,
                            ready=None)


def _wait_ready(port: int, timeout: float) -> float:
    t0 = time.monotonic()
    check = http_ok(f"http://127.0.0.1:{port}/readyz")
    while time.monotonic() - t0 < timeout:
        try:
            if check(None):  # type: ignore[arg-type]
                return time.monotonic() - t0
        except Exception:
            pass
        time.sleep(0.05)
    raise SystemExit(f"extender on {port} not ready within {timeout}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--pods-per-group", type=int, default=2)
    ap.add_argument("--empty-groups", type=int, default=0,
                    help="more PodGroups, whose pods are gone (the issue's 100,000)")
    ap.add_argument("--concurrency", type=int, default=48)
    ap.add_argument("--trees", default=".",
                    help="comma-separated checkouts whose extenders are measured in turn")
    ap.add_argument("--creation-tree", default=".",
                    help="the checkout whose extender runs while the history is created")
    ap.add_argument("--steady", type=float, default=30.0)
    ap.add_argument("--probes", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",")]

    cp = ControlPlane(find_k8s_bin(build=False)).start()
    try:
        return asyncio.run(_run(cp, args, trees))
    finally:
        cp.stop()


async def _run(cp: ControlPlane, args: argparse.Namespace, trees: list[Path]) -> int:
    # Finished pods must stay: the pod GC (kube-controller-manager) deletes them past
    # its threshold. Namespaces are made while it still runs, then it is stopped.
    kube = make_kube(str(cp.kubeconfig))
    for ns in (NS, PROBE_NS):
        await kube.create("/api/v1/namespaces",
                          {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for ns in (NS, PROBE_NS):  # pods are admitted only once their ServiceAccount exists
        while (await kube.http.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
               ).status_code != 200:
            await asyncio.sleep(0.2)
    cp.processes["kube-controller-manager"].stop()
    api = cp.api_client()
    nodes = FakeNodes(api)
    nodes.add_node(HISTORY_NODE)
    nodes.v1.patch_node(HISTORY_NODE, {"spec": {"unschedulable": True}})
    for i in range(PROBE_NODES):
        nodes.add_node(f"probe-node-{i}", cpu="1", memory="8Gi")
    api.close()

    port = free_port()
    cp.start_scheduler(scheduler_config(port), "gang-kube-scheduler")
    poller = HealthPoller(port)
    poller.start()
    rows: list[dict[str, Any]] = []
    creation_tree = Path(args.creation_tree).resolve()

    ext = _start_extender(cp, creation_tree, port, "extender-creation")
    _wait_ready(port, 120)
    t0 = time.monotonic()
    made = await _create_history(kube, args.groups, args.pods_per_group, args.empty_groups,
                                 args.concurrency, progress=True)
    creation = {"tree": str(creation_tree), "seconds": round(made, 1),
                "healthz_max_ms": round(poller.longest(t0, time.monotonic()) * 1000),
                "rss_mib": rss_mib(ext.pid)}
    await asyncio.sleep(5)
    ext.stop()
    print(f"created {args.groups} + {args.empty_groups} groups and "
          f"{args.groups * args.pods_per_group} pods in {made:.0f}s: {json.dumps(creation)}",
          file=sys.stderr)

    for n, tree in enumerate(trees):
        t_start = time.monotonic()
        ext = _start_extender(cp, tree, port, f"extender-{n}")
        sync = await asyncio.to_thread(_wait_ready, port, 1200)
        t_synced = time.monotonic()
        await asyncio.sleep(2)
        rss_synced = rss_mib(ext.pid)
        probes = []
        t_steady = time.monotonic()
        for i in range(args.probes):
            probes.append(await _probe(kube, n * 100 + i))
            await asyncio.sleep(max(0.0, args.steady / max(1, args.probes) - probes[-1]))
        await asyncio.sleep(max(0.0, t_steady + args.steady - time.monotonic()))
        t_end = time.monotonic()
        writes = _metric(port, "gang_extender_podgroup_status_writes_total")
        rows.append({
            "tree": str(tree), "sync_s": round(sync, 2),
            "rss_synced_mib": rss_synced, "rss_end_mib": rss_mib(ext.pid),
            "healthz_max_sync_ms": round(poller.longest(t_start, t_synced) * 1000),
            "healthz_max_steady_ms": round(poller.longest(t_synced, t_end) * 1000),
            "gang_p50_s": round(statistics.median(probes), 3),
            "gang_max_s": round(max(probes), 3),
            "status_writes": writes,
        })
        ext.stop()
        print(json.dumps(rows[-1]), file=sys.stderr)
    poller.stopped.set()
    await kube.http.aclose()

    print(f"\n{args.groups} finished PodGroups, {args.groups * args.pods_per_group} "
          f"Succeeded pods, {args.empty_groups} PodGroups without pods; creation: "
          f"{made:.0f}s, longest /healthz while creating "
          f"{creation['healthz_max_ms']} ms ({creation_tree.name or creation_tree})\n")
    print(md_table(
        ["tree", "sync s", "RSS synced MiB", "RSS end MiB", "longest /healthz in sync ms",
         "longest /healthz steady ms", "gang p50 s", "gang max s", "status writes"],
        [[r["tree"], r["sync_s"], r["rss_synced_mib"], r["rss_end_mib"],
          r["healthz_max_sync_ms"], r["healthz_max_steady_ms"], r["gang_p50_s"],
          r["gang_max_s"], r["status_writes"]] for r in rows]))
    if args.json is not None:
        args.json.write_bytes(orjson.dumps({"args": vars(args) | {"json": str(args.json)},
                                            "creation": creation, "rows": rows},
                                           option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

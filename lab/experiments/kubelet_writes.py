"""Question: does the fake kubelet still spend several times less CPU per pod writing through
RawApi than through the generated client, the one reason e2e/harness/rawapi.py exists?
Answer: e2e/harness/rawapi.py's docstring (numbers and decision), and
lab/history/performance-history.md, "What an earlier round optimized" (its item 9).

CPU the fake kubelet spends per pod on its API writes, by client: the generated
kubernetes client against :class:`e2e.harness.rawapi.RawApi`.

    .venv/bin/python -m lab.experiments.kubelet_writes [--pods 200] [--reps 3]

Why: ``e2e/harness/rawapi.py`` is a second Kubernetes client in the harness, kept only
because the fake kubelet, which shares the 2-core machine with the schedulers being
benchmarked, was measured to spend several times less CPU per pod through it. This
re-measures that claim, so the second client stays only while the number says so.

Each variant is the fake kubelet's own loop (:func:`make_kubelet`) given another
:class:`PodWrites`, the client its status writes and deletes go through; the status
bodies are built by the same code in every variant. Per pod it writes what the fake
kubelet writes for a pod that runs to completion: the Running status, the Succeeded
status, and the force delete with a uid precondition. Variants:

* ``generated, models``: the generated client as usually called (the response is
  deserialised into a ``V1Pod``);
* ``generated, raw+read``: ``_preload_content=False`` and the body read, so urllib3 returns
  the connection to its pool (what the harness does elsewhere);
* ``generated, raw unread``: ``_preload_content=False``, body never read: the fake
  kubelet's writes before RawApi, each paying a new TLS handshake;
* ``RawApi``: what the fake kubelet uses now.

It also times LISTs of all pods (the start of every relist of the fake kubelet's
informer, with the run's pods present), through the generated client (raw bytes, orjson)
and through RawApi, in turns, before each variant's writes.

CPU is the calling thread's (``time.thread_time``): each call runs to completion in that
thread, so no other work (the API server, etcd) is counted. The pods are created bound to
one fake node beforehand (not measured); the variants alternate within each repetition so
that drift in the machine's load spreads evenly over them. Prints a table of medians over
the repetitions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from e2e.harness.cluster import ControlPlane
from e2e.harness.fakenodes import FakeNodes
from e2e.harness.k8s import client
from e2e.harness.kubelet.loop import KubeletLoop, make_kubelet
from e2e.harness.kubelet.pod import KubeletPod
from e2e.harness.kubelet.writes import PodWrites, RawPodWrites
from e2e.harness.rawapi import RawApi
from e2e.harness.waiting import wait_for

NAMESPACE = "kubelet-writes"
NODE = "writes-node-0"


class GeneratedModels:
    """The generated client as usually called: every response becomes a ``V1Pod``."""

    def __init__(self, api_client: Any) -> None:
        self.v1 = client.CoreV1Api(api_client)

    def patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        self.v1.patch_namespaced_pod_status(name, ns, {"status": status})

    def untaint(self, name: str, resource_version: str,
                taints: list[dict[str, Any]]) -> None:
        self.v1.patch_node(name, {"metadata": {"resourceVersion": resource_version},
                                  "spec": {"taints": taints}})

    def force_delete(self, ns: str, name: str, uid: str) -> None:
        self.v1.delete_namespaced_pod(name, ns, body=_delete_options(uid),
                                      grace_period_seconds=0)

    def close(self) -> None:
        """The ApiClient is the caller's, closed by it."""


class GeneratedRawRead(GeneratedModels):
    """Raw responses, read to their end: connections go back to urllib3's pool."""

    def patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        self.v1.patch_namespaced_pod_status(name, ns, {"status": status},
                                            _preload_content=False).read()

    def force_delete(self, ns: str, name: str, uid: str) -> None:
        self.v1.delete_namespaced_pod(name, ns, body=_delete_options(uid),
                                      grace_period_seconds=0, _preload_content=False).read()


class GeneratedRawUnread(GeneratedModels):
    """Raw responses never read (the fake kubelet before RawApi): a connection per call."""

    def patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        self.v1.patch_namespaced_pod_status(name, ns, {"status": status},
                                            _preload_content=False)

    def force_delete(self, ns: str, name: str, uid: str) -> None:
        self.v1.delete_namespaced_pod(name, ns, body=_delete_options(uid),
                                      grace_period_seconds=0, _preload_content=False)


def raw_api(api_client: Any) -> PodWrites:
    """What the fake kubelet uses now."""
    return RawPodWrites(RawApi(api_client))


VARIANTS: dict[str, Callable[[Any], PodWrites]] = {
    "generated, models": GeneratedModels,
    "generated, raw+read": GeneratedRawRead,
    "generated, raw unread": GeneratedRawUnread,
    "RawApi": raw_api,
}


def _delete_options(uid: str) -> Any:
    return client.V1DeleteOptions(grace_period_seconds=0,
                                  preconditions=client.V1Preconditions(uid=uid))


def create_pods(v1: Any, prefix: str, count: int) -> list[KubeletPod]:
    """``count`` pods bound to the fake node, as the fake kubelet's informer would hold
    them (one container, no run time: nothing is scheduled after Running)."""
    pods = []
    for i in range(count):
        name = f"{prefix}-{i}"
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "busybox:1.36"}]}}
        created = orjson.loads(v1.create_namespaced_pod(
            NAMESPACE, body, _preload_content=False).data)
        pods.append(KubeletPod(uid=created["metadata"]["uid"], ns=NAMESPACE, name=name, node=NODE,
                         containers=[("main", "busybox:1.36")]))
    return pods


def write_cpu(loop: KubeletLoop, pods: Sequence[KubeletPod]) -> tuple[float, float, float]:
    """CPU seconds per status write and per delete, and wall seconds per call."""
    life = loop.life
    with life.state.lock:
        for p in pods:
            life.state.pods[p.uid] = p
    status_cpu = delete_cpu = 0.0
    w0 = time.monotonic()
    for p in pods:
        t = time.thread_time()
        life.set_running(p.uid)
        life.set_terminated(p.uid, True)
        t1 = time.thread_time()
        life.writes.force_delete(p.ns, p.name, p.uid)
        delete_cpu += time.thread_time() - t1
        status_cpu += t1 - t
    wall = (time.monotonic() - w0) / (3 * len(pods))
    return status_cpu / (2 * len(pods)), delete_cpu / len(pods), wall


def list_cpu(api_client: Any, calls: int = 10) -> tuple[list[float], list[float]]:
    """CPU seconds of each LIST of all pods: generated client (raw, orjson) and RawApi,
    each warmed up once (its connection made), then called in turns."""
    v1 = client.CoreV1Api(api_client)
    raw_client = RawApi(api_client)

    def generated() -> None:
        orjson.loads(v1.list_pod_for_all_namespaces(_preload_content=False).data)

    def raw() -> None:
        orjson.loads(raw_client.request("GET", "/api/v1/pods"))

    cpu: tuple[list[float], list[float]] = ([], [])
    generated()
    raw()
    for _ in range(calls):
        for i, fn in enumerate((generated, raw)):
            t = time.thread_time()
            fn()
            cpu[i].append(time.thread_time() - t)
    raw_client.close()
    return cpu


def main(argv: Sequence[str] | None = None) -> int:
    """Start a control plane, measure every variant ``--reps`` times, print medians."""
    ap = argparse.ArgumentParser(prog="python -m lab.experiments.kubelet_writes",
                                 description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=200, help="pods per variant and repetition")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    cp = ControlPlane().start()
    api = cp.api_client()
    try:
        v1 = client.CoreV1Api(api)
        FakeNodes(api).add_node(NODE, cpu="1000", memory="1000Gi", pods=10_000)
        v1.create_namespace({"metadata": {"name": NAMESPACE}}, _preload_content=False).read()
        wait_for(lambda: v1.read_namespaced_service_account(  # pods are refused until then
            "default", NAMESPACE, _preload_content=False).read() is not None, 30,
            f"service account default in {NAMESPACE}")
        results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in VARIANTS}
        lists: tuple[list[float], list[float]] = ([], [])
        for rep in range(args.reps):
            for k, (name, make) in enumerate(VARIANTS.items()):
                pods = create_pods(v1, f"r{rep}v{k}", args.pods)
                api_client = cp.api_client()
                loop = make_kubelet(api_client, writes=make(api_client))
                try:
                    for mine, got in zip(lists, list_cpu(api), strict=True):
                        mine.extend(got)
                    results[name].append(write_cpu(loop, pods))
                finally:
                    loop.stop()
                    loop.api.close()
                status, delete, wall = results[name][-1]
                print(f"rep {rep + 1} {name:22} status {status * 1e3:.3f} ms, "
                      f"delete {delete * 1e3:.3f} ms CPU; {wall * 1e3:.1f} ms wall per call",
                      flush=True)
        print(f"\nmedians over {args.reps} reps of {args.pods} pods (CPU of the calling "
              "thread, ms):\n")
        print("| client | per status write | per delete | per pod (2 writes + delete) "
              "| wall per call |")
        print("|---|---|---|---|---|")
        for name, rows in results.items():
            status = statistics.median(r[0] for r in rows) * 1e3
            delete = statistics.median(r[1] for r in rows) * 1e3
            wall = statistics.median(r[2] for r in rows) * 1e3
            print(f"| {name} | {status:.3f} | {delete:.3f} | {2 * status + delete:.2f} "
                  f"| {wall:.1f} |")
        gen, raw = (statistics.median(cpu) * 1e3 for cpu in lists)
        print(f"\nLIST of all pods ({args.pods}), median of {len(lists[0])} calls each: "
              f"generated raw+orjson {gen:.2f} ms, RawApi {raw:.2f} ms CPU")
    finally:
        api.close()
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""In-process benchmark of the extender's core: the verbs through the ASGI app, no network.

    .venv/bin/python -m bench.core --quick     # 500 nodes x 1,000 pods, seconds
    .venv/bin/python -m bench.core --full      # {500, 5,000} nodes x {1,000, 10,000} pods
                                               # x {burst, stream}; about 1 minute
    .venv/bin/python -m bench.core --profile   # cProfile of 5,000 nodes x 10,000 pods, stream

Results: bench/results/core.{json,md} (--full) or core-quick.*; docs/performance.md
explains them.

What one case does (each in its own process, so memory figures do not mix):

1. Builds a synthetic cluster: nodes of 32 CPU / 128Gi (every 4th a tainted 8-GPU node),
   about one running default-scheduler pod per node, and `pods` pending pods in PodGroups of
   1-64 members (four request shapes, one in five gangs on GPUs) plus 5 % plain pods. The
   extender is fed them as its informers would: Kubernetes JSON through `*_from_k8s`.
   At 500 nodes and 10,000 pods the cluster is oversubscribed (many gangs wait); at 5,000
   nodes everything fits.
2. Plays kube-scheduler: pops pods in queue order, sends `/filter` with the names of the
   nodes its own fit check would pass (bound + assumed pods, taints), `/prioritize` with the
   filter's answer, and `/bind` as a concurrent task (binds are asynchronous in
   kube-scheduler, and held open by the extender). A bound pod's Running update is fed back
   as a watch event. The framework's `tick` runs every 100 cycles, as its 0.1 s loop would.
3. After each pass, half of the gangs that run finish (their capacity frees), held binds of
   incomplete gangs time out, and rejected pods are retried (three passes).

Filter and prioritize are what matter for speed: they run on kube-scheduler's serial loop.
Bind latency is reported for binds answered at once (plain pods and the bind that completes
a quorum); held binds wait for the rest of their gang by design. Clock: simulated, 1 ms per
scheduling cycle, so reservation deadlines and backoffs behave the same on any machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import random
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.common import (
    RESULTS,
    machine,
    md_table,
    peak_rss_mib,
    rss_mib,
    summary_ms,
    write_results,
)
from extender.core.convert import group_from_k8s, node_from_k8s, pod_from_k8s
from extender.core.framework import BindDecision, GangFramework
from extender.core.planner import Plan, Shortfall
from extender.core.resources import fits
from extender.core.types import GROUP_LABEL, GroupInfo, PodInfo, Resources
from extender.scheduler.http import create_app, with_fast_verbs
from extender.scheduler.runtime import Runtime, RuntimeConfig

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
]
T0 = 1_790_000_000.0  # simulated epoch seconds


@dataclass(frozen=True)
class Shape:
    name: str
    requests: dict[str, str]
    gpu: bool = False


SHAPES = (
    Shape("small", {"cpu": "500m", "memory": "1Gi"}),
    Shape("medium", {"cpu": "2", "memory": "4Gi"}),
    Shape("large", {"cpu": "4", "memory": "16Gi"}),
    Shape("gpu", {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}, gpu=True),
)
SHAPE_WEIGHTS = (3, 3, 2, 2)

SIZES = ((500, 1000), (500, 10_000), (5000, 1000), (5000, 10_000))
FULL_CASES = tuple((n, p, a) for a in ("burst", "stream") for n, p in SIZES)
QUICK_CASES = ((500, 1000, "burst"), (500, 1000, "stream"))


# ----- Kubernetes JSON, shaped like kube-scheduler's informer copies ---------------------


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def node_json(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    gpu = i % 4 == 3
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    if gpu:
        alloc.update({"memory": "256Gi", "nvidia.com/gpu": "8"})
    return {
        "metadata": {"name": name, "uid": f"node-uid-{i}", "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "gpu-8x" if gpu else "cpu-32"}},
        "spec": {"taints": [GPU_TAINT] if gpu else []},
        "status": {"capacity": dict(alloc), "allocatable": alloc},
    }


def pod_json(
    ns: str, name: str, uid: str, requests: dict[str, str], created: float,
    group: str | None = None, index: int = 0, gpu: bool = False, node: str = "",
    phase: str = "Pending", scheduler: str = "gang-scheduler",
) -> dict[str, Any]:
    labels = {"app": name.rsplit("-", 1)[0], "index": str(index)}
    if group:
        labels[GROUP_LABEL] = group
    tolerations = [*DEFAULT_TOLERATIONS, *([GPU_TOLERATION] if gpu else [])]
    limits = {"nvidia.com/gpu": requests["nvidia.com/gpu"]} if gpu else {}
    return {
        "metadata": {
            "name": name, "namespace": ns, "uid": uid, "resourceVersion": "1",
            "creationTimestamp": _ts(created), "labels": labels,
            "annotations": {"example.com/owner": "bench"},
        },
        "spec": {
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ], "defaultMode": 420}}],
            "containers": [{
                "name": "main", "image": "registry.invalid/trainer:1",
                "resources": {"requests": dict(requests), **({"limits": limits} if gpu else {})},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "schedulerName": scheduler, "tolerations": tolerations, "priority": 0,
            "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
            **({"nodeName": node} if node else {}),
        },
        "status": {"phase": phase, "qosClass": "Burstable"},
    }


def group_json(ns: str, name: str, min_member: int, created: float) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": f"pg-{name}",
                     "creationTimestamp": _ts(created)},
        "spec": {"minMember": min_member},
    }


@dataclass
class Workload:
    nodes: list[dict[str, Any]]
    running: list[dict[str, Any]]  # default-scheduler pods already bound
    groups: list[dict[str, Any]]
    pending: list[dict[str, Any]]  # in kube-scheduler's queue order
    shape_of: dict[str, Shape]  # pod uid -> shape
    gang_sizes: list[int]
    # What arrives together in "stream" mode: a PodGroup (None for a plain pod) and its
    # pods; batch_of: pod uid -> index into batches.
    batches: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]]
    batch_of: dict[str, int]


def make_workload(n_nodes: int, n_pods: int, seed: int = 1) -> Workload:
    rng = random.Random(seed)
    nodes = [node_json(i) for i in range(n_nodes)]
    running = []
    for i in range(n_nodes):
        for k in range(i % 3):  # 0-2 busy pods per node: fragmentation for the planner
            running.append(pod_json(
                "default", f"svc-{i}-{k}", f"run-{i}-{k}",
                {"cpu": str(1 + (i + k) % 3), "memory": f"{2 + (i * 7 + k) % 6}Gi"},
                T0 - 3600, node=f"node-{i:05d}", phase="Running",
                scheduler="default-scheduler"))
    groups: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    shape_of: dict[str, Shape] = {}
    sizes: list[int] = []
    batches: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]] = []
    g = 0
    while len(pending) < n_pods:
        created = T0 + g
        shape = rng.choices(SHAPES, SHAPE_WEIGHTS)[0]
        ns = f"team-{g % 7}"
        if rng.random() < 0.05:  # a plain pod of the gang scheduler
            uid = f"plain-{g}"
            pending.append(pod_json(ns, f"plain-{g}-0", uid, shape.requests, created,
                                    gpu=shape.gpu))
            shape_of[uid] = shape
            batches.append((None, pending[-1:]))
        else:
            size = min(rng.randint(1, 64), n_pods - len(pending))
            name = f"job-{g}"
            groups.append(group_json(ns, name, size, created))
            sizes.append(size)
            for j in range(size):
                uid = f"{name}-{j}"
                pending.append(pod_json(ns, f"{name}-{j}", uid, shape.requests, created,
                                        group=name, index=j, gpu=shape.gpu))
                shape_of[uid] = shape
            batches.append((groups[-1], pending[-size:]))
        g += 1
    batch_of = {p["metadata"]["uid"]: i for i, (_, pods) in enumerate(batches) for p in pods}
    return Workload(nodes, running, groups, pending, shape_of, sizes, batches, batch_of)


# ----- calling the ASGI app without a network ----------------------------------------------


async def asgi_post(app: Any, path: str, body: bytes) -> tuple[int, bytes]:
    """One POST through the ASGI app, as uvicorn would deliver it."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8888),
        "headers": [(b"host", b"127.0.0.1:8888"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }
    done = asyncio.get_running_loop().create_future()
    delivered = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done  # a disconnect only after the response, like a kept-alive client
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body") and not done.done():
                done.set_result(None)

    await app(scope, receive, send)
    return status, b"".join(chunks)


class NullKube:
    """The API server's side of Bindings and wake-up patches: accepts everything at once."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        return None

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        return None


# ----- kube-scheduler's side ------------------------------------------------------------------


@dataclass
class Timings:
    verbs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, verb: str, seconds: float) -> None:
        self.verbs.setdefault(verb, []).append(seconds)


@dataclass
class Plans:
    """Every planning call the framework made, with its gang size and outcome."""

    seconds: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    ok: int = 0
    short: int = 0


class SchedulerSim:
    """kube-scheduler's view: allocatable minus bound and assumed pods, per request shape."""

    def __init__(self, wl: Workload, fw: GangFramework) -> None:
        self.fw = fw
        self.alloc: dict[str, Resources] = {}
        self.tainted: set[str] = set()
        for n in wl.nodes:
            info = node_from_k8s(n)
            self.alloc[info.name] = dict(info.allocatable)
            if info.taints:
                self.tainted.add(info.name)
        self.names = list(self.alloc)
        self.free = {n: dict(a) for n, a in self.alloc.items()}
        self.requests: dict[str, Resources] = {}  # shape name -> requests
        for s in SHAPES:
            self.requests[s.name] = pod_from_k8s(pod_json("x", "x", "x", s.requests, T0)).requests
        self.full: dict[str, set[str]] = {s.name: set() for s in SHAPES}
        self._feasible: dict[str, list[str] | None] = {s.name: None for s in SHAPES}
        for p in wl.running:
            running = pod_from_k8s(p)
            self.charge(running.node_name, running.requests, -1)

    def charge(self, node: str, req: Resources, sign: int) -> None:
        f = self.free[node]
        for k, v in req.items():
            f[k] = f.get(k, 0) + sign * v
        for s in SHAPES:
            now_full = not fits(self.requests[s.name], f)
            full = self.full[s.name]
            if now_full != (node in full):
                (full.add if now_full else full.discard)(node)
                self._feasible[s.name] = None

    def feasible(self, shape: Shape) -> list[str]:
        cached = self._feasible[shape.name]
        if cached is None:
            full = self.full[shape.name]
            cached = [
                n for n in self.names
                if n not in full and (shape.gpu or n not in self.tainted)
                and (not shape.gpu or self.alloc[n].get("nvidia.com/gpu", 0) > 0)
            ]
            self._feasible[shape.name] = cached
        return cached


def _instrument(fw: GangFramework, plans: Plans, timings: Timings) -> None:
    """Time every planning call, queue evaluation and bind decision (instance attributes shadow the
    methods; the framework calls them through self)."""
    plan = fw._plan
    evaluate = fw.evaluate
    bind = fw.bind

    def timed_plan(group: GroupInfo, members: list[PodInfo]) -> Plan | Shortfall:
        t = time.perf_counter()
        result = plan(group, members)
        plans.seconds.append(time.perf_counter() - t)
        plans.sizes.append(group.min_member)
        if isinstance(result, Plan):
            plans.ok += 1
        else:
            plans.short += 1
        return result

    def timed_bind(namespace: str, name: str, uid: str, node: str, now: float) -> BindDecision:
        t = time.perf_counter()
        decision = bind(namespace, name, uid, node, now)
        timings.add("bind: framework decision", time.perf_counter() - t)
        return decision

    def timed_evaluate(now: float) -> None:
        t = time.perf_counter()
        evaluate(now)
        timings.add("evaluate", time.perf_counter() - t)

    fw._plan = timed_plan  # type: ignore[method-assign]
    fw.evaluate = timed_evaluate  # type: ignore[method-assign]
    fw.bind = timed_bind  # type: ignore[method-assign]


async def run_case(n_nodes: int, n_pods: int, passes: int = 3, trace_memory: bool = True,
                   gc_freeze: bool = False, arrival: str = "burst") -> dict[str, Any]:
    """`arrival`: "burst", every pod is pending before kube-scheduler starts (the backlog
    after a big submission); "stream", each gang arrives just before kube-scheduler
    reaches it, so each gang's first member plans that gang (the steady state)."""
    wl = make_workload(n_nodes, n_pods)
    # The simulator's own objects (the workload's JSON) must not lengthen the extender's
    # garbage collections: move them to the permanent generation.
    gc.collect()
    gc.freeze()
    rss0 = rss_mib()
    fw = GangFramework()
    clock = [T0 + 10_000.0]
    runtime = Runtime(fw, NullKube(), RuntimeConfig(),  # type: ignore[arg-type]
                      clock=lambda: clock[0])
    app = with_fast_verbs(create_app(runtime))  # as the CLI serves it
    timings = Timings()
    plans = Plans()

    # 1. informer feed (timed per event: watch events run on the same event loop)
    trace_memory = trace_memory and arrival == "burst"  # stream: nothing pending yet
    if trace_memory:
        tracemalloc.start()
    t_feed = time.perf_counter()
    for n in wl.nodes:
        t = time.perf_counter()
        fw.on_node(node_from_k8s(n))
        timings.add("watch: node", time.perf_counter() - t)
    for p in wl.running:
        fw.on_pod(pod_from_k8s(p), clock[0])
    fed: set[int] = set()

    def feed(batch: int) -> None:
        group, pods = wl.batches[batch]
        fed.add(batch)
        if group is not None:
            t = time.perf_counter()
            fw.on_group(group_from_k8s(group), clock[0])
            timings.add("watch: podgroup", time.perf_counter() - t)
        for p in pods:
            t = time.perf_counter()
            fw.on_pod(pod_from_k8s(p), clock[0])
            timings.add("watch: pod", time.perf_counter() - t)

    if arrival == "burst":
        for b in range(len(wl.batches)):
            feed(b)
    feed_seconds = time.perf_counter() - t_feed
    state_mib = float("nan")
    if trace_memory:
        state_mib = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
        tracemalloc.stop()
    rss_loaded = rss_mib()
    if gc_freeze:
        # What the extender could do once its informers have synced: move the state
        # loaded so far out of the collector's way (gen2 passes walk all of it).
        gc.collect()
        gc.freeze()
    _instrument(fw, plans, timings)

    sim = SchedulerSim(wl, fw)
    by_uid = {p["metadata"]["uid"]: p for p in wl.pending}
    assumed: dict[str, str] = {}
    bound: dict[str, str] = {}
    finished: set[str] = set()
    tasks: set[asyncio.Task[None]] = set()
    counts = {"filter_ok": 0, "filter_rejected": 0, "bind_errors": 0, "cycles": 0}
    filter_kinds: dict[str, list[float]] = {}

    async def post(path: str, body: dict[str, Any]) -> tuple[Any, float]:
        raw = orjson.dumps(body)
        t = time.perf_counter()
        status, out = await asgi_post(app, path, raw)
        dt = time.perf_counter() - t
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {out[:300]!r}")
        return orjson.loads(out), dt

    async def bind(uid: str, node: str) -> None:
        p = by_uid[uid]
        md = p["metadata"]
        reply, dt = await post("/bind", {"PodName": md["name"], "PodNamespace": md["namespace"],
                                         "PodUID": uid, "Node": node})
        if GROUP_LABEL in p["metadata"]["labels"]:
            # Held until the gang's last member is bound: the wait includes every other
            # member's scheduling cycle, so it measures the simulation, not the extender.
            timings.add("bind (gang member, held)", dt)
        else:
            timings.add("bind (plain pod)", dt)
        shape = wl.shape_of[uid]
        assumed.pop(uid, None)
        if reply.get("Error"):
            counts["bind_errors"] += 1
            sim.charge(node, sim.requests[shape.name], +1)
            return
        bound[uid] = node
        running = dict(p)
        running["spec"] = {**p["spec"], "nodeName": node}
        running["status"] = {"phase": "Running", "qosClass": "Burstable"}
        t = time.perf_counter()
        fw.on_pod(pod_from_k8s(running), clock[0])
        timings.add("watch: pod", time.perf_counter() - t)

    def spawn_bind(uid: str, node: str) -> None:
        task = asyncio.ensure_future(bind(uid, node))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def tick() -> None:
        t = time.perf_counter()
        fw.tick(clock[0])
        runtime.drain()
        timings.add("tick", time.perf_counter() - t)

    gc_pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    gc_start = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            gc_pauses[info["generation"]].append(time.perf_counter() - gc_start[0])

    gc.callbacks.append(on_gc)
    t_run = time.perf_counter()
    queue = [p["metadata"]["uid"] for p in wl.pending]
    for _ in range(passes):
        retry: list[str] = []
        for uid in queue:
            if uid in bound or uid in assumed or uid in finished:
                continue
            if wl.batch_of[uid] not in fed:
                feed(wl.batch_of[uid])
            counts["cycles"] += 1
            clock[0] += 0.001
            shape = wl.shape_of[uid]
            names = sim.feasible(shape)
            pod = by_uid[uid]
            gang = fw.cache.pods[uid].group
            key = f"{pod['metadata']['namespace']}/{gang}" if gang else None
            had_reservation = key in fw.reservations if key else False
            reply, dt = await post("/filter", {"Pod": pod, "Nodes": None, "NodeNames": names})
            timings.add("filter", dt)
            if key is None:
                kind = "plain pod"
            elif had_reservation:
                kind = "gang member with a reserved slot"
            else:
                kind = "gang member, no reservation yet (evaluates the queue)"
            got = reply.get("NodeNames") or []
            if not got:
                kind = "rejected"
                counts["filter_rejected"] += 1
                retry.append(uid)
            filter_kinds.setdefault(kind, []).append(dt)
            if got:
                counts["filter_ok"] += 1
                scores, dt = await post("/prioritize",
                                        {"Pod": pod, "Nodes": None, "NodeNames": got})
                timings.add("prioritize", dt)
                node = str(max(scores, key=lambda sc: sc["Score"])["Host"])
                assumed[uid] = node
                sim.charge(node, sim.requests[shape.name], -1)
                spawn_bind(uid, node)
            await asyncio.sleep(0)  # let bind tasks run, as kube-scheduler's goroutines do
            if counts["cycles"] % 100 == 0:
                tick()
        for _ in range(20):
            await asyncio.sleep(0)
        # Held binds of gangs that never completed: let the deadline pass (+ backoff).
        clock[0] += 400
        tick()
        for _ in range(20):
            await asyncio.sleep(0)
        # Half of the running gangs finish: capacity frees for the waiting ones.
        done_groups = sorted({fw.cache.pods[u].group or u for u in bound})[::2]
        done_set = set(done_groups)
        for uid in [u for u in bound if (fw.cache.pods[u].group or u) in done_set]:
            node = bound.pop(uid)
            finished.add(uid)
            p = by_uid[uid]
            gone = dict(p)
            gone["spec"] = {**p["spec"], "nodeName": node}
            gone["status"] = {"phase": "Succeeded", "qosClass": "Burstable"}
            fw.on_pod(pod_from_k8s(gone), clock[0])
            sim.charge(node, sim.requests[wl.shape_of[uid].name], +1)
        tick()
        queue = retry
    run_seconds = time.perf_counter() - t_run
    gc.callbacks.remove(on_gc)
    for task in list(tasks):
        task.cancel()

    verbs = {k: summary_ms(v) for k, v in timings.verbs.items()}
    return {
        "nodes": n_nodes,
        "pods": n_pods,
        "arrival": arrival,
        "gangs": len(wl.groups),
        "plain_pods": sum(1 for p in wl.pending if GROUP_LABEL not in p["metadata"]["labels"]),
        "running_pods": len(wl.running),
        "verbs": verbs,
        "filter_by_kind": {k: summary_ms(v) for k, v in sorted(filter_kinds.items())},
        "planning": {
            **summary_ms(plans.seconds),
            "plans": plans.ok,
            "shortfalls": plans.short,
            "mean_gang_size": round(sum(plans.sizes) / max(1, len(plans.sizes)), 1),
        },
        "counts": {**counts, "bound_or_finished": len(bound) + len(finished),
                   "reservations_left": len(fw.reservations)},
        "memory": {
            "state_mib": state_mib,
            "rss_before_mib": rss0,
            "rss_loaded_mib": rss_loaded,
            "peak_rss_mib": peak_rss_mib(),
        },
        "gc_freeze": gc_freeze,
        "gc_pauses": {f"gen{g}": summary_ms(v) for g, v in gc_pauses.items()},
        "seconds": {"feed": round(feed_seconds, 2), "run": round(run_seconds, 2)},
    }


# ----- orchestration ---------------------------------------------------------------------------


def _run_in_subprocess(nodes: int, pods: int, arrival: str, passes: int,
                       gc_freeze: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.core", "--case", f"{nodes}x{pods}:{arrival}",
         "--passes", str(passes), *(["--gc-freeze"] if gc_freeze else [])],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1],
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def markdown(data: dict[str, Any]) -> str:
    cases = data["cases"]
    m = data["machine"]
    lines = [f"# Core benchmark ({data['mode']})", "",
             f"In-process: kube-scheduler's calls through the ASGI app, no network. "
             f"{m['cpus']} CPUs, load {m['loadavg_1m']} at the start, Python {m['python']}, "
             f"commit {m['commit']}, {m['date']}. Milliseconds per call. *burst*: every pod "
             f"pending before scheduling starts; *stream*: each gang arrives just before "
             f"kube-scheduler reaches it.", ""]
    rows = []
    for c in cases:
        f = c["verbs"].get("filter", {})
        p = c["planning"]
        rows.append([c["nodes"], c["pods"], c["arrival"], f.get("p50", "-"), f.get("p99", "-"),
                     c["verbs"].get("prioritize", {}).get("p99", "-"), p.get("p50", "-"),
                     p.get("p99", "-"), c["memory"]["peak_rss_mib"]])
    lines += ["## Headline", "",
              md_table(["nodes", "pending pods", "arrival", "filter p50", "filter p99",
                        "prioritize p99", "plan p50", "plan p99", "peak RSS MiB"], rows), ""]
    rows = []
    for c in cases:
        for verb in ("filter", "prioritize", "bind: framework decision", "bind (plain pod)",
                     "evaluate", "tick", "watch: pod"):
            st = c["verbs"].get(verb, {})
            rows.append([c["nodes"], c["pods"], c["arrival"], verb, st.get("count", 0),
                         st.get("p50", "-"), st.get("p99", "-"), st.get("max", "-")])
        st = c["planning"]
        rows.append([c["nodes"], c["pods"], c["arrival"], "planning call (plan_gang)",
                     st.get("count", 0), st.get("p50", "-"), st.get("p99", "-"),
                     st.get("max", "-")])
    lines += ["## Every call", "",
              md_table(["nodes", "pending pods", "arrival", "call", "count", "p50 ms",
                        "p99 ms", "max ms"], rows), ""]
    rows = []
    for c in cases:
        for kind, st in c["filter_by_kind"].items():
            rows.append([c["nodes"], c["pods"], c["arrival"], kind, st["count"], st["p50"],
                         st["p99"], st["max"]])
    lines += ["## Filter by path", "",
              md_table(["nodes", "pending pods", "arrival", "filter path", "count", "p50 ms",
                        "p99 ms", "max ms"], rows), ""]
    rows = []
    for c in cases:
        mem, k, gcp = c["memory"], c["counts"], c["gc_pauses"]["gen2"]
        rows.append([c["nodes"], c["pods"], c["arrival"], c["gangs"], mem["state_mib"],
                     mem["rss_loaded_mib"], mem["peak_rss_mib"], gcp.get("count", 0),
                     gcp.get("max", "-"), k["bound_or_finished"], k["filter_rejected"],
                     c["planning"]["plans"], c["planning"]["shortfalls"], c["seconds"]["run"]])
    lines += ["## Memory, garbage collection and outcome", "",
              "State MiB: what the informers' feed allocated (tracemalloc; burst only). "
              "GC: full (generation 2) collections during the run and the longest one, ms.",
              "",
              md_table(["nodes", "pending pods", "arrival", "gangs", "state MiB",
                        "RSS loaded MiB", "peak RSS MiB", "gen2 GCs", "gen2 max ms",
                        "pods bound", "rejections", "plans", "shortfalls", "run s"], rows), ""]
    return "\n".join(lines)


def profile_case(nodes: int, pods: int, arrival: str, out: Path) -> str:
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(run_case(nodes, pods, trace_memory=False, arrival=arrival))
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
    text = buf.getvalue()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def _size(text: str) -> tuple[int, int, str]:
    """"NODESxPODS[:burst|:stream]"."""
    size, _, arrival = text.lower().partition(":")
    nodes, pods = size.split("x")
    if arrival not in ("", "burst", "stream"):
        raise SystemExit(f"unknown arrival {arrival!r}: burst or stream")
    return int(nodes), int(pods), arrival or "burst"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="500 nodes x 1,000 pods")
    mode.add_argument("--full", action="store_true", help="{500, 5000} x {1000, 10000}")
    mode.add_argument("--cases", help="NODESxPODS[:stream],... instead of a preset")
    mode.add_argument("--case", help="NODESxPODS[:stream], one case in this process, "
                      "JSON on stdout")
    mode.add_argument("--profile", nargs="?", const="5000x10000:stream",
                      metavar="NODESxPODS[:stream]",
                      help="cProfile one case (default 5000x10000:stream)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after the initial feed (what-if for the extender)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = ap.parse_args(argv)

    if args.case:
        n, p, a = _size(args.case)
        print(json.dumps(asyncio.run(
            run_case(n, p, args.passes, gc_freeze=args.gc_freeze, arrival=a))))
        return 0
    if args.profile:
        n, p, a = _size(args.profile)
        text = profile_case(n, p, a, args.out / "core-profile.txt")
        print(text[:6000])
        print(f"written: {args.out / 'core-profile.txt'}")
        return 0

    if args.cases:
        cases = tuple(_size(c) for c in args.cases.split(","))
        mode_name = "custom"
    else:
        cases = FULL_CASES if args.full else QUICK_CASES
        mode_name = "full" if args.full else "quick"
    results = []
    for n, p, a in cases:
        print(f"case {n} nodes x {p} pods, {a} ...", file=sys.stderr, flush=True)
        results.append(_run_in_subprocess(n, p, a, args.passes, args.gc_freeze))
    data = {"benchmark": "core", "mode": mode_name, "machine": machine(), "cases": results}
    text = markdown(data)
    stem = "core" if args.full else f"core-{mode_name}"
    paths = write_results(args.out, stem, data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())

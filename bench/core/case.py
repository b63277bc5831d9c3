"""One benchmark case: kube-scheduler played against the in-process extender.

1. The extender is fed the workload as its informers would: Kubernetes JSON through
   `*_from_k8s`, every pod up front ("burst") or each gang just before kube-scheduler
   reaches it ("stream").
2. Playing kube-scheduler: pods are popped in queue order, `/filter` is sent with the
   names of the nodes kube-scheduler's own fit check passes (bench/core/simulator.py),
   `/prioritize` with the filter's answer, and `/bind` as a concurrent task (binds are
   asynchronous in kube-scheduler, and held open by the extender). A bound pod's Running
   update is fed back as a watch event. The manager's `tick` runs every 100 cycles, as
   its 0.1 s loop would.
3. After each pass, half of the gangs that run finish (their capacity frees), held binds
   of incomplete gangs time out, and rejected pods are retried (three passes).

Clock: simulated, 1 ms per scheduling cycle, so reservation deadlines and backoffs
behave the same on any machine.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from typing import Any

import orjson

from bench.common import peak_rss_mib, rss_mib, summary_ms
from bench.core.inprocess import Plans, Timings, asgi_post, extender
from bench.core.simulator import KubeSchedulerView
from bench.core.workload import SHAPES, T0, make_workload, pod_json
from extender.core.model.convert import node_from_k8s, pod_from_k8s
from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.types import GROUP_LABEL


async def run_case(n_nodes: int, n_pods: int, passes: int = 3, trace_memory: bool = True,
                   gc_freeze: bool = False, arrival: str = "burst",
                   topology: bool = False, direct_commit: bool | None = None) -> dict[str, Any]:
    """`arrival`: "burst", every pod is pending before kube-scheduler starts (the backlog
    after a big submission); "stream", each gang arrives just before kube-scheduler
    reaches it, so each gang's first member plans that gang (the steady state).
    `topology`: racks and blocks on the nodes, and gangs that ask for them.
    `direct_commit`: the commit mode (None: `Config`'s default, the one shipped). The
    barrier sends each member through filter and bind; the direct commit binds a gang
    from its plan, so its members make no verb calls, and the queue pass that commits
    it carries the gang's Bindings instead."""
    wl = make_workload(n_nodes, n_pods, topology=topology)
    # The simulator's own objects (the workload's JSON) must not lengthen the extender's
    # garbage collections: move them to the permanent generation.
    gc.collect()
    gc.freeze()
    rss0 = rss_mib()
    clock = [T0 + 10_000.0]
    timings = Timings()
    plans = Plans()
    ext = extender(lambda: clock[0], timings, plans, direct_commit)
    manager, cache, reservations = ext.manager, ext.core.cache, ext.core.ledger.reservations

    # 1. informer feed (timed per event: watch events run on the same event loop)
    trace_memory = trace_memory and arrival == "burst"  # stream: nothing pending yet
    if trace_memory:
        tracemalloc.start()
    t_feed = time.perf_counter()
    for n in wl.nodes:
        t = time.perf_counter()
        manager.on_node(node_from_k8s(n))
        timings.add("watch: node", time.perf_counter() - t)
    for p in wl.running:
        manager.on_pod(pod_from_k8s(p), clock[0])
    fed: set[int] = set()

    def feed(batch: int) -> None:
        group, pods = wl.batches[batch]
        fed.add(batch)
        if group is not None:
            t = time.perf_counter()
            manager.on_group(group_from_k8s(group), clock[0])
            timings.add("watch: podgroup", time.perf_counter() - t)
        for p in pods:
            t = time.perf_counter()
            manager.on_pod(pod_from_k8s(p), clock[0])
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

    # 2. kube-scheduler's side. Its informers deliver the same nodes as the extender's:
    # the view shares the extender's copies rather than hold 5,000 more.
    view = KubeSchedulerView(cache.nodes.values())
    for p in wl.running:
        running = pod_from_k8s(p)
        view.charge(running.node_name, running.requests)
    shapes = {s.name: view.shape_of(pod_from_k8s(pod_json("x", "x", "x", s.requests, T0,
                                                           gpu=s.gpu)))
              for s in SHAPES}
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
        status, out = await asgi_post(ext.app, path, raw)
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
        shape = shapes[wl.shape_of[uid].name]
        if reply.get("Error"):
            assumed.pop(uid, None)
            counts["bind_errors"] += 1
            view.credit(node, shape.proto.requests)
            return
        delivered(uid, node)

    def delivered(uid: str, node: str) -> None:
        """The watch delivers `uid` bound, once: kube-scheduler's view takes it (unless
        its own cycle assumed it) and drops it from its queue, and the extender's cache
        learns it."""
        if uid in bound:
            return
        if assumed.pop(uid, None) is None:
            view.charge(node, shapes[wl.shape_of[uid].name].proto.requests)
        bound[uid] = node
        p = by_uid[uid]
        running = dict(p)
        running["spec"] = {**p["spec"], "nodeName": node}
        running["status"] = {"phase": "Running", "qosClass": "Burstable"}
        t = time.perf_counter()
        manager.on_pod(pod_from_k8s(running), clock[0])
        timings.add("watch: pod", time.perf_counter() - t)
        ext.dispatcher.cache_changed()

    ext.kube.on_bind = delivered

    def spawn_bind(uid: str, node: str) -> None:
        task = asyncio.ensure_future(bind(uid, node))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def tick() -> None:
        t = time.perf_counter()
        manager.tick(clock[0])
        ext.dispatcher.drain()
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
            shape = shapes[wl.shape_of[uid].name]
            names = view.feasible(shape)
            pod = by_uid[uid]
            gang = cache.pods[uid].group
            key = f"{pod['metadata']['namespace']}/{gang}" if gang else None
            had_reservation = key in reservations if key else False
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
                view.charge(node, shape.proto.requests)
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
        done_groups = sorted({cache.pods[u].group or u for u in bound})[::2]
        done_set = set(done_groups)
        for uid in [u for u in bound if (cache.pods[u].group or u) in done_set]:
            node = bound.pop(uid)
            finished.add(uid)
            p = by_uid[uid]
            gone = dict(p)
            gone["spec"] = {**p["spec"], "nodeName": node}
            gone["status"] = {"phase": "Succeeded", "qosClass": "Burstable"}
            manager.on_pod(pod_from_k8s(gone), clock[0])
            view.credit(node, shapes[wl.shape_of[uid].name].proto.requests)
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
        "topology": topology,
        "direct_commit": ext.core.config.direct_commit,
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
                   "reservations_left": len(reservations)},
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

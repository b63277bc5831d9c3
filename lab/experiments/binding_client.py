"""Question: how close do maintained async clients (aiohttp, kubernetes_asyncio, httpx) come
to the extender's own HTTP transport in CPU per Binding? Answer: lab/history/performance-history.md,
"The API client: the transport against aiohttp and kubernetes_asyncio".

CPU per Binding of the extender's HTTP client against other async clients.

    .venv/bin/pip install aiohttp kubernetes_asyncio      # the contenders; not dependencies
    .venv/bin/python -m lab.experiments.binding_client  # 300 Bindings x 5 reps, about 3 min

Why: the extender writes its Bindings through a hand-written HTTP/1.1 transport
(extender/kube/transport.py), which was only ever measured against httpx's default one.
A maintained library that comes close would be cheaper to own; this says how close.

What it does: one local control plane (the e2e harness's ControlPlane, 127.0.0.1 only),
a few Node objects, and for every repetition and client variant a fresh batch of pending
pods (no scheduler runs, so they stay unbound). A child process per variant and
repetition then POSTs one Binding per pod, `--concurrency` in flight as the runtime does
(`binding_concurrency`), on uvloop as the extender runs (`extender.cli._new_event_loop`).
The child measures its own CPU (getrusage, user + system, every thread of the process)
around the Bindings only: the imports, the kubeconfig, and a warm-up that opens the
pooled connections are left out, so what is compared is each client's steady state, the
one a busy extender is in. The parent checks that every pod ended up on its node.

Variants (`--variants`):

* `transport`: the product: `Kube.bind` through `_Writer` and `AsyncioTransport.request`;
* `transport-httpx`: the same transport under httpx's request and response models
  (`Kube` without a writer), for reference;
* `aiohttp`: `aiohttp.ClientSession` on a `TCPConnector` with the ssl context built as
  `extender.kube.client` builds it;
* `aiohttp-tuned`: the same without what the API server does not need per request (no
  cookie jar, no decompression, the headers set once on the session), to give it its
  best chance;
* `kubernetes_asyncio`: the generated `CoreV1Api.create_namespaced_pod_binding` with
  `_preload_content=False` (deserialising the Status reply as a V1Binding raises,
  kubernetes-client/python#547);
* `httpx`: httpx's default transport (httpcore), the earlier baseline.

Repetitions rotate the order of the variants, so drift in the machine's load does not
favour one. Reported per variant: the median CPU per Binding over the repetitions with
its range, the median over the repetitions of its ratio to `transport` in the same
repetition, and wall time. Results: lab/results/binding-client.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from bench.common import machine, md_table, write_results
from lab.common import RESULTS

VARIANTS = ("transport", "aiohttp", "aiohttp-tuned", "kubernetes_asyncio", "httpx",
            "transport-httpx")
NEEDS = {"aiohttp": "aiohttp", "aiohttp-tuned": "aiohttp",
         "kubernetes_asyncio": "kubernetes_asyncio"}
NAMESPACE = "bench-binding"
NODES = 4
SCHEDULER = "bench-nobody"  # no scheduler runs: the pods wait for the client's Bindings
WORKER_TIMEOUT = 120.0

Bind = Callable[[str, str, str], Awaitable[None]]  # name, uid, node


# ----- the child: one client, one batch ---------------------------------------------------


def _binding(name: str, uid: str, node: str) -> bytes:
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    })


def _path(name: str) -> str:
    return f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding"


class BindingFailed(Exception):
    pass


async def _client(variant: str, kubeconfig: str,
                  stack: contextlib.AsyncExitStack) -> Bind:
    """One Binding call of `variant`, with its client set up as the product would."""
    from extender.kube.client import Kube, _load, _make_client, _ssl_context, make_kube
    from extender.kube.transport import AsyncioTransport

    headers = {"Accept": "application/json", "User-Agent": "gang-extender"}
    if variant == "transport":
        kube = make_kube(kubeconfig)
        stack.push_async_callback(kube.http.aclose)

        async def bind(name: str, uid: str, node: str) -> None:
            await kube.bind(NAMESPACE, name, uid, node)

        return bind
    cfg = _load(kubeconfig)
    if variant == "transport-httpx":
        http = _make_client(cfg, 30.0, AsyncioTransport(_ssl_context(cfg), max_idle=24))
        stack.push_async_callback(http.aclose)
        plain = Kube(http)

        async def bind_httpx_models(name: str, uid: str, node: str) -> None:
            await plain.bind(NAMESPACE, name, uid, node)

        return bind_httpx_models
    if variant == "httpx":
        import httpx

        client = httpx.AsyncClient(base_url=cfg.host, headers=headers, verify=_ssl_context(cfg),
                                   timeout=httpx.Timeout(30.0, connect=5.0))
        stack.push_async_callback(client.aclose)

        async def bind_httpx(name: str, uid: str, node: str) -> None:
            resp = await client.post(_path(name), content=_binding(name, uid, node),
                                     headers={"Content-Type": "application/json"})
            if resp.status_code != 201:
                raise BindingFailed(f"{resp.status_code} {resp.content[:200]!r}")

        return bind_httpx
    if variant == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(
            base_url=cfg.host, headers=headers,
            connector=aiohttp.TCPConnector(ssl=_ssl_context(cfg)),
            timeout=aiohttp.ClientTimeout(total=30.0, connect=5.0))
        stack.push_async_callback(session.close)
        json_type = {"Content-Type": "application/json"}

        async def bind_aiohttp(name: str, uid: str, node: str) -> None:
            async with session.post(_path(name), data=_binding(name, uid, node),
                                    headers=json_type) as resp:
                body = await resp.read()
                if resp.status != 201:
                    raise BindingFailed(f"{resp.status} {body[:200]!r}")

        return bind_aiohttp
    if variant == "aiohttp-tuned":
        import aiohttp

        # Everything per request that the API server does not need, moved or turned off:
        # the cookie jar, response decompression, per-request headers to merge.
        tuned = aiohttp.ClientSession(
            base_url=cfg.host, headers={**headers, "Content-Type": "application/json"},
            connector=aiohttp.TCPConnector(ssl=_ssl_context(cfg)),
            cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            skip_auto_headers=("Accept-Encoding",),
            timeout=aiohttp.ClientTimeout(total=30.0, connect=5.0))
        stack.push_async_callback(tuned.close)

        async def bind_aiohttp_tuned(name: str, uid: str, node: str) -> None:
            async with tuned.post(_path(name), data=_binding(name, uid, node)) as resp:
                body = await resp.read()
                if resp.status != 201:
                    raise BindingFailed(f"{resp.status} {body[:200]!r}")

        return bind_aiohttp_tuned
    if variant == "kubernetes_asyncio":
        from kubernetes_asyncio import client as kclient
        from kubernetes_asyncio import config as kconfig

        kcfg = kclient.Configuration()
        await kconfig.load_kube_config(config_file=kubeconfig, client_configuration=kcfg)
        api = kclient.ApiClient(kcfg)
        stack.push_async_callback(api.close)
        # Any: its annotation promises a V1Binding, which _preload_content=False is not
        core: Any = kclient.CoreV1Api(api)

        async def bind_generated(name: str, uid: str, node: str) -> None:
            body = {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            resp = await core.create_namespaced_pod_binding(name, NAMESPACE, body,
                                                            _preload_content=False)
            data = await resp.read()
            if resp.status != 201:
                raise BindingFailed(f"{resp.status} {data[:200]!r}")

        return bind_generated
    raise SystemExit(f"unknown variant {variant!r}")


async def _bind_all(bind: Bind, pods: list[list[str]], concurrency: int) -> int:
    """Every pod's Binding, `concurrency` in flight (the runtime's semaphore); errors."""
    slots = asyncio.Semaphore(concurrency)
    errors = 0

    async def one(name: str, uid: str, node: str) -> None:
        nonlocal errors
        async with slots:
            try:
                await bind(name, uid, node)
            except Exception as exc:
                errors += 1
                if errors <= 3:
                    print(f"binding {name}: {exc!r}", file=sys.stderr)

    await asyncio.gather(*(one(*p) for p in pods))
    return errors


def _cpu() -> tuple[float, float, float]:
    """CPU seconds of this process: precise total, and the user/system split (which
    the kernel samples at its tick, so it is only indicative for short runs)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), r.ru_utime, r.ru_stime


async def _worker(variant: str, kubeconfig: str, pods: list[list[str]], warmup: int,
                  concurrency: int) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        bind = await _client(variant, kubeconfig, stack)
        # The warm-up opens the pool's connections (TLS handshakes) and fills caches.
        warm_errors = await _bind_all(bind, pods[:warmup], concurrency)
        measured = pods[warmup:]
        c0, u0, s0 = _cpu()
        t0 = time.perf_counter()
        errors = await _bind_all(bind, measured, concurrency)
        wall = time.perf_counter() - t0
        c1, u1, s1 = _cpu()
    return {"variant": variant, "bindings": len(measured), "errors": errors + warm_errors,
            "cpu_s": c1 - c0, "user_s": u1 - u0, "sys_s": s1 - s0, "wall_s": wall}


def worker_main(args: argparse.Namespace) -> int:
    from extender.cli import _new_event_loop

    pods = json.loads(Path(args.pods).read_text())
    loop = _new_event_loop("auto")
    try:
        out = loop.run_until_complete(_worker(args.worker, args.kubeconfig, pods,
                                              args.warmup, args.concurrency))
    finally:
        loop.close()
    out["loop"] = type(loop).__module__.split(".")[0]
    print(json.dumps(out))
    return 0


# ----- the parent: control plane, pods, repetitions -----------------------------------------


def _create_batch(core: Any, label: str, count: int) -> list[list[str]]:
    """`count` pending pods labelled batch=`label`: [name, uid, node] each."""
    from e2e.harness.objects import create_pod

    def create(i: int) -> list[str]:
        name = f"{label}-{i:04d}"
        pod = create_pod(NAMESPACE, name, scheduler_name=SCHEDULER, labels={"batch": label})
        return [name, pod["metadata"]["uid"], f"node-{i % NODES}"]

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(create, range(count)))


def _bound_count(core: Any, label: str) -> int:
    resp = core.list_namespaced_pod(NAMESPACE, label_selector=f"batch={label}",
                                    _preload_content=False)
    items = json.loads(resp.data)["items"]
    return sum(1 for p in items if (p.get("spec") or {}).get("nodeName"))


def _delete_batch(core: Any, label: str) -> None:
    core.delete_collection_namespaced_pod(NAMESPACE, label_selector=f"batch={label}",
                                          grace_period_seconds=0, _preload_content=False)


def _prepare(cp: Any) -> Any:
    from e2e.harness.fakenodes import node_manifest
    from e2e.harness.target import use_cluster
    from e2e.harness.waiting import wait_for

    k = use_cluster(cp)
    for i in range(NODES):
        k.core.create_node(node_manifest(f"node-{i}"), _preload_content=False)
    k.core.create_namespace({"metadata": {"name": NAMESPACE}}, _preload_content=False)

    def sa_ready() -> bool:
        k.core.read_namespaced_service_account("default", NAMESPACE, _preload_content=False)
        return True

    wait_for(sa_ready, 30, f"service account default in {NAMESPACE}")
    return k.core


def _run_worker(variant: str, kubeconfig: Path, pods_file: Path, args: argparse.Namespace
                ) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "lab.experiments.binding_client", "--worker", variant,
           "--kubeconfig", str(kubeconfig), "--pods", str(pods_file),
           "--warmup", str(args.warmup), "--concurrency", str(args.concurrency)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT,
                          check=False, cwd=Path(__file__).resolve().parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"{variant} worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if done.stderr.strip():
        print(done.stderr.strip(), file=sys.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summarize(runs: list[dict[str, Any]], variants: list[str]) -> list[dict[str, Any]]:
    base = {r["rep"]: r["cpu_us"] for r in runs if r["variant"] == "transport"}
    rows = []
    for v in variants:
        mine = [r for r in runs if r["variant"] == v]
        cpu = [r["cpu_us"] for r in mine]
        ratios = [r["cpu_us"] / base[r["rep"]] for r in mine if r["rep"] in base]
        rows.append({
            "variant": v, "reps": len(mine),
            "cpu_us_median": round(statistics.median(cpu), 1),
            "cpu_us_min": round(min(cpu), 1), "cpu_us_max": round(max(cpu), 1),
            "ratio_median": round(statistics.median(ratios), 3) if ratios else None,
            "ratio_min": round(min(ratios), 3) if ratios else None,
            "ratio_max": round(max(ratios), 3) if ratios else None,
            "wall_ms_median": round(statistics.median(r["wall_s"] for r in mine) * 1000, 1),
            "user_share": round(sum(r["user_s"] for r in mine)
                                / max(1e-9, sum(r["user_s"] + r["sys_s"] for r in mine)), 2),
        })
    return rows


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    head = (f"Binding POSTs: {data['bindings']} measured per run (after {data['warmup']} "
            f"warm-up), {data['concurrency']} in flight, {data['reps']} repetitions, "
            f"{data['loop']} loop; {m['date']}, commit {m['commit']}, load average "
            f"{m['loadavg_1m']} at the start, {m['cpus']} CPUs, Python {m['python']}.")
    rows = [[r["variant"], r["cpu_us_median"], f"{r['cpu_us_min']:.0f}-{r['cpu_us_max']:.0f}",
             "-" if r["ratio_median"] is None else f"{r['ratio_median']:.2f}",
             "-" if r["ratio_min"] is None else f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
             r["wall_ms_median"], r["user_share"]] for r in data["summary"]]
    table = md_table(["client", "CPU µs per Binding (median)", "range", "vs transport",
                      "ratio range", "wall ms per run", "user share of CPU"], rows)
    skipped = "".join(f"\n\nNot measured: {v} ({why})." for v, why in data["skipped"].items())
    return f"{head}\n\n{table}{skipped}\n\nCommand: `{data['command']}`\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--bindings", type=int, default=300, help="measured Bindings per run")
    ap.add_argument("--warmup", type=int, default=32, help="unmeasured Bindings first")
    ap.add_argument("--concurrency", type=int, default=16, help="Bindings in flight")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    ap.add_argument("--pods", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)

    from e2e.harness.cluster import ControlPlane

    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(wanted) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants: {', '.join(sorted(unknown))}")
    if "transport" not in wanted:
        wanted.insert(0, "transport")  # the ratios are against it
    skipped = {v: f"`pip install {NEEDS[v]}`" for v in wanted
               if v in NEEDS and importlib.util.find_spec(NEEDS[v]) is None}
    variants = [v for v in wanted if v not in skipped]
    info = machine()
    command = " ".join([".venv/bin/python -m lab.experiments.binding_client",
                        *(sys.argv[1:] if argv is None else argv)])
    cp = ControlPlane().start()
    runs: list[dict[str, Any]] = []
    loop_kind = ""
    try:
        core = _prepare(cp)
        pods_file = cp.workdir / "bench-pods.json"
        for rep in range(args.reps):
            shift = rep % len(variants)
            order = variants[shift:] + variants[:shift]
            if rep % 2:
                order.reverse()
            for v in order:
                label = f"{v.replace('_', '-')}-r{rep}"
                pods = _create_batch(core, label, args.warmup + args.bindings)
                pods_file.write_text(json.dumps(pods))
                out = _run_worker(v, cp.kubeconfig, pods_file, args)
                bound = _bound_count(core, label)
                _delete_batch(core, label)
                if out["errors"] or bound != len(pods):
                    raise RuntimeError(f"{v} rep {rep}: {out['errors']} errors, "
                                       f"{bound} of {len(pods)} pods bound")
                loop_kind = out["loop"]
                cpu_us = out["cpu_s"] / out["bindings"] * 1e6
                runs.append({**out, "rep": rep, "cpu_us": round(cpu_us, 1)})
                print(f"rep {rep} {v}: {cpu_us:.0f} µs CPU per Binding, "
                      f"{out['wall_s'] * 1000:.0f} ms wall", file=sys.stderr, flush=True)
    finally:
        cp.stop()
    data = {
        "benchmark": "binding-client", "machine": info, "command": command,
        "bindings": args.bindings, "warmup": args.warmup, "concurrency": args.concurrency,
        "reps": args.reps, "loop": loop_kind, "skipped": skipped,
        "summary": summarize(runs, variants), "runs": runs,
    }
    text = markdown(data)
    paths = write_results(args.out, "binding-client", data, text)
    print(text)
    print("written: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

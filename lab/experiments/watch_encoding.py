"""Question: does the extender's JSON pod watch cost the API server a second encoding of
every pod event, and what would protobuf cost or save the extender? Answer:
lab/history/performance-history.md, "Lever a: a protobuf watch of pods".

What the extender's pod watch costs in JSON against protobuf, on both ends.

    .venv/bin/python -m lab.experiments.watch_encoding [--pods 400] [--reps 4] [--decode-reps 7]

Why: every pod watcher of a real cluster but the extender asks kube-apiserver for
protobuf, and its watch cache keeps one encoding of each event per encoding asked for
(`cachingObject`), so a JSON watch of all pods may cost the API server a second
encoding of every pod event. In `bench.e2e` the fake kubelet watches JSON too, which
hides that; here nothing but kube-controller-manager (protobuf, as on a real cluster)
and the watchers this script starts watch pods, and no scheduler or kubelet runs.

1. **API server.** Each repetition runs the same pod life three times, in a rotating
   order: with no extra watcher ("none"), with one more watch of all pods in JSON, and
   with one in protobuf (`curl -N`, output to /dev/null: the watcher's own CPU is not
   the API server's). A pod's life is what bench.e2e's pods go through: created, bound
   (a Binding), its status patched to Running, deleted without grace; four watch events.
   The API server's CPU (/proc) across each life is charged to its pods.
2. **Extender.** The JSON and protobuf watch streams of one life are recorded, then
   decoded and converted in this process the way the informer does (`orjson` +
   `pod_from_k8s`; `protobuf.decode_event` + `pod_dict` + `pod_from_k8s`), alternating,
   CPU time per event.

Prints both tables with the load average; writes nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from bench.common import cpu_seconds
from bench.e2e.apiserver_pprof import cum_seconds, profile
from e2e.harness.cluster import ControlPlane
from e2e.harness.rawapi import RawApi
from extender.core.model.convert import pod_from_k8s
from extender.kube import protobuf

NAMESPACE = "watch-encoding"
MODES = ("none", "json", "protobuf")
_CHANGES = ("ADDED", "MODIFIED", "DELETED")  # not BOOKMARK or ERROR


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"scheduling.x-k8s.io/pod-group": "g",
                                              "app": "bench"}},
        "spec": {"schedulerName": "nobody", "containers": [{
            "name": "main", "image": "registry.invalid/trainer:1",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }


def life(api: RawApi, prefix: str, pods: int) -> None:
    """Create, bind, mark Running and delete `pods` pods, 8 client threads."""
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"

    def one(i: int) -> None:
        name = f"{prefix}-{i}"
        api.request("POST", base, body=pod(name))
        api.request("POST", f"{base}/{name}/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": f"node-{i % 50}"}})
        api.request("PATCH", f"{base}/{name}/status", body={"status": {"phase": "Running"}},
                    content_type="application/merge-patch+json")
        api.request("DELETE", f"{base}/{name}", body={"gracePeriodSeconds": 0})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(pods)))


def watcher(cp: ControlPlane, accept: str, out: Path | None) -> subprocess.Popen[bytes]:
    pki = cp.workdir / "pki"
    # From a listed resourceVersion, as informers start: without one the API server
    # (etcd 3.4 here) refuses a watch.
    rv = orjson.loads(RawApi(cp.api_client()).request(
        "GET", "/api/v1/pods", {"limit": 1}))["metadata"]["resourceVersion"]
    url = f"{cp.server}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
    return subprocess.Popen(
        ["curl", "-sSN", "--cacert", str(pki / "ca.crt"), "--cert", str(pki / "admin.crt"),
         "--key", str(pki / "admin.key"), "-H", f"Accept: {accept}", url],
        stdout=out.open("wb") if out is not None else subprocess.DEVNULL)


def watch_serving(pprof: Path, pods: int, reps: int) -> None:
    """The API server's CPU in serving watches (`handleWatch`: encoding, writing) per pod,
    and in the JSON encoding inside it, from the profiles of every life of each mode."""
    print(f"\nkube-apiserver CPU in watch serving, µs per pod (4 events), {reps} lives "
          f"of {pods} pods per mode, from its profiles (`go tool pprof -top -cum "
          f"{pprof}/MODE-*.pb.gz`):")
    base = 0.0
    for mode in MODES:
        files = sorted(pprof.glob(f"{mode}-*.pb.gz"))
        total = cum_seconds(files, "k8s.io/apiserver/pkg/endpoints/handlers.handleWatch")
        js = cum_seconds(files, "k8s.io/apimachinery/pkg/runtime/serializer/json."
                          "(*Serializer).Encode", focus="handlers.handleWatch$")
        per = total * 1e6 / (pods * reps)
        base = per if mode == "none" else base
        print(f"  {mode:8s} all watches {per:7.1f} (this watcher {per - base:+7.1f}), "
              f"of it JSON encoding {js * 1e6 / (pods * reps):6.1f}")


def apiserver_cpu(cp: ControlPlane, api: RawApi, pods: int, reps: int,
                  pprof: Path | None, seconds: int) -> dict[str, list[float]]:
    """Per mode, the API server's CPU per pod over each repetition's life; with `pprof`,
    also its CPU profile of each (`seconds` long, more than a life takes)."""
    pid = cp.processes["kube-apiserver"].pid
    assert pid is not None
    per_pod: dict[str, list[float]] = {m: [] for m in MODES}
    for rep in range(reps):
        order = MODES[rep % 3:] + MODES[:rep % 3]
        for mode in order:
            w = None
            if mode != "none":
                w = watcher(cp, "application/json" if mode == "json" else protobuf.WATCH_ACCEPT,
                            None)
                time.sleep(1.0)
            prof = None if pprof is None else profile(
                RawApi(cp.api_client()), seconds, pprof / f"{mode}-{rep}.pb.gz")
            c0 = cpu_seconds(pid)
            life(api, f"r{rep}-{mode}", pods)
            time.sleep(1.0)  # the last events reach the watchers
            per_pod[mode].append((cpu_seconds(pid) - c0) * 1000 / pods)
            if prof is not None:
                prof.join()
            if w is not None:
                w.terminate()
                w.wait()
            print(f"  rep {rep} {mode:8s} {per_pod[mode][-1]:.3f} ms/pod "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    return per_pod


def record(cp: ControlPlane, api: RawApi, pods: int, tmp: Path) -> tuple[list[bytes], list[bytes]]:
    js, pb = tmp / "watch.json", tmp / "watch.pb"
    wj = watcher(cp, "application/json", js)
    wp = watcher(cp, protobuf.WATCH_ACCEPT, pb)
    time.sleep(1.0)
    life(api, "rec", pods)
    time.sleep(2.0)
    for w in (wj, wp):
        w.terminate()
        w.wait()
    lines = [x for x in js.read_bytes().split(b"\n")
             if x.strip() and orjson.loads(x)["type"] in _CHANGES]
    frames = [f for f in protobuf.frames(bytearray(pb.read_bytes()))
              if protobuf.decode_event(f, protobuf.Pod)[0] in _CHANGES]
    return lines, frames


def decode_cpu(lines: list[bytes], frames: list[bytes], reps: int) -> dict[str, list[float]]:
    def json_parse() -> None:
        for x in lines:
            orjson.loads(x)

    def json_full() -> None:
        for x in lines:
            pod_from_k8s(orjson.loads(x)["object"])

    def pb_parse() -> None:
        for f in frames:
            protobuf.decode_event(f, protobuf.Pod)

    def pb_dict() -> None:
        for f in frames:
            protobuf.pod_dict(protobuf.decode_event(f, protobuf.Pod)[1])

    def pb_full() -> None:
        for f in frames:
            pod_from_k8s(protobuf.pod_dict(protobuf.decode_event(f, protobuf.Pod)[1]))

    cases: dict[str, Callable[[], None]] = {
        "JSON: orjson.loads": json_parse, "JSON: + pod_from_k8s": json_full,
        "protobuf: decode_event": pb_parse, "protobuf: + pod_dict": pb_dict,
        "protobuf: + pod_from_k8s": pb_full,
    }
    out: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            t0 = time.process_time()
            fn()
            out[name].append((time.process_time() - t0) * 1e6 / len(lines))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--pods", type=int, default=400)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--decode-reps", type=int, default=7)
    ap.add_argument("--pprof", type=Path, default=None, metavar="DIR",
                    help="write kube-apiserver's CPU profile of every life here")
    args = ap.parse_args(argv)
    # The harness turns kube-apiserver's profiling off; a later flag wins.
    cp = ControlPlane(extra_apiserver_args=["--profiling=true"] if args.pprof else ()).start()
    try:
        api = RawApi(cp.api_client())
        api.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        t0 = time.monotonic()
        life(api, "warm", args.pods)
        seconds = int((time.monotonic() - t0) * 1.5) + 3
        print(f"load {os.getloadavg()}, {args.pods} pods per life", flush=True)
        lines, frames = record(cp, api, args.pods, cp.workdir)
        if len(lines) != len(frames):
            print(f"the two watches saw {len(lines)} and {len(frames)} events", file=sys.stderr)
            return 1
        same = all(pod_from_k8s(orjson.loads(x)["object"])
                   == pod_from_k8s(protobuf.pod_dict(protobuf.decode_event(f, protobuf.Pod)[1]))
                   for x, f in zip(lines, frames, strict=True))
        dec = decode_cpu(lines, frames, args.decode_reps)
        print(f"\nExtender side, {len(lines)} events, same PodInfo from both: {same}; "
              f"CPU µs per event, median (min) of {args.decode_reps}, "
              f"load {os.getloadavg()[0]:.2f}")
        for name, v in dec.items():
            print(f"  {name:26s} {statistics.median(v):7.1f} ({min(v):.1f})")
        print("\nAPI server CPU per pod (4 watch events), rotating order:", flush=True)
        if args.pprof is not None:
            args.pprof.mkdir(parents=True, exist_ok=True)
        cpu = apiserver_cpu(cp, api, args.pods, args.reps, args.pprof, seconds)
        print(f"\nAPI server, ms of CPU per pod, median (min-max) of {args.reps}, "
              f"load {os.getloadavg()[0]:.2f}")
        for mode, v in cpu.items():
            print(f"  {mode:8s} {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})")
        diffs = [j - p for j, p in zip(cpu["json"], cpu["protobuf"], strict=True)]
        print(f"  json - protobuf, per repetition: {', '.join(f'{d:+.3f}' for d in diffs)}")
        if args.pprof is not None:
            watch_serving(args.pprof, args.pods, args.reps)
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

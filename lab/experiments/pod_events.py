"""Question: what does one pod watch event cost through the informer path, and which levers
(the conversion, GC thresholds) lower it? Answer: lab/history/performance-history.md,
"Taken: conversion, 27 → 15 µs per pod" and "Measured, not taken: GC thresholds" (in "3. CPU
per pod").

CPU per pod watch event through the extender's informer path, in this process.

    .venv/bin/python -m lab.experiments.pod_events [--pods 1000] [--reps 9] [--profile]
    .venv/bin/python -m lab.experiments.pod_events --against 3ccd12e  # pod_from_k8s then, now
    .venv/bin/python -m lab.experiments.pod_events --gc               # GC thresholds, whole path

Why: a watch event is the extender's most frequent piece of work (about three per pod:
created, bound, Running; two more when it is deleted), and on a shared 2-core machine
an end-to-end run cannot resolve a few microseconds of it. Here the same recorded-like
events go through what the informer runs for them, wired as `serve.py` wires it: the
JSON line parsed (`orjson`), the pods kind of `reporting.kinds.observed_kinds` (the
conversion, `GangManager.on_pod`, the status writer's bookkeeping), then the
dispatcher's `cache_changed`. Nodes and PodGroups are applied first, as after the
informers' initial lists. CPU time (`time.process_time`) per event, over `--reps`
alternating repetitions of every stage, min and median; `--profile` prints a cProfile
of the whole path instead. `--against REV` adds `pod_from_k8s` as of a git revision
(its `convert.py` and `resources.py` loaded beside the current ones) to the stages;
`--gc` times the whole path under several collector thresholds (after `gc.freeze()`,
as the informer does once listed) instead.

The events are those of `bench.core.workload`'s pods (gangs of 8 on 8-CPU nodes, with the
service-account volume and default tolerations the API server adds): each pod created,
bound with `PodScheduled`, Running with its container status, then deleted.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.common import print_min_median
from bench.core.inprocess import Plans, Timings, extender
from bench.core.workload import node_json, pod_json
from extender.core.model.convert import node_from_k8s, pod_from_k8s
from extender.core.model.convert_groups import group_from_k8s
from extender.kube.informer import Informer
from extender.reporting.kinds import observed_kinds
from extender.reporting.status import StatusWriter
from lab.common import source_at

GANG = 8
NODES = 200



def events(pods: int) -> list[bytes]:
    """Watch lines of `pods` gang pods' lives, interleaved as gangs arrive."""
    t = 1_790_000_000.0
    out: list[bytes] = []
    for g in range(0, pods, GANG):
        for phase in ("ADDED", "BOUND", "RUNNING", "DELETED"):
            for i in range(g, min(g + GANG, pods)):
                node = f"node-{i % NODES:05d}" if phase != "ADDED" else ""
                obj = pod_json("bench", f"job-{g // GANG}-{i - g}", f"uid-{i}",
                               {"cpu": "100m", "memory": "64Mi"}, t,
                               group=f"job-{g // GANG}", node=node,
                               phase="Running" if phase in ("RUNNING", "DELETED")
                               else "Pending")
                obj["metadata"]["resourceVersion"] = str(len(out) + 1)
                if phase != "ADDED":
                    obj["status"]["conditions"] = [{
                        "type": "PodScheduled", "status": "True",
                        "lastTransitionTime": "2026-11-24T07:14:49Z"}]
                if phase in ("RUNNING", "DELETED"):
                    obj["status"]["containerStatuses"] = [{
                        "name": "main", "ready": True, "restartCount": 0,
                        "image": "registry.invalid/trainer:1", "imageID": "",
                        "state": {"running": {"startedAt": "2026-11-24T07:14:50Z"}}}]
                etype = {"BOUND": "MODIFIED", "RUNNING": "MODIFIED"}.get(phase, phase)
                out.append(orjson.dumps({"type": etype, "object": obj}))
    return out


def informer() -> tuple[Informer, Callable[[], None]]:
    """An informer wired as the CLI wires it (no API access: it is fed by hand)."""
    clock = time.time
    ext = extender(clock, Timings(), Plans())
    status = StatusWriter(ext.manager.reads, None, clock)
    inf = Informer(None, ext.manager, clock, ext.dispatcher.cache_changed,  # type: ignore[arg-type]
                   kinds=observed_kinds(status))
    for i in range(NODES):
        ext.manager.on_node(node_from_k8s(node_json(i)))
    return inf, ext.dispatcher.cache_changed


def feed(lines: list[bytes]) -> None:
    inf, changed = informer()
    kind = inf.kinds[1]
    groups = {f"job-{i}" for i in range(len(lines) // GANG + 1)}
    for name in groups:
        inf.manager.on_group(group_from_k8s({
            "metadata": {"name": name, "namespace": "bench", "uid": f"pg-{name}",
                         "creationTimestamp": "2026-11-24T07:14:48Z"},
            "spec": {"minMember": GANG}}), time.time())
    apply, delete = inf._apply, kind.delete
    for line in lines:
        event = orjson.loads(line)
        obj = event["object"]
        if event["type"] == "DELETED":
            delete(inf.manager, obj["metadata"]["uid"], time.time())
        else:
            apply(kind, obj)
        changed()




def old_pod_from_k8s(rev: str) -> Callable[[Any], Any]:
    """`pod_from_k8s` of git revision `rev`, its convert and resources modules loaded
    under other names from `git show`."""
    tmp = Path(tempfile.mkdtemp(prefix="pod-events-"))
    for name in ("convert", "resources"):
        src = source_at(rev, name)
        src = src.replace("from extender.core.model.resources import", "from _old_resources import")
        (tmp / f"_old_{name}.py").write_text(src)
    sys.path.insert(0, str(tmp))
    fn: Callable[[Any], Any] = importlib.import_module("_old_convert").pod_from_k8s
    return fn


def gc_thresholds(lines: list[bytes], reps: int) -> None:
    cases: dict[str, tuple[int, int, int] | None] = {
        "(700, 10, 10) default": (700, 10, 10), "(10000, 10, 10)": (10000, 10, 10),
        "(50000, 20, 10)": (50000, 20, 10), "collector off": None}
    out: dict[str, list[float]] = {k: [] for k in cases}
    before = gc.get_threshold()
    try:
        for _ in range(reps):
            for name, threshold in cases.items():
                gc.collect()
                gc.freeze()
                if threshold is None:
                    gc.disable()
                else:
                    gc.enable()
                    gc.set_threshold(*threshold)
                t0 = time.process_time()
                feed(lines)
                out[name].append((time.process_time() - t0) * 1e6 / len(lines))
    finally:
        gc.enable()
        gc.set_threshold(*before)
    print_min_median("whole informer path, CPU µs per event by GC threshold", reps, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--against", metavar="REV", default=None)
    ap.add_argument("--gc", action="store_true")
    args = ap.parse_args(argv)
    lines = events(args.pods)
    objs = [orjson.loads(x)["object"] for x in lines]
    if args.profile:
        prof = cProfile.Profile(time.process_time)
        prof.runcall(feed, lines)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0
    if args.gc:
        gc_thresholds(lines, args.reps)
        return 0

    def parse() -> None:
        for x in lines:
            orjson.loads(x)

    def convert() -> None:
        for o in objs:
            pod_from_k8s(o)

    def whole() -> None:
        feed(lines)

    stages: dict[str, Callable[[], Any]] = {
        "orjson.loads": parse, "pod_from_k8s": convert, "whole informer path": whole}
    if args.against:
        old = old_pod_from_k8s(args.against)
        assert all(old(o) == pod_from_k8s(o) for o in objs)

        def convert_old() -> None:
            for o in objs:
                old(o)

        stages = {f"pod_from_k8s @{args.against}": convert_old, **stages}
    out: dict[str, list[float]] = {k: [] for k in stages}
    for _ in range(args.reps):
        for name, fn in stages.items():
            gc.collect()
            t0 = time.process_time()
            fn()
            out[name].append((time.process_time() - t0) * 1e6 / len(lines))
    print_min_median(f"{len(lines)} events ({args.pods} pods), CPU µs per event",
                     args.reps, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

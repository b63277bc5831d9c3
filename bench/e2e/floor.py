"""The floor of `bench.e2e` (system F): what committing the same pods costs on the same
control plane with no scheduler at all, so that "at the API server's pace" is a ratio.

The pods are created exactly as the systems' are (same pool of client threads, same
order), named to a scheduler nobody serves, so they stay pending. Once the last one exists,
a bare client posts one Binding per pod, `threads` in flight, and the same raw watch the
systems are timed by sees them bound; the fake kubelet then runs them as it runs every
system's. Nodes are taken round-robin, the spread a scheduler's scoring gives pods this
small.

Bare: the harness's lean JSON client (e2e/harness/rawapi.py: one keep-alive connection
per thread, orjson bodies), its connections opened while the pods are being created, so a
TLS handshake is not part of the time. Its threads share the machine's cores with the
control plane as a scheduler would; a Binding costs the client a fraction of a
millisecond against the API server's tens (docs/performance.md), so it is the API server
that sets the pace.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from e2e.harness.rawapi import RawApi

# Bindings in flight: the fastest of 4-160 measured on this machine (1,000 Bindings in
# 4.4 s at 128, 5.8-6.4 at 64, 11.8 at 16, 7.6 at 160; lab/history/performance-history.md,
# "Issue 30: the floor and the done-means commands"). Below the API server's 200 mutating requests
# in flight, which the fake kubelet's writes share. `bench.e2e --floor-threads` changes it.
FLOOR_THREADS = 128


def binding(ns: str, pod: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def assign(pods: Sequence[str], nodes: Sequence[str]) -> list[tuple[str, str]]:
    """(pod, node) pairs, nodes taken in turn."""
    if not nodes:
        raise ValueError(f"no node to bind {len(pods)} pods to")
    return [(p, nodes[i % len(nodes)]) for i, p in enumerate(pods)]


class FloorBinder:
    """`threads` threads, each with its connection open and waiting; `bind` hands them the
    pods and returns once every Binding was answered. One use."""

    def __init__(self, api: RawApi, ns: str, threads: int = FLOOR_THREADS) -> None:
        if threads < 1:
            raise ValueError(f"floor threads must be at least 1, got {threads}")
        self.api, self.ns = api, ns
        self.go = threading.Event()
        self.ready = threading.Barrier(threads + 1)
        self.lock = threading.Lock()
        self.work: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._worker, daemon=True)
                        for _ in range(threads)]
        for t in self.threads:
            t.start()
        self.ready.wait(30)  # every connection open

    def _worker(self) -> None:
        try:  # a cheap read opens (and authenticates) this thread's connection
            self.api.request("GET", f"/api/v1/namespaces/{self.ns}")
        except Exception as exc:
            with self.lock:
                self.errors.append(f"opening a connection: {exc}")
        self.ready.wait(30)
        self.go.wait()
        while True:
            with self.lock:
                if not self.work:
                    return
                pod, node = self.work.pop()
            try:
                self.api.request("POST", f"/api/v1/namespaces/{self.ns}/pods/{pod}/binding",
                                 body=binding(self.ns, pod, node))
            except Exception as exc:  # reported with the run, never hidden
                with self.lock:
                    self.errors.append(f"binding {pod} to {node}: {exc}")

    def bind(self, pairs: Sequence[tuple[str, str]]) -> None:
        self.work = list(reversed(pairs))  # popped from the end: in the given order
        self.go.set()
        for t in self.threads:
            t.join()
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} of {len(pairs)} floor Bindings failed, "
                               f"first: {self.errors[0]}")

"""The soak's hostile mode: the broken and hostile work every shared cluster holds,
created beside the soak's gangs (issue 27), and the two measures that say whether it
cost the others anything.

`HostileStream` creates, every `every` seconds on average, one of:

* an **unplaceable gang** (`gpu`): members asking for 4 GPUs, which no node of the
  soak has; (`selector`) members whose nodeSelector matches no node. Complete, waiting,
  never placeable: they must take no turn, no capacity and no fairness from anyone;
* a **hostile PodGroup** (`huge-min-resources`): `minResources` of `1e30000000` cpu, a
  value the API server stores as written; the CRD may refuse it (then it is counted as
  refused, which is the point of the CRD's bound);
* **junk PodGroups** (`junk-group`): extreme `minMember`, an hours-long
  `scheduleTimeoutSeconds`, a gang with no member at all;
* **hostile pods** (`huge-pod`): requests far beyond any node (`9e18` cpu,
  `1e300000` memory), in a gang of one;
* **orphans** (`orphan`): members of a PodGroup that does not exist, and a pod of the
  gang scheduler pinned with `spec.nodeName` to a node that does not exist.

Every one of them is unplaceable by construction, so the gang scheduler must never
bind one: a hostile pod with a node at the end is an error of the run. Everything is
deleted before the drain's check of the extender's debug view, like the soak's own
impossible gangs.

`StallProbe` asks the active extender's `/healthz` every 50 ms and keeps the longest
answer: the event loop serves `/healthz`, so a loop stalled by one object shows there
as the outside world sees it. Requests that fail (an extender being killed and
restarted by the chaos) are counted apart, not timed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from e2e.harness.k8s import ApiException
from e2e.harness.objects import create_pod
from e2e.harness.process import cpu_seconds
from e2e.harness.target import kube

log = logging.getLogger("soak.hostile")

PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
KINDS = ("gpu", "selector", "huge-min-resources", "junk-group", "huge-pod", "orphan")
HOSTILE_LABEL = "soak-hostile"


@dataclass
class HostileCounts:
    created: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    refused: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    refusals: list[str] = field(default_factory=list)  # the API server's words, a sample
    bound: list[str] = field(default_factory=list)  # hostile pods that got a node


class HostileStream:
    """Creates hostile objects in the soak's namespaces until told to stop."""

    def __init__(self, *, namespaces: list[str], run_id: str, scheduler_name: str,
                 toleration: dict[str, str], node_label: dict[str, str], seed: int,
                 every: float) -> None:
        self.namespaces = namespaces
        self.run_id = run_id
        self.scheduler = scheduler_name
        self.toleration = toleration
        self.node_label = node_label
        self.rng = random.Random(seed * 7919 + 5)
        self.every = every
        self.counts = HostileCounts()
        self.groups: list[tuple[str, str]] = []  # (ns, name) of PodGroups created
        self.pods: list[tuple[str, str]] = []
        self._index = 0

    # ----- the stream --------------------------------------------------------------------

    def run(self, start: float, seconds: float, stop: threading.Event,
            errors: list[str]) -> None:
        """Create one hostile object every ~`every` s until the load ends."""
        if self.every <= 0:
            return
        try:
            while not stop.wait(self.rng.expovariate(1.0 / self.every)):
                if time.monotonic() - start >= seconds:
                    break
                self.create(self.rng.choice(KINDS))
        except Exception as e:
            errors.append(f"hostile: {e!r}"[:4000])
            log.exception("hostile stream failed")

    def create(self, kind: str) -> None:
        self._index += 1
        ns = self.namespaces[self._index % len(self.namespaces)]
        name = f"x{self._index:04d}-{kind}"
        makers: dict[str, Callable[[str, str], None]] = {
            "gpu": self._gpu_gang, "selector": self._selector_gang,
            "huge-min-resources": self._huge_min_resources, "junk-group": self._junk_group,
            "huge-pod": self._huge_pod, "orphan": self._orphans}
        try:
            makers[kind](ns, name)
            self.counts.created[kind] += 1
        except ApiException as e:
            if e.status not in (400, 422):
                raise
            self.counts.refused[kind] += 1
            if len(self.counts.refusals) < 20:
                self.counts.refusals.append(f"{kind}: {str(e.body)[:300]}")

    # ----- the kinds ----------------------------------------------------------------------

    def _group(self, ns: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": f"{PG[0]}/{PG[1]}", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns,
                             "labels": {"soak": self.run_id, HOSTILE_LABEL: "1"}},
                "spec": spec}
        kube().custom.create_namespaced_custom_object(PG[0], PG[1], ns, PG[2], body,
                                                      _preload_content=False)
        self.groups.append((ns, name))

    def _pod(self, ns: str, name: str, *, group: str | None, cpu: str = "100m",
             memory: str = "64Mi", gpus: int = 0, node_selector: dict[str, str] | None = None,
             extra: dict[str, Any] | None = None) -> None:
        create_pod(ns, name, cpu=cpu, memory=memory, gpus=gpus, scheduler_name=self.scheduler,
                   pod_group=group, labels={"soak": self.run_id, HOSTILE_LABEL: "1"},
                   node_selector=node_selector or self.node_label,
                   tolerations=[self.toleration], spec_extra=extra)
        self.pods.append((ns, name))

    def _gpu_gang(self, ns: str, name: str) -> None:
        self._group(ns, name, {"minMember": 3})
        for i in range(3):
            self._pod(ns, f"{name}-{i}", group=name, gpus=4)  # the soak's nodes have none

    def _selector_gang(self, ns: str, name: str) -> None:
        self._group(ns, name, {"minMember": 2})
        for i in range(2):
            self._pod(ns, f"{name}-{i}", group=name,
                      node_selector={**self.node_label, "pool": "no-such-pool"})

    def _huge_min_resources(self, ns: str, name: str) -> None:
        self._group(ns, name, {"minMember": 1, "minResources": {"cpu": "1e30000000"}})
        self._pod(ns, f"{name}-0", group=name)

    def _junk_group(self, ns: str, name: str) -> None:
        spec = self.rng.choice([
            {"minMember": 2_000_000},
            {"minMember": 2, "scheduleTimeoutSeconds": 86_400},
            {"minMember": 5},  # no member ever comes
        ])
        self._group(ns, name, spec)
        if spec["minMember"] != 5:
            self._pod(ns, f"{name}-0", group=name)

    def _huge_pod(self, ns: str, name: str) -> None:
        # kube-apiserver itself parses a pod's quantities in time that grows with the
        # exponent (measured on v1.36.3: 1e3000000 took 2.2 s to create, 1e10000000
        # 13.8 s, 1e30000000 timed out after 34 s), so pods carry the largest values it
        # takes at once; the PodGroup's minResources, which it does not parse, carry
        # the absurd one (`huge-min-resources`).
        cpu, memory = self.rng.choice([("9e18", "64Mi"), ("100m", "1e300000"),
                                       ("1e300000", "64Mi")])
        self._group(ns, name, {"minMember": 1})
        self._pod(ns, f"{name}-0", group=name, cpu=cpu, memory=memory)

    def _orphans(self, ns: str, name: str) -> None:
        self._pod(ns, f"{name}-0", group=f"{name}-missing")
        self._pod(ns, f"{name}-1", group=None, extra={"nodeName": f"{self.run_id}-ghost"})

    # ----- the end -------------------------------------------------------------------------

    def check_unbound(self, node_of: Callable[[str, str], str | None]) -> None:
        """Record every hostile pod that got a node (the ghost-node orphan excepted: it
        names its node itself and is never bound by anyone)."""
        for ns, name in self.pods:
            node = node_of(ns, name)
            if node and not node.endswith("-ghost"):
                self.counts.bound.append(f"{ns}/{name} on {node}")

    def delete_all(self) -> None:
        k = kube()
        for ns, name in self.pods:
            with contextlib.suppress(ApiException):
                k.core.delete_namespaced_pod(name, ns, grace_period_seconds=0,
                                             _preload_content=False)
        for ns, name in self.groups:
            with contextlib.suppress(ApiException):
                k.custom.delete_namespaced_custom_object(PG[0], PG[1], ns, PG[2], name,
                                                         _preload_content=False)

    def summary(self) -> str:
        c = self.counts
        made = ", ".join(f"{k} {c.created[k]}" + (f" (+{c.refused[k]} refused)"
                                                  if c.refused[k] else "") for k in KINDS)
        return f"hostile objects: {made}; bound by mistake: {len(c.bound)}"


class StallProbe:
    """The longest `/healthz` answer of whichever extender `port()` names, and the CPU
    time that extender's process (`pid()`) used while each answer was awaited.

    Why both: an answer's wall time counts every process on the machine (on 2 shared
    cores, a slow answer may only be the extender waiting for a core); the CPU time
    counts only the extender's own work, the part of a loop stall it can be blamed for.
    Resolution: the kernel's clock tick (10 ms)."""

    def __init__(self, port: Callable[[], int], interval: float = 0.05,
                 pid: Callable[[], int | None] = lambda: None) -> None:
        self.port = port
        self.pid = pid
        self.interval = interval
        self.longest = 0.0
        self.longest_cpu = 0.0
        self.answered = 0
        self.failed = 0
        self.over_250ms = 0
        self.cpu_over_250ms = 0
        # (seconds since start, answer took, extender CPU meanwhile or -1 if unknown)
        self.slow: list[tuple[float, float, float]] = []
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StallProbe:
        self._t0 = time.monotonic()  # the load's start, as the chaos timeline's
        self._thread = threading.Thread(target=self._run, daemon=True, name="soak-stall")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        with httpx.Client(timeout=10.0) as http:
            while not self._stop.wait(self.interval):
                pid = self.pid()
                cpu0 = cpu_seconds(pid)
                t0 = time.monotonic()
                try:
                    http.get(f"http://127.0.0.1:{self.port()}/healthz")
                except httpx.HTTPError:
                    self.failed += 1  # killed by the chaos, or starting
                    continue
                took = time.monotonic() - t0
                cpu1 = cpu_seconds(pid)
                cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else -1.0
                self.answered += 1
                self.over_250ms += took > 0.25
                self.cpu_over_250ms += cpu > 0.25
                self.longest = max(self.longest, took)
                self.longest_cpu = max(self.longest_cpu, cpu)
                if took > 0.25 and len(self.slow) < 50:
                    self.slow.append((round(t0 - self._t0, 1), round(took, 3), round(cpu, 3)))


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (0-1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


__all__ = ["HOSTILE_LABEL", "KINDS", "HostileCounts", "HostileStream", "StallProbe",
           "percentile"]

"""The soak's invariant checker: watches every pod and node of the cluster and records
each violation of what the gang scheduler promises.

Invariants, checked on every watch event (bindings are pods gaining `spec.nodeName`):

* **never a partial gang**: a gang's members are bound in one burst of Bindings. The
  API has no multi-object transaction, so between the burst's first and last Binding
  a watcher does see "some but fewer than minMember" bound; the checker allows that
  for `partial_window` seconds (bursts take milliseconds, see `max_burst_seconds` in
  the report) and records a violation when a gang stays short of its quorum longer,
  or is still short when the run ends, before its quorum was first reached.
* **never an over-committed node**: per node, the requests (cpu, memory, pods) of
  every bound pod that has not finished stay within the node's allocatable. Every pod
  counts, whoever scheduled it.
* a pod's node never changes once set.
* **never a partial eviction**: when a bound, unfinished member of a gang is deleted
  (evicted by a preemption, or as part of a partial gang), every other member that was
  bound and unfinished at that moment must be gone (or finished) within
  `partial_window` seconds. The soak itself deletes a gang only once every pod
  succeeded, so nothing else removes a running member.

The watch is a raw LIST + WATCH of all pods (no client models: hundreds of events a
second are cheap); after an error (an API server restart) it lists again and treats
what vanished as deleted, so it converges whatever it missed while the server was down.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from e2e.harness.fakekubelet import _iter_lines
from e2e.harness.k8s import client

log = logging.getLogger("soak.checker")

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

_SUFFIX = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
           "k": 10**3, "M": 10**6, "G": 10**9}


def quantity(value: str, milli: bool = False) -> int:
    """A Kubernetes quantity as an integer (millis when `milli`), for the plain forms
    the soak writes ("250m", "2", "512Mi"). Deliberately not the product's parser."""
    v = str(value).strip()
    scale = 1000 if milli else 1
    if v.endswith("m"):
        return int(v[:-1]) * scale // 1000
    for suffix, mult in _SUFFIX.items():
        if v.endswith(suffix):
            return int(float(v[: -len(suffix)]) * mult) * scale
    return int(float(v) * scale)


def pod_requests(spec: dict[str, Any]) -> tuple[int, int]:
    """(cpu millis, memory bytes) summed over the regular containers; the soak's pods
    have no init containers or overhead."""
    cpu = mem = 0
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += quantity(req.get("cpu", "0"), milli=True)
        mem += quantity(req.get("memory", "0"))
    return cpu, mem


@dataclass
class Violation:
    kind: str  # partial | partial-at-end | overcommit | rebound | partial-eviction
    subject: str
    detail: str
    at: float  # seconds since the checker started

    def __str__(self) -> str:
        return f"[{self.at:7.1f}s] {self.kind} {self.subject}: {self.detail}"


@dataclass
class PodRec:
    uid: str
    ns: str
    name: str
    gang: str | None
    node: str = ""
    phase: str = "Pending"
    cpu: int = 0
    mem: int = 0
    charged: bool = False


@dataclass
class GangRec:
    key: str
    min_member: int
    bound: set[str] = field(default_factory=set)  # uids ever bound
    first_bound_at: float | None = None
    quorum_at: float | None = None
    reported: bool = False
    # (when a running member was deleted, the members bound and running then): each
    # must be gone or finished within the window.
    evictions: list[tuple[float, set[str]]] = field(default_factory=list)


@dataclass
class NodeRec:
    cpu: int
    mem: int
    pods: int
    used_cpu: int = 0
    used_mem: int = 0
    used_pods: int = 0
    over: bool = False


class Checker:
    """Start it before the first gang is created; `register_gang` before its pods."""

    def __init__(self, api_client: Any, partial_window: float = 30.0,
                 node_selector: str | None = None) -> None:
        self.v1 = client.CoreV1Api(api_client)
        self.partial_window = partial_window
        self.node_selector = node_selector
        self.t0 = time.monotonic()
        self.lock = threading.RLock()
        self.pods: dict[str, PodRec] = {}
        self.gangs: dict[str, GangRec] = {}
        self.nodes: dict[str, NodeRec] = {}
        self.violations: list[Violation] = []
        self.events = 0
        self.relists = 0
        self.max_burst = 0.0
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._threads: list[threading.Thread] = []

    # ----- lifecycle ---------------------------------------------------------------------

    def start(self) -> Checker:
        self._load_nodes()
        for target, name in ((self._watch, "soak-checker-watch"),
                             (self._ticker, "soak-checker-tick")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        if not self._synced.wait(60):
            raise TimeoutError("checker: initial LIST of pods did not finish in 60s")
        return self

    def stop(self) -> None:
        """Stop watching and record every gang still short of its quorum."""
        self._stop.set()
        for t in self._threads:
            t.join(10)
        with self.lock:
            for g in self.gangs.values():
                if g.quorum_at is None and g.bound and not g.reported:
                    self._violate("partial-at-end", g.key,
                                  f"{len(g.bound)} of {g.min_member} members bound when the "
                                  "run ended, quorum never reached")
                    g.reported = True

    def register_gang(self, key: str, min_member: int) -> None:
        with self.lock:
            self.gangs.setdefault(key, GangRec(key, min_member))

    def now(self) -> float:
        return time.monotonic() - self.t0

    # ----- queries for the driver ---------------------------------------------------------

    def gang_pods(self, key: str) -> list[PodRec]:
        ns, _, group = key.partition("/")
        with self.lock:
            return [p for p in self.pods.values() if p.ns == ns and p.gang == group]

    def quorum_reached(self, key: str) -> bool:
        with self.lock:
            g = self.gangs.get(key)
            return g is not None and g.quorum_at is not None

    # ----- nodes ---------------------------------------------------------------------------

    def _load_nodes(self) -> None:
        kw = {"label_selector": self.node_selector} if self.node_selector else {}
        items = json.loads(self.v1.list_node(_preload_content=False, **kw).data)["items"]
        with self.lock:
            for n in items:
                alloc = (n.get("status") or {}).get("allocatable") or {}
                name = n["metadata"]["name"]
                old = self.nodes.get(name)
                rec = NodeRec(quantity(alloc.get("cpu", "0"), milli=True),
                              quantity(alloc.get("memory", "0")), int(alloc.get("pods", "0")))
                if old is not None:
                    rec.used_cpu, rec.used_mem, rec.used_pods = (
                        old.used_cpu, old.used_mem, old.used_pods)
                self.nodes[name] = rec

    def refresh_nodes(self) -> None:
        """Read node allocatable again (after the driver added nodes)."""
        self._load_nodes()

    # ----- the watch -------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                resp = self.v1.list_pod_for_all_namespaces(_preload_content=False,
                                                           _request_timeout=(5, 60))
                data = json.loads(resp.data)
                rv = data["metadata"]["resourceVersion"]
                self._replace(data["items"])
                self._synced.set()
                while not self._stop.is_set():
                    stream = self.v1.list_pod_for_all_namespaces(
                        watch=True, resource_version=rv, allow_watch_bookmarks=True,
                        timeout_seconds=60, _preload_content=False, _request_timeout=(5, 90))
                    try:
                        for line in _iter_lines(stream):
                            ev = json.loads(line)
                            obj = ev["object"]
                            if ev["type"] == "ERROR":
                                raise RuntimeError(f"watch error: {obj.get('message')}")
                            rv = obj["metadata"].get("resourceVersion", rv)
                            if ev["type"] == "BOOKMARK":
                                continue
                            if ev["type"] == "DELETED":
                                self._deleted(obj["metadata"]["uid"])
                            else:
                                self._observe(obj)
                            if self._stop.is_set():
                                return
                    finally:
                        with contextlib.suppress(Exception):
                            stream.release_conn()
            except Exception as e:
                if self._stop.is_set():
                    return
                log.info("checker watch ended (%r); relisting", e)
                self.relists += 1
                time.sleep(0.5)

    def _replace(self, items: list[dict[str, Any]]) -> None:
        with self.lock:
            present = {o["metadata"]["uid"] for o in items}
            for uid in [u for u in self.pods if u not in present]:
                self._deleted(uid)
            for o in items:
                self._observe(o)

    def _observe(self, obj: dict[str, Any]) -> None:
        md, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        uid = md["uid"]
        node = spec.get("nodeName") or ""
        phase = st.get("phase") or "Pending"
        with self.lock:
            self.events += 1
            rec = self.pods.get(uid)
            if rec is None:
                cpu, mem = pod_requests(spec)
                rec = self.pods[uid] = PodRec(uid, md["namespace"], md["name"],
                                              (md.get("labels") or {}).get(GROUP_LABEL),
                                              cpu=cpu, mem=mem)
            if rec.node and node and node != rec.node:
                self._violate("rebound", f"{rec.ns}/{rec.name}",
                              f"node changed from {rec.node} to {node}")
            newly_bound = bool(node) and not rec.node
            rec.node = node or rec.node
            rec.phase = phase
            terminal = phase in ("Succeeded", "Failed")
            if rec.node and not terminal and not rec.charged:
                self._charge(rec, +1)
            elif rec.charged and terminal:
                self._charge(rec, -1)
            if newly_bound and rec.gang:
                self._bound(rec)

    def _deleted(self, uid: str) -> None:
        with self.lock:
            rec = self.pods.pop(uid, None)
            if rec is not None and rec.charged:
                self._charge(rec, -1)
                g = self.gangs.get(f"{rec.ns}/{rec.gang}") if rec.gang else None
                if g is not None:
                    others = {p.uid for p in self.pods.values()
                              if p.ns == rec.ns and p.gang == rec.gang and p.charged}
                    if others:
                        g.evictions.append((self.now(), others))

    def _charge(self, rec: PodRec, sign: int) -> None:
        rec.charged = sign > 0
        n = self.nodes.get(rec.node)
        if n is None:
            return
        n.used_cpu += sign * rec.cpu
        n.used_mem += sign * rec.mem
        n.used_pods += sign
        over = n.used_cpu > n.cpu or n.used_mem > n.mem or n.used_pods > n.pods
        if over and not n.over:
            self._violate("overcommit", rec.node,
                          f"cpu {n.used_cpu}m/{n.cpu}m, memory {n.used_mem >> 20}Mi/"
                          f"{n.mem >> 20}Mi, pods {n.used_pods}/{n.pods} after "
                          f"{rec.ns}/{rec.name} was bound")
        n.over = over

    def _bound(self, rec: PodRec) -> None:
        key = f"{rec.ns}/{rec.gang}"
        g = self.gangs.get(key)
        if g is None:
            return  # not a soak gang
        g.bound.add(rec.uid)
        t = self.now()
        if g.first_bound_at is None:
            g.first_bound_at = t
        if g.quorum_at is None and len(g.bound) >= g.min_member:
            g.quorum_at = t
            self.max_burst = max(self.max_burst, t - g.first_bound_at)

    def _ticker(self) -> None:
        while not self._stop.wait(0.5):
            self.check_windows()

    def check_windows(self, t: float | None = None) -> None:
        """Record gangs short of their quorum for longer than the burst window."""
        t = self.now() if t is None else t
        with self.lock:
            for g in self.gangs.values():
                if (g.quorum_at is None and g.first_bound_at is not None
                        and not g.reported and t - g.first_bound_at > self.partial_window):
                    self._violate("partial", g.key,
                                  f"{len(g.bound)} of {g.min_member} members bound for "
                                  f"{t - g.first_bound_at:.1f}s without reaching quorum")
                    g.reported = True

            for g in self.gangs.values():
                for at, others in list(g.evictions):
                    if t - at <= self.partial_window:
                        continue
                    g.evictions.remove((at, others))
                    left = sorted(self.pods[u].name for u in others
                                  if u in self.pods and self.pods[u].charged)
                    if left:
                        self._violate("partial-eviction", g.key,
                                      f"a running member was deleted {t - at:.1f}s ago and "
                                      f"{', '.join(left)} still run")

    def _violate(self, kind: str, subject: str, detail: str) -> None:
        v = Violation(kind, subject, detail, self.now())
        self.violations.append(v)
        log.error("VIOLATION %s", v)

"""The soak's invariant checker: watches every pod and node of the cluster and records
each violation of what the gang scheduler promises.

Invariants, checked on every watch event (bindings are pods gaining `spec.nodeName`):

* **never a partial bind**: a gang's members are bound in one burst of Bindings. The
  API has no multi-object transaction, so between the burst's first and last Binding
  a watcher does see "some but fewer than minMember" bound; the checker allows that
  for `partial_window` seconds (bursts take milliseconds, see `max_burst_seconds` in
  the report) and records a violation (`partial`) when a gang stays short of its quorum
  longer, or (`partial-at-end`) is still short when the run ends, before its quorum was
  first reached.
* **no partial gang outlives recovery** (`partial-gang`): at any time, not only before
  the first quorum, a gang with 0 < bound members < minMember (bound: the pod exists and
  has a node, whatever its phase) must not stay so longer than a grace of
  `partial_grace_factor` x its PodGroup's `scheduleTimeoutSeconds` (the extender's
  `--default-timeout` when the PodGroup sets none). A commit cut short (the leader
  killed between two Bindings) leaves such a gang; the extender must complete it or
  evict its bound members within that time. Members deleted by the driver when the gang
  is done do not count (`gang_deleted`).
* **no node over-committed by a gang commit** (`overcommit`): per node, the requests
  (cpu, memory, pods) of every bound pod that has not finished, whoever placed it, must
  fit the node's allocatable. The watch delivers events in the API server's order, so
  the checker knows which binding took a node from fitting to exceeding. If it was a
  neighbour's (a pod created with `spec.nodeName`, or one the default scheduler
  placed), the neighbour did it: information (`overcommit-by-direct` /
  `-by-scheduled` in `notes`), not a violation. If it was a gang member's, the gang
  commit did it, and it is a violation unless it is a race: Bindings of two schedulers
  that land within milliseconds of each other cannot see each other (the API checks no
  capacity), so when the node would still fit without the neighbours bound less than
  `race_window` seconds before the commit began (the gang's first Binding of its quorum
  burst; an elastic extra's own Binding), it is noted as `overcommit-race` instead. A
  neighbour that took the capacity earlier than that was in the extender's view when it
  committed. `race_window=0` makes every such over-commit a violation. A gang member
  bound onto a node a neighbour had already over-committed did not make it exceed:
  noted (`gang-onto-overcommitted`).
* a pod's node never changes once set (`rebound`).
* **never a partial eviction** (`partial-eviction`): when a bound, unfinished member of a
  gang is evicted through the Eviction API (its status shows DisruptionTarget,
  EvictionByEvictionAPI: a preemption's victim, or a partial gang's eviction), every
  other member bound and unfinished at that moment must be gone (or finished) within
  `partial_window` seconds: the extender evicts gangs whole. A member deleted otherwise
  falls under `partial-gang`.

The watch is a raw LIST + WATCH of all pods (no client models: hundreds of events a
second are cheap); after an error (an API server restart) it lists again and treats
what vanished as deleted, so it converges whatever it missed while the server was down.
What happened while the watch was down comes without its order: on a relist the checker
first releases pods that finished, then charges the neighbours bound meanwhile, then
the gang members, so an over-commit among them is blamed on the gang (marked
"(relist)"; no race exemption, the times are unknown).
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
NEIGHBOUR_LABEL = "soak-neighbour"
"""Set by the driver on neighbour pods: `direct` (created with `spec.nodeName`) or
`scheduled` (placed by the default scheduler)."""

NOTES_KEPT = 50
"""Informational records kept in full (all are counted): a long run with many
neighbour over-commits must not grow without bound."""

_SUFFIX = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
           "k": 10**3, "M": 10**6, "G": 10**9}


HUGE = (1 << 63) - 1  # what a hostile quantity counts as here: more than any node has


def quantity(value: str, milli: bool = False) -> int:
    """A Kubernetes quantity as an integer (millis when `milli`), for the plain forms
    the soak writes ("250m", "2", "512Mi"). Deliberately not the product's parser. The
    hostile mode's absurd values ("1e300000", "9e18") count as `HUGE`: a watch that
    raised on them would relist forever and blur every timing the checker keeps."""
    try:
        return min(HUGE, _quantity(value, milli))
    except (ValueError, OverflowError):
        return HUGE


def _quantity(value: str, milli: bool) -> int:
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
    # partial | partial-at-end | partial-gang | partial-eviction | overcommit | rebound;
    # for notes:
    # overcommit-by-direct | overcommit-by-scheduled | overcommit-by-other |
    # overcommit-race | gang-onto-overcommitted
    kind: str
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
    kind: str = "other"  # gang | direct | scheduled | other
    node: str = ""
    phase: str = "Pending"
    cpu: int = 0
    mem: int = 0
    charged: bool = False
    bound_at: float | None = None
    # The Eviction API marked it (condition DisruptionTarget, EvictionByEvictionAPI): the
    # extender evicted it, and evicts gangs whole (`partial-eviction`).
    evicted: bool = False


def _evicted(status: dict[str, Any]) -> bool:
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               and c.get("reason") == "EvictionByEvictionAPI"
               for c in status.get("conditions") or [] if isinstance(c, dict))


@dataclass
class GangRec:
    key: str
    min_member: int
    timeout: float  # scheduleTimeoutSeconds, or the extender's default
    bound: set[str] = field(default_factory=set)  # uids ever bound
    live: set[str] = field(default_factory=set)  # uids bound and not deleted
    first_bound_at: float | None = None
    quorum_at: float | None = None
    reported: bool = False
    partial_since: float | None = None  # 0 < live < min_member since then
    partial_reported: bool = False
    deleted: bool = False  # the driver deleted it: its members leaving is no partial gang
    vanished: int = 0  # members deleted by someone else while the gang was alive
    # (when a running member was deleted by someone else, the members bound and running
    # then): each must be gone or finished within the window (`partial-eviction`).
    evictions: list[tuple[float, set[str]]] = field(default_factory=list)


@dataclass
class NodeRec:
    cpu: int
    mem: int
    pods: int
    used_cpu: int = 0
    used_mem: int = 0
    used_pods: int = 0

    def exceeded(self) -> bool:
        return self.used_cpu > self.cpu or self.used_mem > self.mem or self.used_pods > self.pods

    def usage(self) -> str:
        return (f"cpu {self.used_cpu}m/{self.cpu}m, memory {self.used_mem >> 20}Mi/"
                f"{self.mem >> 20}Mi, pods {self.used_pods}/{self.pods}")


class Checker:
    """Start it before the first gang is created; `register_gang` before its pods.

    `gang_scheduler` is the gang profile's schedulerName: its pods are gang pods even
    without a PodGroup label. `default_timeout` is the extender's `--default-timeout`,
    the timeout of a PodGroup without `scheduleTimeoutSeconds`. `race_window`: see
    the module docstring."""

    def __init__(self, api_client: Any, partial_window: float = 30.0,
                 node_selector: str | None = None, *, partial_grace_factor: float = 2.0,
                 default_timeout: float = 60.0, gang_scheduler: str | None = None,
                 race_window: float = 0.5) -> None:
        self.v1 = client.CoreV1Api(api_client)
        self.partial_window = partial_window
        self.race_window = race_window
        self.partial_grace_factor = partial_grace_factor
        self.default_timeout = default_timeout
        self.gang_scheduler = gang_scheduler
        self.node_selector = node_selector
        self.t0 = time.monotonic()
        self.lock = threading.RLock()
        self.pods: dict[str, PodRec] = {}
        self.gangs: dict[str, GangRec] = {}
        self.nodes: dict[str, NodeRec] = {}
        self.violations: list[Violation] = []
        self.notes: list[Violation] = []
        self.note_counts: dict[str, int] = {}
        self.events = 0
        self.relists = 0
        self.max_burst = 0.0
        self.max_partial = 0.0  # longest 0 < bound < minMember episode of any gang
        self._relisting = False
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
        for thread in self._threads:
            thread.join(10)
        with self.lock:
            t = self.now()
            self.check_windows(t)
            for g in self.gangs.values():
                if g.quorum_at is None and g.bound and not g.reported:
                    self._violate("partial-at-end", g.key,
                                  f"{len(g.bound)} of {g.min_member} members bound when the "
                                  "run ended, quorum never reached")
                    g.reported = g.partial_reported = True  # one fact, one violation
                if g.partial_since is not None and not g.partial_reported:
                    self._violate("partial-gang", g.key,
                                  f"{len(g.live)} of {g.min_member} members bound when the "
                                  f"run ended (for {t - g.partial_since:.1f}s)")
                    g.partial_reported = True

    def register_gang(self, key: str, min_member: int, timeout: float | None = None) -> None:
        """A gang of the run; `timeout` is its PodGroup's scheduleTimeoutSeconds."""
        with self.lock:
            self.gangs.setdefault(key, GangRec(
                key, min_member, float(timeout) if timeout else self.default_timeout))

    def gang_deleted(self, key: str) -> None:
        """The driver deletes the gang (done, impossible, or the run ends): its members
        vanishing one by one from now on is no partial gang."""
        with self.lock:
            g = self.gangs.get(key)
            if g is not None:
                self._partial_ends(g, self.now())
                g.deleted = True

    def now(self) -> float:
        return time.monotonic() - self.t0

    # ----- queries for the driver ---------------------------------------------------------

    def gang_pods(self, key: str) -> list[PodRec]:
        ns, _, group = key.partition("/")
        with self.lock:
            return [p for p in self.pods.values() if p.ns == ns and p.gang == group]

    def namespace_pods(self, ns: str) -> list[PodRec]:
        with self.lock:
            return [p for p in self.pods.values() if p.ns == ns]

    def gang_vanished(self, key: str) -> int:
        """Members deleted by someone other than the driver (an eviction by the
        extender's recovery): the driver replaces them, as a Job controller would."""
        with self.lock:
            g = self.gangs.get(key)
            return g.vanished if g is not None else 0

    def quorum_reached(self, key: str) -> bool:
        with self.lock:
            g = self.gangs.get(key)
            return g is not None and g.quorum_at is not None

    def node_free(self, node: str) -> tuple[int, int]:
        """(cpu millis, memory bytes) of `node` not requested by a bound, unfinished
        pod, as the watch last saw it; (0, 0) for a node the checker does not know."""
        with self.lock:
            n = self.nodes.get(node)
            if n is None:
                return 0, 0
            return max(0, n.cpu - n.used_cpu), max(0, n.mem - n.used_mem)

    def counts(self) -> dict[str, int]:
        """Violations and notes by kind."""
        with self.lock:
            out: dict[str, int] = {}
            for v in self.violations:
                out[v.kind] = out.get(v.kind, 0) + 1
            for kind, n in self.note_counts.items():
                out[kind] = out.get(kind, 0) + n
            return out

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
        """A relist: what vanished is deleted; then, since the order of what happened
        meanwhile is lost, pods that finished release their requests first, neighbours
        bound meanwhile are charged next and gang members last (an over-commit among
        them is blamed on the gang: a possible false positive, never a miss)."""

        def order(o: dict[str, Any]) -> int:
            phase = (o.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                return 0
            return 2 if self._kind(o) == "gang" else 1

        with self.lock:
            present = {o["metadata"]["uid"] for o in items}
            for uid in [u for u in self.pods if u not in present]:
                self._deleted(uid)
            self._relisting = True
            try:
                for o in sorted(items, key=order):
                    self._observe(o)
            finally:
                self._relisting = False

    def _kind(self, obj: dict[str, Any]) -> str:
        md, spec = obj["metadata"], obj.get("spec") or {}
        labels = md.get("labels") or {}
        if labels.get(NEIGHBOUR_LABEL) in ("direct", "scheduled"):
            return str(labels[NEIGHBOUR_LABEL])
        if GROUP_LABEL in labels or (
                self.gang_scheduler is not None
                and spec.get("schedulerName") == self.gang_scheduler):
            return "gang"
        return "other"

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
                                              kind=self._kind(obj), cpu=cpu, mem=mem)
            if rec.node and node and node != rec.node:
                self._violate("rebound", f"{rec.ns}/{rec.name}",
                              f"node changed from {rec.node} to {node}")
            newly_bound = bool(node) and not rec.node
            rec.node = node or rec.node
            rec.phase = phase
            rec.evicted = rec.evicted or _evicted(st)
            if newly_bound:
                rec.bound_at = self.now()
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
            if rec is None:
                return
            if rec.charged:
                self._charge(rec, -1)
            g = self.gangs.get(f"{rec.ns}/{rec.gang}") if rec.gang else None
            if g is not None and not g.deleted:
                g.vanished += 1
                g.live.discard(rec.uid)
                self._partial_update(g, self.now())
                if rec.evicted and rec.node and rec.phase not in ("Succeeded", "Failed"):
                    others = {p.uid for p in self.pods.values()
                              if p.ns == rec.ns and p.gang == rec.gang and p.charged}
                    if others:
                        g.evictions.append((self.now(), others))

    def _charge(self, rec: PodRec, sign: int) -> None:
        rec.charged = sign > 0
        n = self.nodes.get(rec.node)
        if n is None:
            return
        before = n.exceeded()
        n.used_cpu += sign * rec.cpu
        n.used_mem += sign * rec.mem
        n.used_pods += sign
        if sign < 0 or not n.exceeded():
            return
        if not before:
            self._overcommitted(rec, n)
        elif rec.kind == "gang":
            self._note("gang-onto-overcommitted", rec.node,
                       f"{n.usage()} after gang member {rec.ns}/{rec.name} was bound to a "
                       f"node already over-committed; {self._occupants(rec.node)}")

    def _overcommitted(self, rec: PodRec, n: NodeRec) -> None:
        """`rec`'s binding took the node from fitting to exceeding: whose fault."""
        how = " (relist)" if self._relisting else ""
        detail = (f"{n.usage()} after {rec.kind} pod {rec.ns}/{rec.name} "
                  f"({rec.cpu}m) was bound{how}; {self._occupants(rec.node)}")
        if rec.kind != "gang":
            self._note(f"overcommit-by-{rec.kind}", rec.node, detail)
        elif self._relisting or self._fits_without_racers(rec, n) is None:
            self._violate("overcommit", rec.node, detail)
        else:
            start = self._commit_start(rec)
            self._note("overcommit-race", rec.node,
                       f"{detail}; fits without the neighbours bound within "
                       f"{self.race_window:g}s before the commit began "
                       f"({self.now() - start:.2f}s ago)")

    def _commit_start(self, rec: PodRec) -> float:
        """When the commit that binds `rec` began, as the watch can tell: the gang's
        first Binding while its quorum is still being bound (the extender decided to
        commit then), else (an elastic extra, a plain pod) this Binding."""
        g = self.gangs.get(f"{rec.ns}/{rec.gang}") if rec.gang else None
        if g is not None and g.quorum_at is None and g.first_bound_at is not None:
            return g.first_bound_at
        return rec.bound_at if rec.bound_at is not None else self.now()

    def _fits_without_racers(self, rec: PodRec, n: NodeRec) -> list[PodRec] | None:
        """The neighbours bound less than `race_window` before `rec`'s commit began, if
        the node fits without them (the over-commit is their race with the commit);
        None if it would exceed anyway (the extender saw enough to know better)."""
        if self.race_window <= 0:
            return None
        since = self._commit_start(rec) - self.race_window
        racers = [p for p in self.pods.values()
                  if p.node == rec.node and p.charged and p.kind != "gang"
                  and p.bound_at is not None and p.bound_at > since]
        if not racers:
            return None
        cpu = n.used_cpu - sum(p.cpu for p in racers)
        mem = n.used_mem - sum(p.mem for p in racers)
        pods = n.used_pods - len(racers)
        return racers if cpu <= n.cpu and mem <= n.mem and pods <= n.pods else None

    def _occupants(self, node: str) -> str:
        """Evidence: what holds the node's cpu, the neighbours by name with how long
        before now they were bound (a neighbour bound just before the gang's Binding is
        a race no bind-time check can close; one bound seconds before is not)."""
        now = self.now()
        gang_cpu = 0
        gangs: set[str] = set()
        others = []
        for p in self.pods.values():
            if p.node != node or not p.charged:
                continue
            if p.kind == "gang":
                gang_cpu += p.cpu
                gangs.add(f"{p.ns}/{p.gang}")
            else:
                age = f"{now - p.bound_at:.2f}s ago" if p.bound_at is not None else "?"
                others.append(f"{p.kind} {p.name} {p.cpu}m bound {age}")
        return (f"gang pods {gang_cpu}m of {sorted(gangs)}; neighbours: "
                f"{', '.join(others) or 'none'}")

    def _bound(self, rec: PodRec) -> None:
        key = f"{rec.ns}/{rec.gang}"
        g = self.gangs.get(key)
        if g is None:
            return  # not a soak gang
        g.bound.add(rec.uid)
        g.live.add(rec.uid)
        t = rec.bound_at if rec.bound_at is not None else self.now()
        if g.first_bound_at is None:
            g.first_bound_at = t
        if g.quorum_at is None and len(g.bound) >= g.min_member:
            g.quorum_at = t
            self.max_burst = max(self.max_burst, t - g.first_bound_at)
        self._partial_update(g, t)

    def _partial_update(self, g: GangRec, t: float) -> None:
        if g.deleted:
            return
        if 0 < len(g.live) < g.min_member:
            if g.partial_since is None:
                g.partial_since, g.partial_reported = t, False
        else:
            self._partial_ends(g, t)

    def _partial_ends(self, g: GangRec, t: float) -> None:
        if g.partial_since is not None:
            self.max_partial = max(self.max_partial, t - g.partial_since)
            g.partial_since = None

    def grace(self, g: GangRec) -> float:
        return self.partial_grace_factor * g.timeout

    def _ticker(self) -> None:
        while not self._stop.wait(0.5):
            self.check_windows()

    def check_windows(self, t: float | None = None) -> None:
        """Record gangs short of their quorum for longer than the burst window, and
        gangs partially bound for longer than their recovery grace."""
        t = self.now() if t is None else t
        with self.lock:
            for g in self.gangs.values():
                if (g.quorum_at is None and g.first_bound_at is not None
                        and not g.reported and t - g.first_bound_at > self.partial_window):
                    self._violate("partial", g.key,
                                  f"{len(g.bound)} of {g.min_member} members bound for "
                                  f"{t - g.first_bound_at:.1f}s without reaching quorum")
                    g.reported = True
                if g.partial_since is None or g.deleted:
                    continue
                self.max_partial = max(self.max_partial, t - g.partial_since)
                if not g.partial_reported and t - g.partial_since > self.grace(g):
                    self._violate("partial-gang", g.key,
                                  f"{len(g.live)} of {g.min_member} members bound for "
                                  f"{t - g.partial_since:.1f}s (grace {self.grace(g):.0f}s = "
                                  f"{self.partial_grace_factor:g} x timeout {g.timeout:g}s)")
                    g.partial_reported = True

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

    def _note(self, kind: str, subject: str, detail: str) -> None:
        self.note_counts[kind] = self.note_counts.get(kind, 0) + 1
        v = Violation(kind, subject, detail, self.now())
        if len(self.notes) < NOTES_KEPT:
            self.notes.append(v)
        log.info("note %s", v)

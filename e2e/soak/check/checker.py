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
  capacity), so when the node would still fit without the neighbours bound after, or
  less than `race_window` seconds before, the moment the extender decided that Binding,
  it is noted as `overcommit-race` instead. That moment is the Binding's own
  `gang-extender.x-k8s.io/decided-at` annotation (the extender decides every Binding
  right before it sends it); for a pod without one, the gang's first Binding of its
  quorum burst, or an elastic extra's own Binding. A neighbour that took the capacity
  earlier than that was in the extender's view when it decided. `race_window=0` makes
  every such over-commit a violation. A gang member
  bound onto a node a neighbour had already over-committed did not make it exceed:
  noted (`gang-onto-overcommitted`).
* a pod's node never changes once set (`rebound`).
* **never a partial eviction** (`partial-eviction`): when a bound, unfinished member of a
  gang is evicted through the Eviction API (its status shows DisruptionTarget,
  EvictionByEvictionAPI: a preemption's victim, or a partial gang's eviction), every
  other member bound and unfinished at that moment must be gone (or finished) within
  `partial_window` seconds: the extender evicts gangs whole. A member deleted otherwise
  falls under `partial-gang`.

The watch and its relists are described in pod_watch.py; the rules in invariants.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from e2e.harness.k8s import client

from .pod_watch import PodWatch
from .records import GangRec, NodeRec, PodRec, Violation


class Checker(PodWatch):
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
        self.wall0 = time.time()
        self.decided_seen = 0
        self.decided_missing = 0
        self.decided_lag_max = 0.0
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

    def _ticker(self) -> None:
        while not self._stop.wait(0.5):
            self.check_windows()

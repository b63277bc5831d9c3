"""The soak's neighbours: pods of no gang on the gangs' nodes, placed by the default
scheduler or created with `spec.nodeName`, part of them aimed at nodes where a gang
holds capacity. Apart from the gangs because they are the cluster's other tenants, on
a stream and a budget of their own, and what they do is judged differently (checker)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from e2e.harness.objects import create_pod
from e2e.harness.target import kube

from .check.checker import Checker
from .check.records import NEIGHBOUR_LABEL
from .config import SoakConfig
from .load import Neighbour
from .names import RunNames
from .results import SoakReport
from .retry import retry

log = logging.getLogger("soak")


class Neighbours:
    """The neighbour stream of one run, on `nodes` (the stack's). `active_view` reads
    the active extender's `/debug/gangs`, where gangs hold capacity right now; `pods`
    holds the neighbours that exist, by name."""

    def __init__(self, cfg: SoakConfig, names: RunNames, nodes: list[str], checker: Checker,
                 report: SoakReport, active_view: Callable[[], dict[str, Any]]) -> None:
        self._cfg = cfg
        self._names = names
        self._nodes = nodes
        self._checker = checker
        self._report = report
        self._active_view = active_view
        self.pods: dict[str, Neighbour] = {}

    def held_nodes(self) -> set[str]:
        """Nodes where a gang holds capacity right now, from the active extender's view:
        its reservations' slots and its held binds."""
        try:
            d = self._active_view()
        except Exception:
            return set()
        held = {s.get("node") for r in d.get("reservations") or [] for s in r.get("slots") or []}
        held |= {b.get("node") for b in d.get("waitingBinds") or []}
        return {n for n in held if isinstance(n, str) and n in self._nodes}

    def _wait_held(self, stop: threading.Event) -> list[str]:
        """Nodes a gang holds capacity on, waiting up to `target_wait` for some: holds
        come and go within seconds, and a pod aimed at one is the point."""
        deadline = time.monotonic() + self._cfg.target_wait
        while True:
            held = sorted(self.held_nodes())
            if held or time.monotonic() >= deadline or stop.is_set():
                return held
            time.sleep(0.2)

    def create(self, rng: random.Random, index: int, stop: threading.Event) -> None:
        """One pod of no gang on the gangs' nodes: through the default scheduler, or
        created with spec.nodeName (no scheduler, no capacity check), part of those on a
        node where a gang holds capacity, taking most of what is free there."""
        cfg, names, nb = self._cfg, self._names, self._report.neighbours
        direct = rng.random() < cfg.direct_fraction
        cpu_m = rng.randint(*cfg.neighbour_cpu_m)
        mem_mi = rng.randint(*cfg.neighbour_memory_mi)
        run_s = round(rng.uniform(*cfg.neighbour_run_seconds), 1)
        name = f"nb{index:05d}"
        kind = "direct" if direct else "scheduled"
        labels = {**names.node_label, NEIGHBOUR_LABEL: kind}
        if direct:
            held = self._wait_held(stop) if rng.random() < cfg.direct_targeted_fraction else []
            node = rng.choice(held or self._nodes)
            free_cpu, free_mem = self._checker.node_free(node)
            if held:
                cpu_m = int(free_cpu * rng.uniform(0.5, 1.0))
            cpu_m = min(cpu_m, free_cpu) // 10 * 10
            mem_mi = min(mem_mi, free_mem >> 20)
            if cpu_m < 100 or mem_mi < 16:
                nb["direct_skipped_full"] += 1
                return
            retry(lambda: create_pod(
                names.aux_ns, name, cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi", run_seconds=run_s,
                labels=labels, tolerations=[names.toleration], spec_extra={"nodeName": node}),
                f"create neighbour {name}")
            nb["direct"] += 1
            nb["direct_at_held"] += bool(held)
        else:
            retry(lambda: create_pod(
                names.aux_ns, name, cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi", run_seconds=run_s,
                labels=labels, scheduler_name="default-scheduler",
                node_selector=names.node_label, tolerations=[names.toleration]),
                f"create neighbour {name}")
            nb["scheduled"] += 1
        self.pods[name] = Neighbour(name, kind, time.monotonic(), bound=direct)

    def reap(self, pending_timeout: float | None = None) -> None:
        """Delete neighbours that finished, and default-scheduler ones still unbound
        after `pending_timeout` (the load must not pile up pods nobody can place)."""
        aux_ns = self._names.aux_ns
        timeout = (self._cfg.neighbour_pending_timeout if pending_timeout is None
                   else pending_timeout)
        seen = {p.name: p for p in self._checker.namespace_pods(aux_ns)}
        now = time.monotonic()
        for nb in list(self.pods.values()):
            p = seen.get(nb.name)
            if p is not None and p.node and not nb.bound:
                nb.bound = True
                self._report.neighbours["scheduled_bound"] += 1
            finished = p is not None and p.phase in ("Succeeded", "Failed")
            expired = not nb.bound and now - nb.created_at > timeout
            if not (finished or expired):
                continue
            retry(lambda nb=nb: kube().core.delete_namespaced_pod(  # type: ignore[misc]
                nb.name, aux_ns, grace_period_seconds=0, _preload_content=False),
                f"delete neighbour {nb.name}")
            del self.pods[nb.name]
            self._report.neighbours["scheduled_expired"] += expired and not finished

    def stream(self, start: float, seconds: float, stop: threading.Event) -> None:
        """Create neighbours for `seconds` from `start` or until `stop` (the load's
        end), whichever comes first (a worker thread)."""
        cfg = self._cfg
        if cfg.neighbour_every <= 0:
            return
        rng = random.Random(cfg.seed * 7919 + 3)
        index = 0
        try:
            while not stop.wait(rng.expovariate(1.0 / cfg.neighbour_every)):
                if time.monotonic() - start >= seconds:
                    break
                self.reap()
                if len(self.pods) < cfg.max_neighbours:
                    self.create(rng, index, stop)
                    index += 1
        except Exception as e:
            self._report.errors.append(f"neighbours: {e!r}"[:4000])
            log.exception("neighbours failed")

    def delete_all(self) -> None:
        """Every neighbour at once (the drain: bound ones may not run out in time)."""
        retry(lambda: kube().core.delete_collection_namespaced_pod(
            self._names.aux_ns, grace_period_seconds=0, _preload_content=False),
            "delete neighbours")
        self.pods.clear()

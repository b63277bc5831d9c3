"""The state one soak run shares between its parts: the cluster, the config, the report,
the gangs and neighbours created, the replicas and who leads, the checker and the
probes; and the few reads every part needs (the leader, its debug view). Apart so that
each job of the run (stack, gangs, neighbours, lease, chaos, measures) can live in a
module of its own as a mixin over this one state, with `Soak` (driver.py) combining them.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any

from e2e.harness.cluster import ControlPlane
from e2e.harness.fakenodes import FakeNodes
from e2e.harness.k8s import client
from e2e.harness.process import ManagedProcess

from .check.checker import Checker
from .config import SoakConfig
from .cut import ApiCut
from .hostile import HostileStream, StallProbe
from .load import GangRun, Neighbour
from .results import SoakReport

LEASE = "gang-scheduler"
"""The replicas' leader-election Lease (in the run's `-nb` namespace, so that a run
never waits for the lease of an earlier one to expire)."""


@dataclass
class Replica:
    """One (extender + kube-scheduler) pair; `hostname` is its kube-scheduler's
    hostname, hence the prefix of its Lease holder identity, and the extender's
    `--leader-identity`."""

    index: int
    hostname: str
    port: int
    extender: ManagedProcess
    scheduler: ManagedProcess


class SoakState:
    def __init__(self, cluster: ControlPlane, cfg: SoakConfig) -> None:
        if cfg.replicas not in (1, 2):
            raise ValueError(f"replicas must be 1 or 2, not {cfg.replicas}")
        self.cluster = cluster
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)  # gangs (load thread only)
        self.chaos_rng = random.Random(cfg.seed * 7919 + 2)  # outages (chaos only)
        self.run_id = f"soak-{cfg.seed}-{secrets.token_hex(2)}"
        self.scheduler_name = f"{self.run_id}-scheduler"
        self.namespaces = [f"{self.run_id}-{c}" for c in "abc"]
        self.aux_ns = f"{self.run_id}-nb"  # neighbours and the Lease
        self.report = SoakReport(cfg.seed, cfg.minutes, replicas=cfg.replicas,
                                 race_window=cfg.race_window,
                                 extender_args=list(cfg.extender_args))
        self.gangs: dict[str, GangRun] = {}
        self.nodes: list[str] = []
        self.node_api = FakeNodes(cluster.api_client())
        self.coordination = client.CoordinationV1Api(cluster.api_client())
        self.checker: Checker | None = None
        self.replicas: list[Replica] = []
        self.default_scheduler: ManagedProcess | None = None  # only if the soak started it
        self.api_cut: ApiCut | None = None  # the extenders' way to the API (watch cuts)
        self.neighbours: dict[str, Neighbour] = {}
        self._chaos_stop = threading.Event()
        self._chaos_lock = threading.Lock()
        self._rss_stop = threading.Event()
        self._rss: list[tuple[int, float, float]] = []  # (pid, t, MiB)
        self._leader: int | None = None  # index of the replica holding the Lease
        self._holder = ""
        self._dead_holders: set[str] = set()  # holder identities of killed schedulers
        self._lease_changes: list[tuple[float, str]] = []  # (monotonic, holder)
        self._leader_kills: list[tuple[float, str]] = []  # (monotonic, holder killed)
        self.hostile: HostileStream | None = None
        self.probe = StallProbe(lambda: self.leader().port,
                                pid=lambda: self.leader().extender.pid)

    @property
    def toleration(self) -> dict[str, str]:
        return {"key": "soak", "operator": "Equal", "value": self.run_id,
                "effect": "NoSchedule"}

    def processes(self) -> list[ManagedProcess]:
        out: list[ManagedProcess] = []
        for r in self.replicas:
            out += [r.scheduler, r.extender]
        if self.default_scheduler is not None:
            out.append(self.default_scheduler)
        return out

    def leader(self) -> Replica:
        """The replica whose kube-scheduler holds the Lease (the only one with one
        replica; the first while no holder is known)."""
        i = self._leader
        return self.replicas[i if i is not None else 0]
    # ----- the extender's own view ---------------------------------------------------------------

    def debug(self, path: str = "/debug/gangs", replica: Replica | None = None) -> dict[str, Any]:
        """A debug view of `replica`'s extender (default: the leader's, the active one)."""
        r = replica or self.leader()
        url = f"http://127.0.0.1:{r.port}{path}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    def leftover(self) -> dict[str, Any]:
        """What the extenders still hold about this run: queue, reservations, held binds,
        Bindings in flight, backoffs, and PodGroups of the run's namespaces (keys
        prefixed `r<i>:` with two replicas)."""
        out: dict[str, Any] = {}
        for r in self.replicas:
            pre = f"r{r.index}:" if len(self.replicas) > 1 else ""
            try:
                d = self.debug(replica=r)
                groups = self.debug("/debug/podgroups", replica=r).get("podGroups") or []
            except Exception as e:
                out[pre + "error"] = repr(e)
                continue
            for k, v in d.items():
                if v and k in ("queue", "reservations", "waitingBinds", "bindingsInFlight",
                               "backoff"):
                    out[pre + k] = v
            mine = [g["gang"] for g in groups
                    if str(g.get("gang", "")).startswith(self.run_id)]
            if mine:
                out[pre + "podGroups"] = mine
        return out

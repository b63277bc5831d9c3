"""The soak's checker's view of the cluster: node allocatable, and a raw LIST + WATCH of
every pod that turns each event into the records and hands bindings, finishes and
deletions to the invariants. Apart from the rules because keeping a watch alive across
API server restarts (relist, what vanished is deleted, order lost) is a job of its own.

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
from datetime import datetime
from typing import Any

from e2e.harness.rawapi import watch_lines

from .invariants import Invariants
from .quantity import pod_requests, quantity
from .records import DECIDED_AT, GROUP_LABEL, NEIGHBOUR_LABEL, NodeRec, PodRec

log = logging.getLogger("soak.checker")


def _evicted(status: dict[str, Any]) -> bool:
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               and c.get("reason") == "EvictionByEvictionAPI"
               for c in status.get("conditions") or [] if isinstance(c, dict))


class PodWatch(Invariants):
    """Feeds the invariants from the API server; `Checker` starts and stops it."""

    v1: Any  # client.CoreV1Api
    node_selector: str | None
    gang_scheduler: str | None
    events: int
    relists: int
    _stop: threading.Event
    _synced: threading.Event

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
                        for line in watch_lines(stream):
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
                rec.decided_at = self._decided_at(md)
                if rec.kind == "gang":
                    if rec.decided_at is None:
                        self.decided_missing += 1
                    else:
                        self.decided_seen += 1
                        self.decided_lag_max = max(self.decided_lag_max,
                                                   rec.bound_at - rec.decided_at)
            terminal = phase in ("Succeeded", "Failed")
            if rec.node and not terminal and not rec.charged:
                self._charge(rec, +1)
            elif rec.charged and terminal:
                self._charge(rec, -1)
            if newly_bound and rec.gang:
                self._bound(rec)

    def _decided_at(self, md: dict[str, Any]) -> float | None:
        """The pod's DECIDED_AT annotation on the checker's clock (seconds since `t0`;
        the extender runs on this machine, so its wall clock is ours), or None when it
        has none or one that is not an RFC 3339 time with a zone."""
        text = (md.get("annotations") or {}).get(DECIDED_AT)
        if not isinstance(text, str):
            return None
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            return None
        if at.tzinfo is None:
            return None
        return at.timestamp() - self.wall0

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

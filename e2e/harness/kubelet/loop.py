"""The fake kubelet's loop: one LIST then a WATCH for pods and for fake nodes, an in-memory
index, and the decision, per event, of what a pod needs next.

Why apart: this is the part that follows the API (informers, relists, the index of nodes
and pods); what a pod then goes through (timers, status writes) is
:mod:`e2e.harness.kubelet.life`, a :class:`~e2e.harness.kubelet.life.PodLife` the loop is
given and calls, and running it as a process is :mod:`e2e.harness.fakekubelet`.
:func:`make_kubelet` wires the parts.

Scale: LISTs and WATCHes through the generated client on raw JSON (orjson, no model
objects); a relist comes at most every two minutes, so only the per-pod writes are worth
the cheaper client (:class:`~e2e.harness.rawapi.RawApi`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from ..fakenodes import FAKE_NODE_SELECTOR, NOT_READY_TAINT, parse_rfc3339, provider_node_to_untaint
from ..k8s import client
from ..rawapi import CONNECT_TIMEOUT, READ_TIMEOUT, RawApi, watch_lines
from .life import KubeletState, PodLife
from .pod import pod_from_json
from .writes import PodWrites, RawPodWrites

log = logging.getLogger("fakekubelet")

READY_LINE = "fake-kubelet: ready"
"""Logged once both initial LISTs are processed; the process starter waits for it."""
WATCH_READ_TIMEOUT = 150.0
"""A watch asks the server to end it after 120 s; silence past this means a dead connection."""


class _Relist(Exception):
    """The watch ended with an ERROR event (usually 410 Gone): start over with a LIST."""


def make_kubelet(api_client: Any, node_selector: str = FAKE_NODE_SELECTOR,
                 workers: int = 8, writes: PodWrites | None = None) -> KubeletLoop:
    """The fake kubelet wired: one state, the pods' life writing through ``writes``
    (:class:`RawApi` unless a measurement passes another client), the loop over both."""
    life = PodLife(KubeletState(), writes or RawPodWrites(RawApi(api_client)), workers)
    return KubeletLoop(api_client, life, node_selector)


class KubeletLoop:
    """The fake kubelet for every node labelled ``harness/fake-kubelet=true``.

    Threads: a node informer, a pod informer (LIST + WATCH, relist on 410), a timer thread
    for run-time expiry (``life``'s) and ``life``'s pool for API writes. All state sits
    behind one lock, ``life.state``'s; API calls are made outside it. LISTs and WATCHes go
    through the generated client on ``api_client``, whose connection pool the watches use
    (size it for the two watches and callers' LISTs); writes through ``life``.
    """

    def __init__(self, api_client: Any, life: PodLife,
                 node_selector: str = FAKE_NODE_SELECTOR) -> None:
        self.api = api_client
        self.v1 = client.CoreV1Api(api_client)
        self.life = life
        self.state = life.state
        self.node_selector = node_selector
        self.known_nodes: set[str] = set()  # ever seen: deleting pods of gone nodes
        self.pods_by_node: dict[str, set[str]] = {}
        self._synced = {"nodes": threading.Event(), "pods": threading.Event()}
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------

    def start_thread(self) -> KubeletLoop:
        """Start the informers and timers in daemon threads; returns after initial sync."""
        for target, name in ((self._node_informer, "fk-nodes"),
                             (self._pod_informer, "fk-pods"),
                             (self.life.run_timers, "fk-timers")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        for ev in self._synced.values():
            if not ev.wait(60):
                raise TimeoutError("fake kubelet: initial LIST did not finish in 60s")
        log.info(READY_LINE)
        return self

    def stop(self) -> None:
        """Stop the threads (watches end at their next event or timeout)."""
        self.state.stop_event.set()
        self.life.stop()

    def run(self) -> None:
        """Run until :meth:`stop` (for the CLI)."""
        self.start_thread()
        self.state.stop_event.wait()

    # -- informers -------------------------------------------------------------------

    def _informer(self, kind: str, list_objects: Callable[..., Any], **selector: str) -> None:
        """LIST + WATCH on raw JSON (``_preload_content=False``, orjson), relisting on
        expiry or error.

        Through the generated client: a relist comes at most every two minutes, and
        ``lab.experiments.kubelet_writes`` finds a LIST costs the same CPU through it as through
        :class:`RawApi`, so only the per-pod writes are worth the second client.
        """
        while not self.state.stop_event.is_set():
            try:
                listed = list_objects(**selector, _preload_content=False,
                                      _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
                data = orjson.loads(listed.data)
                rv = data["metadata"]["resourceVersion"]
                self._replace(kind, data["items"])
                self._synced[kind].set()
                while not self.state.stop_event.is_set():
                    stream = list_objects(
                        **selector, watch=True, resource_version=rv, allow_watch_bookmarks=True,
                        timeout_seconds=120, _preload_content=False,
                        _request_timeout=(CONNECT_TIMEOUT, WATCH_READ_TIMEOUT))
                    try:
                        for line in watch_lines(stream):
                            if self.state.stop_event.is_set():
                                return
                            ev = orjson.loads(line)
                            obj = ev["object"]
                            typ = ev["type"]
                            if typ == "ERROR":
                                raise _Relist(str(obj.get("message")))
                            rv = obj["metadata"].get("resourceVersion", rv)
                            if typ != "BOOKMARK":
                                self._event(kind, typ, obj)
                    finally:
                        # Read to its end, the connection goes back to the pool; abandoned
                        # early (stop, an ERROR event), the rest of its body is in flight.
                        if not stream.closed:
                            stream.close()
                        stream.release_conn()
            except _Relist as e:
                log.info("%s watch expired (%s): relisting", kind, e)
            except Exception as e:
                if self.state.stop_event.is_set():
                    return
                log.warning("%s informer error: %r; retrying", kind, e)
                time.sleep(0.5)

    def _node_informer(self) -> None:
        self._informer("nodes", self.v1.list_node, label_selector=self.node_selector)

    def _pod_informer(self) -> None:
        self._informer("pods", self.v1.list_pod_for_all_namespaces)

    def _replace(self, kind: str, items: list[dict[str, Any]]) -> None:
        """Apply a full LIST: objects missing from it are treated as deleted."""
        with self.state.lock:
            present = {o["metadata"]["name"] if kind == "nodes" else o["metadata"]["uid"]
                       for o in items}
            index = self.state.nodes if kind == "nodes" else self.state.pods
            gone = [k for k in index if k not in present]
        for o in items:
            self._event(kind, "ADDED", o)
        for k in gone:
            if kind == "nodes":
                self._node_gone(k)
            else:
                self._pod_gone(k)

    def _event(self, kind: str, typ: str, obj: dict[str, Any]) -> None:
        if kind == "nodes":
            name = obj["metadata"]["name"]
            if typ == "DELETED":
                self._node_gone(name)
                return
            ip = next((a["address"] for a in (obj.get("status") or {}).get("addresses") or []
                       if a.get("type") == "InternalIP"), "")
            if provider_node_to_untaint(obj):
                self.life.untaint(name, obj["metadata"]["resourceVersion"],
                                  [t for t in (obj.get("spec") or {}).get("taints") or []
                                   if t.get("key") != NOT_READY_TAINT])
            with self.state.lock:
                new = name not in self.state.nodes
                self.state.nodes[name] = ip
                self.known_nodes.add(name)
                uids = list(self.pods_by_node.get(name, ()))
            if new:
                log.info("node %s registered", name)
                for uid in uids:  # pods bound before we saw the node
                    self._reconcile(uid)
            return
        if typ == "DELETED":
            self._pod_gone(obj["metadata"]["uid"])
            return
        p = pod_from_json(obj)
        with self.state.lock:
            old = self.state.pods.get(p.uid)
            if old is not None:
                # Keep what only we know.
                p.start_requested = old.start_requested
                p.running_since = old.running_since
                p.finish_requested = old.finish_requested
                p.delete_requested = old.delete_requested
                if old.node and old.node != p.node:
                    self.pods_by_node.get(old.node, set()).discard(p.uid)
            if p.running_since is None and p.phase == "Running" and not p.start_requested:
                start = (obj.get("status") or {}).get("startTime")
                if start:  # running before we (re)started: resume its clock
                    p.running_since = parse_rfc3339(start)
                    p.start_requested = True
                    self.life.resume(p)
            self.state.pods[p.uid] = p
            if p.node:
                self.pods_by_node.setdefault(p.node, set()).add(p.uid)
        self._reconcile(p.uid)

    def _node_gone(self, name: str) -> None:
        with self.state.lock:
            self.state.nodes.pop(name, None)
        log.info("node %s removed", name)

    def _pod_gone(self, uid: str) -> None:
        with self.state.lock:
            p = self.state.pods.pop(uid, None)
            if p is None:
                return
            if p.node:
                self.pods_by_node.get(p.node, set()).discard(uid)
            self.life.leave_group(p)

    # -- decisions -------------------------------------------------------------------

    def _reconcile(self, uid: str) -> None:
        """Decide the next write for one pod (called after every event about it)."""
        with self.state.lock:
            p = self.state.pods.get(uid)
            if p is None:
                return
            ours = p.node in self.state.nodes
            if p.deleting:
                self.life.leave_group(p)
                if (ours or p.node in self.known_nodes or not p.node) \
                        and not p.delete_requested:
                    p.delete_requested = True
                    self.life.delete(p)
                return
            if not ours or p.phase in ("Succeeded", "Failed"):
                return
            if p.phase == "Pending" and not p.start_requested:
                p.start_requested = True
                self.life.start(p.uid)

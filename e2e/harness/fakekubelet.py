"""Fake nodes and a fake kubelet: pods bound to fake nodes run and finish on command.

Why: the extender decides *where* pods go; what happens after binding only matters in so far
as the rest of the system (job controller, PodGroup status, the extender's own accounting)
reacts to pod phases. A kubelet that flips phases through the status subresource, driven by
annotations, makes those reactions real and deterministic without containers.

Annotations understood (on the pod):

* ``e2e.gang-extender.io/run-seconds: "N"``: Succeeded N seconds after becoming Running.
  Without it (and without a rendezvous) a pod runs forever.
* ``e2e.gang-extender.io/fail: "true"``: Failed (exit code 1) instead of Succeeded.
* ``e2e.gang-extender.io/rendezvous: "<name>"`` + ``e2e.gang-extender.io/rendezvous-size:
  "<N>"``: the pod completes only once N pods of that group (same namespace) have each been
  Running for the run time (``run-seconds``, default 1); until then it runs forever, which
  is how a distributed job with a missing worker hangs. Once met, the group stays met.

Deletion: pods with a deletionTimestamp on fake nodes (or on no node) are force-deleted, as a
kubelet would after stopping containers.

Scale: one LIST then a WATCH for pods and for fake nodes (the generated client on raw
JSON, orjson, no model objects), an in-memory index, and a worker pool for the status
writes and deletes through :class:`~e2e.harness.rawapi.RawApi` (keep-alive connections set
up from the kubeconfig, no generated API layer). A real kubelet runs on other machines;
this one shares the machine with the schedulers being benchmarked, so its per-pod writes
take the cheaper client: about 1.0 ms of CPU per pod against 2.0-2.1 ms through the
generated client with every response read (and 10 ms with responses left unread, each call
then opening a new TLS connection); ``python -m bench.experiments.kubelet_writes`` measures it.

Nodes made by a node provisioner (a Cluster Autoscaler's ``kwok`` provider, which creates
Node objects from a template carrying this label and a Ready status, marks them with
:data:`PROVIDER_NODE_ANNOTATION`): the TaintNodesByCondition admission plugin gives every
new node the ``not-ready`` taint, and the node-lifecycle controller that would lift it
does not run here. :class:`FakeNodes` lifts it itself for the nodes it adds; for those the
loop lifts it, once the node reports Ready, as that controller would.

Run it as a process (preferred, survives test-runner oddities)::

    python -m e2e.harness.fakekubelet --kubeconfig admin.kubeconfig

or in-process with :meth:`KubeletLoop.start_thread`. Nodes are created through
:class:`FakeNodes` (plain API calls; the loop discovers them by label).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import heapq
import ipaddress
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from .base import REPO_ROOT
from .clusterbase import Cluster
from .k8s import ApiException, client, config
from .process import ManagedProcess
from .rawapi import (
    CONNECT_TIMEOUT,
    READ_TIMEOUT,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    RawApi,
    path_segment,
)
from .readiness import log_contains

log = logging.getLogger("fakekubelet")

ANN_PREFIX = "e2e.gang-extender.io/"
ANN_RUN_SECONDS = ANN_PREFIX + "run-seconds"
ANN_FAIL = ANN_PREFIX + "fail"
ANN_RENDEZVOUS = ANN_PREFIX + "rendezvous"
ANN_RENDEZVOUS_SIZE = ANN_PREFIX + "rendezvous-size"

FAKE_NODE_LABEL = "harness/fake-kubelet"
FAKE_NODE_SELECTOR = f"{FAKE_NODE_LABEL}=true"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
PROVIDER_NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""Value ``fake``: a node a provisioner made (the annotation kwok's controller manages)."""
READY_LINE = "fake-kubelet: ready"
"""Logged once both initial LISTs are processed; the process starter waits for it."""

DEFAULT_RENDEZVOUS_RUN_SECONDS = 1.0
WATCH_READ_TIMEOUT = 150.0
"""A watch asks the server to end it after 120 s; silence past this means a dead connection."""
KUBELET_VERSION = "v1.36.3"


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_rfc3339(s: str) -> float:
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@functools.cache
def _network(net: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """Parsed once: ``ip_network`` is slow enough to show in a per-pod profile."""
    return ipaddress.ip_network(net)


def _fake_ip(seed: str, net: str) -> str:
    """A stable pseudo-random address in ``net`` (pod/node IPs only need to look real)."""
    n = _network(net)
    h = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    return str(n.network_address + 1 + h % (n.num_addresses - 2))


# ----------------------------------------------------------------------------------------
# Nodes


def node_manifest(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: int = 110,
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    extra_resources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Ready Node object with capacity == allocatable, as a kubelet would register it.

    Status is accepted on Node create (kubelets register that way), so one call suffices.
    """
    res: dict[str, str] = {
        "cpu": str(cpu), "memory": str(memory), "pods": str(pods),
        "ephemeral-storage": "100Gi",
    }
    if gpus:
        res["nvidia.com/gpu"] = str(gpus)
    res.update(extra_resources or {})
    now = _now_rfc3339()

    def cond(t: str, s: str, reason: str) -> dict[str, Any]:
        return {"type": t, "status": s, "reason": reason, "message": "fake kubelet",
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", FAKE_NODE_LABEL: "true", **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints]},
        "status": {
            "capacity": res, "allocatable": dict(res),
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                cond("Ready", "True", "KubeletReady"),
            ],
            "addresses": [{"type": "InternalIP", "address": _fake_ip(name, "172.30.0.0/16")},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.1.0",
                "osImage": "fake", "containerRuntimeVersion": "fake://1.0",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def _drain(resp: Any) -> None:
    """Read a raw (``_preload_content=False``) response to its end.

    urllib3 hands a connection back to its pool only once the body is read; an unread one
    is dropped, and the next call pays a new TLS handshake (milliseconds of CPU).
    """
    resp.read()


class FakeNodes:
    """Create, cordon and delete fake nodes through the API.

    Separate from the kubelet loop so tests manipulate nodes synchronously in their own
    process while the loop runs elsewhere.
    """

    def __init__(self, api_client: Any) -> None:
        self.v1 = client.CoreV1Api(api_client)

    def add_node(
        self,
        name: str,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: int = 110,
        gpus: int = 0,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        extra_resources: Mapping[str, str] | None = None,
    ) -> str:
        """Register a Ready fake node and return its name.

        The TaintNodesByCondition admission plugin adds ``node.kubernetes.io/not-ready`` to
        every new node; the node-lifecycle controller would remove it, but that controller
        does not run here, so this does. ``taints`` are dicts like
        ``{"key": "k", "value": "v", "effect": "NoSchedule"}``.
        """
        body = node_manifest(name, cpu, memory, pods, gpus, labels, taints, extra_resources)
        created = self.v1.create_node(body, _preload_content=False)
        obj = json.loads(created.data)
        have = obj.get("spec", {}).get("taints") or []
        if any(t.get("key") == NOT_READY_TAINT for t in have):
            self._set_taints(name, [t for t in have if t.get("key") != NOT_READY_TAINT])
        return name

    def _set_taints(self, name: str, taints: list[dict[str, Any]]) -> None:
        # Taints have no merge key: a strategic merge patch replaces the whole list.
        _drain(self.v1.patch_node(name, {"spec": {"taints": taints}},
                                  _preload_content=False))

    def _taints(self, name: str) -> list[dict[str, Any]]:
        obj = json.loads(self.v1.read_node(name, _preload_content=False).data)
        return list(obj.get("spec", {}).get("taints") or [])

    def delete_node(self, name: str, evict_pods: bool = True) -> None:
        """Delete the node; by default also force-delete the pods bound to it.

        Without ``evict_pods`` the pods stay until the pod GC controller removes orphans
        (about 40 s), as in a real cluster after a node object vanishes.
        """
        with contextlib.suppress(ApiException):
            _drain(self.v1.delete_node(name, grace_period_seconds=0, _preload_content=False))
        if evict_pods:
            resp = self.v1.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={name}", _preload_content=False)
            for p in json.loads(resp.data)["items"]:
                md = p["metadata"]
                with contextlib.suppress(ApiException):
                    _drain(self.v1.delete_namespaced_pod(
                        md["name"], md["namespace"], grace_period_seconds=0,
                        _preload_content=False))

    def cordon(self, name: str) -> None:
        """``kubectl cordon``: spec.unschedulable=true."""
        _drain(self.v1.patch_node(name, {"spec": {"unschedulable": True}},
                                  _preload_content=False))

    def uncordon(self, name: str) -> None:
        """``kubectl uncordon``."""
        _drain(self.v1.patch_node(name, {"spec": {"unschedulable": False}},
                                  _preload_content=False))

    def set_ready(self, name: str, ready: bool) -> None:
        """Flip the Ready condition and the not-ready NoSchedule taint, as a node failure
        and the (absent) node-lifecycle controller would. Pods are not evicted."""
        now = _now_rfc3339()
        status = "True" if ready else "False"
        _drain(self.v1.patch_node_status(name, {"status": {"conditions": [{
            "type": "Ready", "status": status, "reason": "FakeKubelet",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, _preload_content=False))
        taints = [t for t in self._taints(name) if t.get("key") != NOT_READY_TAINT]
        if not ready:
            taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        self._set_taints(name, taints)

    def list_nodes(self) -> list[str]:
        """Names of all fake nodes."""
        resp = self.v1.list_node(label_selector=FAKE_NODE_SELECTOR, _preload_content=False)
        return [n["metadata"]["name"] for n in json.loads(resp.data)["items"]]

    def delete_all_nodes(self) -> None:
        """Remove every fake node (and its pods): a clean slate between test modules."""
        for n in self.list_nodes():
            self.delete_node(n)


# ----------------------------------------------------------------------------------------
# Kubelet loop


@dataclass
class _Pod:
    uid: str
    ns: str
    name: str
    node: str = ""
    phase: str = "Pending"
    deleting: bool = False
    run_seconds: float | None = None
    fail: bool = False
    rendezvous: str | None = None
    rendezvous_size: int = 0
    containers: list[tuple[str, str]] = field(default_factory=list)
    init_containers: list[tuple[str, str]] = field(default_factory=list)
    host_network: bool = False
    start_requested: bool = False
    running_since: float | None = None  # wall-clock seconds
    finish_requested: bool = False
    delete_requested: bool = False


@dataclass
class _Group:
    size: int
    reached: set[str] = field(default_factory=set)
    met: bool = False


def _pod_from_json(obj: Mapping[str, Any]) -> _Pod:
    md, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    ann = md.get("annotations") or {}
    run: float | None = None
    if ANN_RUN_SECONDS in ann:
        with contextlib.suppress(ValueError):
            run = float(ann[ANN_RUN_SECONDS])
    size = 0
    with contextlib.suppress(ValueError):
        size = int(ann.get(ANN_RENDEZVOUS_SIZE, "0"))
    return _Pod(
        uid=md["uid"], ns=md["namespace"], name=md["name"],
        node=spec.get("nodeName") or "",
        phase=st.get("phase") or "Pending",
        deleting=md.get("deletionTimestamp") is not None,
        run_seconds=run,
        fail=str(ann.get(ANN_FAIL, "")).lower() == "true",
        rendezvous=ann.get(ANN_RENDEZVOUS) or None,
        rendezvous_size=size,
        containers=[(c["name"], c.get("image", "")) for c in spec.get("containers") or []],
        init_containers=[(c["name"], c.get("image", ""))
                         for c in spec.get("initContainers") or []],
        host_network=bool(spec.get("hostNetwork")),
    )


def _iter_lines(resp: Any) -> Iterator[bytes]:
    """Split a streaming urllib3 response into JSON lines (one watch event each)."""
    buf = b""
    for chunk in resp.stream(64 * 1024, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


class KubeletLoop:
    """The fake kubelet for every node labelled ``harness/fake-kubelet=true``.

    Threads: a node informer, a pod informer (LIST + WATCH, relist on 410), a timer thread
    for run-time expiry and a pool for API writes. All state sits behind one lock; API
    calls are made outside it. LISTs and WATCHes go through the generated client, writes
    through :class:`RawApi` (one keep-alive connection per writer thread); the watches use
    ``api_client``'s connection pool (size it for the two watches and callers' LISTs).
    """

    def __init__(self, api_client: Any, node_selector: str = FAKE_NODE_SELECTOR,
                 workers: int = 8) -> None:
        self.api = api_client
        self.v1 = client.CoreV1Api(api_client)
        self.raw = RawApi(api_client)
        self.node_selector = node_selector
        self.stop_event = threading.Event()
        self.lock = threading.RLock()
        self.nodes: dict[str, str] = {}  # name -> InternalIP
        self.known_nodes: set[str] = set()  # ever seen: deleting pods of gone nodes
        self.pods: dict[str, _Pod] = {}
        self.pods_by_node: dict[str, set[str]] = {}
        self.groups: dict[tuple[str, str], _Group] = {}
        self.timers: list[tuple[float, str]] = []
        self.timer_cv = threading.Condition(self.lock)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fk-write")
        self._synced = {"nodes": threading.Event(), "pods": threading.Event()}
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------

    def start_thread(self) -> KubeletLoop:
        """Start the informers and timers in daemon threads; returns after initial sync."""
        for target, name in ((self._node_informer, "fk-nodes"),
                             (self._pod_informer, "fk-pods"),
                             (self._timer_loop, "fk-timers")):
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
        self.stop_event.set()
        with self.timer_cv:
            self.timer_cv.notify_all()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.raw.close()

    def run(self) -> None:
        """Run until :meth:`stop` (for the CLI)."""
        self.start_thread()
        self.stop_event.wait()

    # -- informers -------------------------------------------------------------------

    def _informer(self, kind: str, list_objects: Callable[..., Any], **selector: str) -> None:
        """LIST + WATCH on raw JSON (``_preload_content=False``, orjson), relisting on
        expiry or error.

        Through the generated client: a relist comes at most every two minutes, and
        ``bench.experiments.kubelet_writes`` finds a LIST costs the same CPU through it as through
        :class:`RawApi`, so only the per-pod writes are worth the second client.
        """
        while not self.stop_event.is_set():
            try:
                listed = list_objects(**selector, _preload_content=False,
                                      _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
                data = orjson.loads(listed.data)
                rv = data["metadata"]["resourceVersion"]
                self._replace(kind, data["items"])
                self._synced[kind].set()
                while not self.stop_event.is_set():
                    stream = list_objects(
                        **selector, watch=True, resource_version=rv, allow_watch_bookmarks=True,
                        timeout_seconds=120, _preload_content=False,
                        _request_timeout=(CONNECT_TIMEOUT, WATCH_READ_TIMEOUT))
                    try:
                        for line in _iter_lines(stream):
                            if self.stop_event.is_set():
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
                if self.stop_event.is_set():
                    return
                log.warning("%s informer error: %r; retrying", kind, e)
                time.sleep(0.5)

    def _node_informer(self) -> None:
        self._informer("nodes", self.v1.list_node, label_selector=self.node_selector)

    def _pod_informer(self) -> None:
        self._informer("pods", self.v1.list_pod_for_all_namespaces)

    def _replace(self, kind: str, items: list[dict[str, Any]]) -> None:
        """Apply a full LIST: objects missing from it are treated as deleted."""
        with self.lock:
            present = {o["metadata"]["name"] if kind == "nodes" else o["metadata"]["uid"]
                       for o in items}
            gone = [k for k in (self.nodes if kind == "nodes" else self.pods) if k not in present]
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
                self._submit(self._untaint, name, obj["metadata"]["resourceVersion"],
                             [t for t in (obj.get("spec") or {}).get("taints") or []
                              if t.get("key") != NOT_READY_TAINT])
            with self.lock:
                new = name not in self.nodes
                self.nodes[name] = ip
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
        p = _pod_from_json(obj)
        with self.lock:
            old = self.pods.get(p.uid)
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
                    p.running_since = _parse_rfc3339(start)
                    p.start_requested = True
                    self._schedule(p)
            self.pods[p.uid] = p
            if p.node:
                self.pods_by_node.setdefault(p.node, set()).add(p.uid)
        self._reconcile(p.uid)

    def _node_gone(self, name: str) -> None:
        with self.lock:
            self.nodes.pop(name, None)
        log.info("node %s removed", name)

    def _pod_gone(self, uid: str) -> None:
        with self.lock:
            p = self.pods.pop(uid, None)
            if p is None:
                return
            if p.node:
                self.pods_by_node.get(p.node, set()).discard(uid)
            self._leave_group(p)

    def _leave_group(self, p: _Pod) -> None:
        """A pod that goes away before its rendezvous is met no longer counts for it."""
        if p.rendezvous is None:
            return
        g = self.groups.get((p.ns, p.rendezvous))
        if g is not None and not g.met:
            g.reached.discard(p.uid)

    # -- decisions -------------------------------------------------------------------

    def _reconcile(self, uid: str) -> None:
        """Decide the next write for one pod (called after every event about it)."""
        with self.lock:
            p = self.pods.get(uid)
            if p is None:
                return
            ours = p.node in self.nodes
            if p.deleting:
                self._leave_group(p)
                if (ours or p.node in self.known_nodes or not p.node) \
                        and not p.delete_requested:
                    p.delete_requested = True
                    self._submit(self._force_delete, p.ns, p.name, p.uid)
                return
            if not ours or p.phase in ("Succeeded", "Failed"):
                return
            if p.phase == "Pending" and not p.start_requested:
                p.start_requested = True
                self._submit(self._set_running, p.uid)

    def _schedule(self, p: _Pod) -> None:
        """Arm the completion timer of a running pod (caller holds the lock)."""
        if p.run_seconds is None and p.rendezvous is None:
            return  # runs forever
        assert p.running_since is not None
        run = p.run_seconds if p.run_seconds is not None else DEFAULT_RENDEZVOUS_RUN_SECONDS
        heapq.heappush(self.timers, (p.running_since + run, p.uid))
        self.timer_cv.notify()

    def _timer_loop(self) -> None:
        while not self.stop_event.is_set():
            due: list[str] = []
            with self.timer_cv:
                now = time.time()
                while self.timers and self.timers[0][0] <= now:
                    due.append(heapq.heappop(self.timers)[1])
                if not due:
                    wait = self.timers[0][0] - now if self.timers else 1.0
                    self.timer_cv.wait(min(wait, 1.0))
                    continue
                for uid in due:
                    self._run_time_over(uid)

    def _run_time_over(self, uid: str) -> None:
        """A pod has run its time: finish it, or count it toward its rendezvous."""
        p = self.pods.get(uid)
        if p is None or p.deleting or p.finish_requested or p.phase in ("Succeeded", "Failed"):
            return
        if p.rendezvous is None:
            self._finish(p)
            return
        key = (p.ns, p.rendezvous)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = _Group(size=p.rendezvous_size)
        g.size = max(g.size, p.rendezvous_size)
        g.reached.add(uid)
        if not g.met and len(g.reached) >= g.size:
            g.met = True
            log.info("rendezvous %s/%s met with %d pods", p.ns, p.rendezvous, len(g.reached))
        if g.met:
            for r in sorted(g.reached):
                q = self.pods.get(r)
                if q is not None and not q.finish_requested and not q.deleting:
                    self._finish(q)

    def _finish(self, p: _Pod) -> None:
        p.finish_requested = True
        self._submit(self._set_terminated, p.uid, not p.fail)

    # -- writes ----------------------------------------------------------------------

    def _submit(self, fn: Any, *args: Any) -> None:
        if self.stop_event.is_set():
            return
        with contextlib.suppress(RuntimeError):  # pool shut down
            self.pool.submit(self._guarded, fn, *args)

    def _guarded(self, fn: Any, *args: Any) -> None:
        """Retry transient API errors; a pod that vanished (404) is simply done.

        Errors reaching the API server (refused while it restarts) are retried for up to
        two minutes, as a kubelet would: a status write lost there leaves the pod Running
        for good, since the informer's relist does not ask for it again."""
        deadline = time.monotonic() + 120.0
        attempt = 0
        while True:
            try:
                fn(*args)
                return
            except ApiError as e:
                if e.status in (404, 409):
                    return
                if e.status == 422:
                    log.error("%s%s rejected: %s", fn.__name__, args,
                              e.body.decode(errors="replace"))
                    return
                log.warning("%s%s failed (%s), retry %d", fn.__name__, args, e.status, attempt)
                if attempt >= 4 and e.status != 429 and not 500 <= e.status < 600:
                    return
            except Exception as e:
                if self.stop_event.is_set():
                    return
                log.warning("%s%s failed (%r), retry %d", fn.__name__, args, e, attempt)
            if time.monotonic() > deadline:
                log.error("%s%s: giving up after %d attempts", fn.__name__, args, attempt + 1)
                return
            time.sleep(min(0.2 * (attempt + 1), 2.0))
            attempt += 1

    @staticmethod
    def _container_id(uid: str, name: str) -> str:
        return hashlib.sha256(f"{uid}/{name}".encode()).hexdigest()

    def _container_status(self, name: str, image: str, state: dict[str, Any],
                          ready: bool, uid: str) -> dict[str, Any]:
        cid = self._container_id(uid, name)
        return {
            "name": name, "image": image or "fake", "imageID": f"fake@sha256:{cid}",
            "containerID": f"containerd://{cid}", "ready": ready,
            "started": "running" in state, "restartCount": 0, "state": state,
        }

    def _set_running(self, uid: str) -> None:
        with self.lock:
            p = self.pods.get(uid)
            if p is None or p.deleting:
                return
            host_ip = self.nodes.get(p.node, "") or _fake_ip(p.node, "172.30.0.0/16")
        now = _now_rfc3339()
        pod_ip = host_ip if p.host_network else _fake_ip(uid, "10.128.0.0/12")
        conds = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                 for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady",
                           "Ready")]
        status: dict[str, Any] = {
            "phase": "Running", "startTime": now, "conditions": conds,
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "containerStatuses": [
                self._container_status(n, img, {"running": {"startedAt": now}}, True, uid)
                for n, img in p.containers],
        }
        if p.init_containers:
            status["initContainerStatuses"] = [
                self._container_status(n, img, {"terminated": {
                    "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now,
                    "containerID": f"containerd://{self._container_id(uid, n)}"}}, False, uid)
                for n, img in p.init_containers]
        self._patch_status(p.ns, p.name, status)
        with self.lock:
            q = self.pods.get(uid)
            if q is not None and q.running_since is None:
                q.running_since = time.time()
                self._schedule(q)

    def _set_terminated(self, uid: str, success: bool) -> None:
        with self.lock:
            p = self.pods.get(uid)
            if p is None:
                return
        now = _now_rfc3339()
        code, reason = (0, "Completed") if success else (1, "Error")
        started = (datetime.fromtimestamp(p.running_since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                   if p.running_since else now)
        conds = [{"type": t, "status": "False", "reason": "PodCompleted",
                  "lastProbeTime": None, "lastTransitionTime": now}
                 for t in ("ContainersReady", "Ready")]
        conds.append({"type": "PodReadyToStartContainers", "status": "False",
                      "lastProbeTime": None, "lastTransitionTime": now})
        status = {
            "phase": "Succeeded" if success else "Failed", "conditions": conds,
            "containerStatuses": [
                self._container_status(n, img, {"terminated": {
                    "exitCode": code, "reason": reason, "startedAt": started,
                    "finishedAt": now,
                    "containerID": f"containerd://{self._container_id(uid, n)}"}}, False, uid)
                for n, img in p.containers],
        }
        self._patch_status(p.ns, p.name, status)

    @staticmethod
    def _pod_path(ns: str, name: str) -> str:
        return f"/api/v1/namespaces/{path_segment(ns)}/pods/{path_segment(name)}"

    def _patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        """Strategic merge patch of the status subresource (what ``patch_namespaced_pod_status``
        sends for a dict body)."""
        self.raw.request("PATCH", self._pod_path(ns, name) + "/status", body={"status": status},
                         content_type=STRATEGIC_MERGE_PATCH)

    def _untaint(self, name: str, resource_version: str,
                 taints: list[dict[str, Any]]) -> None:
        """The node's taints without ``not-ready``, on the version seen (409 if it changed
        since: a later event brings the node again)."""
        self.raw.request("PATCH", f"/api/v1/nodes/{path_segment(name)}", body={
            "metadata": {"resourceVersion": resource_version}, "spec": {"taints": taints}},
            content_type=STRATEGIC_MERGE_PATCH)

    def _force_delete(self, ns: str, name: str, uid: str) -> None:
        """Delete now, but only the pod we saw: a new pod of the same name (a StatefulSet
        replacement, a test re-creating it) fails the uid precondition with 409."""
        self.raw.request("DELETE", self._pod_path(ns, name), {"gracePeriodSeconds": 0},
                         body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})


def provider_node_to_untaint(node: Mapping[str, Any]) -> bool:
    """A provisioner's node (:data:`PROVIDER_NODE_ANNOTATION`) that reports Ready but still
    has the ``not-ready`` taint admission gave it."""
    if (node["metadata"].get("annotations") or {}).get(PROVIDER_NODE_ANNOTATION) != "fake":
        return False
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    return ready and any(t.get("key") == NOT_READY_TAINT
                         for t in (node.get("spec") or {}).get("taints") or [])


class _Relist(Exception):
    """The watch ended with an ERROR event (usually 410 Gone): start over with a LIST."""


class FakeKubelet(FakeNodes):
    """Fake nodes plus the kubelet loop, as a child process (default) or a thread.

    A process is preferred: it keeps running whatever the test process does (a debugger
    stop, a stuck fixture, pytest-timeout's signal) and its log sits next to the other
    components' logs in failure messages.
    """

    def __init__(self, cluster: Cluster, in_process: bool = False) -> None:
        self.cluster = cluster
        self._api = cluster.api_client()
        super().__init__(self._api)
        self.in_process = in_process
        self.process: ManagedProcess | None = None
        self.loop: KubeletLoop | None = None

    def start(self) -> FakeKubelet:
        """Start the loop; returns once it has listed nodes and pods."""
        if self.in_process:
            self.loop = KubeletLoop(self.cluster.api_client()).start_thread()
            return self
        env = {"PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.process = self.cluster.start_process(
            [sys.executable, "-m", "e2e.harness.fakekubelet",
             "--kubeconfig", str(self.cluster.kubeconfig)],
            "fake-kubelet", env=env, cwd=REPO_ROOT, ready=log_contains(READY_LINE),
            ready_timeout=60)
        return self

    def stop(self) -> None:
        """Stop the loop (by pid for the process)."""
        if self.process is not None:
            self.process.stop()
        if self.loop is not None:
            self.loop.stop()
        self._api.close()


# ----------------------------------------------------------------------------------------
# CLI


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m e2e.harness.fakekubelet --kubeconfig K``: run until SIGTERM/SIGINT."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--node-selector", default=FAKE_NODE_SELECTOR)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    cfg = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = args.workers + 4
    loop = KubeletLoop(client.ApiClient(cfg), args.node_selector, args.workers)

    def on_signal(signum: int, _frame: Any) -> None:
        loop.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

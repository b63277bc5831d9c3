"""What happens to a pod once the fake kubelet has it: its run-time clock and rendezvous,
and the status writes and deletes that follow (Running, Succeeded/Failed, force-delete).

Why apart: the loop (:mod:`e2e.harness.kubelet.loop`) decides from watch events *that* a pod
starts, finishes or goes; this is *how*: the timers, the retries and the exact status a
kubelet would post. The loop holds a :class:`PodLife` and calls it; both read one
:class:`KubeletState`, the loop writing its index and this reading it. The writes
themselves go through the :class:`~e2e.harness.kubelet.writes.PodWrites` it is given,
which a measurement swaps (``lab.experiments.kubelet_writes``) to price each client.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..fakenodes import fake_ip, now_rfc3339
from ..rawapi import RawApiError
from .pod import DEFAULT_RENDEZVOUS_RUN_SECONDS, KubeletPod, RendezvousGroup
from .writes import PodWrites

log = logging.getLogger("fakekubelet")


@dataclass
class KubeletState:
    """What the fake kubelet knows of the cluster, all of it behind ``lock``: the loop
    fills it from its watches, :class:`PodLife` reads it to write a pod's status."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    stop_event: threading.Event = field(default_factory=threading.Event)
    nodes: dict[str, str] = field(default_factory=dict)  # name -> InternalIP
    pods: dict[str, KubeletPod] = field(default_factory=dict)


class PodLife:
    """The timers, rendezvous and API writes of the pods the kubelet runs. The loop says
    what a pod needs next (:meth:`start`, :meth:`delete`, :meth:`resume`, ...); the writes
    run on a pool of ``workers`` threads, retried here, through ``writes``."""

    def __init__(self, state: KubeletState, writes: PodWrites, workers: int = 8) -> None:
        self.state = state
        self.writes = writes
        self.groups: dict[tuple[str, str], RendezvousGroup] = {}
        self.timers: list[tuple[float, str]] = []
        self.timer_cv = threading.Condition(state.lock)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fk-write")

    # -- what the loop asks for -----------------------------------------------------

    def start(self, uid: str) -> None:
        """A pending pod on one of our nodes: post it Running."""
        self._submit(self.set_running, uid)

    def resume(self, p: KubeletPod) -> None:
        """A pod found Running with a start time (we restarted): its clock runs on
        (caller holds the lock)."""
        self._schedule(p)

    def delete(self, p: KubeletPod) -> None:
        """A pod marked for deletion: delete it now, as a kubelet does once it stopped."""
        self._submit(self.writes.force_delete, p.ns, p.name, p.uid)

    def untaint(self, name: str, resource_version: str,
                taints: list[dict[str, Any]]) -> None:
        """A fake node the provider registered: take off its ``not-ready`` taint."""
        self._submit(self.writes.untaint, name, resource_version, taints)

    def leave_group(self, p: KubeletPod) -> None:
        """A pod that goes away before its rendezvous is met no longer counts for it
        (caller holds the lock)."""
        if p.rendezvous is None:
            return
        g = self.groups.get((p.ns, p.rendezvous))
        if g is not None and not g.met:
            g.reached.discard(p.uid)

    def stop(self) -> None:
        """Wake the timer thread to see the stop, drop the queued writes, close the
        client (``state.stop_event`` is set by the caller)."""
        with self.timer_cv:
            self.timer_cv.notify_all()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.writes.close()

    # -- timers ----------------------------------------------------------------------

    def _schedule(self, p: KubeletPod) -> None:
        """Arm the completion timer of a running pod (caller holds the lock)."""
        if p.run_seconds is None and p.rendezvous is None:
            return  # runs forever
        assert p.running_since is not None
        run = p.run_seconds if p.run_seconds is not None else DEFAULT_RENDEZVOUS_RUN_SECONDS
        heapq.heappush(self.timers, (p.running_since + run, p.uid))
        self.timer_cv.notify()

    def run_timers(self) -> None:
        """The timer thread: finish the pods whose run time is over, until stopped."""
        while not self.state.stop_event.is_set():
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
        p = self.state.pods.get(uid)
        if p is None or p.deleting or p.finish_requested or p.phase in ("Succeeded", "Failed"):
            return
        if p.rendezvous is None:
            self._finish(p)
            return
        key = (p.ns, p.rendezvous)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = RendezvousGroup(size=p.rendezvous_size)
        g.size = max(g.size, p.rendezvous_size)
        g.reached.add(uid)
        if not g.met and len(g.reached) >= g.size:
            g.met = True
            log.info("rendezvous %s/%s met with %d pods", p.ns, p.rendezvous, len(g.reached))
        if g.met:
            for r in sorted(g.reached):
                q = self.state.pods.get(r)
                if q is not None and not q.finish_requested and not q.deleting:
                    self._finish(q)

    def _finish(self, p: KubeletPod) -> None:
        p.finish_requested = True
        self._submit(self.set_terminated, p.uid, not p.fail)

    # -- writes ----------------------------------------------------------------------

    def _submit(self, fn: Any, *args: Any) -> None:
        if self.state.stop_event.is_set():
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
            except RawApiError as e:
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
                if self.state.stop_event.is_set():
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

    def set_running(self, uid: str) -> None:
        """Post the pod Running, its containers started and ready, and start its clock."""
        with self.state.lock:
            p = self.state.pods.get(uid)
            if p is None or p.deleting:
                return
            host_ip = self.state.nodes.get(p.node, "") or fake_ip(p.node, "172.30.0.0/16")
        now = now_rfc3339()
        pod_ip = host_ip if p.host_network else fake_ip(uid, "10.128.0.0/12")
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
        self.writes.patch_status(p.ns, p.name, status)
        with self.state.lock:
            q = self.state.pods.get(uid)
            if q is not None and q.running_since is None:
                q.running_since = time.time()
                self._schedule(q)

    def set_terminated(self, uid: str, success: bool) -> None:
        """Post the pod Succeeded or Failed, its containers terminated."""
        with self.state.lock:
            p = self.state.pods.get(uid)
            if p is None:
                return
        now = now_rfc3339()
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
        self.writes.patch_status(p.ns, p.name, status)

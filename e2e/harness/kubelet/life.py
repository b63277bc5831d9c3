"""What happens to a pod once the fake kubelet has it: its run-time clock and rendezvous,
and the status writes and deletes that follow (Running, Succeeded/Failed, force-delete).

Why apart: the loop (:mod:`e2e.harness.kubelet.loop`) decides from watch events *that* a pod
starts, finishes or goes; this mixin is *how*: the timers, the retries and the exact
status a kubelet would post. Benchmarks swap the writes alone
(``lab.experiments.kubelet_writes`` overrides :meth:`PodLife._patch_status` and
:meth:`PodLife._force_delete`) and measure their CPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from ..fakenodes import fake_ip, now_rfc3339
from ..rawapi import STRATEGIC_MERGE_PATCH, RawApi, RawApiError, path_segment
from .pod import DEFAULT_RENDEZVOUS_RUN_SECONDS, KubeletPod, RendezvousGroup

log = logging.getLogger("fakekubelet")


class PodLife:
    """Timers and API writes of :class:`~e2e.harness.kubelet.loop.KubeletLoop`, which
    owns the state below (all of it behind ``lock``) and calls these methods."""

    lock: threading.RLock
    stop_event: threading.Event
    raw: RawApi
    pool: ThreadPoolExecutor
    nodes: dict[str, str]
    pods: dict[str, KubeletPod]
    groups: dict[tuple[str, str], RendezvousGroup]
    timers: list[tuple[float, str]]
    timer_cv: threading.Condition

    # -- timers ----------------------------------------------------------------------

    def _schedule(self, p: KubeletPod) -> None:
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
            g = self.groups[key] = RendezvousGroup(size=p.rendezvous_size)
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

    def _finish(self, p: KubeletPod) -> None:
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
            host_ip = self.nodes.get(p.node, "") or fake_ip(p.node, "172.30.0.0/16")
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

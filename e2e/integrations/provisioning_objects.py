"""ProvisioningRequests as the e2e tests see and make them (issue 31): every request of a
namespace over its life (:class:`Requests`, from the watch, so one deleted a moment after
it changed is still seen), the waits the tests share, and objects as another controller
(Kueue's ProvisioningRequest admission check) or the autoscaler writes them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from e2e.gang import GangStack
from e2e.harness.k8s import watch
from e2e.harness.process import ManagedProcess
from e2e.harness.queries import list_pods
from e2e.harness.readiness import log_contains
from e2e.harness.target import kube
from e2e.harness.waiting import LogSource, NotYet, wait_for
from e2e.integrations.autoscaler import (
    ATOMIC,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    GROUP,
    PLURAL,
    VERSION,
    conditions,
    requests_in,
)


@dataclass
class Seen:
    """One request as the watch showed it over its life."""

    name: str
    uid: str
    created: float
    owners: list[dict[str, Any]]
    annotations: dict[str, str]
    spec: dict[str, Any]
    states: list[tuple[float, dict[str, str]]] = field(default_factory=list)
    deleted: float | None = None

    def first(self, condition: str) -> float | None:
        return next((t for t, c in self.states if c.get(condition) == "True"), None)


class Requests:
    """Every ProvisioningRequest of one namespace from the watch's own event stream: a
    request the extender deletes a moment after it failed is still seen, with its uid."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.seen: dict[str, Seen] = {}  # uid -> its life
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def __enter__(self) -> Requests:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _list(self) -> str:
        """Observe what is there now (a request made before the watch starts, a relist
        after an error); returns the list's resourceVersion to watch from."""
        listed = kube().custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)
        for obj in listed["items"]:
            self._observe("ADDED", obj)
        return str(listed["metadata"]["resourceVersion"])

    def _run(self) -> None:
        custom = kube().custom
        rv = ""
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                rv = rv or self._list()
                self._ready.set()
                for ev in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION,
                                   self.ns, PLURAL, resource_version=rv, timeout_seconds=5):
                    self._observe(ev["type"], ev["object"])
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if self._stop.is_set():
                        break
            except Exception:
                rv = ""  # relist: what this missed is in the list it starts with
                time.sleep(0.1)
            finally:
                w.stop()

    def _observe(self, typ: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        meta = obj["metadata"]
        with self._lock:
            s = self.seen.get(meta["uid"])
            if s is None:
                s = self.seen[meta["uid"]] = Seen(
                    meta["name"], meta["uid"], now, list(meta.get("ownerReferences") or []),
                    dict(meta.get("annotations") or {}), dict(obj.get("spec") or {}))
            conds = conditions(obj)
            if not s.states or s.states[-1][1] != conds:
                s.states.append((now, conds))
            if typ == "DELETED":
                s.deleted = now

    def all(self) -> list[Seen]:
        with self._lock:
            return sorted(self.seen.values(), key=lambda s: s.created)

    def live(self) -> list[Seen]:
        return [s for s in self.all() if s.deleted is None]


def wait_request(reqs: Requests, gang: GangStack, what: str = "a ProvisioningRequest",
                 timeout: float = 40) -> Seen:
    """The first request seen (the extender discovers the API within 10 s of its
    installation, then asks on its next tick)."""
    def check() -> Seen | NotYet:
        got = reqs.all()
        return got[0] if got else NotYet(got)

    out = wait_for(check, timeout, what, logs=gang.logs())
    assert isinstance(out, Seen)
    return out


def wait_annotated(ns: str, group: str, request: str, gang: GangStack) -> None:
    """Every member of ``group`` annotated to consume ``request``."""
    def check() -> bool | NotYet:
        pods = list_pods(ns, f"scheduling.x-k8s.io/pod-group={group}")
        anns = {p["metadata"]["name"]: (p["metadata"].get("annotations") or {})
                for p in pods}
        ok = pods and all(a.get(CONSUME_ANNOTATION) == request and a.get(CLASS_ANNOTATION)
                          for a in anns.values())
        return True if ok else NotYet(anns)

    wait_for(check, 20, f"members of {group} annotated to consume {request}",
             logs=gang.logs())


SERVED_LINE = "provisioningrequests: autoscaling.x-k8s.io/v1/provisioningrequests is served"
"""The extender's log once its discovery found the request API (asked every 10 s)."""


def wait_served(ext: ManagedProcess) -> None:
    """Until ``ext`` watches the requests: a gang explained before that would not ask
    (the extender considers asking when it explains a gang, not when the API appears)."""
    wait_for(lambda: log_contains(SERVED_LINE)(ext) or NotYet("not yet"), 30,
             "the extender watching ProvisioningRequests", logs=[ext])


def wait_provisioned(ns: str, logs: Sequence[LogSource], timeout: float = 60) -> None:
    """Until the (one) request of ``ns`` is Provisioned."""
    def check() -> bool | NotYet:
        reqs = requests_in(ns)
        conds = conditions(reqs[0]) if reqs else {}
        return conds.get("Provisioned") == "True" or NotYet(conds)

    wait_for(check, timeout, f"the request of {ns} Provisioned", logs=logs)


def wait_untainted(nodes: list[str], logs: Sequence[LogSource], timeout: float = 30) -> None:
    """Until ``nodes`` have no taint (the fake kubelet lifts ``not-ready``)."""
    def check() -> bool | NotYet:
        taints = {n: [t.key for t in (kube().core.read_node(n).spec.taints or [])]
                  for n in nodes}
        return all(not t for t in taints.values()) or NotYet(taints)

    wait_for(check, timeout, f"nodes {nodes} untainted", logs=logs)


def fail_request(ns: str, name: str) -> None:
    """Failed, as the autoscaler writes it on a request that expired unprovisioned."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube().custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, name, {
        "status": {"conditions": [{
            "type": "Failed", "status": "True", "reason": "Expired", "lastTransitionTime": now,
            "message": "expired without capacity (written by the test)"}]}})


def pg_events(ns: str, name: str) -> dict[str, dict[str, Any]]:
    """reason -> the PodGroup's Event (type, message)."""
    raw = kube().core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name},involvedObject.kind=PodGroup")
    return {e.reason: {"type": e.type, "message": e.message} for e in raw.items}


def pod_template(ns: str, name: str, cpu: str) -> None:
    kube().core.create_namespaced_pod_template(ns, {
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{
            "name": "main", "image": "busybox:1.36",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}})


def create_request(ns: str, name: str, template: str, count: int,
                   cls: str = ATOMIC) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ProvisioningRequest",
            "metadata": {"name": name},
            "spec": {"provisioningClassName": cls,
                     "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}}
    out: dict[str, Any] = kube().custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, body)
    return out

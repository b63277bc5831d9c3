"""A stand-in for the Cluster Autoscaler's ProvisioningRequest support, for machines that
cannot build the real one (its source is on GitHub only: the Go module proxy serves no
version of ``k8s.io/autoscaler/cluster-autoscaler``). A thread of the test session, with
the same Python interface as :class:`e2e.integrations.autoscaler.Autoscaler`; :func:`choose` picks
one of the two (``E2E_AUTOSCALER=real|standin|auto``).

What it does (the contract of ``autoscaling.x-k8s.io/v1`` as the autoscaler 1.36.1
implements it; the pure decisions are :mod:`e2e.integrations.autoscaler_standin_plan`):

* Serves the ``best-effort-atomic-scale-up`` and ``check-capacity`` classes, one request
  per loop, every second: sets ``Accepted``; counts the nodes the request's PodTemplates x
  counts need beyond the free room of the existing Ready, untainted nodes, its own
  new nodes included before the fake kubelet lifts their ``not-ready`` taint (after pending
  unschedulable pods that fit took their part, and after the room Provisioned requests
  still book); atomic class: all of them added if the pool's max allows
  (``Provisioned=True``), none otherwise (``Provisioned=False``, retried after 2 s, then
  4 s); check-capacity: never adds, ``Failed`` at once only with ``noRetry: "true"``.
  A missing PodTemplate fails the request (``FailedToCreatePods``), as the autoscaler does.
* Nodes: made as the kwok provider makes them (named ``<pool>-<5 chars>``, annotated
  ``kwok.x-k8s.io/node: fake``, provider ID ``kwok:<name>``) from
  :func:`~e2e.integrations.autoscaler.template`, so the fake kubelet runs them and lifts the
  ``not-ready`` taint exactly as for the real autoscaler's nodes.
* Booking: a Provisioned request holds room for its pods not yet made until
  ``BookingExpired`` (10 minutes, or ``booking`` seconds).
* Scale-down (only when ``start`` gets ``scale_down``): a node it made that has had no pod
  for that many seconds and is not annotated
  ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` is deleted.

What it does not simulate: the autoscaler's ordinary scale-up for pending pods that
consume no request (it adds nodes only for requests); scale-down of nodes that still run
pods (the real one moves pods off nodes under its utilization threshold); node
selectors, affinity, tolerations and topology of the PodTemplates (every pod fits any
untainted node with the room); init containers and pod overhead; the one-week expiry
(``Failed`` with ``Expired``: the tests write it themselves, as they do for the real one);
several node groups, min sizes, node-provisioning time and failed cloud calls; metrics,
events and its status ConfigMap.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import string
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from e2e.harness.cluster import ControlPlane
from e2e.harness.crds import install_crds
from e2e.harness.fakenodes import PROVIDER_NODE_ANNOTATION, now_rfc3339
from e2e.harness.k8s import ApiException
from e2e.harness.target import kube
from e2e.integrations.autoscaler import (
    CONSUME_ANNOTATION,
    GROUP,
    PLURAL,
    POOL_LABEL,
    SCALE_DOWN_DISABLED,
    VERSION,
    Autoscaler,
    conditions,
    template,
)
from e2e.integrations.autoscaler_standin_plan import (
    RequestCondition,
    Resources,
    booked,
    booking_expired,
    decide,
    free_room,
    merge_conditions,
    nodes_needed,
    place,
    pod_requests,
    quantities,
    retry_due,
    served,
    unschedulable,
    usable_node,
)

CRD_DIR = Path(__file__).resolve().parents[1] / "crds" / "autoscaler"
"""The ProvisioningRequest CRD, copied from the autoscaler's tag cluster-autoscaler-1.36.1
(``cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml``);
tests/repo/test_provisioning_crd.py checks it equals the built autoscaler's copy."""
BOOKING = 600.0
log = logging.getLogger("gang-e2e.integrations.autoscaler_standin")


def _ts(raw: str | None) -> float:
    if not raw:
        return 0.0
    return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _list(call: Any, *args: Any, **kw: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(call(*args, _preload_content=False, **kw).data)[
        "items"]
    return items


class StandinAutoscaler(Autoscaler):
    """The stand-in's loop for one pool; see the module docstring for what it covers."""

    name = "standin"

    def __init__(self, cp: ControlPlane, booking: float = BOOKING) -> None:
        super().__init__(cp, CRD_DIR)
        self.booking = booking
        self.pool = ""
        self.max_size = 0
        self.shape: Resources = {}
        self.node_template: dict[str, Any] = {}
        self.scale_down: float | None = None
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._retries: dict[str, tuple[float, int]] = {}  # uid -> (last attempt, attempts)
        self._empty_since: dict[str, float] = {}

    def install(self) -> None:
        install_crds(kube().api, [CRD_DIR], timeout=60)

    def start(self, pool: str, max_size: int, cpu: str = "4", memory: str = "16Gi",
              scale_down: float | None = None) -> None:
        wanted = (pool, max_size, cpu, memory, scale_down)
        if self._thread is not None and self._thread.is_alive() and wanted == self.settings:
            return
        self._stop_process()
        self.pool, self.max_size, self.scale_down = pool, max_size, scale_down
        self.node_template = template(pool, max_size, cpu, memory)
        self.shape = quantities(self.node_template["status"]["allocatable"])
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._halt,),
                                        name="autoscaler-standin", daemon=True)
        self._thread.start()
        self.settings = wanted
        log.info("autoscaler stand-in: pool %s, at most %d nodes of %s CPU, scale-down %s",
                 pool, max_size, cpu, scale_down)

    def _stop_process(self) -> None:
        if self._thread is not None:
            self._halt.set()
            self._thread.join(10)
            self._thread = None
        self.settings = ()
        self._empty_since.clear()

    def _run(self, halt: threading.Event) -> None:
        while not halt.is_set():
            try:
                self.loop_once(time.time())
            except Exception:  # an API hiccup: the next loop reads everything again
                log.exception("autoscaler stand-in loop")
            halt.wait(1.0)

    # ----- one loop ---------------------------------------------------------------------

    def loop_once(self, now: float) -> None:
        reqs = sorted(_list(kube().custom.list_cluster_custom_object, GROUP, VERSION, PLURAL),
                      key=lambda r: r["metadata"].get("creationTimestamp") or "")
        nodes = _list(kube().core.list_node)
        pods = [p for p in _list(kube().core.list_pod_for_all_namespaces)
                if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        self._expire_bookings(reqs, now)
        for r in reqs:
            conds = conditions(r)
            cls = (r.get("spec") or {}).get("provisioningClassName", "")
            if r["metadata"].get("deletionTimestamp") or not served(cls, conds):
                continue
            uid = r["metadata"]["uid"]
            last = self._retries.get(uid)
            if last is not None and not retry_due(last[0], now, last[1]):
                continue
            self._serve(r, cls, conds, reqs, nodes, pods)
            attempts = last[1] + 1 if last else 1
            self._retries[uid] = (now, attempts)
            break  # one request per loop, as the autoscaler
        if self.scale_down is not None:
            self._scale_down(nodes, pods, now)

    def _expire_bookings(self, reqs: list[dict[str, Any]], now: float) -> None:
        for r in reqs:
            conds = conditions(r)
            if conds.get("Provisioned") != "True" or conds.get("BookingExpired") == "True":
                continue
            at = next((_ts(c.get("lastTransitionTime")) for c in r["status"]["conditions"]
                       if c["type"] == "Provisioned"), now)
            if booking_expired(at, now, self.booking):
                self._write(r, (RequestCondition("BookingExpired", "True",
                                          "CapacityReservationTimeExpired",
                                          "the booking time is over"),))

    def _templates(self, r: Mapping[str, Any]) -> list[Resources] | str:
        """Every pod the request stands for, or why it cannot be made."""
        ns = r["metadata"]["namespace"]
        out: list[Resources] = []
        for ps in (r.get("spec") or {}).get("podSets") or []:
            name = (ps.get("podTemplateRef") or {}).get("name", "")
            try:
                pt = kube().core.read_namespaced_pod_template(name, ns, _preload_content=False)
            except ApiException as e:
                return f"PodTemplate {ns}/{name}: {e.status} {e.reason}"
            spec = (json.loads(pt.data).get("template") or {}).get("spec") or {}
            out += [pod_requests(spec)] * int(ps.get("count") or 0)
        return out

    def _room(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
              reqs: list[dict[str, Any]]) -> list[Resources]:
        """Free room of the usable nodes, less what Provisioned requests still book."""
        by_node: dict[str, list[Resources]] = {}
        for p in pods:
            if (p.get("spec") or {}).get("nodeName"):
                by_node.setdefault(p["spec"]["nodeName"], []).append(pod_requests(p["spec"]))
        room = [free_room(quantities(n["status"].get("allocatable") or {}),
                          by_node.get(n["metadata"]["name"], []))
                for n in nodes if usable_node(n)]
        for r in reqs:
            conds = conditions(r)
            if conds.get("Provisioned") != "True" or conds.get("BookingExpired") == "True" \
                    or conds.get("Failed") == "True":
                continue
            consumers = sum(1 for p in pods if p["metadata"]["namespace"] ==
                            r["metadata"]["namespace"] and (p["metadata"].get("annotations")
                            or {}).get(CONSUME_ANNOTATION) == r["metadata"]["name"])
            wanted = self._templates(r)
            if isinstance(wanted, str):
                continue
            count = booked(len(wanted), consumers)
            for w in wanted[:count]:
                place(room, w)
        return room

    def _serve(self, r: dict[str, Any], cls: str, conds: Mapping[str, str],
               reqs: list[dict[str, Any]], nodes: list[dict[str, Any]],
               pods: list[dict[str, Any]]) -> None:
        wanted = self._templates(r)
        if isinstance(wanted, str):
            self._write(r, (RequestCondition("Failed", "True", "FailedToCreatePods", wanted),))
            return
        pending = [pod_requests(p["spec"]) for p in pods
                   if not (p.get("spec") or {}).get("nodeName") and unschedulable(p)]
        needed = nodes_needed(self._room(nodes, pods, reqs), pending, wanted, self.shape)
        headroom = self.max_size - len(self.nodes(self.pool))
        d = decide(cls, conds, needed, headroom, (r.get("spec") or {}).get("parameters"))
        for _ in range(d.scale_up):
            self._add_node()
        self._write(r, d.conditions)
        log.info("autoscaler stand-in: %s/%s needs %s nodes (room for %d more): %s",
                 r["metadata"]["namespace"], r["metadata"]["name"], needed, headroom,
                 [(c.type, c.status) for c in d.conditions])

    def _add_node(self) -> None:
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        name = f"{self.pool}-{suffix}"
        node = json.loads(json.dumps(self.node_template))
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        node["metadata"]["annotations"] = {PROVIDER_NODE_ANNOTATION: "fake"}
        node["spec"]["providerID"] = f"kwok:{name}"
        kube().core.create_node(node)

    def _write(self, r: dict[str, Any], conds: tuple[RequestCondition, ...]) -> None:
        if not conds:
            return
        merged = merge_conditions((r.get("status") or {}).get("conditions") or [], conds,
                                  now_rfc3339())
        with contextlib.suppress(ApiException):  # deleted meanwhile: nothing to write
            kube().custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, r["metadata"]["namespace"], PLURAL, r["metadata"]["name"],
                {"status": {"conditions": merged}})
        r.setdefault("status", {})["conditions"] = merged

    def _scale_down(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                    now: float) -> None:
        assert self.scale_down is not None
        busy = {(p.get("spec") or {}).get("nodeName") for p in pods}
        for n in nodes:
            meta = n["metadata"]
            name = meta["name"]
            ours = ((meta.get("annotations") or {}).get(PROVIDER_NODE_ANNOTATION) == "fake"
                    and (meta.get("labels") or {}).get(POOL_LABEL) == self.pool)
            kept = (meta.get("annotations") or {}).get(SCALE_DOWN_DISABLED) == "true"
            if not ours or kept or name in busy:
                self._empty_since.pop(name, None)
                continue
            since = self._empty_since.setdefault(name, now)
            if now - since >= self.scale_down:
                log.info("autoscaler stand-in: scaling down %s, empty for %.1fs",
                         name, now - since)
                with contextlib.suppress(ApiException):
                    kube().core.delete_node(name)
                self._empty_since.pop(name, None)


def choose() -> tuple[str, str]:
    """(``real`` or ``standin``, why) from ``E2E_AUTOSCALER`` (default ``auto``: the real
    autoscaler when its binary is built or its source is pointed at, else the stand-in)."""
    mode = os.environ.get("E2E_AUTOSCALER", "auto")
    if mode in ("real", "standin"):
        return mode, f"E2E_AUTOSCALER={mode}"
    if mode != "auto":
        raise ValueError(f"E2E_AUTOSCALER={mode!r}: expected real, standin or auto")
    if os.environ.get("E2E_AUTOSCALER_GIT"):
        return "real", "E2E_AUTOSCALER_GIT is set"
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    built = root / "gang-extender" / "cluster-autoscaler" / "v1.36.1" / "cluster-autoscaler"
    if built.exists():
        return "real", f"built at {built}"
    return "standin", "the Cluster Autoscaler is not built here (its source is on GitHub only)"

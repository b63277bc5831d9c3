"""The ProvisioningRequest adapter: carries out what `core/provisioning.py` decided,
off the request path, one action at a time in the order asked (a request is created
before it may be deleted).

* `CreateRequest`: each pod set's PodTemplate copies a member's spec (its node name and
  scheduling gates left out) with the consume annotations on its metadata; then the
  request; all owned by the gang's PodGroup (ownerReferences, so they go with it; a
  Kueue pod group has no object and gets none: the core deletes its request when the
  gang is gone); each carries our marker (`GANG_ANNOTATION`: the gang's key). Then
  every pending member is annotated to consume it (with `CONSUMES_FOR` beside, which
  the pod admission policy checks), which keeps the autoscaler from scaling up for
  them one by one. An object that already exists (a 409: a restart, a retry) is read
  back and taken as made only when it carries our marker for this gang; any other is
  left alone and is an error for the gang. When the request cannot be made, the
  PodTemplates this call created are deleted again (by their uid), the core hears it
  (`GangManager.provisioning_failed`) and the gang backs off.
* `DeleteRequest`: the request, with the uid the core saw it with as the precondition (a
  409 then means another object has the name now: not ours, left alone, not retried),
  then each of its PodTemplates read back carrying our marker for the gang, by its uid;
  gone already is fine.
* `ProtectNode`: the scale-down-disabled annotation and ours beside it, set or removed.
* `ProvisioningReport`: an Event on the PodGroup and the metric.

The watch of the requests (`PROVISIONING_REQUESTS`) is an optional kind: discovered,
watched only while served, and the core is told whether it is (`served`).

Only the leader writes (extender/kube/leader.py): the dispatcher hands nothing over on
standby, and `active` is asked right before each write. A replica that lost its lease
runs a few seconds more before it exits; the actions still queued then, and the rest of
the one under way, are dropped: the new leader decides them again from what it sees.
Even the clean-up of a create cut short is not sent: the new leader may already have
adopted the PodTemplates it made (a 409, read back carrying our marker for the gang).
Left behind, those are owned by the PodGroup and go with it, or are adopted or deleted
by the new leader when it asks for that gang again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from extender.core.manager import GangManager
from extender.core.model.provisioning_request import (
    API_PATH,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    CONSUMES_FOR,
    GANG_ANNOTATION,
    RESOURCE,
    SCALE_DOWN_DISABLED,
    SCALE_DOWN_OURS,
    request_from_k8s,
)
from extender.core.model.vocabulary import (
    CreateRequest,
    DeleteRequest,
    GroupRef,
    ProtectNode,
    ProvisioningAction,
    ProvisioningReport,
)
from extender.kube.client import ApiError
from extender.kube.informer import Kind
from extender.kube.recorder import ObjectRef
from extender.kube.source_kinds import group_api_version

log = logging.getLogger("gang-extender.provisioning")


class ProvisioningApi(Protocol):
    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    async def get(self, path: str) -> dict[str, Any] | None: ...
    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def delete(self, path: str, uid: str = "") -> None: ...
    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None: ...


class EventSink(Protocol):
    def record(self, ref: ObjectRef, reason: str, message: str,
               warning: bool = False) -> None: ...


def _nothing() -> None:
    pass


def _always() -> bool:
    return True


class _NotLeading(Exception):
    """The lease is lost: no further write of this action is sent."""


def _apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_provisioning_request(request_from_k8s(obj), now)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _marker(obj: dict[str, Any] | None) -> str:
    """Our marker on an object read back: the gang it was made for, "" if none."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    value = notes.get(GANG_ANNOTATION, "") if isinstance(notes, dict) else ""
    return value if isinstance(value, str) else ""


def _uid(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("uid", "")) if isinstance(meta, dict) else ""


PROVISIONING_REQUESTS = Kind(
    "provisioningrequests", f"{API_PATH}/{RESOURCE}", _key, _apply,
    lambda m, key, now: m.on_provisioning_request_deleted(key),
    discover=(API_PATH, RESOURCE))

_EVENT_REASONS = {"requested": "ProvisioningRequested", "provisioned": "Provisioned",
                  "not-created": "ProvisioningRequestNotCreated",
                  "failed": "ProvisioningFailed", "booking-expired": "BookingExpired",
                  "capacity-revoked": "CapacityRevoked"}


def owner(group: GroupRef) -> list[dict[str, Any]]:
    api_version = group_api_version(group.source, group.key)
    if api_version is None or not group.uid:
        return []
    return [{"apiVersion": api_version, "kind": "PodGroup", "name": group.name,
             "uid": group.uid}]


def template_body(action: CreateRequest, index: int, pod: dict[str, Any]) -> dict[str, Any]:
    """A PodTemplate of the member `pod`, for pod set `index` of the request."""
    raw = pod.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    spec = dict(pod.get("spec") or {})
    for field in ("nodeName", "schedulingGates"):
        spec.pop(field, None)
    return {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": f"{action.name}-{index}", "namespace": action.group.namespace,
                     "annotations": {GANG_ANNOTATION: action.gang},
                     "ownerReferences": owner(action.group)},
        "template": {"metadata": {"labels": dict(meta.get("labels") or {}),
                                  "annotations": {CONSUME_ANNOTATION: action.name,
                                                  CLASS_ANNOTATION: action.class_name}},
                     "spec": spec},
    }


def request_body(action: CreateRequest) -> dict[str, Any]:
    return {
        "apiVersion": API_PATH.removeprefix("/apis/"), "kind": "ProvisioningRequest",
        "metadata": {"name": action.name, "namespace": action.group.namespace,
                     "annotations": {GANG_ANNOTATION: action.gang},
                     "ownerReferences": owner(action.group)},
        "spec": {"provisioningClassName": action.class_name,
                 "podSets": [{"podTemplateRef": {"name": f"{action.name}-{i}"},
                              "count": s.count} for i, s in enumerate(action.pod_sets)]},
    }


class Provisioner:
    def __init__(self, manager: GangManager, kube: ProvisioningApi | None,
                 events: EventSink | None = None,
                 on_result: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 active: Callable[[], bool] = _always) -> None:
        self.manager = manager
        self.kube = kube
        self.events = events
        self.on_result = on_result  # the outcome of each report, for the metric
        self.clock = clock
        self.active = active  # whether this replica leads (`Leadership.active`)
        self._queue: asyncio.Queue[tuple[ProvisioningAction, Callable[[], None]]] = (
            asyncio.Queue())

    def add(self, action: ProvisioningAction, changed: Callable[[], None] = _nothing) -> None:
        """Carry out `action` in turn; `changed` is called once the manager was told
        something that may give it new actions (the dispatcher's, which drains them)."""
        if isinstance(action, ProvisioningReport):
            self._report(action)
        else:
            self._queue.put_nowait((action, changed))

    def served(self, kind: str, served: bool) -> None:
        """The informer's discovery: whether the request API is served."""
        if kind == PROVISIONING_REQUESTS.name:
            self.manager.provisioning_served(served)

    async def run(self) -> None:
        while True:
            action, changed = await self._queue.get()
            try:
                await self.do(action, changed)
            except asyncio.CancelledError:
                raise
            except Exception:  # one action's bug must not stop the others
                log.exception("provisioning action %s failed", action)

    async def do(self, action: ProvisioningAction,
                 changed: Callable[[], None] = _nothing) -> None:
        if self.kube is None:
            return
        try:
            await self._do(action, changed)
        except _NotLeading:
            log.warning("provisioning action %s not carried out (further): this replica no "
                        "longer holds the lease", action)

    def _lead(self) -> None:
        """Asked before each write, with no await between: at the start of an action
        (its first write, when it makes no read before), and before each later one."""
        if not self.active():
            raise _NotLeading

    async def _do(self, action: ProvisioningAction, changed: Callable[[], None]) -> None:
        assert self.kube is not None
        self._lead()
        if isinstance(action, CreateRequest):
            error = await self._create(action)
            if error is not None:
                log.warning("gang=%s ProvisioningRequest %s not created: %s", action.gang,
                            action.name, error)
                self.manager.provisioning_failed(action.gang, action.name, error, self.clock())
                changed()
        elif isinstance(action, DeleteRequest):
            await self._delete(action)
        elif isinstance(action, ProtectNode):
            on = action.on
            await self._quiet(self.kube.merge_patch(f"/api/v1/nodes/{action.node}", {
                "metadata": {"annotations": {SCALE_DOWN_DISABLED: "true" if on else None,
                                             SCALE_DOWN_OURS: action.gang if on else None}}}))

    async def _create(self, action: CreateRequest) -> str | None:
        assert self.kube is not None
        ns = action.group.namespace
        made: list[tuple[str, str]] = []  # (path, uid) of the objects made by this call
        error: str | None = None
        try:
            for i, pod_set in enumerate(action.pod_sets):
                pod = await self.kube.get_pod(ns, pod_set.template.name)
                if pod is None:
                    error = f"member {ns}/{pod_set.template.name} is gone"
                    break
                error = await self._make(f"/api/v1/namespaces/{ns}/podtemplates",
                                         template_body(action, i, pod), action.gang,
                                         "PodTemplate", made)
                if error is not None:
                    break
            else:
                error = await self._make(f"{API_PATH}/namespaces/{ns}/{RESOURCE}",
                                         request_body(action), action.gang,
                                         "ProvisioningRequest", made)
        except ApiError as exc:
            error = str(exc)
        if error is not None:
            for path, uid in made:  # PodTemplates only: the request is made last
                self._lead()
                await self._quiet(self.kube.delete(path, uid=uid), ok=(404, 409))
            return error
        for ref in action.annotate:
            self._lead()
            await self._quiet(self.kube.merge_patch(
                f"/api/v1/namespaces/{ref.namespace}/pods/{ref.name}",
                {"metadata": {"annotations": {CONSUME_ANNOTATION: action.name,
                                              CLASS_ANNOTATION: action.class_name,
                                              CONSUMES_FOR: action.gang}}}))
        log.info("gang=%s ProvisioningRequest %s/%s created (%d pod set(s))", action.gang,
                 ns, action.name, len(action.pod_sets))
        return None

    async def _make(self, collection: str, body: dict[str, Any], gang: str, kind: str,
                    made: list[tuple[str, str]]) -> str | None:
        """Create `body` in `collection`: None when it is there and the gang's, else why
        not. A 409 is ours only if the object of that name, read back, carries our marker
        for `gang` (made before a restart, or by an earlier try); anything else of that
        name (a user's, another gang's) is never adopted. What this call made goes into
        `made`, with its uid, for the caller to take back on a later failure."""
        assert self.kube is not None
        meta = body["metadata"]
        name, ns = str(meta["name"]), str(meta["namespace"])
        path = f"{collection}/{name}"
        try:
            self._lead()
            created = await self.kube.create(collection, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        else:
            uid = _uid(created) if isinstance(created, dict) else ""
            if uid:
                made.append((path, uid))
            return None
        there = await self.kube.get(path)
        marker = _marker(there)
        if there is not None and marker == gang:
            return None
        if there is None:
            return f"{kind} {ns}/{name} was in the way and is gone now: asked again later"
        return (f"{kind} {ns}/{name} already exists and is not the extender's for gang "
                f"{gang} (its {GANG_ANNOTATION} annotation is "
                f"{repr(marker) if marker else 'absent'}): left alone, no ProvisioningRequest "
                f"made; delete or rename that object to let the gang ask")

    async def _delete(self, action: DeleteRequest) -> None:
        assert self.kube is not None
        ns = action.namespace
        if not action.uid:  # never by name alone (the core sends none such)
            log.warning("ProvisioningRequest %s/%s not deleted: no uid seen", ns, action.name)
            return
        try:  # asked in `_do` just before, with no await between
            await self.kube.delete(f"{API_PATH}/namespaces/{ns}/{RESOURCE}/{action.name}",
                                   uid=action.uid)
        except ApiError as exc:
            if exc.status == 409:  # the precondition: another object has the name now
                log.warning("ProvisioningRequest %s/%s left alone: no longer the one of uid "
                            "%s made for gang %s (%s)", ns, action.name, action.uid,
                            action.gang, exc)
                return
            if exc.status != 404:
                log.warning("provisioning write failed: %s", exc)
        for name in action.templates:
            path = f"/api/v1/namespaces/{ns}/podtemplates/{name}"
            try:
                there = await self.kube.get(path)
            except ApiError as exc:
                log.warning("provisioning read failed: %s", exc)
                continue
            if there is None:
                continue
            uid = _uid(there)
            if _marker(there) != action.gang or not uid:
                log.warning("PodTemplate %s/%s left alone: not the extender's for gang %s",
                            ns, name, action.gang)
                continue
            self._lead()
            await self._quiet(self.kube.delete(path, uid=uid), ok=(404, 409))
        log.info("ProvisioningRequest %s/%s deleted: %s", ns, action.name, action.reason)

    @staticmethod
    async def _quiet(call: Any, ok: tuple[int, ...] = (404,)) -> None:
        """A write whose failure is logged, not raised: gone already (404) is what was
        wanted (and a delete's failed uid precondition, 409, when `ok` says so: another
        object has the name now, left alone)."""
        try:
            await call
        except ApiError as exc:
            if exc.status not in ok:
                log.warning("provisioning write failed: %s", exc)

    def _report(self, report: ProvisioningReport) -> None:
        if self.on_result is not None:
            self.on_result(report.outcome)
        g = report.group
        api_version = group_api_version(g.source, g.key)
        if self.events is None or api_version is None:
            return
        warning = report.outcome not in ("requested", "provisioned")
        self.events.record(ObjectRef("PodGroup", api_version, g.namespace, g.name, g.uid),
                           _EVENT_REASONS.get(report.outcome, report.outcome),
                           report.message, warning=warning)

"""The ProvisioningRequest adapter (`scheduler/provisioner.py`): the objects it writes for
a gang, in which order, what it tolerates, what it tells the core; its routing from the
dispatcher and its discovery through the informer. The decisions are the core's
(tests/core/test_provisioning.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.provisioning_request import (
    ATOMIC_CLASS,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    CONSUMES_FOR,
    GANG_ANNOTATION,
    SCALE_DOWN_DISABLED,
    SCALE_DOWN_OURS,
    RequestInfo,
)
from extender.core.model.types import KUEUE, GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import (
    CreateRequest,
    DeleteRequest,
    GroupRef,
    PodRef,
    PodSet,
    ProtectNode,
    ProvisioningReport,
)
from extender.core.wiring import Core
from extender.kube.client import ApiError, Kube
from extender.kube.informer import Informer, InformerOptions
from extender.kube.recorder import ObjectRef
from extender.scheduler.dispatch import Dispatcher, Outlets
from extender.scheduler.provisioner import PROVISIONING_REQUESTS, Provisioner

GROUP = GroupRef("ns", "train", "uid-train")
CREATE = CreateRequest(GROUP, "ns/train", "train-capacity", ATOMIC_CLASS,
                       (PodSet(PodRef("ns", "train-0", "u0"), 3),
                        PodSet(PodRef("ns", "train-3", "u3"), 1)),
                       (PodRef("ns", "train-0", "u0"), PodRef("ns", "train-3", "u3")))


class FakeKube:
    """The API server's side: `objects` are what exists (path -> object), for the
    read-backs after a 409 and the reads before a PodTemplate is deleted."""

    def __init__(self, fail: dict[str, ApiError] | None = None,
                 pods: dict[str, dict[str, Any]] | None = None,
                 objects: dict[str, dict[str, Any]] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail = fail or {}
        self.objects = objects or {}
        self.pods = pods if pods is not None else {
            name: {"metadata": {"name": name, "labels": {"app": "train"}},
                   "spec": {"nodeName": "", "schedulingGates": [{"name": "g"}],
                            "containers": [{"name": "c", "image": "x"}]}}
            for name in ("train-0", "train-3")}

    def _call(self, verb: str, path: str, body: Any = None) -> None:
        self.calls.append((verb, path, body))
        for prefix, error in self.fail.items():
            if f"{verb} {path}".startswith(prefix):
                raise error

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("get", f"/api/v1/namespaces/{namespace}/pods/{name}")
        return self.pods.get(name)

    async def get(self, path: str) -> dict[str, Any] | None:
        self._call("read", path)
        return self.objects.get(path)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._call("create", path, body)
        name = body["metadata"]["name"]
        return {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}

    async def delete(self, path: str, uid: str = "") -> None:
        self._call("delete", path, uid)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self._call("patch", path, patch)


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[ObjectRef, str, str, bool]] = []

    def record(self, ref: ObjectRef, reason: str, message: str, warning: bool = False) -> None:
        self.recorded.append((ref, reason, message, warning))


def run(kube: FakeKube, action: Any, manager: GangManager | None = None) -> Provisioner:
    p = Provisioner(manager or GangManager(), kube, clock=lambda: 100.0)
    asyncio.run(p.do(action))
    return p


def _error(status: int) -> ApiError:
    return ApiError(status, "x", "y")


def test_a_request_is_made_templates_first_then_its_members_consume_it() -> None:
    kube = FakeKube()
    run(kube, CREATE)
    writes = [(v, p) for v, p, _ in kube.calls if v not in ("get", "read")]
    assert writes == [
        ("create", "/api/v1/namespaces/ns/podtemplates"),
        ("create", "/api/v1/namespaces/ns/podtemplates"),
        ("create", "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests"),
        ("patch", "/api/v1/namespaces/ns/pods/train-0"),
        ("patch", "/api/v1/namespaces/ns/pods/train-3"),
    ]
    owner = [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
              "name": "train", "uid": "uid-train"}]
    t0 = kube.calls[1][2]
    assert t0["metadata"]["name"] == "train-capacity-0"
    assert t0["metadata"]["ownerReferences"] == owner
    assert t0["metadata"]["annotations"] == {GANG_ANNOTATION: "ns/train"}
    spec = t0["template"]["spec"]
    assert "nodeName" not in spec and "schedulingGates" not in spec  # not a scheduled pod
    assert spec["containers"] == [{"name": "c", "image": "x"}]
    assert t0["template"]["metadata"] == {
        "labels": {"app": "train"},
        "annotations": {CONSUME_ANNOTATION: "train-capacity", CLASS_ANNOTATION: ATOMIC_CLASS}}
    req = kube.calls[4][2]
    assert req["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert req["kind"] == "ProvisioningRequest"
    assert req["metadata"]["ownerReferences"] == owner
    assert req["metadata"]["annotations"] == {GANG_ANNOTATION: "ns/train"}
    assert req["spec"] == {"provisioningClassName": ATOMIC_CLASS, "podSets": [
        {"podTemplateRef": {"name": "train-capacity-0"}, "count": 3},
        {"podTemplateRef": {"name": "train-capacity-1"}, "count": 1}]}
    assert kube.calls[-1][2] == {"metadata": {"annotations": {
        CONSUME_ANNOTATION: "train-capacity", CLASS_ANNOTATION: ATOMIC_CLASS,
        CONSUMES_FOR: "ns/train"}}}  # the pod admission policy checks it names its gang


def test_a_kueue_pod_group_has_no_owner_to_name() -> None:
    kube = FakeKube()
    kueue = CreateRequest(GroupRef("ns", "train", "", KUEUE), "kueue:ns/train",
                          "train-capacity", ATOMIC_CLASS, CREATE.pod_sets, ())
    run(kube, kueue)
    assert all(c[2]["metadata"]["ownerReferences"] == []
               for c in kube.calls if c[0] == "create")


TEMPLATES = "/api/v1/namespaces/ns/podtemplates"
REQUESTS = "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests"


def _obj(name: str, gang: str | None, uid: str = "") -> dict[str, Any]:
    notes = {} if gang is None else {GANG_ANNOTATION: gang}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid or f"old-{name}",
                         "annotations": notes}}


def test_objects_made_before_a_restart_are_taken_as_made() -> None:
    """A 409 whose object, read back, carries our marker for this gang: ours."""
    kube = FakeKube(fail={"create /apis/autoscaling.x-k8s.io": _error(409),
                          f"create {TEMPLATES}": _error(409)},
                    objects={f"{TEMPLATES}/train-capacity-0": _obj("t0", "ns/train"),
                             f"{TEMPLATES}/train-capacity-1": _obj("t1", "ns/train"),
                             f"{REQUESTS}/train-capacity": _obj("r", "ns/train")})
    manager = GangManager()
    p = run(kube, CREATE, manager)
    assert [v for v, _, _ in kube.calls].count("patch") == 2  # went on to the members
    assert p.manager.reads.backoff("ns/train") is None
    assert not [c for c in kube.calls if c[0] == "delete"]


@pytest.mark.parametrize("marker", [None, "volcano:ns/train", ""])
def test_a_409_against_an_object_not_ours_for_the_gang_is_not_adopted(
        marker: str | None) -> None:
    """A user's PodTemplate (no marker), or another gang's (another source's group of
    the same name): left alone, no request made, the gang backs off with the reason in
    its status, and the PodTemplate this call made is taken back by its uid."""
    manager = _asked_manager()
    kube = FakeKube(fail={f"create {TEMPLATES}": _error(409)},
                    objects={f"{TEMPLATES}/train-capacity-0": _obj("t0", marker)})
    one = CreateRequest(GROUP, "ns/train", "train-capacity", ATOMIC_CLASS,
                        (PodSet(PodRef("ns", "train-0", "u0"), 2),), ())
    run(kube, one, manager)
    assert not [c for c in kube.calls if c[1].startswith(REQUESTS)]
    assert not [c for c in kube.calls if c[0] in ("delete", "patch")]
    bo = manager.reads.backoff("ns/train")
    assert bo is not None and bo.attempts == 1
    report = [a for a in manager.take_actions() if isinstance(a, ProvisioningReport)][-1]
    assert report.outcome == "not-created"  # an Event on the PodGroup; the status says it too
    assert ("PodTemplate ns/train-capacity-0 already exists and is not the extender's for "
            "gang ns/train") in report.message, report
    # The request itself of that name, someone else's: the templates made go again.
    kube = FakeKube(fail={"create /apis/autoscaling.x-k8s.io": _error(409)},
                    objects={f"{REQUESTS}/train-capacity": _obj("r", marker)})
    manager = _asked_manager()
    run(kube, CREATE, manager)
    assert [(v, p, u) for v, p, u in kube.calls if v == "delete"] == [
        ("delete", f"{TEMPLATES}/train-capacity-0", "uid-train-capacity-0"),
        ("delete", f"{TEMPLATES}/train-capacity-1", "uid-train-capacity-1")]
    assert manager.reads.backoff("ns/train") is not None


def _asked_manager(taken: bool = True) -> GangManager:
    """A manager whose core asked for the request of gang ns/train (`taken`: the
    CreateRequest taken out of its actions already)."""
    manager = GangManager(Core.wire(Config(preemption=False, starvation_after_seconds=None)))
    manager.provisioning_served(True)
    manager.on_node(NodeInfo("n0", {"cpu": 4000, "memory": 1 << 34, "pods": 10}))
    manager.on_group(GroupInfo("ns", "train", 2, uid="uid-train"), 0.0)
    for i in range(2):
        manager.on_pod(PodInfo(f"u{i}", "ns", f"train-{i}",
                               {"cpu": 3000, "memory": 1 << 30, "pods": 1},
                               labels={"scheduling.x-k8s.io/pod-group": "train"},
                               scheduler_name="gang-scheduler"), 0.0)
    manager.tick(1.0)
    manager.tick(1.1)
    if taken:
        assert any(isinstance(a, CreateRequest) for a in manager.take_actions())
    return manager


@pytest.mark.parametrize("fail", [
    {"create /apis/autoscaling.x-k8s.io": _error(403)},
    {"create /api/v1/namespaces/ns/podtemplates": _error(422)},
])
def test_a_request_that_cannot_be_made_backs_the_gang_off(fail: dict[str, ApiError]) -> None:
    manager = _asked_manager()
    kube = FakeKube(fail=fail)
    run(kube, CREATE, manager)
    bo = manager.reads.backoff("ns/train")
    assert bo is not None and bo.attempts == 1
    # What this call made it takes back itself, by uid; the core asks no delete of what
    # it never saw.
    made = [p for v, p, _ in kube.calls if v == "create" and p == TEMPLATES]
    took_back = [(p, u) for v, p, u in kube.calls if v == "delete"]
    assert took_back == [(f"{TEMPLATES}/train-capacity-{i}", f"uid-train-capacity-{i}")
                         for i in range(len(made) if "autoscaling" in next(iter(fail))
                                        else 0)]
    assert not [a for a in manager.take_actions() if isinstance(a, DeleteRequest)]


def test_a_member_gone_before_its_template_was_copied_backs_off() -> None:
    manager = _asked_manager()
    kube = FakeKube(pods={})
    run(kube, CREATE, manager)
    assert not [c for c in kube.calls if c[0] == "create"]
    bo = manager.reads.backoff("ns/train")
    assert bo is not None and bo.attempts == 1


DELETE = DeleteRequest("ns", "train-capacity", ("train-capacity-0", "train-capacity-1"),
                       "gang ns/train is bound", "uid-r", "ns/train")


def test_a_delete_takes_the_request_by_its_uid_then_its_templates_and_gone_is_fine(
        caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeKube(fail={f"delete {TEMPLATES}/train-capacity-0": _error(404)},
                    objects={f"{TEMPLATES}/train-capacity-0": _obj("t0", "ns/train", "u-t0"),
                             f"{TEMPLATES}/train-capacity-1": _obj("t1", "ns/train", "u-t1")})
    run(kube, DELETE)
    assert [c for c in kube.calls if c[0] == "delete"] == [
        ("delete", f"{REQUESTS}/train-capacity", "uid-r"),  # the uid precondition
        ("delete", f"{TEMPLATES}/train-capacity-0", "u-t0"),
        ("delete", f"{TEMPLATES}/train-capacity-1", "u-t1"),
    ]
    assert "write failed" not in caplog.text  # gone already is what was wanted
    run(FakeKube(fail={"delete": _error(500)}),
        DeleteRequest("ns", "r", (), "x", "uid-r", "ns/r"))
    assert "provisioning write failed: 500" in caplog.text


def test_a_request_no_longer_the_one_seen_is_left_alone_with_its_templates(
        caplog: pytest.LogCaptureFixture) -> None:
    """The uid precondition fails (409): another object has the name now. Logged, not
    retried, and its templates are not touched."""
    kube = FakeKube(fail={"delete /apis/autoscaling.x-k8s.io": _error(409)},
                    objects={f"{TEMPLATES}/train-capacity-0": _obj("t0", "ns/train")})
    run(kube, DELETE)
    assert [c[0] for c in kube.calls] == ["delete"]
    assert "left alone: no longer the one of uid uid-r" in caplog.text
    kube = FakeKube()
    run(kube, DeleteRequest("ns", "train-capacity", (), "x", "", "ns/train"))
    assert not kube.calls  # never by name alone


def test_a_users_podtemplate_named_like_ours_is_left_alone() -> None:
    """Only PodTemplates read back carrying our marker for the gang are deleted."""
    kube = FakeKube(objects={f"{TEMPLATES}/train-capacity-0": _obj("t0", None),
                             f"{TEMPLATES}/train-capacity-1": _obj("t1", "kueue:ns/train")})
    run(kube, DELETE)
    assert [c[1] for c in kube.calls if c[0] == "delete"] == [f"{REQUESTS}/train-capacity"]


def test_a_node_is_protected_and_released_with_both_annotations() -> None:
    kube = FakeKube()
    run(kube, ProtectNode("n1", True, "ns/train"))
    run(kube, ProtectNode("n1", False, "ns/train"))  # off is off, whatever it names
    assert [c[2] for c in kube.calls] == [
        {"metadata": {"annotations": {SCALE_DOWN_DISABLED: "true", SCALE_DOWN_OURS: "ns/train"}}},
        {"metadata": {"annotations": {SCALE_DOWN_DISABLED: None, SCALE_DOWN_OURS: None}}},
    ]
    assert kube.calls[0][1] == "/api/v1/nodes/n1"


def test_a_report_is_an_event_on_the_podgroup_and_a_metric() -> None:
    events, outcomes = Events(), list[str]()
    p = Provisioner(GangManager(), FakeKube(), events, on_result=outcomes.append)
    p.add(ProvisioningReport(GROUP, "ns/train-capacity", "failed", "gang ns/train: ... Failed"))
    p.add(ProvisioningReport(GROUP, "ns/train-capacity", "requested", "gang ns/train: asked"))
    assert outcomes == ["failed", "requested"]
    (ref, reason, _, warning), (_, reason2, _, warning2) = events.recorded
    assert (ref.kind, ref.name, ref.uid) == ("PodGroup", "train", "uid-train")
    assert (reason, warning, reason2, warning2) == ("ProvisioningFailed", True,
                                                    "ProvisioningRequested", False)


def test_the_dispatcher_hands_provisioning_actions_to_the_adapter() -> None:
    manager = _asked_manager()
    manager.on_provisioning_request(RequestInfo(
        "ns", "train-capacity", "uid-r", "ns/train", ATOMIC_CLASS, 1.5, "Accepted", 1.5),
        1.5)
    manager.on_group_deleted("ns/train")
    manager.tick(2.0)
    seen: list[object] = []

    class Recording(Provisioner):
        def add(self, action: Any, changed: Any = None) -> None:
            seen.append(action)

    dispatcher = Dispatcher(manager, None, clock=lambda: 2.0,
                            outlets=Outlets(provisioner=Recording(manager, None)))
    dispatcher.drain()
    assert [type(a) for a in seen] == [DeleteRequest]


def test_discovery_tells_the_core_whether_the_api_is_served() -> None:
    manager = GangManager()

    class Discovery:
        async def discover(self, group_version: str) -> set[str] | None:
            assert group_version == "/apis/autoscaling.x-k8s.io/v1"
            return {"provisioningrequests"}

        async def list_pages(self, *a: Any, **kw: Any) -> Any:
            if False:
                yield
            raise asyncio.CancelledError

    p = Provisioner(manager, None)
    inf = Informer(Discovery(), manager, lambda: 0.0, lambda: None,  # type: ignore[arg-type]
                   kinds=(PROVISIONING_REQUESTS,), options=InformerOptions(on_served=p.served))

    async def go() -> None:
        await asyncio.wait_for(inf._wait_until_served(PROVISIONING_REQUESTS), 5)

    asyncio.run(go())
    assert manager._core.provisioning.served


def test_the_clients_delete_carries_the_uid_precondition_and_get_reads_or_none() -> None:
    """kube/client.py: a delete with a uid sends DeleteOptions.preconditions.uid (the API
    server answers 409 when the object of that name has another uid); a read of what is
    not there is None, not an error."""
    seen: list[tuple[str, str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.content))
        if request.method == "DELETE" and b'"other"' in request.content:
            return httpx.Response(409, json={"reason": "Conflict", "message":
                                             "Precondition failed: UID in precondition"})
        if request.method == "GET" and request.url.path.endswith("/gone"):
            return httpx.Response(404, json={})
        return httpx.Response(200, json={"metadata": {"name": "x", "uid": "u1"}})

    async def go() -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            kube = Kube(http)
            await kube.delete(f"{TEMPLATES}/x", uid="u1")
            with pytest.raises(ApiError) as exc:
                await kube.delete(f"{TEMPLATES}/x", uid="other")
            assert exc.value.status == 409
            return await kube.get(f"{TEMPLATES}/x"), await kube.get(f"{TEMPLATES}/gone")

    found, gone = asyncio.run(go())
    assert found is not None and found["metadata"]["uid"] == "u1" and gone is None
    method, path, body = seen[0]
    assert (method, path) == ("DELETE", f"{TEMPLATES}/x")
    assert orjson.loads(body) == {"kind": "DeleteOptions", "apiVersion": "v1",
                                  "preconditions": {"uid": "u1"}}


def test_what_the_core_says_of_a_request_not_created_goes_out_at_once() -> None:
    """The provisioner tells the core a request could not be made; what the core says
    then (the gang backs off: its status and an Event) is carried out by the dispatcher
    that handed the request over, at once rather than at the next tick's drain."""
    manager = _asked_manager(taken=False)
    outcomes: list[str] = []
    reports: list[object] = []
    kube = FakeKube(fail={"create /apis/autoscaling.x-k8s.io": _error(403)})
    provisioner = Provisioner(manager, kube, on_result=outcomes.append, clock=lambda: 1.2)
    dispatcher = Dispatcher(manager, None, clock=lambda: 1.2,
                            outlets=Outlets(provisioner=provisioner, on_report=reports.append))

    async def go() -> None:
        dispatcher.drain()  # the CreateRequest, queued for the provisioner
        reports.clear()
        running = asyncio.create_task(provisioner.run())
        for _ in range(200):
            if "not-created" in outcomes:
                break
            await asyncio.sleep(0.01)
        running.cancel()

    asyncio.run(go())
    assert outcomes == ["requested", "not-created"]
    assert [type(r).__name__ for r in reports] == ["StatusChanged"]
    assert manager.take_actions() == []

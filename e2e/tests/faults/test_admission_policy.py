"""The extender's pod patches are limited to its wake-up annotation (issue 27, item 6),
its node patches to the scale-down annotations it set itself, its deletes to the objects
carrying its marker (issue 42, "Only what is ours").

RBAC can only say "patch pods". deploy/admission/extender-pod-patches.yaml, a
ValidatingAdmissionPolicy, refuses any other change the extender's account makes to a pod.
Here the shipped manifests (kustomize build of deploy/, not a copy) are applied to the local
API server, and the extender's own credentials (the token its Secret receives, as the
extender container mounts it) patch a pending pod:

* the extender's wake-up patch, sent by the extender's own client code, is admitted;
* every other change (labels, other annotations, spec, finalizers, owner references), alone
  or along with a wake-up, is refused, and the pod is left as it was;
* the same changes by another identity (the admin) are admitted: the policy judges only the
  extender's account.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import deploy_kit as dk
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.k8s import ApiException, client
from e2e.harness.objects import create_pod
from e2e.harness.queries import get_pod
from e2e.harness.target import ClusterApis
from e2e.harness.waiting import wait_for
from extender.core.manager import GangManager
from extender.core.model.provisioning_request import (
    ATOMIC_CLASS,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    CONSUMES_FOR,
    GANG_ANNOTATION,
    SCALE_DOWN_DISABLED,
    SCALE_DOWN_OURS,
    request_name,
)
from extender.core.model.sources import jobset_gang_name
from extender.core.model.vocabulary import ProtectNode
from extender.kube.client import ApiError, make_kube
from extender.scheduler.provisioner import Provisioner
from extender.scheduler.wakeups import WAKE_ANNOTATION

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def extender_api(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Path]]:
    """deploy/'s accounts, roles and admission policy applied for real; the extender's
    credentials as a client and as a kubeconfig."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane (E2E_KUBECONFIG is set)")
    from e2e.harness.target import kube as admin

    docs = dk.rbac_docs(dk.kustomize_build())
    kinds = {d["kind"] for d in docs}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds
    errors = dk.apply(dk.dynamic_client(admin().api), docs)
    assert not errors, "\n".join(errors)
    kubeconfig = dk.secret_token_kubeconfig(
        control_plane, admin().core, dk.INSTALL_NS, dk.EXTENDER_TOKEN_SECRET,
        tmp_path_factory.mktemp("vap") / "extender.kubeconfig")
    api = dk.sa_api_client(kubeconfig)
    yield api, kubeconfig
    api.close()


def _status(patch: Callable[[], object]) -> int:
    """The HTTP status of a patch made as the extender: 200, or the refusal's."""
    try:
        patch()
    except ApiException as e:
        return int(e.status)
    return 200


def _patch(api: Any, ns: str, name: str, body: dict[str, Any]) -> int:
    """Merge-patch the pod as the extender; the HTTP status (200, or the refusal's)."""
    return _status(lambda: client.CoreV1Api(api).patch_namespaced_pod(name, ns, body))


def _wait_until_refused(patch: Callable[[dict[str, Any]], int], what: str) -> None:
    """A policy takes effect a moment after it is created: wait until it refuses. The
    probe is an object of its own, and each try changes a label to a new value: a try
    the policy let through would otherwise leave the next identical patch nothing to
    change (which the policy rightly admits) and the wait would never end."""
    tries = iter(range(1_000_000))
    wait_for(lambda: patch({"metadata": {"labels": {"try": str(next(tries))}}}) == 422 or None,
             30, what)


def _refusal(api: Any, ns: str, name: str, body: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api).patch_namespaced_pod(name, ns, body)
    assert exc.value.status == 422, (exc.value.status, exc.value.body)
    text = str(exc.value.body)
    assert "ValidatingAdmissionPolicy" in text and "gang-scheduler-extender-pod-patches" in text
    return text


def _wake(now: float) -> dict[str, Any]:
    return {"metadata": {"annotations": {WAKE_ANNOTATION: f"{now:.3f}"}}}


def _as_extender_code(kubeconfig: Path, ns: str, name: str, now: float) -> None:
    """The wake-up patch exactly as extender/scheduler/wakeups.py sends it, through the
    extender's own client (make_kube, merge_patch)."""
    async def go() -> None:
        kube = make_kube(str(kubeconfig))
        try:
            await kube.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}", _wake(now))
        finally:
            await kube.http.aclose()

    asyncio.run(go())


def test_the_extender_may_patch_only_its_wake_up_annotation(
    extender_api: tuple[Any, Path], namespace: str, kube: ClusterApis
) -> None:
    api, kubeconfig = extender_api
    create_pod(namespace, "pending", labels={"team": "a"},
               annotations={"owner": "someone"}, scheduler_name="nobody-schedules-this")
    before = get_pod(namespace, "pending")
    assert before is not None

    create_pod(namespace, "probe", scheduler_name="nobody-schedules-this")
    _wait_until_refused(lambda body: _patch(api, namespace, "probe", body),
                        "the admission policy refusing the extender's label patch")

    refused: dict[str, dict[str, Any]] = {
        "add a label": {"metadata": {"labels": {"extra": "1"}}},
        "change a label": {"metadata": {"labels": {"team": "b"}}},
        "remove a label": {"metadata": {"labels": {"team": None}}},
        "add an annotation": {"metadata": {"annotations": {"other": "1"}}},
        "change an annotation": {"metadata": {"annotations": {"owner": "me"}}},
        "remove an annotation": {"metadata": {"annotations": {"owner": None}}},
        "a wake-up with a label": {"metadata": {"labels": {"team": "b"},
                                                "annotations": {WAKE_ANNOTATION: "1.000"}}},
        "a wake-up with an annotation": {"metadata": {"annotations": {
            WAKE_ANNOTATION: "1.000", "other": "1"}}},
        "change the spec": {"spec": {"activeDeadlineSeconds": 5}},
        "add a toleration": {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}},
        "change the image": {"spec": {"containers": [{"name": before["spec"]["containers"][0][
            "name"], "image": "registry.example.com/other:1"}]}},
        "add a finalizer": {"metadata": {"finalizers": ["example.com/hold"]}},
        "add an owner": {"metadata": {"ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "x",
            "uid": "00000000-0000-0000-0000-000000000001"}]}},
    }
    messages = {what: _refusal(api, namespace, "pending", body)
                for what, body in refused.items()}
    assert "may not change a pod's labels" in messages["add a label"]
    assert "may change no pod annotation but" in messages["add an annotation"]
    assert "may not change a pod's spec" in messages["change the spec"]

    # The extender's own wake-up, by its own code: admitted, twice (a new value each time).
    _as_extender_code(kubeconfig, namespace, "pending", 1000.0)
    _as_extender_code(kubeconfig, namespace, "pending", 1001.5)
    after = get_pod(namespace, "pending")
    assert after is not None
    assert after["metadata"]["annotations"] == {"owner": "someone", WAKE_ANNOTATION: "1001.500"}
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"] == before["spec"]
    assert not after["metadata"].get("finalizers") and not after["metadata"].get(
        "ownerReferences")
    # Removing its own annotation is a change of that annotation only.
    assert _patch(api, namespace, "pending",
                  {"metadata": {"annotations": {WAKE_ANNOTATION: None}}}) == 200

    # The policy is about the extender's account, not about pods: the admin may.
    kube.core.patch_namespaced_pod("pending", namespace, {"metadata": {"labels": {"team": "b"}}})
    pod = get_pod(namespace, "pending")
    assert pod is not None and pod["metadata"]["labels"]["team"] == "b"


def test_a_wake_up_of_a_pod_that_is_gone_is_still_a_404(
    extender_api: tuple[Any, Path], namespace: str
) -> None:
    """The policy does not turn the extender's "pod already gone" (which wakeups.py
    ignores) into another error."""
    _, kubeconfig = extender_api
    with pytest.raises(ApiError) as exc:
        _as_extender_code(kubeconfig, namespace, "never-created", 1.0)
    assert exc.value.status == 404


def test_the_extender_may_set_the_provisioning_annotations_of_a_pod(
    extender_api: tuple[Any, Path], namespace: str
) -> None:
    """scheduler/provisioner.py: a gang's members consume its ProvisioningRequest, with
    the extender's marker naming the gang beside; the same patch with anything else is
    refused, and so is the consume annotation on a pod of no gang, with a marker naming
    another gang, or naming another request than the gang's own."""
    api, _ = extender_api
    create_pod(namespace, "member", scheduler_name="nobody-schedules-this", pod_group="train")
    create_pod(namespace, "plain", scheduler_name="nobody-schedules-this")
    gang = f"{namespace}/train"
    consume = {CONSUME_ANNOTATION: request_name(gang), CLASS_ANNOTATION: ATOMIC_CLASS,
               CONSUMES_FOR: gang}
    _wait_until_refused(lambda body: _patch(api, namespace, "member", body),
                        "the admission policy refusing the extender's label patch")
    _refusal(api, namespace, "member",
             {"metadata": {"annotations": {**consume, "other": "1"}}})
    for other in ({CONSUMES_FOR: f"volcano:{namespace}/train"},  # another gang's marker
                  {CONSUME_ANNOTATION: "train-capacity.volcano"},  # another gang's request
                  {CONSUME_ANNOTATION: "kueue-wl-1a2b3"},  # another controller's
                  {CONSUMES_FOR: None}):  # no marker
        text = _refusal(api, namespace, "member", {"metadata": {"annotations": {
            **consume, **other}}})
        assert "only its own gang's ProvisioningRequest" in text, other
    _refusal(api, namespace, "plain", {"metadata": {"annotations": consume}})  # no gang
    assert _patch(api, namespace, "member", {"metadata": {"annotations": consume}}) == 200
    pod = get_pod(namespace, "member")
    assert pod is not None and pod["metadata"]["annotations"] == consume
    # Set, never removed.
    assert _patch(api, namespace, "member",
                  {"metadata": {"annotations": {CONSUME_ANNOTATION: None}}}) == 422


def test_the_extender_may_delete_only_podtemplates_carrying_its_marker(
    extender_api: tuple[Any, Path], namespace: str, kube: ClusterApis
) -> None:
    """deploy/admission/extender-deletes.yaml: "delete podtemplates" is for the ones the
    extender made (our marker); a user's PodTemplate named like ours is refused to the
    extender's account, not to the admin."""
    api, _ = extender_api

    def template(name: str, notes: dict[str, str]) -> None:
        kube.core.create_namespaced_pod_template(namespace, {
            "metadata": {"name": name, "annotations": notes},
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}})

    def delete(name: str) -> int:
        return _status(lambda: client.CoreV1Api(api).delete_namespaced_pod_template(
            name, namespace))

    def refused() -> bool | None:
        """A probe of its own, made again when a try before the policy took effect
        deleted it."""
        try:
            template("probe", {})
        except ApiException as e:
            if e.status != 409:
                raise
        return delete("probe") == 422 or None

    wait_for(refused, 30,
             "the delete policy refusing the extender's delete of an unmarked PodTemplate")
    template("train-capacity-0", {"owner": "a user"})
    assert delete("train-capacity-0") == 422
    assert kube.core.read_namespaced_pod_template("train-capacity-0", namespace)
    template("ours-capacity-0", {GANG_ANNOTATION: f"{namespace}/ours"})
    assert delete("ours-capacity-0") == 200
    kube.core.delete_namespaced_pod_template("train-capacity-0", namespace)  # the admin may


def test_the_extender_may_change_only_the_scale_down_annotations_of_a_node(
    extender_api: tuple[Any, Path], kube: ClusterApis
) -> None:
    """deploy/admission/extender-node-patches.yaml: "patch nodes" is for the autoscaler's
    scale-down-disabled annotation (and the extender's own beside it) on reserved nodes,
    exactly as the adapter sends it; labels, taints, cordon and other annotations are
    refused to the extender's account, not to the admin."""
    api, kubeconfig = extender_api
    name = f"vap-node-{int(time.time() * 1000) % 10**9}"
    kube.core.create_node({"metadata": {"name": name, "labels": {"pool": "a"},
                                        "annotations": {"owner": "ops"}}})
    try:
        def patch(body: dict[str, Any]) -> int:
            return _status(lambda: client.CoreV1Api(api).patch_node(name, body))

        _wait_until_refused(patch, "the node policy refusing the extender's label patch")
        for body in ({"metadata": {"labels": {"pool": "b"}}},
                     {"metadata": {"annotations": {"owner": "me"}}},
                     {"spec": {"unschedulable": True}},
                     {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}):
            assert patch(body) == 422, body

        async def protect(on: bool) -> None:
            k = make_kube(str(kubeconfig))
            try:
                await Provisioner(GangManager(), k).do(ProtectNode(name, on, "ns/train"))
            finally:
                await k.http.aclose()

        asyncio.run(protect(True))
        node = kube.core.read_node(name).to_dict()
        assert node["metadata"]["annotations"] == {
            "owner": "ops", SCALE_DOWN_DISABLED: "true", SCALE_DOWN_OURS: "ns/train"}
        asyncio.run(protect(False))
        node = kube.core.read_node(name).to_dict()
        assert node["metadata"]["annotations"] == {"owner": "ops"}
        # An operator's own scale-down-disabled annotation (no marker of ours beside):
        # neither removed, changed nor claimed by the extender's account.
        kube.core.patch_node(name, {"metadata": {"annotations": {SCALE_DOWN_DISABLED: "false"}}})
        theirs: list[dict[str, str | None]] = [
            {SCALE_DOWN_DISABLED: None},  # removed
            {SCALE_DOWN_DISABLED: "true", SCALE_DOWN_OURS: "ns/train"},  # taken over
            {SCALE_DOWN_OURS: "ns/train"}]  # claimed
        for notes in theirs:
            assert patch({"metadata": {"annotations": notes}}) == 422, notes
        node = kube.core.read_node(name).to_dict()
        assert node["metadata"]["annotations"] == {"owner": "ops", SCALE_DOWN_DISABLED: "false"}
        assert node["metadata"]["labels"]["pool"] == "a"
        assert "k" not in {t["key"] for t in node["spec"].get("taints") or []}
        assert not node["spec"].get("unschedulable")
    finally:
        kube.core.delete_node(name)


def test_the_extender_may_set_the_provisioning_annotations_of_a_jobset_pod(
    extender_api: tuple[Any, Path], namespace: str
) -> None:
    """A JobSet's gang has no label of its own: the policy derives it from the JobSet
    controller's labels (name, restart attempt, uid; the replicated Job and Job index
    under "per-job", or where the JobSet itself may split the set) as core/model/sources.py
    does, so
    the extender may make a JobSet pod consume its gang's request, and only that one:
    not another attempt's, and not on a pod whose attempt is not a plain number."""
    api, _ = extender_api
    uid = "0f6a3c2e-8d41-4b7a-9e10-5c2d7f3b9a61"
    labels = {"jobset.sigs.k8s.io/jobset-name": "train", "jobset.sigs.k8s.io/jobset-uid": uid,
              "jobset.sigs.k8s.io/restart-attempt": "1"}
    create_pod(namespace, "member", scheduler_name="nobody-schedules-this", labels=labels)
    create_pod(namespace, "odd", scheduler_name="nobody-schedules-this",
               labels={**labels, "jobset.sigs.k8s.io/restart-attempt": "01"})
    create_pod(namespace, "split", scheduler_name="nobody-schedules-this",
               labels={**labels, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                       "jobset.sigs.k8s.io/job-index": "1"},
               annotations={"gang-extender.x-k8s.io/jobset-gang": "per-job"})
    gang = f"jobset:{namespace}/{jobset_gang_name('train', uid, 1)}"
    old = f"jobset:{namespace}/{jobset_gang_name('train', uid, 0)}"

    def consume(g: str) -> dict[str, Any]:
        return {"metadata": {"annotations": {CONSUME_ANNOTATION: request_name(g),
                                             CLASS_ANNOTATION: ATOMIC_CLASS,
                                             CONSUMES_FOR: g}}}

    _wait_until_refused(lambda body: _patch(api, namespace, "member", body),
                        "the admission policy refusing the extender's label patch")
    text = _refusal(api, namespace, "member", consume(old))  # the old attempt's gang
    assert "only its own gang's ProvisioningRequest" in text
    _refusal(api, namespace, "odd", consume(f"jobset:{namespace}/train.01.0f6a3c2e"))
    assert _patch(api, namespace, "member", consume(gang)) == 200
    pod = get_pod(namespace, "member")
    assert pod is not None and pod["metadata"]["annotations"][CONSUMES_FOR] == gang
    # A pod of a Job that is a gang of its own ("per-job"): that Job's gang, not the set's.
    _refusal(api, namespace, "split", consume(gang))
    _refusal(api, namespace, "split", consume(f"{gang}.workers"))
    assert _patch(api, namespace, "split", consume(f"{gang}.workers-1")) == 200
    # A pod whose JobSet may split it (on the JobSet, which a policy cannot read): its
    # replicated Job's gang or its Job's, named by its own labels, and no other's.
    create_pod(namespace, "by-jobset", scheduler_name="nobody-schedules-this",
               labels={**labels, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                       "jobset.sigs.k8s.io/job-index": "1"})
    for other in (f"{gang}.driver", f"{gang}.workers-0", f"{old}.workers"):
        _refusal(api, namespace, "by-jobset", consume(other))
    for own in (f"{gang}.workers", f"{gang}.workers-1", gang):
        assert _patch(api, namespace, "by-jobset", consume(own)) == 200, own

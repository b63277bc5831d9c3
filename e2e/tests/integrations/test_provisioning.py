"""Gangs on an autoscaled node pool (issue 31), against the real Cluster Autoscaler (kwok
provider, :mod:`e2e.integrations.autoscaler`) growing a pool of fake nodes for ProvisioningRequests.

Shapes: static fake nodes of 4 CPUs, pool nodes of 4 CPUs; every member asks 3 CPUs, so a
node holds one member. Each test shares the cluster with what does not concern it: pods
of no gang bound on the static nodes (1 CPU each, which still leaves room for a member),
and a gang set aside as unplaceable by its own rules (members of 64 CPUs, more than any
node has or the pool makes): it must ask for nothing. Requests are followed from their
watch (:mod:`e2e.integrations.provisioning_objects`).

Why the autoscaler starts only once the gang's request is there: pending members not yet
annotated to consume a request are the autoscaler's ordinary business, and its ordinary
scale-up, racing the extender's first tick, would add nodes for them one by one (the
partial scale-up the issue describes). Started after, it sees only pods that consume the
request and the request itself: what is tested is what the extender asked for and what
it did with the answer. The scale-down test is the other way round: the autoscaler makes
the nodes first, then scales down around a gang's reservation.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.fixtures import NodeSet
from e2e.harness.k8s import ApiException
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import get_podgroup, list_pods
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.autoscaler import (
    ATOMIC,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    GROUP,
    PLURAL,
    SCALE_DOWN_DISABLED,
    VERSION,
    Autoscaler,
)
from e2e.integrations.autoscaler_standin import StandinAutoscaler, choose
from e2e.integrations.operators import obtain_operator, scheduled_condition
from e2e.integrations.provisioning_objects import (
    Requests,
    Seen,
    create_request,
    fail_request,
    pg_events,
    pod_template,
    wait_annotated,
    wait_provisioned,
    wait_request,
    wait_served,
    wait_untainted,
)
from e2e.tests.volcano import volcano_crd

__all__ = ["volcano_crd"]  # the fixture of e2e/tests/volcano.py, used by name below


pytestmark = pytest.mark.e2e

LOGS = ["cluster-autoscaler", "gang-extender", "gang-kube-scheduler", "fake-kubelet"]
NODE_CPU, MEMBER_CPU = "4", "3"
QUIET = 4.0
"""Seconds watched after a gang settled to show no (further) request appears."""


@pytest.fixture(scope="module")
def autoscaler(control_plane: Cluster, fake_kubelet: FakeKubelet) -> Iterator[Autoscaler]:
    """The autoscaler, not running until a test starts it; the ProvisioningRequest CRD
    installed for this module only (the extender discovers it, and forgets it once it is
    removed, so the rest of the session runs as before)."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the Cluster Autoscaler as a local process on the local control plane")
    kind, why = choose()
    print(f"PROVISIONER {kind} ({why})")
    a = (StandinAutoscaler(control_plane) if kind == "standin"
         else Autoscaler(control_plane, obtain_operator("cluster-autoscaler")))
    a.install()
    try:
        yield a
    finally:
        a.stop()
        a.uninstall()


@pytest.fixture
def pool(autoscaler: Autoscaler, gang: GangStack, namespace: str) -> Iterator[str]:
    """A pool name for this test, once the extender watches the requests; the autoscaler
    and its nodes are gone after it."""
    wait_served(gang.extender)
    try:
        yield f"pool-{namespace[-6:]}"
    finally:
        autoscaler.stop()


# ----- what the tests set up -------------------------------------------------------------


def static_nodes(fake_nodes: NodeSet, ns: str, count: int) -> list[str]:
    """``count`` nodes of 4 CPUs outside the pool, each with a pod of no gang (1 CPU)."""
    nodes = fake_nodes.add_nodes(count, prefix=f"static-{ns[-6:]}", cpu=NODE_CPU,
                                 memory="16Gi")
    for n in nodes:
        create_pod(ns, f"foreign-{n}", cpu="1", spec_extra={"nodeName": n})
    return nodes


def gang_of(ns: str, name: str, members: int, cpu: str = MEMBER_CPU,
            annotations: dict[str, str] | None = None) -> None:
    create_podgroup(ns, name, members, timeout=120)
    for i in range(members):
        create_pod(ns, f"{name}-{i}", cpu=cpu, memory="1Gi", scheduler_name=GANG_SCHEDULER,
                   pod_group=name, annotations=annotations)


def unplaceable_gang(ns: str) -> None:
    """Set aside by its own rules: members no node can hold, however many are added (nor
    any the pool makes: the autoscaler's ordinary scale-up leaves them pending too)."""
    create_podgroup(ns, "huge", 2, timeout=120)
    for i in range(2):
        create_pod(ns, f"huge-{i}", cpu="64", scheduler_name=GANG_SCHEDULER,
                   pod_group="huge")


def podgroup_uid(ns: str, name: str) -> str:
    return str((get_podgroup(ns, name) or {})["metadata"]["uid"])


def reason(ns: str, group: str) -> str:
    cond = scheduled_condition(ns, group)
    return cond[0] if cond else ""


def wait_bound(rec: Recorder, group: str, n: int, timeout: float, gang: GangStack) -> None:
    wait_for(lambda: len(rec.bound(group)) == n or NotYet(rec.bound(group)), timeout,
             f"the {n} members of {group} bound", logs=[*LOGS, *gang.logs()])
    rec.assert_never_partial(group, n)


# ----- the tests -------------------------------------------------------------------------


def test_autoscaler_provisions_a_hand_made_request(autoscaler: Autoscaler, pool: str,
                                                   namespace: str) -> None:
    """The harness itself: the autoscaler grows its pool for a request, atomically, and
    the fake kubelet makes its nodes usable (Ready, no ``not-ready`` taint)."""
    autoscaler.start(pool, max_size=4, cpu=NODE_CPU)
    pod_template(namespace, "members", MEMBER_CPU)
    create_request(namespace, "by-hand", "members", 2)
    wait_provisioned(namespace, LOGS)
    nodes = autoscaler.nodes(pool)
    assert len(nodes) == 2, nodes
    wait_untainted(nodes, LOGS)


def test_gang_short_by_two_nodes_asks_binds_nothing_and_lands_whole_once_provisioned(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    """Two nodes for a gang of four: one request, owned by the PodGroup, for the two
    members without room in the atomic class, all four members annotated to consume it;
    nothing bound while it waits (two members would fit); the autoscaler adds exactly
    the two nodes, the request is Provisioned, the gang lands whole on the two static
    and the two new nodes, and the request is deleted once it is bound."""
    ns = namespace
    static = static_nodes(fake_nodes, ns, 2)
    with Recorder(ns) as rec, Requests(ns) as reqs:
        unplaceable_gang(ns)
        gang_of(ns, "train", 4)
        req = wait_request(reqs, gang)
        assert req.name == "train-capacity"
        assert [(o["kind"], o["name"], o["uid"]) for o in req.owners] == [
            ("PodGroup", "train", podgroup_uid(ns, "train"))]
        assert req.spec["provisioningClassName"] == ATOMIC
        assert sum(s["count"] for s in req.spec["podSets"]) == 2, req.spec
        wait_annotated(ns, "train", req.name, gang)
        time.sleep(QUIET)  # the gang waits: two of its four would fit, none is bound
        assert not rec.bound("train"), rec.bound("train")
        assert reason(ns, "train") == "WaitingForProvisioning", scheduled_condition(ns, "train")

        autoscaler.start(pool, max_size=4, cpu=NODE_CPU)
        wait_bound(rec, "train", 4, 60, gang)
        added = autoscaler.nodes(pool)
        # Two were missing. The autoscaler books pending members that fit existing room
        # (its filter-out-schedulable step runs before it sets aside pods consuming a
        # request) and then scales up for the request's pods left without room: asked
        # for the two members without room, it adds two nodes (for the whole gang: 4).
        print(f"MEASURED the autoscaler added {len(added)} nodes for a gang short of 2 "
              f"(request for {sum(s['count'] for s in req.spec['podSets'])} members)")
        assert len(added) == 2, added
        assert {r.node for r in rec.bound("train").values()} <= {*static, *added}
        provisioned = req.first("Provisioned")
        assert provisioned is not None, req.states
        assert min(rec.bind_times("train")) >= provisioned - 1.0, (req.states, rec.history)
        wait_for(lambda: bool(req.deleted) or NotYet(req.states), 20,
                 "the request deleted once the gang is bound", logs=gang.logs())
        time.sleep(QUIET)
        assert [s.name for s in reqs.all()] == ["train-capacity"], reqs.all()
        assert not rec.bound("huge")


def test_failed_request_backs_off_and_asks_again(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    """The gang's request fails: the gang backs off and says so (status, a Warning
    Event), its request is deleted and, after the backoff, a new one is made, which the
    autoscaler provisions, and the gang lands whole.

    The autoscaler itself sets Failed on a request of these classes only after a week
    without capacity (or when it cannot make the request's pods; check-capacity also
    when the request says ``noRetry``); short of that it keeps retrying under
    ``Provisioned=False``. So the test writes Failed on the first request, as the
    autoscaler does when a request expires, while the autoscaler is not yet running."""
    ns = namespace
    static = static_nodes(fake_nodes, ns, 2)
    with Recorder(ns) as rec, Requests(ns) as reqs:
        unplaceable_gang(ns)
        gang_of(ns, "train", 4)
        first = wait_request(reqs, gang)
        fail_request(ns, first.name)

        def asked_again() -> Seen | NotYet:
            later = [s for s in reqs.all() if s.uid != first.uid]
            return later[0] if later else NotYet(reqs.all())

        second = wait_for(asked_again, 30, "a second request after the backoff",
                          logs=gang.logs())
        assert isinstance(second, Seen)
        assert second.name == first.name == "train-capacity"
        assert first.deleted is not None and first.deleted <= second.created, (first, second)
        failed_at = first.first("Failed")
        assert failed_at is not None, first.states
        # --backoff-base 2 (the stack's): not asked again before that
        assert second.created - failed_at >= 1.5, (first.states, second.created)
        print(f"MEASURED asked again {second.created - failed_at:.2f}s after Failed")
        assert not rec.bound("train")
        events = pg_events(ns, "train")
        assert events.get("ProvisioningFailed", {}).get("type") == "Warning", events

        autoscaler.start(pool, max_size=4, cpu=NODE_CPU)
        wait_bound(rec, "train", 4, 60, gang)
        assert {r.node for r in rec.bound("train").values()} <= {
            *static, *autoscaler.nodes(pool)}
        assert second.first("Provisioned") is not None, second.states
        assert [s.uid for s in reqs.all()] == [first.uid, second.uid], reqs.all()
        assert not rec.bound("huge")


def test_deleted_gang_leaves_no_request(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    """A pool too small for the gang (one node where two are missing): the autoscaler
    adds none (all or nothing) and the request stays. Deleting the gang takes its
    request and PodTemplates with it."""
    ns = namespace
    static_nodes(fake_nodes, ns, 2)
    with Recorder(ns) as rec, Requests(ns) as reqs:
        unplaceable_gang(ns)
        gang_of(ns, "train", 4)
        req = wait_request(reqs, gang)
        wait_annotated(ns, "train", req.name, gang)
        autoscaler.start(pool, max_size=1, cpu=NODE_CPU)

        def accepted() -> bool | NotYet:
            return req.first("Accepted") is not None or NotYet(req.states)

        wait_for(accepted, 30, "the request Accepted", logs=LOGS)
        time.sleep(QUIET)  # the autoscaler's loops: not one node for part of the gang
        assert autoscaler.nodes(pool) == []
        assert req.first("Provisioned") is None and req.deleted is None, req.states
        templates = [p.metadata.name for p in
                     kube().core.list_namespaced_pod_template(ns).items]
        assert templates, "the request's PodTemplates"
        assert not rec.bound("train")

        kube().custom.delete_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "train")
        for i in range(4):
            with contextlib.suppress(ApiException):
                kube().core.delete_namespaced_pod(f"train-{i}", ns, grace_period_seconds=0)

        def gone() -> bool | NotYet:
            left = ([s.name for s in reqs.live()],
                    [p.metadata.name for p in kube().core.list_namespaced_pod_template(ns).items])
            return True if left == ([], []) else NotYet(left)

        wait_for(gone, 30, "the request and its PodTemplates gone with the gang",
                 logs=gang.logs())
        time.sleep(QUIET)
        assert reqs.live() == [], reqs.all()
        assert len(reqs.all()) == 1, reqs.all()


def test_kueue_made_request_gets_no_second_one(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    """Members that consume a request another controller made (as Kueue's
    ProvisioningRequest admission check does: the request, its PodTemplate, and the two
    annotations on the pods): the extender asks for nothing, says it waits for that
    request, and places the gang once the autoscaler provisioned it."""
    ns = namespace
    static = static_nodes(fake_nodes, ns, 2)
    pod_template(ns, "kueue-train-main", MEMBER_CPU)
    create_request(ns, "kueue-train", "kueue-train-main", 4)
    with Recorder(ns) as rec, Requests(ns) as reqs:
        unplaceable_gang(ns)
        gang_of(ns, "train", 4, annotations={CONSUME_ANNOTATION: "kueue-train",
                                             CLASS_ANNOTATION: ATOMIC})

        def waiting() -> tuple[str, str] | NotYet:
            cond = scheduled_condition(ns, "train")
            return cond if cond and cond[0] == "WaitingForProvisioning" else NotYet(cond)

        cond = wait_for(waiting, 40, "the gang waiting for Kueue's request", logs=gang.logs())
        assert isinstance(cond, tuple) and "kueue-train" in cond[1], cond
        time.sleep(QUIET)
        assert [s.name for s in reqs.all()] == ["kueue-train"], reqs.all()
        assert not rec.bound("train")

        autoscaler.start(pool, max_size=4, cpu=NODE_CPU)
        wait_bound(rec, "train", 4, 60, gang)
        added = autoscaler.nodes(pool)
        assert {r.node for r in rec.bound("train").values()} <= {*static, *added}
        time.sleep(QUIET)
        assert [s.name for s in reqs.all()] == ["kueue-train"], reqs.all()
        assert reqs.live(), "Kueue's request is Kueue's to delete"
        assert not rec.bound("huge")


def test_gang_that_fits_asks_for_nothing(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    """Four nodes: a gang of two that fits is placed and asks for nothing, nor does the
    unplaceable gang; beside them a gang of four, short of two nodes, asks (the control:
    the feature is on)."""
    ns = namespace
    static_nodes(fake_nodes, ns, 4)
    with Recorder(ns) as rec, Requests(ns) as reqs:
        unplaceable_gang(ns)
        gang_of(ns, "fits", 2)
        wait_bound(rec, "fits", 2, 30, gang)
        gang_of(ns, "short", 4)
        req = wait_request(reqs, gang)
        time.sleep(QUIET)
        assert [s.name for s in reqs.all()] == ["short-capacity"], reqs.all()
        assert req.name == "short-capacity"
        assert reason(ns, "huge") == "Unplaceable", scheduled_condition(ns, "huge")
        assert not rec.bound("short") and not rec.bound("huge")
        anns = {p["metadata"]["name"]: (p["metadata"].get("annotations") or {})
                for p in list_pods(ns)}
        assert not any(CONSUME_ANNOTATION in a for n, a in anns.items()
                       if not n.startswith("short-")), anns


def test_nodes_reserved_for_a_gang_are_kept_from_scale_down(
    autoscaler: Autoscaler, pool: str, gang: GangStack, namespace: str
) -> None:
    """The autoscaler's booking of a provisioned request lives in its scale-up simulation
    and ends with the request (which the extender deletes once the gang is bound) or
    after 10 minutes; its scale-down removes a node with no pod once it has been unneeded
    for ``--scale-down-unneeded-time`` (2 s here). A node the extender reserved for a
    member not yet bound is such a node. Two pool nodes, a gang of two reserving both,
    one member held back by kube-scheduler's own filter (a claim that does not exist,
    which the extender does not model), so the reservation lasts: both nodes carry the
    scale-down-disabled annotation and stay. The gang deleted, the annotations go and
    the autoscaler removes the emptied nodes, which shows it would have."""
    ns = namespace
    autoscaler.start(pool, max_size=2, cpu=NODE_CPU)  # scale-down off while it grows
    pod_template(ns, "two", MEMBER_CPU)
    create_request(ns, "two-nodes", "two", 2)
    wait_provisioned(ns, LOGS)
    nodes = autoscaler.nodes(pool)
    assert len(nodes) == 2, nodes
    kube().custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "two-nodes")
    wait_untainted(nodes, LOGS)

    unplaceable_gang(ns)
    create_podgroup(ns, "held", 2, timeout=300)
    create_pod(ns, "held-0", cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER,
               pod_group="held")
    create_pod(ns, "held-1", cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER,
               pod_group="held", spec_extra={"volumes": [
                   {"name": "data", "persistentVolumeClaim": {"claimName": "absent"}}]})

    def marks() -> dict[str, str | None]:
        return {n: (kube().core.read_node(n).metadata.annotations or {}).get(
            SCALE_DOWN_DISABLED) for n in nodes}

    wait_for(lambda: all(v == "true" for v in marks().values()) or NotYet(marks()), 30,
             "both reserved nodes marked scale-down-disabled", logs=gang.logs())
    autoscaler.start(pool, max_size=2, cpu=NODE_CPU, scale_down=2.0)
    time.sleep(15)  # past the unneeded time, many autoscaler loops
    assert autoscaler.nodes(pool) == nodes, "a node reserved for the gang was removed"

    kube().custom.delete_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "held")
    for name in ("held-0", "held-1"):
        kube().core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    wait_for(lambda: autoscaler.nodes(pool) == [] or NotYet(
        (autoscaler.nodes(pool), marks() if autoscaler.nodes(pool) else {})), 60,
        "the emptied, unmarked nodes scaled down", logs=LOGS)


def test_a_users_podtemplate_named_like_ours_is_left_alone(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    """Issue 42, "Only what is ours": a user's PodTemplate ``train-capacity-0`` is there
    before gang ``train`` asks. The extender's create of that name is answered 409; read
    back, it does not carry the extender's marker for the gang, so it is not adopted: no
    request is made on it, the gang backs off with the reason in its status and a
    Warning Event, and the user's PodTemplate is never changed or deleted, through the
    gang's retries and its deletion. Once the user's object is gone, the gang asks."""
    ns = namespace
    static_nodes(fake_nodes, ns, 2)
    pod_template(ns, "train-capacity-0", MEMBER_CPU)
    users = kube().core.read_namespaced_pod_template("train-capacity-0", ns).metadata
    with Recorder(ns) as rec, Requests(ns) as reqs:
        gang_of(ns, "train", 4)

        def refused() -> dict[str, Any] | NotYet:
            event = pg_events(ns, "train").get("ProvisioningRequestNotCreated")
            return event if event else NotYet(pg_events(ns, "train"))

        event = wait_for(refused, 40, "the gang told the PodTemplate in the way is not ours",
                         logs=gang.logs())
        assert isinstance(event, dict) and event["type"] == "Warning", event
        assert ("PodTemplate " + ns + "/train-capacity-0 already exists and is not the "
                "extender's for gang " + ns + "/train") in event["message"], event
        def said() -> tuple[str, str] | NotYet:
            cond = scheduled_condition(ns, "train")
            return cond if cond and "is not the extender's" in cond[1] else NotYet(cond)

        wait_for(said, 20, "the gang's status naming the object in the way", logs=gang.logs())
        time.sleep(QUIET)  # backoff 2 s: it retries, and is refused the same way
        assert reqs.all() == [], reqs.all()
        still = kube().core.read_namespaced_pod_template("train-capacity-0", ns).metadata
        assert (still.uid, still.resource_version) == (users.uid, users.resource_version)
        assert not (still.annotations or {}), still.annotations
        assert not rec.bound("train")

        # The user deletes theirs: the gang asks on its next attempt, under that name.
        kube().core.delete_namespaced_pod_template("train-capacity-0", ns)
        req = wait_request(reqs, gang, timeout=60)
        assert req.name == "train-capacity"
        assert req.annotations.get("gang-extender.x-k8s.io/gang") == f"{ns}/train"


VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
GANG_MARKER = "gang-extender.x-k8s.io/gang"


def test_same_named_gangs_of_two_sources_each_get_their_own_request(
    autoscaler: Autoscaler, pool: str, gang: GangStack, fake_nodes: NodeSet, namespace: str,
    volcano_crd: None,
) -> None:
    """Issue 42, "Only what is ours": a scheduler-plugins PodGroup ``train`` and a Volcano
    PodGroup ``train`` in one namespace, both short of capacity. Each gets a request of
    its own (``train-capacity`` and ``train-capacity.volcano``), each carrying our marker
    for its gang, owned by its PodGroup, its members annotated to consume it; the
    autoscaler provisions both and both gangs land whole; neither request is deleted
    while its gang waits, and both go (with their PodTemplates) once bound.

    Before, the two shared the name ``train-capacity``: the second gang's create was
    answered 409 and taken as its own request, so only one request existed, for the
    first gang's members, and either gang's end deleted it under the other. The static
    nodes are full (a 2-CPU pod of no gang on each: a 3-CPU member does not fit), so
    neither gang counts room the other could take: each asks for both its members."""
    ns = namespace
    for n in fake_nodes.add_nodes(2, prefix=f"static-{ns[-6:]}", cpu=NODE_CPU,
                                  memory="16Gi"):
        create_pod(ns, f"foreign-{n}", cpu="2", spec_extra={"nodeName": n})
    members = {"sp": ["train-0", "train-1"], "volcano": ["vc-train-0", "vc-train-1"]}
    with Recorder(ns) as rec, Requests(ns) as reqs:
        unplaceable_gang(ns)
        gang_of(ns, "train", 2)
        vc = kube().custom.create_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "train"}, "spec": {"minMember": 2, "queue": "default"}})
        for name in members["volcano"]:
            create_pod(ns, name, cpu=MEMBER_CPU, memory="1Gi", scheduler_name=GANG_SCHEDULER,
                       annotations={VOLCANO_ANNOTATION: "train"})

        def two() -> dict[str, Seen] | NotYet:
            got = {s.name: s for s in reqs.all()}
            return got if len(got) >= 2 else NotYet(sorted(got))

        got = wait_for(two, 60, "a ProvisioningRequest for each of the two gangs train",
                       logs=gang.logs())
        assert isinstance(got, dict)
        assert sorted(got) == ["train-capacity", "train-capacity.volcano"], sorted(got)
        sp_req, vc_req = got["train-capacity"], got["train-capacity.volcano"]
        assert sp_req.annotations.get(GANG_MARKER) == f"{ns}/train", sp_req.annotations
        assert vc_req.annotations.get(GANG_MARKER) == f"volcano:{ns}/train", vc_req.annotations
        assert [(o["apiVersion"], o["name"], o["uid"]) for o in sp_req.owners] == [
            ("scheduling.x-k8s.io/v1alpha1", "train", podgroup_uid(ns, "train"))]
        assert [(o["apiVersion"], o["name"], o["uid"]) for o in vc_req.owners] == [
            ("scheduling.volcano.sh/v1beta1", "train", vc["metadata"]["uid"])]
        for req in (sp_req, vc_req):
            assert req.spec["provisioningClassName"] == ATOMIC, req.spec
            assert sum(s["count"] for s in req.spec["podSets"]) == 2, req.spec

        want = {**dict.fromkeys(members["sp"], sp_req.name),
                **dict.fromkeys(members["volcano"], vc_req.name)}

        def consuming() -> bool | NotYet:
            anns = {p["metadata"]["name"]: (p["metadata"].get("annotations") or {})
                    for p in list_pods(ns)}
            now = {n: anns.get(n, {}).get(CONSUME_ANNOTATION) for n in want}
            return now == want or NotYet(now)

        wait_for(consuming, 20, "each gang's members consuming its own request",
                 logs=gang.logs())
        templates = {t.metadata.name: (t.metadata.annotations or {}).get(GANG_MARKER)
                     for t in kube().core.list_namespaced_pod_template(ns).items}
        assert templates == {"train-capacity-0": f"{ns}/train",
                             "train-capacity.volcano-0": f"volcano:{ns}/train"}, templates

        def bound(which: str) -> list[float]:
            return sorted(r.bound_at for n, r in rec.bound().items()
                          if n in members[which] and r.bound_at is not None)

        time.sleep(QUIET)  # both wait for their nodes: nothing bound, both requests live
        assert not bound("sp") and not bound("volcano"), rec.history
        assert sorted(s.name for s in reqs.live()) == sorted(got), reqs.all()

        autoscaler.start(pool, max_size=4, cpu=NODE_CPU)
        wait_for(lambda: all(len(bound(w)) == 2 for w in members) or NotYet(
            {w: len(bound(w)) for w in members}), 90, "both gangs train bound",
            logs=[*LOGS, *gang.logs()])
        added = autoscaler.nodes(pool)
        nodes = {n: r.node for n, r in rec.bound().items() if n in want}
        print(f"MEASURED the autoscaler added {len(added)} nodes for two gangs of 2 "
              f"(bound: {sorted(nodes.items())})")
        assert set(nodes.values()) <= set(added), (added, rec.history)
        assert len(added) == 4, added
        for which, req in (("sp", sp_req), ("volcano", vc_req)):
            times = bound(which)
            assert times[-1] - times[0] <= 2.0, (which, rec.history)
            assert req.first("Provisioned") is not None, (req.name, req.states)
            # never deleted while its gang waited (the watches' order: 1 s of slack)
            assert req.deleted is None or req.deleted >= times[-1] - 1.0, (
                req.name, req.deleted, times, req.states)

        def cleaned() -> bool | NotYet:
            left = ([s.name for s in reqs.live()],
                    [t.metadata.name for t in kube().core.list_namespaced_pod_template(ns).items])
            return left == ([], []) or NotYet(left)

        wait_for(cleaned, 20, "both requests and their PodTemplates deleted once bound",
                 logs=gang.logs())
        time.sleep(QUIET)
        assert sorted(s.name for s in reqs.all()) == sorted(got), reqs.all()
        assert not rec.bound("huge")

"""Gangs on autoscaled node pools (`core/provisioning.py`): who asks for a
ProvisioningRequest, what for, once, and what ends it; and the scale-down protection of
reserved nodes. The autoscaler is played by the test: it reads the actions and answers
with the request's states and new nodes."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from extender.core.model.convert import node_from_k8s, pod_from_k8s
from extender.core.model.provisioning_request import (
    ATOMIC_CLASS,
    MAX_POD_SET_COUNT,
    RequestInfo,
    pod_sets,
    request_from_k8s,
    request_name,
)
from extender.core.model.types import VOLCANO, GroupInfo, Membership
from extender.core.model.vocabulary import (
    BindPod,
    CreateRequest,
    DeleteRequest,
    ProtectNode,
    ProvisioningReport,
    Reason,
)
from tests.core.autoscaled import (
    answer,
    asked,
    condition,
    gang,
    of,
    request_json,
    settle,
    settled,
    shapes,
    sim_with,
)
from tests.core.sim import group, node, pod


def test_a_gang_short_of_capacity_asks_once_for_the_members_without_room() -> None:
    sim = sim_with()
    members = gang(sim)  # 4 × 3 CPU, two nodes of 4: two fit
    settle(sim)
    settle(sim)
    [create] = of(sim, CreateRequest)
    assert create.name == "g-capacity" and create.gang == "ns/g"
    assert create.class_name == ATOMIC_CLASS
    assert create.group.uid == "g-g"  # the PodGroup owns it
    # Two fit the free nodes: the two without room, in one shape; all four consume it.
    assert [s.count for s in create.pod_sets] == [2]
    assert {p.uid for p in create.annotate} == {m.uid for m in members}
    assert not of(sim, BindPod)  # nothing bound before the capacity is there
    st = sim.status("ns/g")
    assert st.reason == Reason.WAITING_FOR_PROVISIONING, st
    assert "waiting for ProvisioningRequest ns/g-capacity (Creating since" in st.message
    assert "2 of 4" in st.message or "4 members" in st.message or "fit" in st.message
    [report] = of(sim, ProvisioningReport)
    assert report.outcome == "requested"
    view = sim.manager.reads.provisioning("ns/g")
    assert view is not None and view.state == "Creating"


def test_the_class_is_a_setting() -> None:
    _, create = asked(provisioning_class="check-capacity.autoscaling.x-k8s.io")
    assert create.class_name == "check-capacity.autoscaling.x-k8s.io"


@pytest.mark.parametrize("served,on", [(False, True), (True, False)])
def test_nothing_is_asked_unless_served_and_on(served: bool, on: bool) -> None:
    sim = settled(served=served, provisioning=on)
    assert not of(sim, CreateRequest)
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE  # as before: short of nodes


def test_a_gang_that_fits_asks_for_nothing() -> None:
    sim = settled(nodes=4)
    assert not of(sim, CreateRequest)
    assert len(sim.bound("g")) == 4


def test_an_unplaceable_gang_asks_for_nothing() -> None:
    sim = sim_with()
    sim.add_group(group("g", 2))
    for i in range(2):
        sim.add_pod(pod(f"g-{i}", "g", cpu=6000))  # no node has 6 CPUs
    settle(sim)
    assert not of(sim, CreateRequest)
    assert sim.status("ns/g").reason == Reason.UNPLACEABLE


def test_a_gang_waiting_behind_a_reservation_asks_for_nothing() -> None:
    sim = sim_with(nodes=4)
    gang(sim, "a", 4)
    sim.schedule(sim.cache.gang_pods("ns/a")[0].uid)  # reserves all four nodes, waits
    gang(sim, "b", 4)
    sim.tick(0.1)
    sim.tick(0.1)
    assert sim.status("ns/b").reason == Reason.WAITING_BEHIND_OLDER_GANG
    assert not of(sim, CreateRequest)


def test_pods_that_consume_another_controllers_request_get_none_from_us() -> None:
    sim = sim_with()
    gang(sim, provisioning_request="kueue-wl-1a2b3")
    settle(sim)
    assert not of(sim, CreateRequest)
    st = sim.status("ns/g")
    assert "consume ProvisioningRequest ns/kueue-wl-1a2b3" in st.message, st
    assert "no second one" in st.message


def test_provisioned_capacity_places_the_gang_whole_and_the_request_goes() -> None:
    sim, create = asked()
    answer(sim, create, "Accepted")
    assert "(Accepted since" in sim.status("ns/g").message
    sim.add_node(node("new-0", cpu=4000))  # the first node: still short, nothing bound
    sim.run_all()
    assert not sim.bound("g")
    sim.add_node(node("new-1", cpu=4000))
    answer(sim, create, "Provisioned")
    assert [r.outcome for r in of(sim, ProvisioningReport)] == ["requested", "provisioned"]
    settle(sim)
    assert len(sim.bound("g")) == 4
    [delete] = of(sim, DeleteRequest)
    assert (delete.namespace, delete.name, delete.templates) == ("ns", "g-capacity",
                                                                 ("g-capacity-0",))
    assert "bound" in delete.reason
    settle(sim)
    assert len(of(sim, DeleteRequest)) == 1 and len(of(sim, CreateRequest)) == 1


@pytest.mark.parametrize("ending", ["Failed", "BookingExpired", "CapacityRevoked"])
def test_an_ended_request_backs_off_and_asks_again(ending: str) -> None:
    sim, create = asked()
    answer(sim, create, "Accepted")
    answer(sim, create, ending, message="out of quota")
    st = sim.status("ns/g")
    assert st.reason == Reason.BACKING_OFF, st
    assert f"ProvisioningRequest ns/g-capacity {ending} (out of quota)" in st.message
    assert "backing off 10s" in st.message
    bo = sim.manager.reads.backoff("ns/g")
    assert bo is not None and bo.attempts == 1  # requeueState in the status keeps it
    [delete] = of(sim, DeleteRequest)
    assert delete.name == "g-capacity"
    assert of(sim, ProvisioningReport)[-1].outcome != "requested"
    sim.tick(10)
    settle(sim)
    assert len(of(sim, CreateRequest)) == 1  # the old one is not gone yet: never two
    sim.manager.on_provisioning_request_deleted("ns/g-capacity")
    sim.tick(0.1)
    creates = of(sim, CreateRequest)
    assert len(creates) == 2 and creates[1].name == "g-capacity"
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_PROVISIONING


def test_no_new_request_before_the_backoff_ends() -> None:
    sim, create = asked()
    answer(sim, create, "Failed")
    sim.manager.on_provisioning_request_deleted("ns/g-capacity")  # gone at once
    sim.tick(5)
    settle(sim)
    assert len(of(sim, CreateRequest)) == 1  # backing off (10 s)
    sim.tick(6)
    assert len(of(sim, CreateRequest)) == 2


def test_nothing_is_asked_once_the_api_is_no_longer_served() -> None:
    sim, create = asked()
    answer(sim, create, "Failed")
    sim.manager.on_provisioning_request_deleted("ns/g-capacity")
    sim.manager.provisioning_served(False)  # the autoscaler's CRD was removed
    sim.tick(30)
    settle(sim)
    assert len(of(sim, CreateRequest)) == 1


def test_without_the_api_another_controllers_request_is_not_mentioned() -> None:
    sim = sim_with(served=False)
    gang(sim, provisioning_request="kueue-wl-1a2b3")
    settle(sim)
    assert "ProvisioningRequest" not in sim.status("ns/g").message


def test_a_gang_short_of_free_capacity_keeps_waiting_for_its_request() -> None:
    """Not set aside: it fits the nodes emptied, but running pods take the room."""
    sim = sim_with(nodes=4)
    for i in range(2):
        sim.add_pod(pod(f"busy-{i}", cpu=3000, node_name=f"n{i}", phase="Running"))
    gang(sim)
    settle(sim)
    [create] = of(sim, CreateRequest)
    assert len(create.annotate) == 4
    sim.add_node(node("small", cpu=1000))  # capacity changed: planned again, still short
    settle(sim)
    st = sim.status("ns/g")
    assert st.reason == Reason.WAITING_FOR_PROVISIONING, st
    assert "waiting for ProvisioningRequest ns/g-capacity" in st.message
    assert len(of(sim, CreateRequest)) == 1


def test_an_ended_request_of_a_reserved_gang_changes_nothing() -> None:
    sim, create = asked()
    sim.add_node(node("new-0", cpu=4000))
    sim.add_node(node("new-1", cpu=4000))
    sim.schedule(sim.cache.gang_pods("ns/g")[0].uid)  # reserved, waiting for its binds
    answer(sim, create, "BookingExpired")
    assert sim.manager.reads.backoff("ns/g") is None


def test_a_deleted_gang_leaves_no_request() -> None:
    sim, create = asked()
    answer(sim, create, "Accepted")
    sim.manager.on_group_deleted("ns/g")
    sim.tick(0.1)
    [delete] = of(sim, DeleteRequest)
    assert delete.name == "g-capacity" and "gone" in delete.reason


def test_a_restart_finds_the_request_and_asks_no_second_one() -> None:
    sim, create = asked()
    again = sim_with()
    again.manager.on_provisioning_request(dataclasses.replace(
        answer(sim, create, "Accepted")), again.now)
    gang(again)
    settle(again)
    assert not of(again, CreateRequest)
    st = again.status("ns/g")
    assert st.reason == Reason.WAITING_FOR_PROVISIONING and "(Accepted since" in st.message


def test_too_many_shapes_for_one_request_are_said_not_asked() -> None:
    sim = sim_with()
    shapes(sim)  # two fit the two nodes: 33 without room
    settle(sim)
    assert not of(sim, CreateRequest)
    assert "33 different shapes: more than the 32 pod sets" in sim.status("ns/g").message


def test_a_pod_set_is_split_at_its_count_limit() -> None:
    members = [pod(f"p{i}", "g") for i in range(MAX_POD_SET_COUNT + 3)]
    sets = pod_sets(members)
    assert [s.count for s in sets] == [MAX_POD_SET_COUNT, 3]


def test_a_long_podgroup_name_still_makes_a_valid_unique_name() -> None:
    a, b = request_name("ns/" + "x" * 300), request_name("ns/" + "x" * 299 + "y")
    assert a != b and len(a) <= 249 and len(b) <= 249
    assert request_name("ns/train") == "train-capacity"
    # A Kueue group is named by a label value: capitals and "_" are cleaned and hashed.
    odd = request_name("kueue:ns/My_Group")
    assert odd.endswith("-capacity.kueue") and odd.startswith("my-group-")
    assert re.fullmatch(DNS, odd)


DNS = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def test_same_named_groups_of_two_sources_get_two_request_names() -> None:
    """The name is the gang's, source included: a Volcano PodGroup "train" and a
    scheduler-plugins one in the same namespace never share a request, and no source's
    name can be made to look like another's ("<name>-capacity" ends in "capacity", the
    others in ".<source>", and a source has no dot)."""
    keys = ["ns/train", "volcano:ns/train", "workload-api:ns/train", "kueue:ns/train",
            "ns/train.volcano", "ns/train-capacity.volcano", "volcano:ns/train.kueue"]
    names = [request_name(k) for k in keys]
    assert len(set(names)) == len(keys), names
    assert names[:2] == ["train-capacity", "train-capacity.volcano"]
    assert all(re.fullmatch(DNS, n) and len(n) <= 249 for n in names)
    long = [request_name(f"{s}ns/{'y' * 260}") for s in ("", "volcano:", "kueue:")]
    assert len(set(long)) == 3 and all(len(n) <= 249 and re.fullmatch(DNS, n) for n in long)


def test_a_volcano_gang_named_like_a_scheduler_plugins_gang_asks_under_its_own_name() -> None:
    sim = sim_with(nodes=2)
    gang(sim)  # scheduler-plugins ns/g
    sim.add_group(group("g", 4, source=VOLCANO))
    for i in range(4):
        sim.add_pod(pod(f"v-{i}", cpu=3000, membership=Membership(VOLCANO, "g")))
    settle(sim)
    settle(sim)
    names = {c.gang: c.name for c in of(sim, CreateRequest)}
    assert names == {"ns/g": "g-capacity", "volcano:ns/g": "g-capacity.volcano"}


def test_a_preemption_about_to_serve_the_gang_asks_for_nothing() -> None:
    sim = sim_with(preemption=True)
    sim.add_group(group("low", 2))
    for i in range(2):
        sim.add_pod(pod(f"low-{i}", "low", cpu=3000))
    settle(sim)
    assert len(sim.bound("low")) == 2
    sim.add_group(group("high", 2))
    for i in range(2):
        sim.add_pod(pod(f"high-{i}", "high", cpu=3000, priority=100))
    settle(sim)
    assert not of(sim, CreateRequest)


# ----- scale-down protection -----------------------------------------------------------------


def test_reserved_nodes_are_protected_while_the_reservation_holds() -> None:
    sim = sim_with(nodes=3)
    sim.add_node(dataclasses.replace(node("theirs", cpu=4000), scale_down_disabled=True))
    gang(sim, size=4)
    sim.schedule(sim.cache.gang_pods("ns/g")[0].uid)  # reserved on all four, binds wait
    sim.tick(1.0)
    on = {a.node for a in of(sim, ProtectNode) if a.on}
    assert on == {"n0", "n1", "n2"}  # not the operator's own
    sim.tick(1.0)
    assert len(of(sim, ProtectNode)) == 3  # asked once, not on every tick
    for n in ("n0", "n1", "n2"):  # the watch shows our annotation
        sim.add_node(dataclasses.replace(node(n, cpu=4000), scale_down_disabled=True,
                                         scale_down_ours=True))
    sim.run_all()  # the gang binds: its reservation ends
    assert len(sim.bound("g")) == 3 or sim.manager.reads.reservations() == ()
    sim.manager.on_group_deleted("ns/g")
    sim.tick(1.0)
    off = {a.node for a in of(sim, ProtectNode) if not a.on}
    assert off == {"n0", "n1", "n2"}


def test_with_provisioning_off_only_the_nodes_we_marked_are_unmarked() -> None:
    """A run with `--provisioning-requests off` after one with it on: the nodes the
    extender marked (its key beside the annotation) are unmarked, once; an operator's
    own annotation is left alone, and nothing is marked."""
    sim = sim_with(nodes=0, provisioning=False)
    sim.add_node(dataclasses.replace(node("ours", cpu=4000), scale_down_disabled=True,
                                     scale_down_ours=True))
    sim.add_node(dataclasses.replace(node("theirs", cpu=4000), scale_down_disabled=True))
    sim.add_node(node("plain", cpu=4000))
    gang(sim, size=2)
    sim.schedule(sim.cache.gang_pods("ns/g")[0].uid)  # reserved: still never marked
    sim.tick(1.0)
    sim.tick(1.0)
    assert [(a.node, a.on) for a in of(sim, ProtectNode)] == [("ours", False)]


def test_no_protection_while_the_api_is_not_served() -> None:
    sim = sim_with(served=False)
    gang(sim, size=2)
    sim.schedule(sim.cache.gang_pods("ns/g")[0].uid)
    sim.tick(1.0)
    assert not of(sim, ProtectNode)


# ----- reading the objects ---------------------------------------------------------------------


def test_a_request_is_read_with_its_state() -> None:
    r = request_from_k8s(request_json([]))
    assert (r.state, r.gang, r.templates, r.key) == ("Pending", "ns/g", ("g-capacity-0",),
                                                     "ns/g-capacity")
    assert request_from_k8s(request_json([condition("Accepted")])).state == "Accepted"
    r = request_from_k8s(request_json([condition("Accepted"), condition("Provisioned")]))
    assert r.state == "Provisioned" and r.since == r.created + 60
    assert request_from_k8s(request_json([condition("Provisioned"), condition("BookingExpired")])
                            ).state == "BookingExpired"
    assert request_from_k8s(request_json([condition("Provisioned", "False")])).state == "Pending"


def test_a_malformed_request_is_a_clear_error() -> None:
    bad = request_json([])
    bad["spec"]["podSets"] = "x"
    with pytest.raises(ValueError, match=r"spec\.podSets"):
        request_from_k8s(bad)


@pytest.mark.parametrize("key", ["autoscaling.x-k8s.io/consume-provisioning-request",
                                 "cluster-autoscaler.kubernetes.io/consume-provisioning-request"])
def test_a_pod_is_read_with_the_request_it_consumes(key: str) -> None:
    obj: dict[str, Any] = {"metadata": {"name": "p", "uid": "u", "namespace": "ns",
                                        "annotations": {key: "wl-check-1"}},
           "spec": {"containers": [{"name": "c"}]}}
    assert pod_from_k8s(obj).provisioning_request == "wl-check-1"
    obj["metadata"]["annotations"] = {}
    assert pod_from_k8s(obj).provisioning_request == ""


def test_a_node_is_read_with_its_scale_down_annotations() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "n", "annotations": {
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}}, "status": {}}
    n = node_from_k8s(obj)
    assert n.scale_down_disabled and not n.scale_down_ours
    obj["metadata"]["annotations"]["gang-extender.x-k8s.io/scale-down-disabled-for"] = "ns/g"
    assert node_from_k8s(obj).scale_down_ours
    assert not node_from_k8s({"metadata": {"name": "n"}, "status": {}}).scale_down_disabled
    # An operator's "false" is theirs too: the extender neither overwrites nor removes it.
    obj = {"metadata": {"name": "n", "annotations": {
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "false"}}, "status": {}}
    assert node_from_k8s(obj).scale_down_disabled and not node_from_k8s(obj).scale_down_ours


def test_a_gang_with_nothing_to_ask_costs_a_tick_nothing_until_its_members_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sim = sim_with()
    members = shapes(sim)  # two fit the two nodes: 33 without room
    settle(sim)
    looked: list[str] = []
    counts = sim.cache.quorum_counts

    def counting(g: GroupInfo) -> Any:
        looked.append(g.key)
        return counts(g)

    monkeypatch.setattr(sim.cache, "quorum_counts", counting)
    for _ in range(20):
        sim.tick(0.1)
    assert looked.count("ns/g") <= 1, looked  # not once per tick
    assert not of(sim, CreateRequest)
    sim.manager.on_group(group("g", 34), sim.now)  # one shape fewer is enough now
    sim.delete(members[-1].uid)
    settle(sim)
    [create] = of(sim, CreateRequest)
    assert len(create.pod_sets) == 32


def test_a_request_seen_ended_before_its_group_is_ended_once_the_group_is_there() -> None:
    """A restart: the watch of the requests may deliver a Failed one before the
    PodGroups are listed."""
    sim = sim_with()
    req = RequestInfo("ns", "g-capacity", "r1", "ns/g", ATOMIC_CLASS, sim.now, "Failed",
                      sim.now, "out of quota", ("g-capacity-0",))
    sim.manager.on_provisioning_request(req, sim.now)
    gang(sim)
    settle(sim)
    assert not of(sim, CreateRequest)  # not a second one of that name
    [delete] = of(sim, DeleteRequest)
    assert delete.templates == ("g-capacity-0",)
    assert sim.status("ns/g").reason == Reason.BACKING_OFF


def test_a_request_that_ended_while_its_gang_was_placed_is_ended_when_it_waits_again() -> None:
    sim, create = asked()
    sim.add_node(node("new-0", cpu=4000))
    sim.add_node(node("new-1", cpu=4000))
    members = sim.cache.gang_pods("ns/g")
    sim.schedule(members[0].uid)  # reserved; its other binds never come
    answer(sim, create, "BookingExpired")
    assert not of(sim, DeleteRequest)
    sim.tick(31)  # the reservation times out: the gang waits again
    sim.tick(0.1)
    [delete] = of(sim, DeleteRequest)
    assert delete.name == "g-capacity"
    assert len(of(sim, CreateRequest)) == 1


def test_a_request_never_seen_in_the_watch_is_given_up_and_asked_again() -> None:
    sim = settled()
    assert len(of(sim, CreateRequest)) == 1
    sim.tick(61)  # never showed (a foreign object of that name refused ours)
    st = sim.status("ns/g")
    assert st.reason == Reason.BACKING_OFF and "not seen in the watch 60s" in st.message, st
    # Never seen carrying our marker: nothing is deleted by name (it may be ours behind a
    # lagging watch, or someone else's); an Event says it was not made.
    assert not of(sim, DeleteRequest)
    assert of(sim, ProvisioningReport)[-1].outcome == "not-created"
    sim.tick(11)
    assert len(of(sim, CreateRequest)) == 2


def test_no_delete_is_asked_for_a_request_never_seen_with_our_marker() -> None:
    """The gang goes while its request is asked for and not yet in the watch: nothing is
    deleted by name. When the watch shows it with our marker, it is deleted by the uid
    it was seen with; an object of that name without our marker never is."""
    sim, create = asked()
    sim.manager.on_group_deleted("ns/g")
    sim.tick(0.1)
    sim.tick(61)
    assert not of(sim, DeleteRequest)
    theirs = RequestInfo("ns", "g-capacity", "u-theirs", "", ATOMIC_CLASS, sim.now,
                         "Accepted", sim.now, "", ("g-capacity-0",))
    sim.manager.on_provisioning_request(theirs, sim.now)  # no marker: not ours
    sim.tick(0.1)
    sim.drain()
    assert not of(sim, DeleteRequest)
    sim.manager.on_provisioning_request_deleted("ns/g-capacity")
    answer(sim, create, "Accepted", uid="r-ours")
    sim.tick(0.1)
    sim.drain()
    [delete] = of(sim, DeleteRequest)
    assert (delete.name, delete.uid, delete.gang) == ("g-capacity", "r-ours", "ns/g")


def test_a_request_that_could_not_be_made_asks_no_delete() -> None:
    """The adapter found an object of that name that is not ours (or failed): the gang
    backs off, an Event says why, and nothing is deleted by the core."""
    sim, create = asked()
    sim.manager.provisioning_failed("ns/g", create.name, "PodTemplate ns/g-capacity-0 "
                                    "already exists and is not the extender's", sim.now)
    sim.drain()
    assert sim.status("ns/g").reason == Reason.BACKING_OFF
    assert "is not the extender's" in sim.status("ns/g").message
    assert not of(sim, DeleteRequest)
    report = of(sim, ProvisioningReport)[-1]
    assert report.outcome == "not-created" and "ns/g" in report.message


def test_members_annotated_under_the_name_before_the_source_was_in_it_are_still_ours() -> None:
    """A Volcano gang whose members an earlier version annotated with "<name>-capacity"
    (its request's name then): not another controller's request; it asks under its
    own name now."""
    sim = sim_with(nodes=2)
    sim.add_group(group("g", 4, source=VOLCANO))
    for i in range(4):
        sim.add_pod(pod(f"v-{i}", cpu=3000, membership=Membership(VOLCANO, "g"),
                        provisioning_request="g-capacity"))
    settle(sim)
    settle(sim)
    [create] = of(sim, CreateRequest)
    assert create.name == "g-capacity.volcano" and len(create.annotate) == 4

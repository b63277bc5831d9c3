"""What a gang's ProvisioningRequest asks for (`core/asking.py`): the members without
room only, counted against the free capacity the extender sees; what happens when that
count moves while the request is live; the API becoming served; and the autoscaler's
`Provisioned=False` answer in the gang's status."""

from __future__ import annotations

import dataclasses

from extender.core.model.provisioning_request import RequestInfo, request_from_k8s
from extender.core.model.vocabulary import CreateRequest, DeleteRequest, Reason
from tests.core.autoscaled import (
    answer,
    asked,
    condition,
    gang,
    of,
    request_json,
    settle,
    settled,
    sim_with,
)
from tests.core.sim import group, node, pod


def test_room_reserved_for_another_gang_counts_as_taken() -> None:
    sim = sim_with(nodes=3)
    sim.add_group(group("a", 2))
    a = [sim.add_pod(pod(f"a-{i}", "a", cpu=3000)) for i in range(2)]
    sim.schedule(a[0].uid)  # a reserves two of the three nodes and waits for its second
    members = gang(sim, "b", 4)  # three would fit without a's reservation, one with it
    settle(sim)
    [create] = of(sim, CreateRequest)
    assert create.gang == "ns/b"
    assert [s.count for s in create.pod_sets] == [3]
    assert {p.uid for p in create.annotate} == {m.uid for m in members}


def test_only_the_shapes_without_room_are_asked_for() -> None:
    sim = sim_with()  # two nodes of 4 CPUs
    sim.add_group(group("g", 4))
    for i in range(2):
        sim.add_pod(pod(f"big-{i}", "g", cpu=3000))
        sim.add_pod(pod(f"small-{i}", "g", cpu=2000))
    settle(sim)
    [create] = of(sim, CreateRequest)  # the big ones take both nodes: two small lack room
    [pod_set] = create.pod_sets
    assert pod_set.count == 2 and pod_set.template.name.startswith("small-")
    assert len(create.annotate) == 4


def test_a_live_request_that_asks_for_too_little_is_replaced_once_gone() -> None:
    sim, create = asked(nodes=3)  # 4 × 3 CPU: one lacks room
    assert [s.count for s in create.pod_sets] == [1]
    answer(sim, create, "Accepted")
    sim.manager.on_node_deleted("n2")  # now two lack room
    settle(sim)
    [delete] = of(sim, DeleteRequest)
    assert delete.name == "g-capacity" and "2 member(s) now without room" in delete.reason
    st = sim.status("ns/g")
    assert st.reason == Reason.INSUFFICIENT_CAPACITY and "asks again once it is gone" in \
        st.message
    settle(sim)
    assert len(of(sim, CreateRequest)) == 1  # never two: the old one is still there
    sim.manager.on_provisioning_request_deleted("ns/g-capacity")
    settle(sim)
    creates = of(sim, CreateRequest)
    assert len(creates) == 2 and [s.count for s in creates[1].pod_sets] == [2]
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_PROVISIONING


def test_a_live_request_that_asks_for_more_than_is_missing_is_kept() -> None:
    sim, create = asked()  # two lack room
    answer(sim, create, "Accepted")
    sim.add_node(node("other", cpu=4000))  # one found room: one lacks it now
    settle(sim)
    settle(sim)
    assert not of(sim, DeleteRequest) and len(of(sim, CreateRequest)) == 1
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_PROVISIONING


def test_after_a_restart_the_size_of_the_request_decides() -> None:
    sim = sim_with(nodes=3)
    gang(sim)
    req = RequestInfo("ns", "g-capacity", "u", "ns/g", "c", 0.0, "Accepted", 0.0,
                      templates=("g-capacity-0",), count=1)
    sim.manager.on_provisioning_request(req, sim.now)  # made before a restart: 1 pod
    settle(sim)
    assert not of(sim, CreateRequest) and not of(sim, DeleteRequest)
    sim.manager.on_node_deleted("n2")
    settle(sim)
    [delete] = of(sim, DeleteRequest)
    assert "more than the 1 its ProvisioningRequest" in delete.reason


def test_the_api_becoming_served_makes_waiting_gangs_ask() -> None:
    sim = settled(served=False)
    assert not of(sim, CreateRequest)
    for _ in range(5):
        sim.tick(0.1)
    assert not of(sim, CreateRequest)  # nothing changed for it: it is not planned again
    sim.manager.provisioning_served(True)
    settle(sim)
    [create] = of(sim, CreateRequest)
    assert [s.count for s in create.pod_sets] == [2]
    assert sim.status("ns/g").reason == Reason.WAITING_FOR_PROVISIONING


def test_the_autoscalers_provisioned_false_shows_in_the_status() -> None:
    sim, create = asked()
    req = answer(sim, create, "Accepted")
    assert "waiting for the autoscaler" not in sim.status("ns/g").message
    note = "CapacityIsNotFound: Capacity is not found, CA will try to find it later."
    sim.manager.on_provisioning_request(dataclasses.replace(req, waiting=note), sim.now)
    sim.drain()
    st = sim.status("ns/g")
    assert st.reason == Reason.WAITING_FOR_PROVISIONING
    assert "waiting for ProvisioningRequest ns/g-capacity (Accepted since" in st.message
    assert st.message.endswith(f"; waiting for the autoscaler: {note}")


def test_provisioned_false_is_read_with_its_reason_and_message() -> None:
    no = {**condition("Provisioned", "False"), "reason": "CapacityIsNotFound",
          "message": "Capacity is not found, CA will try to find it later."}
    r = request_from_k8s(request_json([condition("Accepted"), no]))
    assert r.state == "Accepted" and r.count == 4
    assert r.waiting == ("CapacityIsNotFound: Capacity is not found, CA will try to find it "
                         "later.")
    assert request_from_k8s(request_json([condition("Accepted")])).waiting == ""
    assert request_from_k8s(request_json([condition("Failed"), no])).waiting == ""  # ended: said so

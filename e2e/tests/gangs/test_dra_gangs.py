"""GPU gangs on Dynamic Resource Allocation, on the local control plane (issue 44): a
fake driver publishes devices for fake nodes (e2e/fakedra.py says what it does
not simulate), the stock kube-scheduler's DynamicResources plugin allocates the claims,
and the extender plans gangs on the devices.

* Two gangs of 4 members × (1 CPU + a claim from a template asking for exactly 2
  devices) on four 16-CPU nodes publishing 2 devices each, created interleaved: one
  gang is placed whole, on the four nodes, while the other waits; once the first is
  done, the other is placed whole. Before, the extender planned each gang onto one node
  (4 CPU of 16), kube-scheduler's plugin could allocate one member's devices per node,
  and nothing was bound: both gangs timed out and were planned the same way again.
* Fragmented devices, 6 + 2 + 2 + 2 free, and a gang of 3 members × 4 devices: 12 devices
  in all, but only one node holds a member; nothing is bound and the PodGroup says why.
* A launcher without claims beside 2 workers with claims: the workers go through
  kube-scheduler's cycle (its plugin allocates their claims) onto different nodes, the
  launcher with them, all bound together.
* A CEL selector on an attribute and on a capacity: of nodes with t4 devices, a100
  devices of 20Gi and a100 devices of 80Gi, the members are placed only where an a100
  of at least 40Gi is.
* Pods of the default scheduler holding devices (their claims allocated by it) on two
  of four nodes: the gang of 2 members × 2 devices is placed on the other two.
* Three members naming one ResourceClaim of 2 devices (one allocation for all): all
  bound on one node, where kube-scheduler allocates it once. (Before, each member was
  planned on a node of its own and the slots followed the allocation once it was seen;
  this case guards the end result, the planning is tested in
  tests/core/planner/test_device_plans.py.)
* An upstream PodGroup (scheduling.k8s.io/v1beta1) whose spec.resourceClaims names a
  template of 2 devices, and its 3 members claiming it: the control plane makes one
  claim for the group, and all three are bound on the node of its one allocation (as
  for the named claim above, a guard of the end result: the planning's difference is
  tested in tests/core/devices/test_podgroup_claims.py).
* A high-priority gang of 4 × 2 devices evicts the whole lower-priority gang holding
  every device (its CPU alone would not have made room) and is placed whole on them.
* A gang that times out with members waiting at the barrier, their claims allocated by
  kube-scheduler in their own cycle: once the extender refuses their binds, no
  allocation is left behind (kube-scheduler takes its pods off the claims, the
  control plane's resourceclaim controller releases them).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from e2e.fakedra import (
    allocated_claims,
    claim_named,
    claims_from,
    create_claim,
    create_claim_template,
    fake_driver,
)
from e2e.gang import (
    DEFAULT_ARGS,
    GangStack,
    Recorder,
    block_ports,
    port_pod,
    scheduler_config,
    start_extender,
)
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.process import free_port
from e2e.harness.queries import get_podgroup, pod_nodes
from e2e.harness.target import kube
from e2e.harness.versions import dra_workload_gates, upstream_gang_gates
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.priority_stack import classes, gone

__all__ = ["classes"]  # the PriorityClasses fixture, used here too

pytestmark = pytest.mark.e2e

RUN_SECONDS = 8.0  # long enough to see the second gang wait, short enough to see it go


def test_two_dra_gangs_created_interleaved_are_placed_one_whole_then_the_other(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="dra", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim_template(ns, "two-gpus", 2)
        for g in ("a", "b"):
            create_podgroup(ns, g, 4, timeout=60)
        with Recorder(ns) as rec:
            for i in range(4):
                for g in ("a", "b"):
                    create_pod(ns, f"{g}-{i}", cpu="1", memory="64Mi",
                               scheduler_name=GANG_SCHEDULER, pod_group=g,
                               run_seconds=RUN_SECONDS, spec_extra=claims_from("two-gpus"))

            def one_whole() -> bool | NotYet:
                bound = {g: len(rec.bound(g)) for g in ("a", "b")}
                return 4 in bound.values() or NotYet((bound, pod_nodes(ns)))

            wait_for(one_whole, 45, "one gang bound whole", logs=gang.logs())
            first = "a" if len(rec.bound("a")) == 4 else "b"
            second = "b" if first == "a" else "a"
            placed = {r.node for r in rec.bound(first).values()}
            assert placed == set(nodes), f"gang {first} on {placed}: one member per node"
            # Its members' claims hold the devices kube-scheduler allocated: 2 per node.
            held = allocated_claims(ns)
            assert len(held) == 4 and all(len(d) == 2 for d in held.values()), held
            # The other waits whole while the first runs: none of its members is bound.
            time.sleep(RUN_SECONDS / 2)
            assert rec.bound(second) == {}, rec.history

            wait_for(lambda: len(rec.bound(second)) == 4 or NotYet(pod_nodes(ns)),
                     60 + RUN_SECONDS, f"gang {second} bound whole once {first} is done",
                     logs=gang.logs())
            assert {r.node for r in rec.bound(second).values()} == set(nodes)
            done = min(r.phase_at.get("Succeeded", float("inf"))
                       for r in rec.bound(first).values())
            assert min(rec.bind_times(second)) >= done - 0.5, rec.history
            rec.assert_never_partial(first, 4)
            rec.assert_never_partial(second, 4)
        print(f"MEASURED dra: gang {first} bound whole "
              f"{max(rec.bind_times(first)) - min(rec.bind_times(first)):.2f}s spread, "
              f"gang {second} {min(rec.bind_times(second)) - done:.2f}s after {first} ended")


def scheduled_condition(ns: str, group: str) -> dict[str, str]:
    pg = get_podgroup(ns, group) or {}
    conds = {c["type"]: c for c in (pg.get("status") or {}).get("conditions", [])}
    return dict(conds.get("Scheduled", {}))


def test_fragmented_devices_hold_no_gang_of_three_times_four(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="frag", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n, count in zip(nodes, (6, 2, 2, 2), strict=True):
            driver.publish(n, count)
        create_claim_template(ns, "four-gpus", 4)
        create_podgroup(ns, "f", 3, timeout=60)
        with Recorder(ns) as rec:
            for i in range(3):
                create_pod(ns, f"f-{i}", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
                           pod_group="f", spec_extra=claims_from("four-gpus"))

            def said() -> str | NotYet:
                cond = scheduled_condition(ns, "f")
                return cond.get("message", "") if cond.get("reason") == "Unplaceable" \
                    else NotYet(cond)

            message = wait_for(said, 30, "the PodGroup says Unplaceable", logs=gang.logs())
            assert "needs 3 × {4 × gpu.example.com}; 1 fit" in message, message
            time.sleep(3)
            assert rec.bound() == {}, rec.history
            assert allocated_claims(ns) == {}


def test_a_launcher_without_claims_and_dra_workers_are_bound_together(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(2, prefix="lw", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim_template(ns, "two-gpus", 2)
        create_podgroup(ns, "job", 3, timeout=60)
        with Recorder(ns) as rec:
            create_pod(ns, "launcher", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
                       pod_group="job")
            for i in range(2):
                create_pod(ns, f"worker-{i}", cpu="1", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER, pod_group="job",
                           spec_extra=claims_from("two-gpus"))
            wait_for(lambda: len(rec.bound("job")) == 3 or NotYet(pod_nodes(ns)), 45,
                     "the launcher and both workers bound", logs=gang.logs())
            rec.assert_never_partial("job", 3)
            where = {name: r.node for name, r in rec.bound("job").items()}
            assert where["worker-0"] != where["worker-1"], where
            held = allocated_claims(ns)
            assert sorted(len(d) for d in held.values()) == [2, 2], held


def test_a_dra_gang_that_times_out_leaves_no_allocation_behind(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(3, prefix="tmo", cpu="16", memory="64Gi")
    block_ports(ns, nodes)  # the fourth member, asking for the port, is never offered
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim_template(ns, "two-gpus", 2)
        create_podgroup(ns, "t", 4, timeout=10)
        with Recorder(ns) as rec:
            for i in range(3):
                create_pod(ns, f"t-{i}", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
                           pod_group="t", spec_extra=claims_from("two-gpus"))
            port_pod(ns, "t-3", group="t", cpu="0")
            wait_for(lambda: len(allocated_claims(ns)) == 3 or NotYet(allocated_claims(ns)),
                     30, "the three members' claims allocated, their binds waiting",
                     logs=gang.logs())
            assert rec.bound() == {}

            def released() -> bool | NotYet:
                held = allocated_claims(ns)
                return not held or NotYet(held)

            wait_for(released, 40, "no allocation left after the gang's timeout",
                     logs=gang.logs())
            assert rec.bound() == {}, rec.history


def test_a_selector_on_an_attribute_and_a_capacity_places_members_only_on_matching_devices(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="sel", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        shapes = (("t4", "16Gi", 2), ("a100", "20Gi", 2), ("a100", "80Gi", 1),
                  ("a100", "80Gi", 1))
        for n, (model, memory, count) in zip(nodes, shapes, strict=True):
            driver.publish(n, count, attributes={"model": {"string": model}},
                           capacity={"memory": memory})
        create_claim_template(ns, "big-a100", 1, selector=(
            'device.attributes["gpu.example.com"].model == "a100" && '
            'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'))
        create_podgroup(ns, "s", 2, timeout=60)
        with Recorder(ns) as rec:
            for i in range(2):
                create_pod(ns, f"s-{i}", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
                           pod_group="s", spec_extra=claims_from("big-a100"))
            wait_for(lambda: len(rec.bound("s")) == 2 or NotYet(pod_nodes(ns)), 45,
                     "both members bound", logs=gang.logs())
            assert {r.node for r in rec.bound("s").values()} == set(nodes[2:])
            held = allocated_claims(ns)
            assert sorted(d for devices in held.values() for d in devices) == [
                f"{nodes[2]}/gpu-0", f"{nodes[3]}/gpu-0"], held


def test_a_dra_gang_beside_pods_of_another_scheduler_holding_devices(
    gang: GangStack, fake_nodes: Nodes, namespace: str, default_scheduler: object
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="oth", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim_template(ns, "two-gpus", 2)
        with Recorder(ns) as rec:
            for i in range(2):  # spec.schedulerName unset: the default scheduler's
                create_pod(ns, f"other-{i}", cpu="1", memory="64Mi",
                           spec_extra=claims_from("two-gpus"))
            wait_for(lambda: len(rec.bound()) == 2 or NotYet(pod_nodes(ns)), 30,
                     "the default scheduler's pods bound with their devices",
                     logs=gang.logs())
            theirs = {r.node for r in rec.bound().values()}
            assert len(theirs) == 2, theirs
            create_podgroup(ns, "g", 2, timeout=60)
            for i in range(2):
                create_pod(ns, f"g-{i}", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
                           pod_group="g", spec_extra=claims_from("two-gpus"))
            wait_for(lambda: len(rec.bound("g")) == 2 or NotYet(pod_nodes(ns)), 45,
                     "the gang bound on the other two nodes", logs=gang.logs())
            rec.assert_never_partial("g", 2)
            assert {r.node for r in rec.bound("g").values()} == set(nodes) - theirs



def test_a_high_priority_dra_gang_evicts_a_whole_lower_priority_one(
    gang: GangStack, fake_nodes: Nodes, namespace: str, classes: dict[str, str]
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="pre", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim_template(ns, "two-gpus", 2)
        with Recorder(ns) as rec:
            for g, klass in (("low", classes["low"]), ("high", classes["high"])):
                create_podgroup(ns, g, 4, timeout=60)
                for i in range(4):
                    create_pod(ns, f"{g}-{i}", cpu="1", memory="64Mi",
                               scheduler_name=GANG_SCHEDULER, pod_group=g,
                               priority_class=klass, spec_extra=claims_from("two-gpus"))
                if g == "low":
                    wait_for(lambda: len(rec.bound("low")) == 4 or NotYet(pod_nodes(ns)), 45,
                             "the low gang bound on every device", logs=gang.logs())
            wait_for(lambda: len(rec.bound("high")) == 4 or NotYet(pod_nodes(ns)), 60,
                     "the high gang bound whole", logs=gang.logs())
            rec.assert_never_partial("high", 4)
            assert {r.node for r in rec.bound("high").values()} == set(nodes)
            assert all(gone(ns, f"low-{i}") for i in range(4)), "low evicted whole"
            held = allocated_claims(ns)
            assert sorted(len(d) for d in held.values()) == [2, 2, 2, 2], held


def test_members_sharing_a_named_claim_are_bound_on_the_node_of_its_one_allocation(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="shr", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim(ns, "ring", 2)
        create_podgroup(ns, "s", 3, timeout=60)
        with Recorder(ns) as rec:
            for i in range(3):
                create_pod(ns, f"s-{i}", cpu="1", memory="64Mi", scheduler_name=GANG_SCHEDULER,
                           pod_group="s", spec_extra=claim_named("ring"))
            wait_for(lambda: len(rec.bound("s")) == 3 or NotYet(pod_nodes(ns)), 45,
                     "the three members bound", logs=gang.logs())
            rec.assert_never_partial("s", 3)
            (node,) = {r.node for r in rec.bound("s").values()}
            held = allocated_claims(ns)
            assert held == {"ring": [f"{node}/gpu-0", f"{node}/gpu-1"]}, held


DRA_WORKLOAD_SCHED = "gang-scheduler-dra-workload"


@pytest.fixture(scope="module")
def dra_workload(control_plane: Cluster) -> Iterator[GangStack]:
    """An extender and a kube-scheduler of their own, the scheduler with
    DRAWorkloadResourceClaims (and GenericWorkload, which it needs) so that its
    DynamicResources plugin allocates a PodGroup's claims; its in-tree GangScheduling
    plugin, which that gate turns on, is disabled: the extender is the gang scheduler."""
    if not isinstance(control_plane, ControlPlane) or control_plane.minor < (1, 37):
        pytest.skip("PodGroups' spec.resourceClaims: Kubernetes 1.37 on the local control plane")
    port = free_port()
    args = [*DEFAULT_ARGS, "--scheduler-name", DRA_WORKLOAD_SCHED]
    ext = start_extender(control_plane, port, args, "gang-extender-dra-workload")
    config = scheduler_config(port)
    config["profiles"][0]["schedulerName"] = DRA_WORKLOAD_SCHED
    config["profiles"][0].setdefault("plugins", {}).setdefault("multiPoint", {}).setdefault(
        "disabled", []).append({"name": "GangScheduling"})
    sched = control_plane.start_scheduler(
        config, "gang-kube-scheduler-dra-workload",
        feature_gates=f"{upstream_gang_gates(control_plane.minor)},"
                      f"{dra_workload_gates(control_plane.minor)}")
    yield GangStack(control_plane, port, ext, sched, args)
    for p in (sched, ext):
        with contextlib.suppress(Exception):
            p.stop()


def test_an_upstream_podgroups_claim_is_one_allocation_for_its_members(
    dra_workload: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(4, prefix="upc", cpu="16", memory="64Gi")
    with fake_driver() as driver:
        for n in nodes:
            driver.publish(n, 2)
        create_claim_template(ns, "two-gpus", 2)
        kube().custom.create_namespaced_custom_object(
            "scheduling.k8s.io", "v1beta1", ns, "podgroups",
            {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "up"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                      "resourceClaims": [{"name": "gpu",
                                          "resourceClaimTemplateName": "two-gpus"}]}})
        with Recorder(ns) as rec:
            for i in range(3):
                create_pod(ns, f"up-{i}", cpu="1", memory="64Mi",
                           scheduler_name=DRA_WORKLOAD_SCHED,
                           spec_extra={"schedulingGroup": {"podGroupName": "up"},
                                       **claims_from("two-gpus")})
            wait_for(lambda: len(rec.bound()) == 3 or NotYet(
                (pod_nodes(ns), allocated_claims(ns))), 45, "the three members bound",
                logs=dra_workload.logs())
            (node,) = {r.node for r in rec.bound().values()}
            held = allocated_claims(ns)
            # One claim, the group's (made from the template, named in its status).
            assert list(held.values()) == [[f"{node}/gpu-0", f"{node}/gpu-1"]], held
            pg = kube().custom.get_namespaced_custom_object(
                "scheduling.k8s.io", "v1beta1", ns, "podgroups", "up")
            statuses = (pg.get("status") or {}).get("resourceClaimStatuses") or []
            assert [s.get("resourceClaimName") for s in statuses] == list(held), statuses

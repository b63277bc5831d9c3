"""The direct commit on the real control plane (issue 30, architecture.md §7): a planned
gang is bound by the extender itself, all its Bindings in flight at once, without a
kube-scheduler cycle per member; a member kube-scheduler's own plugins must place (here
a PersistentVolumeClaim whose volume is pinned to one node) still goes through
kube-scheduler's cycle and the bind barrier, and its gang lands whole."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.queries import pod_nodes
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.faults.commit_faults import kube_scheduler_paused
from e2e.tests.metrics import metric

pytestmark = pytest.mark.e2e


def verb_requests(gang: GangStack, verb: str) -> float:
    """Requests of `verb` kube-scheduler has sent the extender so far (every outcome)."""
    return metric(gang, "gang_extender_verb_duration_seconds_count", {"verb": verb})


def bind_requests(gang: GangStack) -> float:
    return verb_requests(gang, "bind")


def commit_waits(gang: GangStack, outcome: str) -> float:
    return metric(gang, "gang_extender_commit_wait_seconds_count", {"outcome": outcome})


def test_a_200_pod_gang_is_committed_without_a_kube_scheduler_cycle_per_member(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """Created while kube-scheduler runs no cycle at all: the extender's tick plans the
    complete gang and the commit binds all 200 members. On the barrier path nothing
    would bind: every member needs its own bind request."""
    ns = namespace
    fake_nodes.add_nodes(20, prefix="big", cpu="16", memory="64Gi")
    create_podgroup(ns, "big", 200, timeout=120)
    requests_before = bind_requests(gang)
    with Recorder(ns) as rec, kube_scheduler_paused(gang):
        for i in range(200):
            create_pod(ns, f"big-{i}", cpu="100m", memory="64Mi",
                       scheduler_name=GANG_SCHEDULER, pod_group="big")
        last_created = time.monotonic()
        wait_for(lambda: len(rec.bound("big")) == 200 or NotYet(len(rec.bound("big"))),
                 60, "the 200-pod gang bound while kube-scheduler is stopped",
                 logs=gang.logs())
        took = max(rec.bind_times("big")) - last_created
        spread = max(rec.bind_times("big")) - min(rec.bind_times("big"))
        print(f"MEASURED direct commit: 200-pod gang bound {took:.2f}s after its last "
              f"member, its Bindings over {spread:.2f}s, no kube-scheduler cycle")
        assert bind_requests(gang) == requests_before  # not one bind request
        rec.assert_never_partial("big", 200, window=30.0)
    assert took <= 30.0, f"the commit took {took:.1f}s after the last member"


def _pv_and_claim(ns: str, name: str, node: str) -> None:
    """A PersistentVolume usable only on `node` and a claim already bound to it (the
    control plane runs no volume controller, so the binding is written here as the PV
    controller writes it): kube-scheduler's VolumeBinding filter offers `node` alone."""
    core = kube().core
    pv: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-{name}"},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "", "hostPath": {"path": f"/tmp/{ns}-{name}"},
            "claimRef": {"namespace": ns, "name": name},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
        },
    }
    core.create_persistent_volume(pv, _preload_content=False)
    claim: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns,
                     "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "volumeName": f"{ns}-{name}", "resources": {"requests": {"storage": "1Gi"}}},
    }
    core.create_namespaced_persistent_volume_claim(ns, claim, _preload_content=False)


def test_a_gang_with_a_pvc_member_lands_whole_through_kube_scheduler(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """The fallback: the member with a claim goes through kube-scheduler's cycle (its
    VolumeBinding filter keeps it on its volume's node, which the extender's plan knows
    nothing of) and waits at the barrier; the other members commit with it. Committed
    directly, it would land where the plan put it, away from its volume."""
    ns = namespace
    # Best fit leaves the big node to last: the plan puts nobody on the volume's node.
    small = fake_nodes.add_nodes(3, prefix="pvs", cpu="2", memory="8Gi")
    big = fake_nodes.add_node("pvs-big", cpu="16", memory="64Gi")
    _pv_and_claim(ns, "data", big)
    create_podgroup(ns, "pvg", 3, timeout=60)
    with Recorder(ns) as rec:
        try:
            for i in range(2):
                create_pod(ns, f"pvg-{i}", cpu="1", scheduler_name=GANG_SCHEDULER,
                           pod_group="pvg")
            create_pod(ns, "pvg-vol", cpu="1", scheduler_name=GANG_SCHEDULER,
                       pod_group="pvg", spec_extra={"volumes": [
                           {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]})
            wait_for(lambda: len(rec.bound("pvg")) == 3 or NotYet(pod_nodes(ns)), 60,
                     "the gang with a PVC member bound whole", logs=gang.logs())
            nodes = pod_nodes(ns)
            assert nodes["pvg-vol"] == big, nodes  # where its volume is
            assert {nodes["pvg-0"], nodes["pvg-1"]} <= {*small, big}
            rec.assert_never_partial("pvg", 3)
        finally:
            kube().core.delete_persistent_volume(f"{ns}-data")


def test_kube_scheduler_runs_one_cycle_for_a_gang_the_extender_commits(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """The commit wait: the filter call that sets a gang's commit off is answered only
    once the extender's watch has delivered the members the commit bound, so that
    kube-scheduler's queue, fed by its own watch, has dropped them by the time its loop
    goes on. Answered at once, the loop would take the next member while its Binding is
    in flight and run a cycle (a filter and a bind call) for it: most of the gang."""
    ns = namespace
    fake_nodes.add_nodes(4, prefix="cw", cpu="8", memory="16Gi")
    create_podgroup(ns, "wave", 16)
    filters_before = verb_requests(gang, "filter")
    landed_before = commit_waits(gang, "landed")

    def member(i: int) -> None:
        create_pod(ns, f"wave-{i}", cpu="100m", memory="64Mi",
                   scheduler_name=GANG_SCHEDULER, pod_group="wave")

    with Recorder(ns) as rec:
        member(0)  # kube-scheduler's first cycle: its filter call waits for the rest
        wait_for(lambda: any(w["pod"] == f"{ns}/wave-0" for w in gang.debug()["filterWaits"])
                 or NotYet(gang.debug()), 10, "the filter call for wave-0 held for its gang",
                 interval=0.01, logs=gang.logs())
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(member, range(1, 16)))
        wait_for(lambda: len(rec.bound("wave")) == 16 or NotYet(len(rec.bound("wave"))),
                 30, "the 16-pod gang bound", logs=gang.logs())
        rec.assert_never_partial("wave", 16)
    filters = verb_requests(gang, "filter") - filters_before
    print(f"MEASURED commit wait: {filters:.0f} filter calls for a 16-pod gang")
    assert commit_waits(gang, "landed") > landed_before
    assert filters <= 4, f"kube-scheduler took {filters:.0f} of 16 members through a cycle"
    # The member whose cycle set the commit off is bound at kube-scheduler's bind request:
    # bound earlier, kube-scheduler's informer would see it bound before the cycle assumed
    # it, and the cycle would fail with FailedScheduling and PodScheduled=False on it. (A
    # member kube-scheduler takes through a cycle while its Binding lands can still meet
    # that race, as before the wait: at most the cycles after the first.)
    raw = kube().core.list_namespaced_event(ns, field_selector="reason=FailedScheduling",
                                            _preload_content=False)
    failed = {e["involvedObject"]["name"]: e["message"]
              for e in json.loads(raw.data)["items"]}
    assert "wave-0" not in failed and len(failed) <= filters - 1, failed
    first = kube().core.read_namespaced_pod("wave-0", ns)
    scheduled = [c.status for c in first.status.conditions or [] if c.type == "PodScheduled"]
    assert scheduled == ["True"], first.status.conditions

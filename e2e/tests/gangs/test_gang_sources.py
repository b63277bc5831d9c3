"""The pod-group APIs operators already emit, end to end (issue 19), on any cluster with the
gang scheduler installed (e2e/anycluster.py):

* Kueue plain pod groups: labels and an annotation on the pods, no object;
* Volcano PodGroups (scheduling.volcano.sh/v1beta1), whose CRD is installed while the
  extender runs (the minimal one in e2e/crds/volcano, unless the cluster has Volcano's);
* the upstream Workload API's PodGroup, scheduling.k8s.io/v1alpha2 (1.36) or v1beta1
  (1.37), where served (the local control plane serves its release's; e2e/harness);
* a pod carrying keys of two sources counts for one gang only.

Each gang is shown to wait whole while a member is missing, to bind as one burst, and to
say why it waits in Events on its object (or on its pods, for Kueue).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.anycluster import AnyCluster, Slots
from e2e.gang import Recorder
from e2e.harness.objects import create_podgroup
from e2e.harness.queries import get_pod, served_workload_version
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.volcano import VOLCANO_ANNOTATION, volcano_crd

pytestmark = [pytest.mark.e2e, pytest.mark.any_cluster]

__all__ = ["volcano_crd"]  # the fixture of e2e/tests/volcano.py, used by name below

KUEUE_NAME = "kueue.x-k8s.io/pod-group-name"
KUEUE_COUNT = "kueue.x-k8s.io/pod-group-total-count"
# The extender asks discovery for an optional API every 10 s (extender/kube/informer.py).
DISCOVERY = 10


def condition(ns: str, pod: str) -> str:
    for c in ((get_pod(ns, pod) or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message", ""))
    return ""


def extender_events(ns: str, kind: str, name: str) -> list[dict[str, Any]]:
    """The gang extender's Events about one object of the namespace."""
    raw = kube().core.list_namespaced_event(
        ns, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
        _preload_content=False)
    return [e for e in json.loads(raw.data)["items"]
            if e.get("reportingComponent") == "gang-extender"]


def reasons_on(ns: str, group: str, reasons: set[str]) -> list[dict[str, Any]] | NotYet:
    """The extender's Events on the PodGroup once they include `reasons`."""
    events = extender_events(ns, "PodGroup", group)
    have = {e["reason"] for e in events}
    return events if reasons <= have else NotYet(sorted(have))


def waits_then_binds_whole(ns: str, slots: Slots, rec: Recorder, members: list[str],
                           create: Any, waiting: str, bind_timeout: float = 30) -> None:
    """Create all members but the last: they are turned away with `waiting` in their
    condition and none binds; the last one brings the whole gang in, as one burst."""
    for name in members[:-1]:
        create(name)

    def turned_away() -> str | NotYet:
        if rec.bound():
            return "bound"
        msg = condition(ns, members[0])
        return "waiting" if waiting in msg else NotYet(msg)

    state = wait_for(turned_away, 30, f"{members[0]} waits: {waiting!r}", logs=slots.logs)
    if state == "waiting":
        time.sleep(1)
    assert rec.bound() == {}, f"a member bound before its gang was complete: {rec.history}"
    create(members[-1])
    wait_for(lambda: len(rec.bound()) == len(members) or NotYet(slots.bound(ns)),
             bind_timeout, "the whole gang bound", logs=slots.logs)
    times = sorted(r.bound_at for r in rec.bound().values() if r.bound_at is not None)
    assert times[-1] - times[0] <= 2.0, f"bound over {times[-1] - times[0]:.2f}s: {rec.history}"


def test_kueue_pod_group_is_a_gang_never_bound_pod_by_pod(
        any_cluster: AnyCluster, namespace: str) -> None:
    """The report of issue 19: four pods of a Kueue pod group; three were bound one by one
    as plain pods within a second. Now they wait for the fourth, and say so on themselves."""
    ns, slots = namespace, any_cluster.nodes(4)
    names = [f"job-{i}" for i in range(4)]

    def create(name: str) -> None:
        slots.pod(ns, name, labels={KUEUE_NAME: "job"}, annotations={KUEUE_COUNT: "4"})

    with Recorder(ns) as rec:
        waits_then_binds_whole(ns, slots, rec, names, create,
                               f"gang kueue:{ns}/job: 3 of 4 members exist")
    events = wait_for(lambda: extender_events(ns, "Pod", "job-0") or NotYet("no Event"), 20,
                      "the extender's Events on a Kueue pod", logs=slots.logs)
    assert any(e["reason"] == "WaitingForMembers" and f"kueue:{ns}/job" in e["message"]
               for e in events), events


def test_volcano_podgroup_is_a_gang_and_its_crd_is_picked_up_while_running(
        any_cluster: AnyCluster, namespace: str, volcano_crd: None) -> None:
    ns, slots = namespace, any_cluster.nodes(3)
    kube().custom.create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "mpi"}, "spec": {"minMember": 3, "queue": "default"}})

    def create(name: str) -> None:
        slots.pod(ns, name, annotations={VOLCANO_ANNOTATION: "mpi"})

    with Recorder(ns) as rec:
        # Until the extender has discovered the new API the members are turned away with
        # "PodGroup ... not found"; after, with "2 of 3 members exist". Either way none
        # binds, and the whole gang does once complete (woken when its reservation is
        # made, if discovery comes last).
        waits_then_binds_whole(ns, slots, rec, [f"mpi-{i}" for i in range(3)], create,
                               f"gang volcano:{ns}/mpi: ", bind_timeout=DISCOVERY + 30)
    events = wait_for(lambda: reasons_on(ns, "mpi", {"Reserved", "Bound"}), 20,
                      "the extender's Events on the Volcano PodGroup", logs=slots.logs)
    assert {e["involvedObject"]["apiVersion"] for e in events} == {
        "scheduling.volcano.sh/v1beta1"}
    pg = kube().custom.get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", "mpi")
    assert not pg.get("status"), "Volcano's status is Volcano's: the extender writes none"


def test_upstream_podgroup_is_a_gang(any_cluster: AnyCluster, namespace: str) -> None:
    """The same gang on the version of the upstream PodGroup the cluster serves: v1alpha2
    on 1.36 (`make e2e-k8s K8S=1.36`), v1beta1 on 1.37 (`make test`). No release serves
    both, so the version is chosen here, not parametrized: a case that could never run
    would be a skip in every run (and external mode allows none)."""
    version = served_workload_version()
    if version is None:
        pytest.skip("no version of scheduling.k8s.io PodGroups is served (v1beta1 on 1.37, "
                    "v1alpha2 on 1.36, each with its --runtime-config and GenericWorkload)")
    ns, slots = namespace, any_cluster.nodes(3)
    kube().custom.create_namespaced_custom_object(
        "scheduling.k8s.io", version, ns, "podgroups",
        {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
         "metadata": {"name": "up"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})

    def create(name: str) -> None:
        slots.pod(ns, name, spec_extra={"schedulingGroup": {"podGroupName": "up"}})

    with Recorder(ns) as rec:
        waits_then_binds_whole(ns, slots, rec, [f"up-{i}" for i in range(3)], create,
                               f"gang workload-api:{ns}/up: 2 of 3 members exist")
    events = wait_for(lambda: reasons_on(ns, "up", {"Reserved", "Bound"}), 20,
                      "the extender's Events on the upstream PodGroup", logs=slots.logs)
    assert {e["involvedObject"]["apiVersion"] for e in events} == {
        f"scheduling.k8s.io/{version}"}
    # Its members name the gang scheduler: the scheduling condition of its version, as
    # kube-scheduler writes it on its own gangs (e2e/tests/integrations/test_upstream_status.py).
    sched = "PodGroupScheduled" if version == "v1alpha2" else "PodGroupInitiallyScheduled"

    def scheduled() -> dict[str, Any] | NotYet:
        pg = kube().custom.get_namespaced_custom_object(
            "scheduling.k8s.io", version, ns, "podgroups", "up")
        conds = {c["type"]: c for c in (pg.get("status") or {}).get("conditions") or []}
        c = conds.get(sched)
        return c if c is not None and c["status"] == "True" else NotYet(conds)

    wait_for(scheduled, 20, f"{sched}=True on the upstream PodGroup", logs=slots.logs)


def test_a_pod_with_keys_of_two_sources_is_counted_once(
        any_cluster: AnyCluster, namespace: str) -> None:
    """Labelled for a scheduler-plugins PodGroup of 2 and for a Kueue pod group of 3: the
    scheduler-plugins label comes first (extender/core/model/sources.py), so the two pods are a
    complete gang of 2; counted for Kueue's too, they would wait for a third forever."""
    ns, slots = namespace, any_cluster.nodes(2)
    create_podgroup(ns, "pair", 2)
    with Recorder(ns) as rec:
        for i in range(2):
            slots.pod(ns, f"pair-{i}", pod_group="pair", labels={KUEUE_NAME: "pair"},
                      annotations={KUEUE_COUNT: "3"})
        wait_for(lambda: len(rec.bound()) == 2 or NotYet(slots.bound(ns)), 30,
                 "the scheduler-plugins gang of 2 bound", logs=slots.logs)
        rec.assert_never_partial("pair", 2)

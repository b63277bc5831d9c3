"""Beside the in-tree gang scheduler (issue 28 item 5): the cluster's default kube-scheduler
runs its own gang scheduling (1.37: the `GenericWorkload` gate; 1.36: `GenericWorkload`
and `GangScheduling`, the alpha gates of k8s.io/kubernetes pkg/features), and the gang
scheduler (our extender and its kube-scheduler profile) runs too. Its gangs (upstream
PodGroups whose pods name default-scheduler) and ours (an upstream PodGroup whose pods
name gang-scheduler, and a scheduler-plugins PodGroup) share two nodes:

* neither binds a member of an incomplete gang, its own or the other's;
* every pod is bound by its own scheduler (the Scheduled Event's reporting controller:
  ours by our profile or, for a member the extender's commit bound, the extender);
* no node is over-committed: each counts the other's bound pods (the gangs complete
  one after another: a race of two schedulers binding at once is the kubelet's to settle);
* each group's status is written by its own scheduler only (managedFields of the status
  subresource), and the extender sends no Event about theirs.

The module stops the session's default scheduler (no gang gates) and runs one with the
gates under the same profile, restoring the first afterwards. It fails without its
features: without the in-tree gates their incomplete gang does not wait (a plain default
scheduler binds `theirs-0` at once); with the gang manager counting pods of another
scheduler as members (`GangManager.on_pod`'s NOT_A_MEMBER), our condition and message
land on their PodGroup.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.process import ManagedProcess
from e2e.harness.queries import get_podgroup
from e2e.harness.target import kube
from e2e.harness.versions import k8s_minor
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.integrations.upstream_podgroups import (
    EXTENDER_MANAGER,
    conditions,
    create_upstream,
    get_upstream,
    member,
    scheduled_type,
    status_managers,
    version,
)

pytestmark = pytest.mark.e2e

HOLD = 3.0
"""Seconds the incomplete gangs are watched to stay unbound (a per-pod scheduler binds a
pod within about 0.1 s here)."""


def in_tree_gates(minor: tuple[int, int]) -> str:
    """The gates that turn on kube-scheduler's own gang scheduling: 1.37 folded
    GangScheduling into GenericWorkload (and refuses the old name)."""
    return "GenericWorkload=true" if minor >= (1, 37) else \
        "GenericWorkload=true,GangScheduling=true"


@pytest.fixture(scope="module")
def in_tree(control_plane: Cluster, default_scheduler: ManagedProcess | None
            ) -> Iterator[ManagedProcess]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane (it restarts the default scheduler)")
    if default_scheduler is not None:
        default_scheduler.stop()
    gates = in_tree_gates(k8s_minor(control_plane.bin_dir))
    proc = control_plane.start_default_scheduler("kube-scheduler-gangs", feature_gates=gates)
    try:
        yield proc
    finally:
        proc.stop()
        if default_scheduler is not None:
            default_scheduler.start()


def scheduled_by(ns: str) -> dict[str, str]:
    """pod -> the scheduler (profile) whose Scheduled Event names it."""
    raw = kube().core.list_namespaced_event(ns, field_selector="reason=Scheduled",
                                            _preload_content=False)
    out = {}
    for e in json.loads(raw.data)["items"]:
        who = e.get("reportingComponent") or (e.get("source") or {}).get("component", "")
        out[e["involvedObject"]["name"]] = who
    return out


def requests_per_node(ns: str) -> dict[str, int]:
    """node -> millicores requested by the namespace's bound pods."""
    raw = kube().core.list_namespaced_pod(ns, _preload_content=False)
    out: dict[str, int] = {}
    for p in json.loads(raw.data)["items"]:
        node = p["spec"].get("nodeName")
        if not node or p["metadata"].get("deletionTimestamp"):
            continue
        for c in p["spec"]["containers"]:
            cpu = str(c["resources"]["requests"]["cpu"])
            out[node] = out.get(node, 0) + (int(cpu[:-1]) if cpu.endswith("m")
                                            else int(float(cpu) * 1000))
    return out


def extender_events_on(ns: str, name: str) -> list[dict[str, Any]]:
    raw = kube().core.list_namespaced_event(
        ns, field_selector=f"involvedObject.kind=PodGroup,involvedObject.name={name}",
        _preload_content=False)
    return [e for e in json.loads(raw.data)["items"]
            if e.get("reportingComponent") == "gang-extender"]


def test_in_tree_gangs_and_ours_never_touch_each_other(
        in_tree: ManagedProcess, gang: GangStack, fake_nodes: NodeSet, namespace: str
) -> None:
    v, ns = version(), namespace
    sel = {"in-tree-e2e": ns}
    fake_nodes.add_nodes(2, prefix=f"{ns}-n", cpu="4", memory="8Gi", labels=sel)
    create_upstream(ns, "theirs", 2, v)
    create_upstream(ns, "ours", 2, v)
    create_podgroup(ns, "sp", 2)
    logs = [in_tree, *gang.logs()]

    def sp_pod(name: str) -> None:
        create_pod(ns, name, cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="sp",
                   node_selector=sel, labels=sel)

    # 2 + 2 + 1 + 1 + 1 + 1 cores on 2 x 4: every packing fits, none with room to spare.
    with Recorder(ns) as rec:
        member(ns, "theirs-0", "theirs", "2", sel, scheduler="default-scheduler")
        member(ns, "ours-0", "ours", "1", sel)
        sp_pod("sp-0")
        time.sleep(HOLD)
        assert rec.bound() == {}, f"a member of an incomplete gang was bound: {rec.history}"
        # One gang completes at a time, each after the one before is seen bound: two
        # schedulers deciding at the same instant cannot see each other's choice (docs/
        # sharing-nodes.md: the kubelet's admission settles that race; the fake kubelet admits
        # all). A watch delivers in resourceVersion order, so each scheduler sees the last
        # gang bound before it sees the member that completes the next: the in-tree one
        # has to count ours, and ours has to count theirs.
        member(ns, "ours-1", "ours", "1", sel)
        wait_for(lambda: len(rec.bound()) == 2 or NotYet(sorted(rec.bound())), 60,
                 "ours bound", logs=logs)
        member(ns, "theirs-1", "theirs", "2", sel, scheduler="default-scheduler")
        wait_for(lambda: len(rec.bound()) == 4 or NotYet(sorted(rec.bound())), 60,
                 "theirs bound", logs=logs)
        sp_pod("sp-1")
        wait_for(lambda: len(rec.bound()) == 6 or NotYet(sorted(rec.bound())), 60,
                 "all three gangs bound", logs=logs)
        for group in ("theirs", "ours", "sp"):
            rec.assert_never_partial(group, 2)

    by = wait_for(lambda: (lambda s: s if len(s) == 6 else NotYet(s))(scheduled_by(ns)),
                  20, "a Scheduled Event per pod", logs=logs)
    # Ours are reported by our kube-scheduler profile when it bound them through the bind
    # verb, or by the extender when its commit bound them with no bind request waiting.
    our_reporters = {GANG_SCHEDULER, "gang-extender"}
    assert {p: who for p, who in by.items() if p.startswith("theirs")} == {
        "theirs-0": "default-scheduler", "theirs-1": "default-scheduler"}, by
    assert all(by[p] in our_reporters for p in ("ours-0", "ours-1", "sp-0", "sp-1")), by
    used = requests_per_node(ns)
    assert all(m <= 4000 for m in used.values()), \
        f"a node over-committed: {used}; {rec.history}"

    sched = scheduled_type(v)

    def written() -> tuple[dict[str, Any], dict[str, Any]] | NotYet:
        theirs, ours = conditions(ns, "theirs", v), conditions(ns, "ours", v)
        done = all(c.get(sched, {}).get("status") == "True" for c in (theirs, ours))
        return (theirs, ours) if done else NotYet((theirs, ours))

    theirs, ours = wait_for(written, 20, f"{sched}=True on both upstream PodGroups",
                            logs=logs)
    # Theirs as kube-scheduler writes it; ours with our message.
    assert theirs[sched]["reason"] == "Scheduled"
    assert not theirs[sched]["message"].startswith("gang "), theirs
    assert ours[sched]["message"] == f"gang workload-api:{ns}/ours: quorum of 2 bound", ours
    their_writers = status_managers(get_upstream(ns, "theirs", v))
    our_writers = status_managers(get_upstream(ns, "ours", v))
    assert their_writers and EXTENDER_MANAGER not in their_writers, their_writers
    assert our_writers == {EXTENDER_MANAGER}, our_writers
    assert extender_events_on(ns, "theirs") == []
    # The scheduler-plugins PodGroup: ours, as ever.

    def sp_scheduled() -> bool | NotYet:
        st = (get_podgroup(ns, "sp") or {}).get("status") or {}
        ok = any(c.get("type") == "Scheduled" and c.get("status") == "True"
                 for c in st.get("conditions") or [])
        return ok or NotYet(st)

    wait_for(sp_scheduled, 20, "Scheduled=True on the scheduler-plugins PodGroup", logs=logs)

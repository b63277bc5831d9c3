"""The peers `bench.e2e` compares with really schedule gangs as configured there
(bench/e2e/systems.py): C, the stock kube-scheduler with its in-tree GangScheduling plugin
(GenericWorkload on 1.37; GenericWorkload and GangScheduling on 1.36), and D,
scheduler-plugins' Coscheduling. A benchmark whose peer silently placed the pods one by one
(a misspelt field, a missing gate, a plugin not enabled) would still print numbers, only
wrong ones: here two members of a gang of three must stay unbound while the third is
missing, and all three bind once it exists.

About 10 s per system. D's binary is built once per machine by
`e2e/build-operator.sh scheduler-plugins` (`make operators`). The session's control plane
serves the release's scheduling.k8s.io PodGroups (v1beta1 on 1.37, v1alpha2 on 1.36) but
without the API server's GangScheduling gate on 1.36, which C turned out not to need
here; D runs against our PodGroup CRD, whose spec is
scheduler-plugins' (the benchmark swaps in their own CRD).
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from bench.e2e.systems import group_manifest, pod_manifest, scheduler_config
from e2e.gang import scheduler_config as shipped_config
from e2e.harness.cluster import ControlPlane
from e2e.harness.fixtures import NodeSet
from e2e.harness.target import kube
from e2e.harness.versions import upstream_gang_gates, workload_api_version
from e2e.harness.waiting import wait_for
from e2e.integrations.operators import obtain_operator

pytestmark = pytest.mark.e2e

HOLD = 3.0
"""Seconds the incomplete gang is watched to stay unbound (a per-pod scheduler binds a
pod within about 0.1 s here)."""


def bound(ns: str) -> set[str]:
    raw = kube().core.list_namespaced_pod(ns, _preload_content=False)
    return {p["metadata"]["name"] for p in json.loads(raw.data)["items"]
            if p["spec"].get("nodeName")}


@pytest.mark.parametrize("system", ["C", "D"])
def test_peer_waits_for_the_whole_gang(system: str, local_control_plane: ControlPlane,
                                       fake_nodes: NodeSet, namespace: str) -> None:
    cp, ns = local_control_plane, namespace
    binary, coscheduling = None, None
    if system == "D":
        cache = obtain_operator("scheduler-plugins")
        binary = cache / "scheduler-plugins"
        coscheduling = yaml.safe_load((cache / "coscheduling-config.yaml").read_text())
    fake_nodes.add_nodes(2)
    cfg = scheduler_config(system, "unthrottled", shipped_config(0), coscheduling)
    sched = cp.start_scheduler(cfg, f"peer-{system.lower()}", binary=binary,
                               feature_gates=upstream_gang_gates(cp.minor)
                               if system == "C" else "")
    try:
        k = kube()
        obj = group_manifest(system, ns, "trio", 3, workload_api_version(cp.minor))
        assert obj is not None
        (grp, ver, plural), body = obj
        k.custom.create_namespaced_custom_object(grp, ver, ns, plural, body)
        members = [f"trio-{i}" for i in range(3)]
        for m in members[:2]:
            k.core.create_namespaced_pod(ns, pod_manifest(system, ns, m, "trio"),
                                         _preload_content=False)
        time.sleep(HOLD)
        assert bound(ns) == set(), f"{system} bound members of an incomplete gang"
        k.core.create_namespaced_pod(ns, pod_manifest(system, ns, members[2], "trio"),
                                     _preload_content=False)

        def whole() -> bool:
            return bound(ns) == set(members)

        # Coscheduling retries a rejected gang after its backoff; kube-scheduler on the next
        # event.
        wait_for(whole, 30, f"{system} binds the whole gang", logs=[sched.name])
    finally:
        sched.stop()

"""bench/e2e/systems.py: each system's pods, group objects and KubeSchedulerConfiguration form
the gangs its scheduler expects, and nothing else differs between the systems. A wrong
field name would not fail a benchmark run loudly (an upstream gang scheduler that does not
recognise a pod schedules it as a plain pod), so the manifests are pinned here."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bench.e2e import systems
from e2e.gang import scheduler_config as shipped_config
from e2e.harness.fixtures import POD_GROUP_LABEL
from e2e.harness.versions import upstream_gang_gates, workload_api_version

# scheduler-plugins v0.34.7 manifests/coscheduling/scheduler-config.yaml, as parsed
# (the benchmark reads the copy e2e/build-operator.sh caches).
COSCHEDULING = yaml.safe_load("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: REPLACE_ME}
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint: {enabled: [{name: Coscheduling}]}
    queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 10}
""")


def config(system: str, client: str = "default") -> dict[str, Any]:
    return systems.scheduler_config(system, client, shipped_config(1234), COSCHEDULING)


def test_pods_join_their_gang_the_way_each_scheduler_reads_it() -> None:
    a, b, c, d = (systems.pod_manifest(s, "ns", "job-3-1", "job-3") for s in "ABCD")
    assert POD_GROUP_LABEL not in a["metadata"]["labels"]
    assert "schedulingGroup" not in a["spec"]
    assert b["metadata"]["labels"][POD_GROUP_LABEL] == "job-3"
    assert d["metadata"]["labels"][POD_GROUP_LABEL] == "job-3"
    assert c["spec"]["schedulingGroup"] == {"podGroupName": "job-3"}
    assert POD_GROUP_LABEL not in c["metadata"]["labels"]
    assert [p["spec"]["schedulerName"] for p in (a, b, c, d)] == [
        "bench-stock", "gang-scheduler", "bench-upstream", "bench-coscheduling"]
    # Otherwise the same pod: same requests, same container.
    for p in (b, c, d):
        assert p["spec"]["containers"] == a["spec"]["containers"]
        assert p["metadata"]["labels"]["app"] == "job-3"


def test_group_objects_per_system() -> None:
    assert systems.group_manifest("A", "ns", "g", 8) is None
    (api_b, body_b) = systems.group_manifest("B", "ns", "g", 8) or ((), {})
    (api_d, body_d) = systems.group_manifest("D", "ns", "g", 8) or ((), {})
    assert api_b == api_d == ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    assert body_b == body_d
    assert body_b["spec"] == {"minMember": 8}
    (api_c, body_c) = systems.group_manifest("C", "ns", "g", 1000) or ((), {})
    assert api_c == ("scheduling.k8s.io", "v1beta1", "podgroups")
    assert body_c["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert body_c["spec"] == {"schedulingPolicy": {"gang": {"minCount": 1000}}}
    # 1.36's version: the same spec (k8s.io/api v0.36.3 scheduling/v1alpha2).
    (api_c, old) = systems.group_manifest("C", "ns", "g", 1000, "v1alpha2") or ((), {})
    assert api_c == ("scheduling.k8s.io", "v1alpha2", "podgroups")
    assert old["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert old["spec"] == body_c["spec"]
    with pytest.raises(ValueError):
        systems.group_manifest("E", "ns", "g", 8)


def test_only_b_has_the_extender_and_only_d_coscheduling() -> None:
    b = config("B")
    assert [e["urlPrefix"] for e in b["extenders"]] == ["http://127.0.0.1:1234"] * 2
    for s in "ACD":
        assert "extenders" not in config(s)
    d = config("D")["profiles"][0]
    assert d["plugins"]["multiPoint"]["enabled"] == [{"name": "Coscheduling"}]
    assert d["plugins"]["queueSort"]["enabled"] == [{"name": "Coscheduling"}]
    assert d["pluginConfig"] == [{"name": "Coscheduling",
                                  "args": {"permitWaitingTimeSeconds": 10}}]
    # B's one plugin change (no preemption) carried over, not Coscheduling's clientConnection.
    assert {"name": "DefaultPreemption"} in d["plugins"]["postFilter"]["disabled"]
    assert "Coscheduling" not in str(config("C")) and "Coscheduling" not in str(config("A"))
    with pytest.raises(ValueError):
        systems.scheduler_config("D", "default", shipped_config(1), None)


def test_the_shared_profile_settings_are_b_s_as_shipped() -> None:
    shipped = shipped_config(1)
    for s, sysdef in systems.SYSTEMS.items():
        cfg = config(s)
        prof = cfg["profiles"][0]
        assert prof["schedulerName"] == sysdef.scheduler_name
        assert prof.get("percentageOfNodesToScore") == shipped["profiles"][0].get(
            "percentageOfNodesToScore")
        assert cfg["podInitialBackoffSeconds"] == shipped["podInitialBackoffSeconds"]
        assert "leaderElection" not in cfg


def test_client_settings() -> None:
    for s in "ABCD":
        assert "clientConnection" not in config(s, "default")  # each binary's own default
        assert config(s, "unthrottled")["clientConnection"]["qps"] < 0  # no rate limiter
    with pytest.raises(KeyError):
        config("A", "fast")


def test_own_scoring_leaves_the_percentage_to_kube_scheduler_except_for_b() -> None:
    for s in "ACD":
        prof = systems.scheduler_config(s, "default", shipped_config(1), COSCHEDULING,
                                        own_scoring=True)["profiles"][0]
        assert "percentageOfNodesToScore" not in prof
    b = systems.scheduler_config("B", "default", shipped_config(1), COSCHEDULING,
                                 own_scoring=True)
    assert b["profiles"][0].get("percentageOfNodesToScore") == shipped_config(1)[
        "profiles"][0].get("percentageOfNodesToScore")  # B's as shipped


def test_the_upstream_peer_gets_the_gates_and_version_of_its_release() -> None:
    """1.37 folded GangScheduling into GenericWorkload and refuses to start with the old
    gate named; 1.36 needs both for its GangScheduling plugin. A wrong pair fails C's
    kube-scheduler at start-up or leaves it placing pods one by one."""
    assert upstream_gang_gates((1, 37)) == "GenericWorkload=true"
    assert upstream_gang_gates((1, 38)) == "GenericWorkload=true"
    assert upstream_gang_gates((1, 36)) == "GenericWorkload=true,GangScheduling=true"
    assert workload_api_version((1, 37)) == "v1beta1"
    assert workload_api_version((1, 36)) == "v1alpha2"

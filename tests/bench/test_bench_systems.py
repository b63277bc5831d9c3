"""bench/e2e/systems.py: each system's pods, group objects and KubeSchedulerConfiguration form
the gangs its scheduler expects, and nothing else differs between the systems but node
sampling, which is B's as deploy/ ships it and stock for the others. A wrong
field name would not fail a benchmark run loudly (an upstream gang scheduler that does not
recognise a pod schedules it as a plain pod), so the manifests are pinned here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import e2e.gang
from bench.e2e import systems
from bench.e2e.run import system_config
from e2e.gang import scheduler_config as shipped_config
from e2e.harness.objects import POD_GROUP_LABEL
from e2e.harness.versions import upstream_gang_gates, workload_api_version

REPO = Path(__file__).resolve().parents[2]

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
    for s in systems.SCHEDULED:
        cfg = config(s)
        prof = cfg["profiles"][0]
        assert prof["schedulerName"] == systems.SYSTEMS[s].scheduler_name
        assert cfg["podInitialBackoffSeconds"] == shipped["podInitialBackoffSeconds"]
        assert cfg["podMaxBackoffSeconds"] == shipped["podMaxBackoffSeconds"]
        assert {"name": "DefaultPreemption"} in prof["plugins"]["postFilter"]["disabled"]
        assert "leaderElection" not in cfg
    # Node sampling is B's alone: B as deploy/ ships it (set or not), the others stock.
    assert (config("B")["profiles"][0].get("percentageOfNodesToScore")
            == shipped["profiles"][0].get("percentageOfNodesToScore"))
    for s in "ACD":
        assert "percentageOfNodesToScore" not in config(s)["profiles"][0]


def _deploy_copy(root: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """deploy/scheduler-config.yaml as it is in this checkout, edited, under `root`."""
    cfg = yaml.safe_load((REPO / "deploy" / "scheduler-config.yaml").read_text())
    edit(cfg)
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "scheduler-config.yaml").write_text(yaml.safe_dump(cfg))


def test_a_change_in_deploy_flows_through_to_every_run(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs read deploy/ at every start (`run.system_config`), never a copy: a profile
    that drops `percentageOfNodesToScore` (issue 30) or changes the backoff is what runs."""
    def without_percentage(cfg: dict[str, Any]) -> None:
        cfg["profiles"][0].pop("percentageOfNodesToScore", None)
        cfg["podInitialBackoffSeconds"] = 3

    def with_percentage(cfg: dict[str, Any]) -> None:
        cfg["profiles"][0]["percentageOfNodesToScore"] = 30

    monkeypatch.setattr(e2e.gang, "REPO", tmp_path / "one")
    _deploy_copy(tmp_path / "one", without_percentage)
    for s in "ABCD":
        cfg = system_config(s, "default", 7, COSCHEDULING)
        assert cfg["podInitialBackoffSeconds"] == 3, s
        assert "percentageOfNodesToScore" not in cfg["profiles"][0], s
    b = system_config("B", "default", 7, COSCHEDULING)
    assert {e["urlPrefix"] for e in b["extenders"]} == {"http://127.0.0.1:7"}
    # A value deploy/ sets reaches B (and only B, unless the what-if shares it).
    monkeypatch.setattr(e2e.gang, "REPO", tmp_path / "two")
    _deploy_copy(tmp_path / "two", with_percentage)
    assert system_config("B", "default", 7, COSCHEDULING)["profiles"][0][
        "percentageOfNodesToScore"] == 30
    assert "percentageOfNodesToScore" not in system_config(
        "A", "default", 7, COSCHEDULING)["profiles"][0]
    assert system_config("A", "default", 7, COSCHEDULING, shared_scoring=True)["profiles"][0][
        "percentageOfNodesToScore"] == 30


def test_client_settings() -> None:
    for s in "ABCD":
        assert "clientConnection" not in config(s, "default")  # each binary's own default
        assert config(s, "unthrottled")["clientConnection"]["qps"] < 0  # no rate limiter
    with pytest.raises(KeyError):
        config("A", "fast")


def test_shared_scoring_gives_a_c_and_d_b_s_percentage() -> None:
    """The what-if that runs the layout before issue 30: every system at B's setting."""
    shipped = shipped_config(1)
    shipped["profiles"][0]["percentageOfNodesToScore"] = 100  # as deploy/ had it
    for s in "ABCD":
        prof = systems.scheduler_config(s, "default", shipped, COSCHEDULING,
                                        shared_scoring=True)["profiles"][0]
        assert prof["percentageOfNodesToScore"] == 100


def test_the_floor_runs_no_scheduler_and_the_same_pods_as_a() -> None:
    with pytest.raises(ValueError, match="runs no kube-scheduler"):
        systems.scheduler_config("F", "default", shipped_config(1), COSCHEDULING)
    assert systems.group_manifest("F", "ns", "g", 8) is None
    a, f = (systems.pod_manifest(s, "ns", "job-0-1", "job-0") for s in "AF")
    assert f["spec"]["schedulerName"] == "bench-floor"  # served by no scheduler
    assert f["spec"]["schedulerName"] not in {
        systems.SYSTEMS[s].scheduler_name for s in systems.SCHEDULED}
    assert f["metadata"] == a["metadata"]
    assert {**f["spec"], "schedulerName": "x"} == {**a["spec"], "schedulerName": "x"}


def test_the_upstream_peer_gets_the_gates_and_version_of_its_release() -> None:
    """1.37 folded GangScheduling into GenericWorkload and refuses to start with the old
    gate named; 1.36 needs both for its GangScheduling plugin. A wrong pair fails C's
    kube-scheduler at start-up or leaves it placing pods one by one."""
    assert upstream_gang_gates((1, 37)) == "GenericWorkload=true"
    assert upstream_gang_gates((1, 38)) == "GenericWorkload=true"
    assert upstream_gang_gates((1, 36)) == "GenericWorkload=true,GangScheduling=true"
    assert workload_api_version((1, 37)) == "v1beta1"
    assert workload_api_version((1, 36)) == "v1alpha2"

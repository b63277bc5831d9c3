"""The four systems `bench.e2e` compares, and its floor, as data: which kube-scheduler,
with which configuration, and what each needs on the pods and group objects to form the
same gangs.

* **A**: stock kube-scheduler, no gangs (the ceiling: what the same pods cost unscheduled
  as gangs).
* **B**: gang-extender, with `deploy/scheduler-config.yaml` as shipped;
  `scheduling.x-k8s.io/v1alpha1` PodGroups and the `scheduling.x-k8s.io/pod-group` label.
* **C**: upstream Kubernetes gang scheduling: the same kube-scheduler binary with the gates
  that enable its `GangScheduling` plugin (`GenericWorkload` on 1.37, beta;
  `GenericWorkload` and `GangScheduling` on 1.36, alpha: e2e/harness/versions.py),
  `scheduling.k8s.io/v1beta1` PodGroups (`v1alpha2` on 1.36) with
  `spec.schedulingPolicy.gang.minCount`, pods joined by `spec.schedulingGroup.podGroupName`
  (field names from k8s.io/api v0.37.2 and v0.36.3, `scheduling/v1beta1/types.go`,
  `scheduling/v1alpha2/types.go`, `core/v1/types.go`: the same in both).
* **D**: scheduler-plugins v0.34.7 with Coscheduling: its own kube-scheduler build
  (`e2e/build-operator.sh scheduler-plugins`), its PodGroup CRD and its Coscheduling
  profile from the same module; the same PodGroups and label as B.
* **F**: the floor, no scheduler: the same pods as A's, named to a scheduler nobody
  serves, and once the last one exists a bare client posts one Binding per pod
  (bench/e2e/floor.py). What any scheduler's commit of the same pods can at best match
  on this control plane.

Everything else is the same for A-D, so that only the gang machinery differs: the
pods (one container, 100m / 64Mi), the client setting under test, and from B's profile as
deploy/ ships it (read at every run, so a change there flows through) the settings that
decide how fast a pod comes back: `podInitialBackoffSeconds`, `podMaxBackoffSeconds` and
the disabled `DefaultPreemption` (nothing here preempts). D turns members away until their
gang is complete and C parks them, so with kube-scheduler's defaults (1 s doubling to 10 s)
they would be measured against a B that retries within 1-2 s.

Node sampling is the one profile setting not shared: `percentageOfNodesToScore` is B's
only where B runs, whatever deploy/ ships (100 until issue 30: the extender then had to
see every feasible node). A is stock kube-scheduler, and C and D run as their users run
them: scheduler-plugins' Coscheduling manifest sets no percentage, and neither
Coscheduling's Permit nor upstream's gang plugin needs every node filtered. All three keep
kube-scheduler's adaptive default, which on thousands of nodes stops filtering after a few
hundred feasible ones (every node up to 100 nodes, 42 % of 1,000, 10 % of 5,000).
Sharing B's 100 made "5,000 nodes: B/A" compare B against a stock scheduler slowed to B's
setting; `shared_scoring` (`bench.e2e --shared-scoring`) still runs that layout. Pure
functions, so the manifests are unit-tested (tests/bench/test_bench_systems.py) without a
cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from e2e.harness.objects import (
    GANG_SCHEDULER,
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    pod_metadata,
    pod_spec,
)

UPSTREAM_GROUP, UPSTREAM_PLURAL = "scheduling.k8s.io", "podgroups"
# System C's feature gates (kube-scheduler and, with the runtime config, the API server)
# and its PodGroups' version depend on the control plane's release: versions.py's
# upstream_gang_gates and workload_api_version, given ControlPlane.minor.


@dataclass(frozen=True)
class System:
    key: str  # "A".."D", the column names of every table
    label: str
    scheduler_name: str  # the profile's schedulerName, also the pods' spec.schedulerName
    gangs: bool  # whether the pods form gangs (A's do not)


SYSTEMS: dict[str, System] = {
    "A": System("A", "stock kube-scheduler, no gangs", "bench-stock", False),
    "B": System("B", "gang-extender", GANG_SCHEDULER, True),
    "C": System("C", "upstream kube-scheduler gang scheduling", "bench-upstream", True),
    "D": System("D", "scheduler-plugins Coscheduling v0.34.7", "bench-coscheduling", True),
    "F": System("F", "floor: a bare client's Bindings, no scheduler", "bench-floor", False),
}
# Systems that run a kube-scheduler (F has none: scheduler_config refuses it).
SCHEDULED = ("A", "B", "C", "D")

# kube-scheduler's client to the API server. "default": what users run, the component
# config's defaults (QPS 50, burst 100), left unset so each binary applies its own.
# "unthrottled": a negative QPS makes client-go build no rate limiter at all
# (k8s.io/client-go rest/config.go creates one only for qps > 0).
CLIENT_SETTINGS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "unthrottled": {"qps": -1, "burst": 1000},
}


def scheduler_config(system: str, client: str, shipped: Mapping[str, Any],
                     coscheduling: Mapping[str, Any] | None = None,
                     shared_scoring: bool = False) -> dict[str, Any]:
    """KubeSchedulerConfiguration of `system` under the client setting `client`.

    `shipped` is B's configuration as `e2e.gang.scheduler_config` reads it from deploy/
    (extender entries already pointed at the running extender); A, C and D take its
    profile settings without the extenders and without its `percentageOfNodesToScore`
    (module docstring). `coscheduling` is scheduler-plugins'
    `manifests/coscheduling/scheduler-config.yaml` (D only): its profile's plugins and
    pluginConfig are used as they are. `shared_scoring` (a what-if, the layout of the runs
    before issue 30): A, C and D take B's `percentageOfNodesToScore` as well.
    """
    if system not in SCHEDULED:
        raise ValueError(f"system {system!r} runs no kube-scheduler")
    sysdef = SYSTEMS[system]
    cfg: dict[str, Any] = copy.deepcopy(dict(shipped))
    cfg.pop("clientConnection", None)
    cfg.pop("leaderElection", None)
    profile = cfg["profiles"][0]
    profile["schedulerName"] = sysdef.scheduler_name
    if system != "B":
        cfg.pop("extenders", None)
        if not shared_scoring:
            profile.pop("percentageOfNodesToScore", None)
    if system == "D":
        if coscheduling is None:
            raise ValueError("system D needs scheduler-plugins' Coscheduling configuration")
        theirs = coscheduling["profiles"][0]
        plugins = copy.deepcopy(theirs.get("plugins") or {})
        # B's one change to the stock plugins (no DefaultPreemption) applies to D as well.
        for point, value in (profile.get("plugins") or {}).items():
            merged = plugins.setdefault(point, {})
            for kind in ("enabled", "disabled"):
                names = {p["name"] for p in merged.get(kind, [])}
                extra = [p for p in value.get(kind, []) if p["name"] not in names]
                if extra:
                    merged[kind] = [*merged.get(kind, []), *extra]
        profile["plugins"] = plugins
        profile["pluginConfig"] = copy.deepcopy(theirs.get("pluginConfig") or [])
    setting = CLIENT_SETTINGS[client]
    if setting is not None:
        cfg["clientConnection"] = dict(setting)
    return cfg


def group_manifest(system: str, ns: str, name: str, size: int,
                   upstream_version: str = "v1beta1") -> tuple[
        tuple[str, str, str], dict[str, Any]] | None:
    """((group, version, plural), body) of the object declaring one gang, None for A.
    `upstream_version`: C's scheduling.k8s.io version, v1beta1 on 1.37, v1alpha2 on 1.36
    (the spec is the same in both)."""
    if system in ("B", "D"):
        return (PG_GROUP, PG_VERSION, PG_PLURAL), {
            "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": size},
        }
    if system == "C":
        return (UPSTREAM_GROUP, upstream_version, UPSTREAM_PLURAL), {
            "apiVersion": f"{UPSTREAM_GROUP}/{upstream_version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
        }
    if system in ("A", "F"):
        return None
    raise ValueError(f"unknown system {system!r}")


def pod_manifest(system: str, ns: str, name: str, gang: str) -> dict[str, Any]:
    """One pod of gang `gang`. A's pods (and F's, the same but for the scheduler's name)
    carry the same `app` label and nothing else that joins them; B and D share the
    PodGroup label; C names its PodGroup in the spec."""
    sysdef = SYSTEMS[system]
    pod_group = gang if system in ("B", "D") else None
    extra = {"schedulingGroup": {"podGroupName": gang}} if system == "C" else None
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns,
                     **pod_metadata({"app": gang}, None, pod_group)},
        "spec": pod_spec(scheduler_name=sysdef.scheduler_name, extra=extra),
    }

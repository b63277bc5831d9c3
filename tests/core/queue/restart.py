"""What a restarted extender lists: a PodGroup carrying the status the previous process
wrote, through JSON and the converter. Shared by the tests of what survives a restart
(the backoff, the starvation guard's clock), for both kinds of PodGroup: a
scheduler-plugins one keeps the record in fields of its status, an upstream one (whose
status, a built-in API type's, holds only conditions) in conditions of ours."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.convert_groups import group_from_k8s, workload_group_from_k8s
from extender.core.model.phase import GroupStatus, Previous
from extender.core.model.types import WORKLOAD_API, GroupInfo, Membership, PodInfo
from extender.core.model.upstream_status import upstream_conditions
from extender.core.model.vocabulary import StatusChanged
from extender.core.wiring import Core
from extender.reporting.status import StatusWriter
from tests.core.sim import SimScheduler, group, node, pod

GANG = "ns/g"
BETA = "scheduling.k8s.io/v1beta1"
UPSTREAM_GANG = f"{WORKLOAD_API}:ns/g"


def podgroup(status: dict[str, Any] | None, min_member: int = 2, name: str = "g"
             ) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"namespace": "ns", "name": name, "uid": f"g-{name}"},
        "spec": {"minMember": min_member},
    }
    if status is not None:
        obj["status"] = status
    return obj


def written(sim: SimScheduler, gang: str = GANG) -> GroupStatus:
    """The status the writer computes now, told what the gang manager reported."""
    group_now = sim.manager.reads.group(gang)
    assert group_now is not None
    writer = StatusWriter(sim.manager.reads, None)
    for action in sim.actions:
        if isinstance(action, StatusChanged):
            writer.on_report(action)
    st = writer.compute(group_now, sim.now)
    assert st is not None
    return st


def recorded(sim: SimScheduler, gang: str = GANG) -> GroupInfo:
    """The PodGroup as a restarted extender lists it: the status written, through JSON,
    read back by the converter."""
    doc = orjson.loads(orjson.dumps(written(sim, gang).to_k8s()))
    group_now = sim.manager.reads.group(gang)
    assert group_now is not None
    return group_from_k8s(podgroup(doc, group_now.min_member, group_now.name))


def upstream_podgroup(status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The upstream PodGroup `ns/g` (a gang of two) as the API server returns it."""
    return {"apiVersion": BETA, "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": "g", "uid": "g-g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            "status": status or {}}


def upstream_recorded(sim: SimScheduler) -> GroupInfo:
    """The upstream PodGroup as a restarted extender lists it: the conditions the writer
    sets for the first process's status, through JSON, read back."""
    conds = upstream_conditions(written(sim, UPSTREAM_GANG), None, BETA, Previous(),
                                sim.now, 1)
    status = orjson.loads(orjson.dumps({"conditions": [c.to_k8s() for c in conds]}))
    return workload_group_from_k8s(upstream_podgroup(status))


@dataclass(frozen=True)
class Source:
    """The gang `g` of two as one kind of PodGroup declares it: its key, the PodGroup
    first listed, a member pod by name, and the PodGroup a restarted extender lists.
    A test of what survives a restart runs once per source, since each keeps the record
    in another place and a fix to one has been missing from the other before."""

    gang: str
    listed: Callable[[], GroupInfo]
    member: Callable[[str], PodInfo]
    recorded: Callable[[SimScheduler], GroupInfo]

    def cluster(self, pg: GroupInfo, policy: BackoffPolicy, now: float) -> SimScheduler:
        """One node, the PodGroup `pg` and the gang's two pods, at `now`."""
        sim = SimScheduler(Core.wire(Config(10, policy, direct_commit=False)))
        sim.now = now
        sim.add_node(node("n0"))
        sim.add_group(pg)
        for i in range(2):
            sim.add_pod(self.member(f"g-{i}"))
        return sim

    def timed_out(self, policy: BackoffPolicy) -> SimScheduler:
        """The gang's second member never comes to filter: its reservation times out
        (after 10 s) once. Started off a whole second, so that an end recorded in whole
        seconds is rounded."""
        sim = self.cluster(self.listed(), policy, 1000.3)
        sim.tick()
        assert sim.schedule(uid_of(sim, "g-0")) == "held"
        sim.tick(10.1)
        return sim

    def restarted(self, first: SimScheduler, policy: BackoffPolicy, after: float
                  ) -> SimScheduler:
        """A new process `after` seconds later, listing what `first` recorded."""
        return self.cluster(self.recorded(first), policy, first.now + after)


def uid_of(sim: SimScheduler, name: str) -> str:
    return next(p.uid for p in sim.cache.pods.values() if p.name == name)


PLUGINS = Source(GANG, lambda: group("g", 2), lambda name: pod(name, "g"), recorded)
UPSTREAM = Source(UPSTREAM_GANG, lambda: workload_group_from_k8s(upstream_podgroup()),
                  lambda name: pod(name, membership=Membership(WORKLOAD_API, "g")),
                  upstream_recorded)

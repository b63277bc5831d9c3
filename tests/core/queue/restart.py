"""What a restarted extender lists: a PodGroup carrying the status the previous process
wrote, through JSON and the converter. Shared by the tests of what survives a restart
(the backoff, the starvation guard's clock)."""

from __future__ import annotations

from typing import Any

import orjson

from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.phase import GroupStatus
from extender.core.model.types import GroupInfo
from extender.core.model.vocabulary import StatusChanged
from extender.reporting.status import StatusWriter
from tests.core.sim import SimScheduler

GANG = "ns/g"


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

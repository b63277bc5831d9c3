"""The cluster the preemption tests share: whole 4-CPU nodes, preemption on, no
starvation guard (its holds would stand in for the evictions under test), the bind
barrier as kube-scheduler drives it; and the evictions a preemptor asked for, apart from
the disruptions'."""

from __future__ import annotations

from extender.core.model.config import Config
from extender.core.model.vocabulary import EvictPods
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node


def cluster(nodes: int = 4, preemption: bool = True) -> SimScheduler:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, preemption=preemption,
                                        starvation_after_seconds=None, direct_commit=False)))
    for i in range(nodes):
        sim.add_node(node(f"n{i}", cpu=4000))
    return sim


def evictions(sim: SimScheduler) -> list[EvictPods]:
    """The evictions asked for a preemptor (a disruption's have none)."""
    return [a for a in sim.actions if isinstance(a, EvictPods) and a.preemptor]

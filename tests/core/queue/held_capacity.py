"""The starvation guard's held capacity, set up: a cluster where a gang needing two whole
nodes starved behind long-running pods and got them held. The starvation tests and the
debug view's test of a held reservation both start from it, so it is a module of its own
rather than a test module the other imports from."""

from __future__ import annotations

from extender.core.model.config import Config
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node
from tests.core.workload import Driver, Job


def held_cluster() -> tuple[SimScheduler, Driver, Job]:
    """Two nodes, each with a long-running 1-cpu pod; a gang needing both nodes whole
    starves and gets them held."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=1.0, preemption=False)))
    for i in range(3):
        sim.add_node(node(f"n{i}", cpu=4000))
    fillers = [Job(f"f{i}", at=0, run=50.0, cpu=3000) for i in range(3)]
    big = Job("big", at=0.5, run=5.0, cpu=4000, members=2)
    driver = Driver(sim, [*fillers, big])
    driver.run(2)
    assert [r.held for r in sim.manager.reads.reservations()] == ["starvation"]
    return sim, driver, big

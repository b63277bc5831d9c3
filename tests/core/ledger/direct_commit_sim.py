"""A simulated scheduler with the direct commit on, driven a pass at a time with the
Bindings it asks for left in flight (taken, not yet answered): how the direct commit's
tests and the in-flight tests both catch the commit between its decision and the API's
answer, so it is a module of its own rather than a test module the other imports from."""

from __future__ import annotations

from collections.abc import Sequence

from extender.core.model.config import Config
from extender.core.model.vocabulary import BindPod
from extender.core.wiring import Core
from tests.core.sim import SimScheduler


def direct_sim(**config: object) -> SimScheduler:
    return SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=True,
                                         **config)))  # type: ignore[arg-type]


def taken(sim: SimScheduler) -> Sequence[object]:
    """The actions asked for since the last call, not carried out (Bindings in flight)."""
    out = sim.manager.take_actions()
    sim.actions.extend(out)
    return out


def run_pass(sim: SimScheduler, seconds: float = 1.0) -> None:
    """A tick (the queue's pass), its actions left for `taken`."""
    sim.now += seconds
    sim.manager.tick(sim.now)


def binds(actions: Sequence[object]) -> dict[str, str]:
    return {a.pod.uid: a.node for a in actions if isinstance(a, BindPod)}

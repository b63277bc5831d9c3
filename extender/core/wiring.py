"""The core's parts and how they are wired: each part gets its collaborators through its
constructor (the layering test caps them at 6), and `Core.wire` is the one place that
builds them in order. Kept apart from the manager so that the door stays about what
comes in and goes out, not about construction."""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.bind import Bind
from extender.core.cache import Cache
from extender.core.cache.tombstones import Tombstones
from extender.core.devices.model import SelectorCompiler
from extender.core.explain import Explanations
from extender.core.filter import Filter
from extender.core.ledger import Ledger
from extender.core.model.config import Config
from extender.core.outbox import Outbox
from extender.core.parked import Parked
from extender.core.planner import GangPlanner, plan_group
from extender.core.preemption.budgets import Budgets
from extender.core.preemption.disruption import Disruptions
from extender.core.preemption.preemptor import Preemptions
from extender.core.provisioning import Provisioning
from extender.core.queue.arrivals import Arrivals
from extender.core.queue.backoff import Backoffs
from extender.core.queue.gang_queue import GangQueue, Remedies
from extender.core.queue.starvation import Starvation
from extender.core.queue.timeouts import Timeouts
from extender.core.queue.waiting import Waiting
from extender.core.view import ClusterView


@dataclass(frozen=True, slots=True)
class Core:
    """The manager's parts, wired to each other through their constructors."""

    config: Config
    cache: Cache
    tombstones: Tombstones
    outbox: Outbox
    parked: Parked
    ledger: Ledger
    explanations: Explanations
    backoffs: Backoffs
    arrivals: Arrivals
    queue: GangQueue
    filter: Filter
    bind: Bind
    timeouts: Timeouts
    budgets: Budgets
    preemptions: Preemptions
    starvation: Starvation
    provisioning: Provisioning
    disruptions: Disruptions

    @classmethod
    def wire(cls, config: Config | None = None, planner: GangPlanner = plan_group,
             selectors: SelectorCompiler | None = None) -> Core:
        """`selectors` compiles DRA selectors (the CEL runtime is an adapter,
        `extender/cel_selectors.py`); without it no selector selects a device."""
        config = config or Config()
        cache, outbox, arrivals, budgets = Cache(selectors), Outbox(), Arrivals(), Budgets()
        backoffs = Backoffs(config.backoff)
        parked = Parked(cache.pods)
        view = ClusterView(config, cache, planner)
        waiting = Waiting(backoffs, arrivals, parked)
        ledger = Ledger(cache, parked, outbox, config.direct_commit)
        explanations = Explanations(outbox)
        preemptions = Preemptions(view, ledger.reservations, budgets, explanations, outbox)
        provisioning = Provisioning(view, ledger.reservations, backoffs, explanations, outbox)
        queue = GangQueue(view, ledger, waiting, explanations, outbox,
                          Remedies(preemptions, provisioning))
        return cls(
            config, cache, Tombstones(), outbox, parked, ledger,
            explanations, backoffs, arrivals, queue,
            Filter(view, ledger, queue, waiting, explanations, preemptions.leaving),
            Bind(cache, ledger, parked, preemptions.leaving),
            Timeouts(view, ledger, backoffs, explanations, queue, outbox),
            budgets, preemptions, queue.starvation, provisioning,
            Disruptions(cache, preemptions.leaving, outbox),
        )



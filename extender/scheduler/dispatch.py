"""Between kube-scheduler's requests and the gang manager: each action the manager asks
for routed to the part that carries it out, through a table fixed at construction, and
the clock that drives the manager (the tick).

The verbs have parts of their own: the filter verb's waits (`FilterVerb`,
scheduler/filter_verb.py) and the binding cycle, a bind request from the decision to the
answer and every Binding of ours (`BindingCycle`, scheduler/binding.py); the dispatcher
makes both and hands them what they need, and routes `BindPod` and `RejectWaitingBind` to
the binding cycle like any other action. Nothing here blocks the event loop.

On standby (`Leadership`, extender/kube/leader.py) the dispatcher carries out no I/O: no
tick, no Binding, no wake-up. Reports still reach the in-memory consumers (metrics, the
status writer's bookkeeping); the writers themselves hold back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from extender.core.manager import GangManager
from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import (
    Action,
    BindPod,
    EvictPods,
    FilterResult,
    GangTimedOut,
    PodRef,
    Preempting,
    ProvisioningAction,
    RejectWaitingBind,
    Report,
    StatusChanged,
    WakePods,
)
from extender.kube.catch_up import CatchUpRequests
from extender.kube.leader import Leadership
from extender.scheduler.binding import BindingApi, BindingCycle, BindingHooks, BindingLimits
from extender.scheduler.evictions import Evictions
from extender.scheduler.filter_verb import FilterVerb, WaitListeners
from extender.scheduler.provisioner import Provisioner
from extender.scheduler.supervise import LoopErrors
from extender.scheduler.wakeups import Wakeups

log = logging.getLogger("gang-extender")

# /healthz fails when the tick loop has not completed an iteration for this many tick
# intervals plus `DispatchConfig.tick_stale_margin` seconds (the margin absorbs a busy
# event loop: the liveness probe is for a tick that stopped, not for a slow one).
TICK_STALE_INTERVALS = 3


@dataclass
class DispatchConfig:
    # Stop waiting for a bind's answer after this long and let kube-scheduler retry;
    # keep it below the bind extender entry's httpTimeout so it never times out first.
    bind_wait_limit: float = 240.0
    tick_interval: float = 0.1
    # Binding POSTs in flight at once; the rest queue in order. The direct commit sends a
    # 1,000-pod gang's Bindings at once: 64 took its commit from 2.08 to 1.76 times the
    # floor's, and 128 (the floor's own) from 1.55 to 1.06 once kube-scheduler stopped
    # running cycles beside it (docs/performance.md, "Issue 30" and "The commit wait").
    binding_concurrency: int = 128
    tick_stale_margin: float = 5.0
    # Longest a filter call answered with its node waits while its gang's commit lands
    # (`FilterVerb._commit`); 0 answers at once. It holds kube-scheduler's serial
    # loop: with the assembly wait it must stay below the filter entry's httpTimeout.
    commit_wait: float = 1.0

    @property
    def tick_stale_after(self) -> float:
        return TICK_STALE_INTERVALS * self.tick_interval + self.tick_stale_margin


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Outlets:
    """Where the dispatcher sends what the manager asks for besides Bindings, and whom it
    and its binding cycle tell what happened. Handed over whole when the dispatcher is
    made: what a part left None would carry out is dropped (tests and benchmarks leave
    out what they do not exercise)."""

    wakeups: Wakeups | None = None
    evictions: Evictions | None = None
    # The ProvisioningRequest adapter (scheduler/provisioner.py).
    provisioner: Provisioner | None = None
    # Every report the manager makes (metrics, Events, PodGroup status).
    on_report: Callable[[Report], None] | None = None
    # Told the outcome of every Binding POST (None: bound), whether a bind request asked
    # for it or the direct commit made it (`Metrics.on_binding`).
    on_binding: Callable[[str | None], None] | None = None
    # Told of each pod the direct commit bound with no bind request of kube-scheduler's
    # waiting for it (pod, node): kube-scheduler posts the pod's Scheduled Event only
    # for pods it bound through the bind verb, so the wiring posts one for these.
    on_bound_directly: Callable[[PodRef, str], None] | None = None
    # (placed, seconds) and (landed, seconds) after each filter call that waited for its
    # gang's members or its commit (`FilterVerb`).
    on_assembly_wait: Callable[[bool, float], None] | None = None
    on_commit_wait: Callable[[bool, float], None] | None = None
    # Where a Binding's try that left the API server's state unknown asks the informer
    # to catch the pods and nodes up (`BindingHooks.catch_up`).
    catch_up: CatchUpRequests | None = None


@dataclass(frozen=True)
class Gates:
    """Whether the dispatcher acts, and how its tick loop is watched."""

    # Without a lease to follow (tests, one replica without election): always active.
    leader: Leadership | None = None
    # Whether the informers have applied their first lists (`Informer.synced.is_set`):
    # until then the cache is partial and the tick waits.
    synced: Callable[[], bool] = _always
    tick_errors: LoopErrors | None = None
    # Test-only fault injection (supervise.TICK_FAULTS_ENV): called in each tick.
    tick_fault: Callable[[], None] | None = None


class Dispatcher:
    def __init__(
        self,
        manager: GangManager,
        kube: BindingApi | None,
        config: DispatchConfig | None = None,
        clock: Callable[[], float] = time.time,
        outlets: Outlets | None = None,
        gates: Gates | None = None,
    ) -> None:
        out = outlets or Outlets()
        gates = gates or Gates()
        self.manager = manager
        self.leader = gates.leader or Leadership(None, None, "")
        self.outlets = out
        self.config = config or DispatchConfig()
        self.clock = clock
        # The bind verb and every Binding: its `bind` answers /bind.
        self.bindings = BindingCycle(
            manager, kube, self.leader, clock,
            BindingLimits(self.config.bind_wait_limit, self.config.binding_concurrency,
                          self.config.commit_wait),
            BindingHooks(self.drain, self.cache_changed, on_binding=out.on_binding,
                         on_bound_directly=out.on_bound_directly, catch_up=out.catch_up))
        self._filter = FilterVerb(manager, clock, self.drain, self.bindings.held,
                                  self.config.commit_wait,
                                  WaitListeners(out.on_assembly_wait, out.on_commit_wait))
        self.synced = gates.synced
        self.tick_errors = gates.tick_errors or LoopErrors("tick")
        self.tick_fault = gates.tick_fault
        # When the tick loop last completed an iteration (time.monotonic), on standby
        # and before the sync too: /healthz asks whether the loop runs, not whether it
        # acted. Counted from construction, so a loop that never started fails too.
        self.ticked_at = time.monotonic()
        # Each kind of action the manager asks for, and what carries it out: fixed here,
        # checked complete against the vocabulary (tests/scheduler/test_dispatch_failures.py).
        # Every report goes the same way, so a report added to the vocabulary needs no
        # route of its own.
        self._routes: dict[type[Action], Callable[[Any, bool], None]] = {
            BindPod: self.bindings.take,
            RejectWaitingBind: self.bindings.reject,
            WakePods: self._route_wakeup,
            EvictPods: self._route_eviction,
            **{kind: self._route_provisioning for kind in get_args(ProvisioningAction)},
            **{kind: self._report for kind in get_args(Report)},
        }

    # ----- the manager's actions ------------------------------------------------------------

    def drain(self) -> None:
        """Carry out what the manager asked for since the last call, each action by its
        route; each route is told whether this replica is active (on standby no I/O)."""
        active = self.leader.active
        routes = self._routes
        for action in self.manager.take_actions():
            routes[type(action)](action, active)

    def _route_wakeup(self, action: WakePods, active: bool) -> None:
        if self.outlets.wakeups is not None and active:
            self.outlets.wakeups.add(action)

    def _route_provisioning(self, action: ProvisioningAction, active: bool) -> None:
        if self.outlets.provisioner is not None and active:
            self.outlets.provisioner.add(action, self._drained)

    def _route_eviction(self, action: EvictPods, active: bool) -> None:
        what = (f"preempted for {action.preemptor}" if action.preemptor
                else "partial, or disrupted whole")
        log.warning("%s %s: evicting %s", action.gang, what,
                    ", ".join(p.key for p in action.pods))
        if self.outlets.evictions is not None and active:
            self.outlets.evictions.add(action, self._eviction_answer)

    def _report(self, action: Report, active: bool) -> None:
        """Reports reach their consumers on standby too: the writers hold back there."""
        if isinstance(action, Preempting):
            log.warning("%s reason=%s %s", action.preemptor, action.reason, action.message)
        elif not isinstance(action, StatusChanged):
            level = logging.WARNING if isinstance(action, GangTimedOut) else logging.INFO
            log.log(level, "gang=%s reason=%s %s", action.group.key, action.reason,
                    action.message)
        if self.outlets.on_report is not None:
            self.outlets.on_report(action)

    def _drained(self) -> None:
        """The provisioner told the manager something (a request not created)."""
        self.drain()

    def _eviction_answer(self, uid: str, error: str | None) -> None:
        """What the Eviction API said about a preemption's victim, told to the manager."""
        self.manager.eviction_answered(uid, error, self.clock())
        self.drain()

    def cache_changed(self) -> None:
        """A watch event was applied, or a Binding returned: run what it set off, and let
        a waiting filter call look again."""
        self.drain()
        self._filter.changed()

    # ----- the filter verb ---------------------------------------------------------------

    async def filter(self, pod: PodInfo, node_names: list[str]) -> FilterResult:
        """Answer one /filter request (`FilterVerb`: it may wait for the gang's members,
        or for its commit to land)."""
        return await self._filter.filter(pod, node_names)

    async def idle(self) -> None:
        """Wait until every Binding this dispatcher started has finished (tests,
        shutdown)."""
        await self.bindings.idle()

    def filter_waits(self) -> list[dict[str, object]]:
        return self._filter.waits()

    # ----- time ------------------------------------------------------------------------

    async def tick_loop(self) -> None:
        """Deadlines, backoffs and freed capacity, a few times a second; never on standby,
        where no deadline may expire (the active replica owns them), and not before the
        first lists are applied (a partial cache would expire and plan wrongly). An
        iteration that raises is reported and the loop goes on (supervise.LoopErrors)."""
        while True:
            try:
                if self.leader.active and self.synced():
                    if self.tick_fault is not None:
                        self.tick_fault()
                    self.manager.tick(self.clock())
                    self.drain()
                self.ticked_at = time.monotonic()
                self.tick_errors.ok()
            except Exception as exc:
                self.tick_errors.report(exc)
            await asyncio.sleep(self.config.tick_interval)

    def tick_health(self) -> str | None:
        """None while the tick loop completes its iterations, else why not (/healthz)."""
        age = time.monotonic() - self.ticked_at
        limit = self.config.tick_stale_after
        if age <= limit:
            return None
        return (f"the tick loop has not completed an iteration for {age:.1f}s (limit "
                f"{limit:g}s: {TICK_STALE_INTERVALS} tick intervals plus "
                f"{self.config.tick_stale_margin:g}s){self.tick_errors.why()}")

"""Between kube-scheduler's requests and the gang manager: requests kept open (binds
waiting for their gang), and the I/O the manager asks for carried out.

A bind request that waits (at the permit barrier, or for its Binding) is an asyncio
future keyed by pod uid, resolved when the Binding returns or the manager rejects it;
nothing here blocks the event loop. Every Binding leaves by one route: a `BindPod`
action, posted with a bounded number in flight.

On standby (`Leadership`, extender/kube/leader.py) the dispatcher carries out no I/O: no
tick, no Binding, no wake-up. Reports still reach the in-memory consumers (metrics, the
status writer's bookkeeping); the writers themselves hold back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, get_args

from extender.core.manager import GangManager
from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import (
    Action,
    BindOutcome,
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
from extender.kube.leader import Leadership
from extender.scheduler.binding import (
    BindingApi,
    BindingPoster,
    HeldBindings,
    OutcomeUnknown,
    Withdrawn,
)
from extender.scheduler.evictions import Evictions
from extender.scheduler.filter_verb import FilterVerb, WaitListeners
from extender.scheduler.provisioner import Provisioner
from extender.scheduler.supervise import LoopErrors
from extender.scheduler.wakeups import Wakeups

log = logging.getLogger("gang-extender")

# A waiting bind is answered by the manager's own expiry first, with the gang-level
# reason; the adapter's limit runs this much past the deadline only against a missed tick.
_DEADLINE_GRACE_SECONDS = 2.0

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
    tells what happened. Handed over whole when the dispatcher is made: what a part left
    None would carry out is dropped (tests and benchmarks leave out what they do not
    exercise)."""

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
        self.kube = kube
        self.outlets = out
        self.config = config or DispatchConfig()
        self.clock = clock
        self._answers: dict[str, asyncio.Future[str | None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._bindings = BindingPoster(kube, self.config.binding_concurrency, self._post_due,
                                       clock)
        self.held = HeldBindings(self._bindings, lambda a: self._spawn(self._bind(a)),
                                 self.config.commit_wait)
        self._filter = FilterVerb(manager, clock, self.drain, self.held,
                                  self.config.commit_wait,
                                  WaitListeners(out.on_assembly_wait, out.on_commit_wait))
        self.synced = gates.synced
        self.tick_errors = gates.tick_errors or LoopErrors("tick")
        self.tick_fault = gates.tick_fault
        self._requested: set[str] = set()  # uids with a bind request being answered
        # When the tick loop last completed an iteration (time.monotonic), on standby
        # and before the sync too: /healthz asks whether the loop runs, not whether it
        # acted. Counted from construction, so a loop that never started fails too.
        self.ticked_at = time.monotonic()
        # Each kind of action the manager asks for besides Bindings, and what carries it
        # out: fixed here, checked complete against the vocabulary
        # (tests/scheduler/test_dispatch_failures.py). Every report goes the same way, so a report
        # added to the vocabulary needs no route of its own. Bindings are `drain`'s own.
        self._routes: dict[type[Action], Callable[[Any, bool], None]] = {
            RejectWaitingBind: self._route_rejection,
            WakePods: self._route_wakeup,
            EvictPods: self._route_eviction,
            **{kind: self._route_provisioning for kind in get_args(ProvisioningAction)},
            **{kind: self._report for kind in get_args(Report)},
        }

    # ----- the manager's actions ------------------------------------------------------------

    def drain(self, caller: str | None = None) -> BindPod | None:
        """Carry out what the manager asked for since the last call. The Binding of the
        pod whose bind request is `caller` is returned instead of spawned: that request
        posts it itself, without waiting for the event loop to get round to a task."""
        own = None
        active = self.leader.active
        routes = self._routes
        for action in self.manager.take_actions():
            if type(action) is not BindPod:
                routes[type(action)](action, active)
            elif not active:
                self._refuse(action)
            elif action.pod.uid == caller:
                own = action
            elif self._filter.in_call(action.pod.uid):
                self.held.hold(action)
            else:
                self._spawn(self._bind(action))
        return own

    def _route_rejection(self, action: RejectWaitingBind, active: bool) -> None:
        self._resolve(action.uid, action.message)

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

    def _post_due(self, uid: str, node: str) -> str | None:
        """Whether a Binding may be posted now: never once the lease is lost (the new
        leader places the gang again, maybe elsewhere), else as the manager decides."""
        if not self.leader.active:
            return self.leader.standby_error()
        return self.manager.post_due(uid, node)

    def _refuse(self, action: BindPod) -> None:
        """A Binding asked for on standby (a watch event completing a gang whose binds
        were waiting when leadership was lost) is not created: the new leader places the
        gang whole."""
        error = self.leader.standby_error()
        log.warning("binding of pod=%s not created: %s", action.pod.key, error)
        self.manager.binding_finished(action.pod.uid, action.node, error, self.clock())
        self._resolve(action.pod.uid, error)

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

    async def bindings_settled(self, timeout: float) -> int:
        """Wait (at most `timeout` seconds) until no Binding is in flight; returns how many
        still are. On leadership loss the process lets the Bindings already sent be
        answered before it exits, so their outcome is logged; those not sent yet (held
        for a bind request, queued, or due for a retry) are refused by `_post_due`: the
        new leader may already be placing their gang, and a post now could land beside
        its decision."""
        deadline = time.monotonic() + timeout
        self.held.release_all()
        while True:
            left = sum(1 for b in self.manager.reads.binds_in_progress() if b.in_flight)
            if not left or time.monotonic() >= deadline:
                return left
            await asyncio.sleep(0.05)

    def answer_waiting(self, message: str) -> int:
        """Answer every bind request still waiting with `message`; returns how many. Used
        just before the exit on leadership loss: kube-scheduler gets an error it
        re-queues the pod on, and no request is cut off mid-answer."""
        waiting = [uid for uid, fut in self._answers.items() if not fut.done()]
        for uid in waiting:
            self._resolve(uid, message)
        return len(waiting)

    async def idle(self) -> None:
        """Wait until every Binding and wake-up this dispatcher started has finished
        (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks)

    def filter_waits(self) -> list[dict[str, object]]:
        return self._filter.waits()

    # ----- the bind verb ---------------------------------------------------------------

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str | None:
        """Answer one /bind request: None for success or the error text. A repeat of a
        bind in progress waits for the same answer (the manager says whether it may)."""
        self._requested.add(uid)
        self.held.release(uid)  # its Binding, held until kube-scheduler assumed the pod
        try:
            return await self._bind_request(namespace, name, uid, node)
        finally:
            self._requested.discard(uid)

    async def _bind_request(self, namespace: str, name: str, uid: str, node: str
                            ) -> str | None:
        decision = self.manager.bind(namespace, name, uid, node, self.clock())
        if decision.outcome is BindOutcome.BOUND:
            return None
        if decision.outcome is BindOutcome.ERROR:
            log.info("bind refused pod=%s/%s node=%s: %s", namespace, name, node,
                     decision.message)
            return decision.message
        answer = self._answer(uid)
        own = self.drain(caller=uid)  # may post Bindings, which resolve `answer`
        if own is not None:
            await self._bind(own)
        limit = min(max(decision.deadline - self.clock(), 0.0) + _DEADLINE_GRACE_SECONDS,
                    self.config.bind_wait_limit)
        try:
            return await asyncio.wait_for(asyncio.shield(answer), timeout=limit)
        except TimeoutError:
            message = self.manager.bind_wait_expired(uid, limit)
            if not self.manager.reads.bind_in_flight(uid):
                self._answers.pop(uid, None)
            return message

    def _answer(self, uid: str) -> asyncio.Future[str | None]:
        fut = self._answers.get(uid)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._answers[uid] = fut
        return fut

    def _resolve(self, uid: str, error: str | None) -> None:
        fut = self._answers.pop(uid, None)
        if fut is not None and not fut.done():
            fut.set_result(error)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _bind(self, action: BindPod) -> None:
        pod = action.pod
        self._answer(pod.uid)
        token = self.held.posting(action)
        error: str | None = f"binding pod {pod.key} to node {action.node} was cut off"
        withdrawn = cancelled = unknown = False
        try:
            error = await self._bindings.post(pod.namespace, pod.name, pod.uid, action.node)
        except Withdrawn:
            withdrawn = True  # held now (`take_back`); posted at kube-scheduler's request
        except OutcomeUnknown as exc:
            error, unknown = str(exc), True
        except asyncio.CancelledError:
            cancelled = True
            raise
        except Exception as exc:  # a bug here must not leave the pod in flight
            log.exception("binding pod %s to node %s", pod.key, action.node)
            error = f"binding pod {pod.key} to node {action.node} failed: {exc!r}"
        finally:
            self.held.posted(pod.uid, token)
            if not withdrawn:
                self._bound(action, error, cancelled, unknown)

    def _bound(self, action: BindPod, error: str | None, cancelled: bool,
               unknown: bool = False) -> None:
        """Whatever happened, the gang manager hears the end of a Binding: a pod left
        "in flight" would hold its gang's reservation for good. `unknown`: it may have
        taken effect all the same (`OutcomeUnknown`)."""
        pod = action.pod
        if error is None:
            log.info("bound pod=%s node=%s gang=%s", pod.key, action.node,
                     action.gang or "-")
        else:
            log.warning("bind failed pod=%s node=%s gang=%s: %s", pod.key, action.node,
                        action.gang or "-", error)
        self.manager.binding_finished(pod.uid, action.node, error, self.clock(),
                                      unknown=unknown)
        self._resolve(pod.uid, error)
        if self.outlets.on_binding is not None:
            self.outlets.on_binding(error)
        if (error is None and pod.uid not in self._requested
                and self.outlets.on_bound_directly is not None):
            self.outlets.on_bound_directly(pod, action.node)
        if not cancelled:
            self.cache_changed()

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

"""The binding cycle of the adapter, read top-down as kube-scheduler's `ScheduleOne`
reads its own: every Binding of ours, from the gang manager's decision to the answer
kube-scheduler gets, happens here and nowhere else.

A bind request (`BindingCycle.bind`):

1. its Binding, if one is held for this request (below), is posted now;
2. the gang manager decides (`GangManager.bind`): bound already, refused, or wait;
3. waiting, what the decision set off is carried out (the dispatcher's routes): the
   Bindings of the commit it completed come back here (`take`), this pod's own posted by
   this request, the others in tasks of their own;
4. each Binding is posted (`post`): the gang manager asked right before every try
   (`GangManager.post_due`, never once the lease is lost), tried again while another try
   may help, its outcome told to the gang manager (`GangManager.binding_finished`);
5. the request is answered: its Binding's outcome, a rejection (`RejectWaitingBind`), or
   the end of its wait (`GangManager.bind_wait_expired`).

A bind request that waits is an asyncio future keyed by pod uid; nothing here blocks the
event loop. The direct commit's Bindings, which no bind request asked for, take steps 4
and 5 alone: they come here through `take` and are answered to nobody.

Holding (`HeldBindings`): the Bindings of members whose filter call is in progress
(`HeldBindings.in_call`), and those taken back from the queue of a big commit when
kube-scheduler takes their member through a cycle (`take_back`), wait for kube-scheduler's
bind request. A Binding that reaches kube-scheduler's informer before kube-scheduler
assumed the pod at the end of its cycle fails that cycle, and kube-scheduler records
FailedScheduling and PodScheduled=False on a bound pod. Posted at the pod's bind request
(`release`), it lands after the assume.

Posting (`BindingPoster`): a bounded number in flight, and what failed tried again when
another try may help. Resending a Binding is safe by design: if an earlier one took
effect, the next gets 409, and a 409 is success when the pod is bound to the node we asked
for. So every failure that leaves it unknown whether the API server made the Binding, or
that says it could not now, is tried again; only an answer that says no is final. When
the last try's answer was lost, the pod is read back; when it cannot be, the outcome is
unknown, and the gang manager keeps the pod's capacity charged until its watch tells
(`OutcomeUnknown`).

A try that fails so that the API server's state is unknown (no answer, a refused or reset
connection, a timeout, a 500/502/503/504: the server may be going down) makes the gang
manager distrust its view at once (`BindingHooks.catch_up`): the pods and nodes are marked
behind before the slot it frees can be taken by the next queued post, whose gate then
refuses it, and the informer is asked to catch them up again (extender/kube/catch_up.py).
Its own watches may notice the server's death only later, and a post let through in that
gap may be held on its way and land after pods bound there meanwhile. A 429 or another
answer says the server is there and what it did, so it changes nothing here.

On standby (`Leadership`, extender/kube/leader.py) no Binding is posted: one the gang
manager asks for is refused (`take`), one queued or held is refused before its try.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from extender.core.manager import GangManager
from extender.core.model.vocabulary import BindOutcome, BindPod, PodRef, RejectWaitingBind
from extender.kube.catch_up import CatchUpRequests
from extender.kube.client import ApiError
from extender.kube.leader import Leadership

log = logging.getLogger("gang-extender")

# API answers worth another try: the API server overloaded or restarting.
_TRANSIENT = frozenset({429, 500, 502, 503, 504})
# Those of them after which the API server's state is unknown: it failed mid-request or
# is going away, so a write may have been made and others' changes not yet watched. A
# 429 turned the request away whole.
_UNSURE = _TRANSIENT - {429}
# What the transport (extender/kube/transport.py, through httpx) raises when a request
# may not have reached the API server or its answer was lost: connecting failed or timed
# out, the connection was reset or closed before the answer, an answer that did not come
# in time. httpx's exceptions are not OSError; OSError stays for clients that raise the
# socket's own. A request httpx refused to send (a bad URL or scheme) is final.
TRANSIENT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError,
                    OSError)
_BINDING_ATTEMPTS = 3
# Reads of the pod after the last try failed with an answer lost: whether it took effect.
_READ_BACK_ATTEMPTS = 2
_BINDING_RETRY_DELAY = 0.2  # seconds, growing 2.5 times per attempt
# A waiting bind is answered by the manager's own expiry first, with the gang-level
# reason; the adapter's limit runs this much past the deadline only against a missed tick.
_DEADLINE_GRACE_SECONDS = 2.0


class BindingApi(Protocol):
    # `decided_at`: the wall-clock time this try was decided, or None to send none
    # (`Kube.bind` puts it on the Binding as an annotation).
    async def bind(self, namespace: str, name: str, uid: str, node: str,
                   decided_at: float | None = None) -> None: ...

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def describe(exc: BaseException) -> str:
    """An exception in words: httpx's often have an empty message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else repr(exc)


class Withdrawn(Exception):
    """The post was taken back (`BindingPoster.withdraw`) before it was sent."""


class _Refused(Exception):
    """The gate refused a try (`PostGate`); its text says why."""


class OutcomeUnknown(Exception):
    """Every try failed so that one may still have taken effect (its answer was lost, or
    the API server failed mid-request), and the pod could not be read back to tell: the
    pod may be bound to the node. Its text is the error for kube-scheduler."""


# Asked right before each try of a post: None to send it, else why not (the post then
# ends with that error, final). The gang manager's `post_due`, behind the lease.
PostGate = Callable[[str, str], str | None]


def _always(uid: str, node: str) -> str | None:
    return None


@dataclass(frozen=True)
class BindingLimits:
    """How long a bind request waits, and how many Bindings are in flight at once (the
    dispatcher's `DispatchConfig` says why each is what it is)."""

    bind_wait_limit: float = 240.0
    concurrency: int = 128
    # The filter verb's commit wait: a held Binding waits this long and a grace more
    # for its bind request.
    commit_wait: float = 1.0


@dataclass(frozen=True)
class BindingHooks:
    """What the binding cycle sets off and whom it tells, handed over when it is made."""

    # Carry out what the gang manager asked for (the dispatcher's routes): a decision to
    # wait may have completed a commit, whose Bindings come back through `take`.
    drain: Callable[[], object]
    # A Binding returned: carry out what it set off and let the waiting filter calls
    # look again (`Dispatcher.cache_changed`).
    changed: Callable[[], None]
    # Told the outcome of every Binding POST (None: bound), whether a bind request asked
    # for it or the direct commit made it (`Metrics.on_binding`).
    on_binding: Callable[[str | None], None] | None = None
    # Told of each pod bound with no bind request of kube-scheduler's waiting for it
    # (pod, node): kube-scheduler posts the pod's Scheduled Event only for pods it bound
    # through the bind verb, so the wiring posts one for these.
    on_bound_directly: Callable[[PodRef, str], None] | None = None
    # Where a try that left the API server's state unknown asks for the pods and nodes
    # to be caught up (the informer serves it); None (tests, benchmarks with no informer):
    # nothing would ever catch them up, so nothing is marked behind either.
    catch_up: CatchUpRequests | None = None


class BindingCycle:
    """Bind requests and Bindings, from the gang manager's decision to the answer.

    bind(namespace, name, uid, node)   answer one /bind request (the module's steps 1-5)
    take(action, active)               the dispatcher's route for a `BindPod`
    reject(action, active)             the dispatcher's route for a `RejectWaitingBind`
    post(action)                       post one Binding and report its outcome
    answer_waiting(message)            answer every waiting bind request (exit)
    settled(timeout)                   wait until no Binding is in flight (lease lost)
    idle()                             wait until the Bindings started here are done
    """

    def __init__(self, manager: GangManager, kube: BindingApi | None, leader: Leadership,
                 clock: Callable[[], float], limits: BindingLimits,
                 hooks: BindingHooks) -> None:
        self.manager = manager
        self.leader = leader
        self.clock = clock
        self.limits = limits
        self.hooks = hooks
        # Every try is decided when it is sent, by the gang manager behind the lease.
        self.poster = BindingPoster(kube, limits.concurrency, self._post_due, clock,
                                    None if hooks.catch_up is None else self._api_unsure)
        self.held = HeldBindings(self.poster, self.send, limits.commit_wait)
        self._answers: dict[str, asyncio.Future[str | None]] = {}
        self._requested: set[str] = set()  # uids with a bind request being answered
        # The bind request whose decision is being carried out (`_carry_out`), and its
        # own Binding once `take` has it.
        self._caller: str | None = None
        self._own: BindPod | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # ----- a bind request --------------------------------------------------------------

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str | None:
        """Answer one /bind request: None for success or the error text. A repeat of a
        bind in progress waits for the same answer (the gang manager says whether it
        may)."""
        self._requested.add(uid)
        try:
            self.held.release(uid)  # its Binding, held until kube-scheduler assumed the pod
            decision = self.manager.bind(namespace, name, uid, node, self.clock())
            if decision.outcome is BindOutcome.BOUND:
                return None
            if decision.outcome is BindOutcome.ERROR:
                log.info("bind refused pod=%s/%s node=%s: %s", namespace, name, node,
                         decision.message)
                return decision.message
            answer = self._answer(uid)
            own = self._carry_out(uid)  # may post Bindings, which resolve `answer`
            if own is not None:
                await self.post(own)
            limit = min(max(decision.deadline - self.clock(), 0.0) + _DEADLINE_GRACE_SECONDS,
                        self.limits.bind_wait_limit)
            try:
                return await asyncio.wait_for(asyncio.shield(answer), timeout=limit)
            except TimeoutError:
                message = self.manager.bind_wait_expired(uid, limit)
                if not self.manager.reads.bind_in_flight(uid):
                    self._answers.pop(uid, None)
                return message
        finally:
            self._requested.discard(uid)

    def _carry_out(self, uid: str) -> BindPod | None:
        """Carry out what the decision for `uid` set off; its own Binding, if it asked
        for one, is returned instead of spawned: this request posts it itself, without
        waiting for the event loop to get round to a task."""
        self._caller, self._own = uid, None
        try:
            self.hooks.drain()
        finally:
            self._caller = None
        own, self._own = self._own, None
        return own

    # ----- the Bindings the gang manager asks for --------------------------------------

    def take(self, action: BindPod, active: bool) -> None:
        """A Binding the gang manager asked for: refused on standby, posted by the bind
        request whose decision asked for it, held while kube-scheduler takes its pod
        through a filter call, else posted in a task of its own."""
        uid = action.pod.uid
        if not active:
            self._refuse(action)
        elif uid == self._caller:
            self._own = action
        elif self.held.in_call(uid):
            self.held.hold(action)
        else:
            self.send(action)

    def reject(self, action: RejectWaitingBind, active: bool) -> None:
        """A waiting bind the gang manager turned down (its gang's node lost, expired)."""
        self._resolve(action.uid, action.message)

    def send(self, action: BindPod) -> None:
        """Post `action` in a task of its own."""
        self._spawn(self.post(action))

    def _refuse(self, action: BindPod) -> None:
        """A Binding asked for on standby (a watch event completing a gang whose binds
        were waiting when leadership was lost) is not created: the new leader places the
        gang whole."""
        error = self.leader.standby_error()
        log.warning("binding of pod=%s not created: %s", action.pod.key, error)
        self.manager.binding_finished(action.pod.uid, action.node, error, self.clock())
        self._resolve(action.pod.uid, error)

    async def post(self, action: BindPod) -> None:
        """Post one Binding (`BindingPoster`: the gang manager asked before each try) and
        report its outcome, whatever happened: a pod left "in flight" would hold its
        gang's reservation for good."""
        pod = action.pod
        self._answer(pod.uid)
        token = self.held.posting(action)
        error: str | None = f"binding pod {pod.key} to node {action.node} was cut off"
        withdrawn = cancelled = unknown = False
        try:
            error = await self.poster.post(pod.namespace, pod.name, pod.uid, action.node)
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
                self._finished(action, error, cancelled, unknown)

    def _post_due(self, uid: str, node: str) -> str | None:
        """Whether a Binding may be posted now (asked before each try): never once the
        lease is lost (the new leader places the gang again, maybe elsewhere), else as
        the gang manager decides."""
        if not self.leader.active:
            return self.leader.standby_error()
        return self.manager.post_due(uid, node)

    def _api_unsure(self) -> None:
        """A try failed so that the API server's state is unknown: the pods and nodes
        are behind in the gang manager from this moment (its gate refuses every post
        until the informer has caught them up: `post_due`), and the informer is asked to
        catch them up (`CatchUpRequests`). Called before the failed try frees its slot."""
        catch_up = self.hooks.catch_up
        assert catch_up is not None
        for kind in catch_up.kinds:
            self.manager.watch_broken(kind)
        catch_up.request()

    def _finished(self, action: BindPod, error: str | None, cancelled: bool,
                  unknown: bool = False) -> None:
        """The end of a Binding, told to the gang manager, then to the request waiting
        for it and to the listeners. `unknown`: it may have taken effect all the same
        (`OutcomeUnknown`)."""
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
        if self.hooks.on_binding is not None:
            self.hooks.on_binding(error)
        if (error is None and pod.uid not in self._requested
                and self.hooks.on_bound_directly is not None):
            self.hooks.on_bound_directly(pod, action.node)
        if not cancelled:
            self.hooks.changed()

    # ----- the answers -----------------------------------------------------------------

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

    def answer_waiting(self, message: str) -> int:
        """Answer every bind request still waiting with `message`; returns how many. Used
        just before the exit on leadership loss: kube-scheduler gets an error it
        re-queues the pod on, and no request is cut off mid-answer."""
        waiting = [uid for uid, fut in self._answers.items() if not fut.done()]
        for uid in waiting:
            self._resolve(uid, message)
        return len(waiting)

    async def settled(self, timeout: float) -> int:
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

    async def idle(self) -> None:
        """Wait until every Binding started here has finished (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks)


# How long past the commit wait a held Binding waits for kube-scheduler's bind request
# before it is posted anyway: that request follows the filter answer within milliseconds
# unless the cycle failed.
HELD_BINDING_GRACE_SECONDS = 1.0


class HeldBindings:
    def __init__(self, poster: BindingPoster, send: Callable[[BindPod], None],
                 commit_wait: float) -> None:
        self.poster = poster
        self.send = send  # post a Binding now, in a task (`BindingCycle.send`)
        self.hold_seconds = commit_wait + HELD_BINDING_GRACE_SECONDS
        # Pods kube-scheduler is taking through a filter call now, with the commit wait
        # on (`FilterVerb.filter`): a Binding the gang manager asks for them is held.
        self._in_call: set[str] = set()
        # Each held Binding with the timer that posts it if no bind request comes: a pod
        # held again (kube-scheduler took it through another cycle) gets a new one, so
        # the first cannot post the second hold's Binding before kube-scheduler assumed
        # the pod.
        self._held: dict[str, tuple[BindPod, asyncio.TimerHandle]] = {}
        # Bindings handed to the poster and not yet answered, by pod uid (with the
        # token of the send that owns the entry): what `take_back` may still hold.
        self._posting: dict[str, tuple[BindPod, object]] = {}

    def call_started(self, uid: str) -> None:
        """kube-scheduler's filter call for `uid` began (the commit wait is on)."""
        self._in_call.add(uid)

    def call_ended(self, uid: str) -> None:
        self._in_call.discard(uid)

    def in_call(self, uid: str) -> bool:
        """A filter call for `uid` is in progress and the commit wait is on: a Binding
        for it posted now would reach kube-scheduler's informer before kube-scheduler
        assumes the pod at the end of this cycle, and the cycle would fail there,
        recording FailedScheduling and PodScheduled=False on a bound pod."""
        return uid in self._in_call

    def hold(self, action: BindPod) -> None:
        """Post `action` only at kube-scheduler's bind request for its pod (`release`),
        once kube-scheduler has assumed the pod; or, if it never comes (the cycle
        failed), `hold_seconds` later: the gang is committed, and is bound whole either
        way."""
        uid = action.pod.uid
        earlier = self._held.get(uid)
        if earlier is not None:
            earlier[1].cancel()
        timer = asyncio.get_running_loop().call_later(self.hold_seconds, self.release, uid)
        self._held[uid] = (action, timer)

    def held(self, uid: str) -> bool:
        return uid in self._held

    def take_back(self, uid: str) -> bool:
        """Hold the Binding of `uid` if it still waits for a free slot behind the others
        of a big commit: kube-scheduler has taken the member through a cycle meanwhile,
        and the cycle would fail at assume if the Binding landed first. False once it is
        sent (or there is none)."""
        posting = self._posting.get(uid)
        if posting is None or not self.poster.withdraw(uid):
            return False
        self.hold(posting[0])
        return True

    def release(self, uid: str) -> None:
        """Post a held Binding now; the poster asks the gang manager (and the lease)
        whether it is still due before it sends it (`BindingCycle._post_due`)."""
        entry = self._held.pop(uid, None)
        if entry is not None:
            action, timer = entry
            timer.cancel()
            self.send(action)

    def release_all(self) -> None:
        for uid in list(self._held):
            self.release(uid)

    def posting(self, action: BindPod) -> object:
        """`action` is handed to the poster; the token to give `posted`."""
        token = object()
        self._posting[action.pod.uid] = (action, token)
        return token

    def posted(self, uid: str, token: object) -> None:
        """The post that `token` names is answered or withdrawn (a later post for the
        same pod keeps its own entry)."""
        if self._posting.get(uid, (None, None))[1] is token:
            del self._posting[uid]


class BindingPoster:
    def __init__(self, kube: BindingApi | None, concurrency: int,
                 gate: PostGate = _always, clock: Callable[[], float] | None = None,
                 unsure: Callable[[], None] | None = None) -> None:
        self.kube = kube
        # The wall clock read when the gate says yes: each try's Binding says when it
        # was decided, so that whoever checks an over-commit afterwards can tell what
        # the extender could have seen then (None: the Binding says nothing).
        self._clock = clock
        # Every try is decided when it is sent, not when it was queued: a post may wait
        # for a slot behind a big commit, or for kube-scheduler's bind request, and a
        # retry follows a 429 by up to a second, long enough for the gang to be
        # released or the node taken meanwhile.
        self._gate = gate
        # Told of a try after which the API server's state is unknown (`_UNSURE`,
        # `TRANSIENT_ERRORS`), while the try still holds its slot: the posts waiting for
        # a slot ask the gate only after it was told.
        self._unsure = unsure
        self._slots = asyncio.Semaphore(concurrency)
        # Posts waiting for their first slot, by pod uid -> post number; and the numbers
        # of those withdrawn (a later post for the same pod is another number).
        self._queued: dict[str, int] = {}
        self._withdrawn: set[int] = set()
        self._numbers = itertools.count()

    def withdraw(self, uid: str) -> bool:
        """Take back the post for `uid` if it is still waiting for a slot: it then raises
        `Withdrawn` instead of being sent. False once it is sent (or there is none)."""
        number = self._queued.pop(uid, None)
        if number is None:
            return False
        self._withdrawn.add(number)
        return True

    async def post(self, namespace: str, name: str, uid: str, node: str) -> str | None:
        """None once the pod is bound to `node`, else the error for kube-scheduler.
        Raises `Withdrawn` if taken back before it was sent."""
        if self.kube is None:
            return "no Kubernetes client configured"
        number = next(self._numbers)
        self._queued[uid] = number
        try:
            delay = _BINDING_RETRY_DELAY
            error: str | None = None
            for attempt in range(1, _BINDING_ATTEMPTS + 1):
                try:
                    error, transient = await self._once(self.kube, namespace, name, uid,
                                                        node, number if attempt == 1 else None)
                except _Refused as refused:
                    if error is None:
                        return str(refused)
                    # An earlier try lost its answer and may have taken effect: read the
                    # pod back rather than give its capacity back on the refusal's word.
                    # The answer names that try's failure first: it is what went wrong,
                    # the refusal only why it was not tried again.
                    return await self._read_back(self.kube, namespace, name, node,
                                                 f"{error}; not tried again: {refused}")
                if error is None or not transient:
                    return error
                if attempt == _BINDING_ATTEMPTS:
                    return await self._read_back(self.kube, namespace, name, node, error)
                log.info("binding pod %s/%s to %s: %s; trying again (attempt %d)",
                         namespace, name, node, error, attempt + 1)
                await asyncio.sleep(delay)
                delay *= 2.5
            return None  # not reached
        finally:
            if self._queued.get(uid) == number:
                del self._queued[uid]

    async def _read_back(self, kube: BindingApi, namespace: str, name: str, node: str,
                         error: str) -> str | None:
        """After the last try failed with a transient error: whether one of the tries
        took effect after all, from the pod itself. None if it is bound to `node`, else
        `error`; raises `OutcomeUnknown` when the pod cannot be read either, so the gang
        manager keeps the pod's capacity charged until its watch tells."""
        failed: BaseException | None = None
        for attempt in range(_READ_BACK_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_BINDING_RETRY_DELAY)
            try:
                pod = await kube.get_pod(namespace, name)
            except Exception as exc:
                failed = exc
                continue
            if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
                return None
            return error
        assert failed is not None
        raise OutcomeUnknown(f"{error}; whether it took effect is not known (reading the "
                             f"pod back: {describe(failed)})")

    async def _once(self, kube: BindingApi, namespace: str, name: str, uid: str, node: str,
                    number: int | None = None) -> tuple[str | None, bool]:
        """(error or None, whether another try may help). `number`: the post's, on its
        first attempt, which may still be withdrawn while it waits for a slot."""
        failed = f"binding pod {namespace}/{name} to node {node} failed"
        try:
            async with self._slots:
                if number is not None:
                    if number in self._withdrawn:
                        self._withdrawn.discard(number)
                        raise Withdrawn(uid)
                    if self._queued.get(uid) == number:
                        del self._queued[uid]
                refused = self._gate(uid, node)
                if refused is not None:
                    raise _Refused(refused)
                try:
                    await kube.bind(namespace, name, uid, node,
                                    decided_at=self._clock() if self._clock is not None
                                    else None)
                except (ApiError, *TRANSIENT_ERRORS) as exc:
                    # Told here, inside the slot: the semaphore hands it on as this
                    # block exits, and the next post must find the gate shut.
                    if self._unsure is not None and (
                            not isinstance(exc, ApiError) or exc.status in _UNSURE):
                        self._unsure()
                    raise
            return None, False
        except (Withdrawn, _Refused):
            raise
        except ApiError as exc:
            if exc.status != 409:
                return f"{failed}: {exc}", exc.status in _TRANSIENT
            conflict = exc
        except TRANSIENT_ERRORS as exc:
            # It may have been made all the same: the next try's 409 tells.
            return f"{failed}: {describe(exc)}", True
        except Exception as exc:
            return f"{failed}: {exc!r}", False
        # 409: already assigned. Success only if it is assigned where we meant to. A
        # failed look is answered by trying again, whose 409 looks again.
        try:
            pod = await kube.get_pod(namespace, name)
        except Exception as get_exc:
            return f"{failed}: {conflict}; reading the pod: {describe(get_exc)}", True
        if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
            return None, False
        return f"{failed}: {conflict}", False

"""The adapter's one home for the Bindings of ours in flight: held for kube-scheduler's
bind request (`HeldBindings`), queued for a slot, sent, tried again, withdrawn, read back
(`BindingPoster`). The core decides each of them (`GangManager.post_due`, asked before
every try); what happens to them between the decision and the answer happens here.

Posting: a bounded number in flight, and what failed tried again when another try may
help. Resending a Binding is safe by design: if an earlier one took effect, the next gets
409, and a 409 is success when the pod is bound to the node we asked for. So every failure
that leaves it unknown whether the API server made the Binding, or that says it could
not now, is tried again; only an answer that says no is final. When the last try's answer
was lost, the pod is read back; when it cannot be, the outcome is unknown, and the gang
manager keeps the pod's capacity charged until its watch tells (`OutcomeUnknown`).

Holding: the Bindings of members whose filter call is in progress (`FilterVerb.in_call`),
and those taken back from the queue of a big commit when kube-scheduler takes their member
through a cycle (`take_back`), wait for kube-scheduler's bind request. A Binding that
reaches kube-scheduler's informer before kube-scheduler assumed the pod at the end of its
cycle fails that cycle, and kube-scheduler records FailedScheduling and
PodScheduled=False on a bound pod. Posted at the pod's bind request (`release`), it lands
after the assume.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from extender.core.model.vocabulary import BindPod
from extender.kube.client import ApiError

log = logging.getLogger("gang-extender")

# API answers worth another try: the API server overloaded or restarting.
_TRANSIENT = frozenset({429, 500, 502, 503, 504})
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


class BindingPoster:
    def __init__(self, kube: BindingApi | None, concurrency: int,
                 gate: PostGate = _always, clock: Callable[[], float] | None = None) -> None:
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
            for attempt in range(1, _BINDING_ATTEMPTS + 1):
                try:
                    error, transient = await self._once(self.kube, namespace, name, uid,
                                                        node, number if attempt == 1 else None)
                except _Refused as refused:
                    if attempt == 1:
                        return str(refused)
                    # An earlier try lost its answer and may have taken effect: read the
                    # pod back rather than give its capacity back on the refusal's word.
                    return await self._read_back(self.kube, namespace, name, node,
                                                 str(refused))
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
                await kube.bind(namespace, name, uid, node,
                                decided_at=self._clock() if self._clock is not None else None)
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


# How long past the commit wait a held Binding waits for kube-scheduler's bind request
# before it is posted anyway: that request follows the filter answer within milliseconds
# unless the cycle failed.
HELD_BINDING_GRACE_SECONDS = 1.0


class HeldBindings:
    def __init__(self, poster: BindingPoster, send: Callable[[BindPod], None],
                 commit_wait: float) -> None:
        self.poster = poster
        self.send = send  # post a Binding now (the dispatcher's task)
        self.hold_seconds = commit_wait + HELD_BINDING_GRACE_SECONDS
        # Each held Binding with the timer that posts it if no bind request comes: a pod
        # held again (kube-scheduler took it through another cycle) gets a new one, so
        # the first cannot post the second hold's Binding before kube-scheduler assumed
        # the pod.
        self._held: dict[str, tuple[BindPod, asyncio.TimerHandle]] = {}
        # Bindings handed to the poster and not yet answered, by pod uid (with the
        # token of the send that owns the entry): what `take_back` may still hold.
        self._posting: dict[str, tuple[BindPod, object]] = {}

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
        whether it is still due before it sends it (`Dispatcher._post_due`)."""
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

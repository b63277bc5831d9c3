"""Bindings held for kube-scheduler's bind request: those of members whose filter call is
in progress (`FilterVerb.in_call`), and those taken back from the queue of a big commit
when kube-scheduler takes their member through a cycle (`take_back`).

Why: a Binding that reaches kube-scheduler's informer before kube-scheduler assumed the
pod at the end of its cycle fails that cycle, and kube-scheduler records FailedScheduling
and PodScheduled=False on a bound pod. Posted at the pod's bind request (`release`), it
lands after the assume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from extender.core.model.vocabulary import BindPod
from extender.scheduler.binding import BindingPoster

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

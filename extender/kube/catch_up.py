"""Requests to catch the watches that decide fits up again, from whoever learns that the
extender's view of the API server may be behind before any watch of its own breaks.

Why it exists: when kube-apiserver dies under our Bindings, the Bindings in flight fail at
once (a reset, a refused connection, a 5xx from a server going down), while the
informer's watches notice only tens of milliseconds later, or not at all when the
connection is half-open. The Bindings queued behind those take the freed slots in that
gap, and the gang manager, which knows nothing is wrong yet, lets them through; held by
whatever sits between us and a returning API server, they can land seconds later, after
pods bound there meanwhile (docs/reliability.md, §3, "Watches"). So the
binding cycle, on such a failure, marks the kinds behind in the gang manager itself, at
once, and asks here for a catch-up; the informer, which alone can tell when the cache is
caught up again, restarts those kinds' watches and clears them as it clears a broken
watch.

Made first by the wiring and handed to both (the binding cycle is made before the
informer, which takes the dispatcher's `cache_changed`): the same cut as the `synced`
event. The informer reads `count` where it decides a kind is caught up, so a request is
seen there from the moment it is made, before its own task has woken to act on it.
"""

from __future__ import annotations

import asyncio

# The kinds whose watches decide whether a node fits (`Kind.holds_commits` in
# informer.py): what a catch-up request marks behind and restarts.
FIT_KINDS = ("nodes", "pods")


class CatchUpRequests:
    """Catch-up requests, counted: `request` from the binding cycle, `next` and `count`
    read by the informer."""

    def __init__(self, kinds: tuple[str, ...] = FIT_KINDS) -> None:
        self.kinds = kinds
        self._count = 0
        self._asked = asyncio.Event()

    @property
    def count(self) -> int:
        """How many requests were made so far: a kind is caught up only by a watch begun
        after the last of them."""
        return self._count

    def request(self) -> None:
        """The API server's state may have changed unseen (a write's answer was lost):
        catch `kinds` up with a watch begun from now."""
        self._count += 1
        self._asked.set()

    async def next(self, seen: int) -> int:
        """Wait until more than `seen` requests were made; returns how many were. A burst
        (every Binding in flight failing together) wakes the waiter once."""
        while self._count <= seen:
            self._asked.clear()
            await self._asked.wait()
        return self._count

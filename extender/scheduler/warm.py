"""Connections to the API server opened before a commit needs them.

The direct commit posts a planned gang's Bindings up to the Binding concurrency at once.
Each one that found no idle keep-alive connection opened one at that moment: a 1,000-pod
gang's commit began with some 60 TLS handshakes in the extender and as many client
authentications in the API server, about a tenth of the extender's time in that commit
(docs/performance.md, "Issue 30: the commit's first connections and its last second").
While a gang's members are being created, this loop opens as many connections as its
Bindings will use, up to the concurrency, so that they wait idle when its commit starts.
Connections that are idle already are not touched, nothing is opened on standby (no
Binding is made there), and after a failure to connect (or to keep a connection open) it
waits before trying again, so an API server that is down is not met with a connection
storm.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("gang-extender")

# How often the loop looks at the gangs arriving.
INTERVAL_SECONDS = 0.25
# After a round with a failed connection: this long before the next, doubling to the cap.
RETRY_SECONDS = 5.0
RETRY_CAP_SECONDS = 60.0

Warm = Callable[[int], Awaitable[tuple[int, list[BaseException]]]]


@dataclass
class WarmStats:
    opened: int = 0
    failed: int = 0


class ConnectionWarmer:
    """`warm(n)` opens connections until `n` are idle (`Kube.warm`); `ahead(now)` says how
    many Bindings are about to be asked for (`Reads.bindings_ahead`); `limit` is the
    Binding concurrency, more than which are never in flight."""

    def __init__(self, warm: Warm, ahead: Callable[[float], int], limit: int,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.warm = warm
        self.ahead = ahead
        self.limit = limit
        self.clock = clock
        self.monotonic = monotonic
        self.stats = WarmStats()
        self._retry = 0.0  # the wait after the last failed round; 0 while none failed
        self._not_before = float("-inf")

    async def run(self, active: Callable[[], bool]) -> None:
        """Forever: a round every `INTERVAL_SECONDS` while `active()` (the leader, its
        first lists applied)."""
        while True:
            await asyncio.sleep(INTERVAL_SECONDS)
            if active():
                await self.step()

    async def step(self) -> int:
        """One round: how many connections it opened."""
        if self.monotonic() < self._not_before:
            return 0
        want = min(self.ahead(self.clock()), self.limit)
        if want <= 0:
            return 0
        try:
            opened, errors = await self.warm(want)
        except Exception as exc:  # best effort: a Binding opens its own connection
            opened, errors = 0, [exc]
        self.stats.opened += opened
        self.stats.failed += len(errors)
        if errors:
            self._retry = min(self._retry * 2 or RETRY_SECONDS, RETRY_CAP_SECONDS)
            self._not_before = self.monotonic() + self._retry
            log.warning("opening %d connection(s) to the API server ahead of gang commits: "
                        "%d failed (%s); next try in %gs", opened + len(errors), len(errors),
                        errors[0], self._retry)
        else:
            self._retry = 0.0
            if opened:
                log.debug("opened %d connection(s) to the API server ahead of gang commits",
                          opened)
        return opened

"""Supervised work: background loops that survive a bad iteration, long-running tasks
whose end is fatal, and a watch on the event loop's own lag.

Why a loop goes on after an exception: the tick expires reservations and the wake-up
loop un-parks pods. One unforeseen exception that ended either would leave gangs holding
capacity for good while the process looked healthy. An iteration that raises is logged
(with its traceback, at most once per `LOG_EVERY_SECONDS` per loop, so a persistent error
does not flood the log), counted in `gang_extender_loop_errors_total`, and skipped.

Why a task that ends is fatal: every long-running task (the informers, the lease watch,
the tick, wake-ups, status, Events, the lag monitor) is meant to run until the process
stops. One that returns or raises has stopped doing its part and nothing restarts it in
place; exiting non-zero lets the container restart with a fresh cache instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("gang-extender")

# A loop's errors are logged with their traceback at most this often; the ones in
# between are counted (metric and the next log line) only.
LOG_EVERY_SECONDS = 30.0
# The event loop lag that is worth a warning: a verb or a tick delayed this much is
# already visible to kube-scheduler.
LAG_WARN_SECONDS = 0.1
# How often the lag monitor samples: small enough to see a stall of ~100 ms, large enough
# to cost nothing (4 wake-ups a second).
LAG_SAMPLE_SECONDS = 0.25
# Exit status when a long-running task ended (1 is leadership loss, 2 a usage error).
EXIT_TASK_ENDED = 3
# Test-only fault injection, off unless set: the first N tick iterations after the
# caches synced raise (e2e/tests/faults/test_supervision.py makes a running extender's tick
# raise with it). Never set it in a deployment.
TICK_FAULTS_ENV = "GANG_EXTENDER_TEST_TICK_FAULTS"


@dataclass
class LoopErrors:
    """Rate-limited reporting of one loop's failed iterations."""

    loop: str
    on_error: Callable[[str], None] | None = None  # the metric, by loop name
    every: float = LOG_EVERY_SECONDS
    clock: Callable[[], float] = time.monotonic
    count: int = 0  # all errors so far
    consecutive: int = 0  # since the last iteration that completed
    last: str = ""  # the last error, for /healthz
    _logged_at: float | None = None
    _unlogged: int = 0

    def report(self, exc: BaseException) -> None:
        self.count += 1
        self.consecutive += 1
        self.last = f"{type(exc).__name__}: {exc}"
        if self.on_error is not None:
            self.on_error(self.loop)
        now = self.clock()
        if self._logged_at is not None and now - self._logged_at < self.every:
            self._unlogged += 1
            return
        more = (f" ({self._unlogged} more since the last one logged)" if self._unlogged
                else "")
        log.error("%s loop iteration failed%s; going on", self.loop, more, exc_info=exc)
        self._logged_at, self._unlogged = now, 0

    def ok(self) -> None:
        self.consecutive = 0

    def why(self) -> str:
        """What the failed iterations since the last completed one said, for /healthz."""
        if not self.consecutive:
            return ""
        return f"; the last {self.consecutive} iteration(s) raised, the last: {self.last}"


@dataclass
class LagMonitor:
    """Sleeps `interval` again and again; how much later than asked it woke is how long
    the event loop was busy with something else (a long callback, a big relist, a
    garbage collection): every verb waited that long too."""

    observe: Callable[[float], None]
    interval: float = LAG_SAMPLE_SECONDS
    warn_above: float = LAG_WARN_SECONDS
    every: float = LOG_EVERY_SECONDS
    clock: Callable[[], float] = time.monotonic
    worst: float = 0.0  # since the last warning
    _over: int = 0
    _warned_at: float | None = None

    def sample(self, lag: float) -> None:
        lag = max(lag, 0.0)
        self.observe(lag)
        if lag <= self.warn_above:
            return
        self._over += 1
        self.worst = max(self.worst, lag)
        now = self.clock()
        if self._warned_at is not None and now - self._warned_at < self.every:
            return
        log.warning("event loop lag %.0f ms (over %.0f ms %d time(s), worst %.0f ms, "
                    "since the last warning): verbs and the tick waited that long",
                    lag * 1000, self.warn_above * 1000, self._over, self.worst * 1000)
        self._warned_at, self._over, self.worst = now, 0, 0.0

    async def run(self) -> None:
        while True:
            start = self.clock()
            await asyncio.sleep(self.interval)
            self.sample(self.clock() - start - self.interval)


def describe_end(task: asyncio.Task[object]) -> tuple[str, BaseException | None]:
    """Why a long-running task ended, in words, and its exception if it raised."""
    if task.cancelled():
        return "was cancelled", None
    exc = task.exception()
    if exc is not None:
        return f"raised {type(exc).__name__}: {exc}", exc
    return "returned", None


async def first_to_end(tasks: Iterable[asyncio.Task[object]]) -> int:
    """Wait until one of `tasks` ends, log why and return the exit status for it. The
    caller exits with that status: see the module docstring."""
    done, _ = await asyncio.wait(list(tasks), return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        why, exc = describe_end(task)
        log.critical("task %s %s; a long-running task must never end: exiting (status "
                     "%d) so the container restarts", task.get_name(), why, EXIT_TASK_ENDED,
                     exc_info=exc)
    return EXIT_TASK_ENDED


def tick_faults_from_env(environ: dict[str, str] | None = None
                         ) -> Callable[[], None] | None:
    """The test-only fault of `TICK_FAULTS_ENV`: a callable that raises the first N
    times it is called, or None (the default: nothing injected)."""
    value = (os.environ if environ is None else environ).get(TICK_FAULTS_ENV, "")
    if not value:
        return None
    try:
        left = int(value)
    except ValueError:
        raise SystemExit(f"{TICK_FAULTS_ENV} must be a whole number, got {value!r}") from None
    log.warning("%s=%d: the first %d tick(s) after the sync will raise (test-only fault "
                "injection)", TICK_FAULTS_ENV, left, left)

    def fault() -> None:
        nonlocal left
        if left > 0:
            left -= 1
            raise RuntimeError(f"injected tick fault ({TICK_FAULTS_ENV}, {left} left)")

    return fault

"""Where the gangs and pods that a queue pass does not take wait, and what brings them
back, as kube-scheduler's queue keeps its backoff queue and its unschedulable pods beside
the active queue.

* `backoffs`: gangs that timed out, until their backoff ends (or for good, at the retry
  limit);
* `arrivals`: gangs whose members are still being created (the filter's assembly wait);
* `parked`: pods the filter turned away, woken when their gang can move.

The filter and the queue pass read and update all three together; they are one part of
the queue, not three collaborators.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.parked import Parked
from extender.core.queue.arrivals import Arrivals
from extender.core.queue.backoff import Backoffs


@dataclass(frozen=True, slots=True)
class Waiting:
    backoffs: Backoffs
    arrivals: Arrivals
    parked: Parked

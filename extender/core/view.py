"""What the gang lifecycle reads and never changes: the settings, the cluster as the
watches left it, and how a gang would be placed on it.

The queue pass, the filter, the timeouts and preemption each judged a gang against the
same three things, passed one by one; they travel together because they are one
question ("what does the cluster allow this gang now?"), as kube-scheduler hands its
plugins one framework handle with the snapshot and the client. Only the gang manager
writes the cache (from watch events); holders of a view read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.cache import Cache
from extender.core.model.config import Config
from extender.core.planner import GangPlanner


@dataclass(frozen=True, slots=True)
class ClusterView:
    config: Config
    cache: Cache
    # Plans a gang against `cache.snapshot()`; tests and benchmarks pass their own.
    planner: GangPlanner

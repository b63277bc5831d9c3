"""The extender's view of the cluster (nodes, pods, PodGroups) and the capacity derived
from it, kept incrementally from watch events, with its fit index."""

from extender.core.cache.cache import Cache, PodsOnNode
from extender.core.cache.fitindex import FitIndex

__all__ = ["Cache", "FitIndex", "PodsOnNode"]

"""The extender's view of the cluster (nodes, pods, PodGroups) and the capacity derived
from it, kept incrementally from watch events, with its fit index."""

from extender.core.cache.cache import Cache
from extender.core.cache.fitindex import FitIndex
from extender.core.cache.pods_on_node import PodsOnNode

__all__ = ["Cache", "FitIndex", "PodsOnNode"]

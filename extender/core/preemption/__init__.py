"""Whole-gang preemption: which lower-priority work a gang (or a plain pod of the gang
scheduler) that cannot be planned may evict, and the evictions it waits for."""

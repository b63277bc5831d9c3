"""Gangs on the real control plane: placement, lifecycle, topology, priorities and
preemption, shared nodes, the commit, status and metrics as users see them."""

"""What must hold when things go wrong: restarts and failovers, races around a commit,
poisoned and hostile objects, the extender's permissions, supervision, the short soak."""

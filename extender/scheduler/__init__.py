"""Adapters that talk to kube-scheduler: the extender verbs, waiting binds, wake-ups."""

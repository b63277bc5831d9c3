"""Adapters that talk to kube-scheduler: the extender verbs, held binds, wake-ups."""

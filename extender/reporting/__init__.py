"""Adapters that report to users: PodGroup status, Events, metrics."""

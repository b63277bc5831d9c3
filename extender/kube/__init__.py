"""Adapters that talk to the Kubernetes API: client, transport, informer."""

"""End-to-end tests and the local control-plane harness for gang-extender.

A package (not a loose folder) so tests and tools can ``import e2e.harness`` and so the fake
kubelet can run as ``python -m e2e.harness.fakekubelet``.
"""

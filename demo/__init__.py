"""The demo behind ``make demo``: the classic two-job gang deadlock on a local control
plane, once with the stock kube-scheduler and once with the gang scheduler.

A package of its own, outside ``e2e/``: it is what a newcomer runs first, not a test, and it
only borrows the e2e harness (``e2e.harness``, ``e2e.gang``) to start the control plane, the
fake kubelet and the gang stack. Run it from the repository root as ``python -m demo``.
"""

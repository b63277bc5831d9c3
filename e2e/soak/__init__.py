"""Chaos soak of the gang scheduler with invariant checks (issue 7).

* :mod:`.driver`: random gangs on a too-small cluster while the extender, the gang
  kube-scheduler and kube-apiserver are killed and restarted; drain and final checks.
* :mod:`.checker`: watches every pod and node; records partial gangs, over-committed
  nodes and re-bound pods.

Run it: ``python -m e2e.soak --seed 7 --minutes 20`` (see docs/reliability.md); CI runs a
short seeded version, e2e/tests/test_soak_short.py.
"""

from .checker import Checker, Violation
from .driver import SoakConfig, SoakReport, run_soak

__all__ = ["Checker", "SoakConfig", "SoakReport", "Violation", "run_soak"]

"""Chaos soak of the gang scheduler with invariant checks (issue 7; neighbours and leader
kills, issue 16).

* :mod:`.driver`: random gangs on a too-small cluster, with neighbour pods (default
  scheduler and spec.nodeName) on the same nodes, while the extender, the gang
  kube-scheduler, the leader replica and kube-apiserver are killed and restarted; drain
  and final checks. Its parts, one job each, are mixins over :mod:`.state`:
  :mod:`.stack` (the run's own control-plane stack), :mod:`.gangs` (drawn in
  :mod:`.workload`), :mod:`.neighbours`, :mod:`.chaos` (with :mod:`.lease`, who leads),
  :mod:`.measures`; :mod:`.config` and :mod:`.report` are its input and output,
  :mod:`.retry` its API calls that survive a restart.
* :mod:`.checker`: watches every pod and node; records partial binds, partial gangs past
  their recovery grace, nodes over-committed by a gang commit (neighbours' over-commits
  and races as information) and re-bound pods. Its parts: :mod:`.watch` (LIST + WATCH,
  relists), :mod:`.invariants` (the rules), :mod:`.records` (pods, gangs, nodes,
  violations) and :mod:`.quantity` (its own quantity parser).
* :mod:`.hostile`: the hostile mode (broken and hostile objects beside the gangs) and
  the stall probe (the longest ``/healthz`` answer).

Run it: ``python -m e2e.soak --seed 7 --minutes 20`` (see docs/reliability.md); CI runs a
short seeded version, e2e/tests/faults/test_soak_short.py.
"""

from .check.checker import Checker
from .check.records import Violation
from .config import SoakConfig
from .driver import run_soak
from .results import SoakReport

__all__ = ["Checker", "SoakConfig", "SoakReport", "Violation", "run_soak"]

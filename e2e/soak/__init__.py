"""Chaos soak of the gang scheduler with invariant checks (issue 7; neighbours and leader
kills, issue 16).

* :mod:`.driver`: random gangs on a too-small cluster, with neighbour pods (default
  scheduler and spec.nodeName) on the same nodes, while the extender, the gang
  kube-scheduler, the leader replica and kube-apiserver are killed and restarted; drain
  and final checks. Its parts are objects, one job each, each given what it uses when
  it is made: :mod:`.stack` (the run's own control-plane stack), :mod:`.lease` (the
  replicas, who leads), :mod:`.gangs` (drawn in :mod:`.load`), :mod:`.neighbours`,
  :mod:`.chaos`, :mod:`.measures`; :mod:`.names` (what the run is called on the
  cluster), :mod:`.config` and :mod:`.results` are its input and output, :mod:`.retry`
  its API calls that survive a restart.
* :mod:`.check`: the checker, which watches every pod and node; records partial binds,
  partial gangs past their recovery grace, nodes over-committed by a gang commit
  (neighbours' over-commits and races as information) and re-bound pods. Its parts:
  :mod:`.check.pod_watch` (LIST + WATCH, relists), :mod:`.check.invariants` (the rules),
  :mod:`.check.records` (pods, gangs, nodes, violations) and :mod:`.check.quantity` (its
  own quantity parser).
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

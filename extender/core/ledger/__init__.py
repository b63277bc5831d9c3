"""The reservation ledger: capacity held for gangs, and the bind requests that wait for
their gang's quorum (architecture.md §3.4, §3.6, §4, §8).

`Ledger` is the one object the filter, the bind verb, the queue and preemption talk to;
its parts (`_book`: slots charged to nodes; `_repair`: when a slot's node is lost) are
private to this package. `timeouts.Timeouts` says what the end of a reservation means
for its gang (backoff, status, evicting a partial gang); only the gang manager calls it.

A reservation, keyed by its gang (or "pod <ns>/<name>" for a plain preemptor's own).
Each arrow is named by the method that makes it:

                                          reserve(held=...)
          +-------------------------------------------------------------+
          |                          reserve / reserve_key              v
      (absent) ------------------------------------------------>  +----------+
          ^                                                      |   Held   |
          |  release: a victim's eviction refused, a lost node    +----------+
          +------------ (repair), a takeover, group deleted ------+    |
          |                                                            | promote
          |                                                            v (deadline
          |  bound: quorum bound (Timeouts.check_quorum_bound,     +----------+ from now)
          +----- or a plain preemptor's pod bound) --------------- | Reserved |
          |                                                        +----------+
          |  release: deadline passed, no Binding in flight,             |
          +----- >= COMMIT_GRACE_SECONDS after its commit --------------+
                 (Timeouts.expire), group deleted or recreated

    Inside a reservation a slot is added (reserve, reserve_one), moved (move, retarget,
    repair), and dropped (unreserve: its member bound, deleted, finished or relabelled).

A bind request of a gang member (plain pods and extras skip the barrier: bind_now):

      (none) --- wait ---> Waiting --- commit: quorum assembled, ---> Binding --+
                            |  |       every waiting node still fits        |  |
                            |  |                                            |  | finished
                            |  +-- reject: slot dropped or moved off a      |  v
                            |      lost node (repair), pod gone, gang    (none): bound,
                            |      released, timed out or bound            or refused
                            |      -> RejectWaitingBind                    (kube-scheduler
                            +-- wait_expired: the adapter gave up           retries)
"""

from __future__ import annotations

from extender.core.ledger._book import Reservation, Slot, plain_key
from extender.core.ledger._ledger import Ledger

__all__ = ["Ledger", "Reservation", "Slot", "plain_key"]

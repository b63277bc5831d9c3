"""The reservation ledger: capacity held for gangs, and the bind requests that wait for
their gang's quorum (architecture.md §2, §4, §7, §11). Two machines, each in a module of
its own, and the commit between them:

* `Reservations` (`_reservations.py`): capacity held for gangs, slot by slot, and what a
  lost node does to it (`_repair.py` says when a node is lost);
* `Binds` (`_binds.py`): bind requests waiting at the barrier, and Bindings in flight;
  it knows no reservation, a reservation's changes tell it what they mean for a bind;
* `Ledger` (`_commit.py`): the door, which holds both (and `staleness`) and makes the
  commit, where a gang's reserved and waiting members become Bindings.

The filter, the bind verb, the queue, its timeouts and the manager hold the `Ledger` and
call the part that owns what they ask (`ledger.reservations.release`,
`ledger.binds.post_due`, `ledger.commit`), so no door stands between a caller and the
method; the modules are private to this package. A caller that reads one part only is
given that part, so its constructor shows what it can touch: preemption and
provisioning take the `Reservations`, the filter's and bind's check of fresh pods
(`core/node_claims.py`) the `Staleness`. What the end of a reservation means for
its gang (backoff, status, evicting a partial gang) is the queue's to say
(`core/queue/timeouts.py`): the ledger keeps capacity and bind requests, and imports
nothing of the queue above it.

A reservation (`Reservations`), keyed by its gang (or "pod <ns>/<name>" for a plain
preemptor's own). Each arrow is named by the method that makes it, and who calls it:

                       reserve (held=...)
     (absent) ----------------------------------------> Held
      |  ^  ^                                             |  |
      |  |  +------------------ release ------------------+  | promote: every slot's
      |  |     a victim's eviction refused, a lost node      |  node has room (queue
      |  |     (repair), a takeover, group deleted/recreated |  pass); deadline from now
      |  |     or left with no pod of ours (gang_left)       v
      |  +--------------------- release ------------------ Reserved
      |  |     deadline passed, no Binding in flight, the   ^  |
      |  |     commit's grace over (Timeouts.expire);       |  |
      |  |     preempted; group deleted or recreated, or    |  |
      |  |     left with no pod of ours (gang_left,         |  |
      |  |     composite_left): nothing waits, no backoff   |  |
      |  +--------------------- bound ----------------------|--+
      |        quorum bound (Timeouts.check_quorum_bound),  |
      |        a plain preemptor's pod bound                |
      +----------------------- reserve ---------------------+
                 (queue pass: the whole gang fits now)

Inside a reservation a slot is added (reserve_one: a member short of one), moved
(move: kube-scheduler excluded its node; retarget: it chose another that fits;
repair/squeezed: the node was lost) and dropped (unreserve: its member bound there,
deleted, finished or relabelled; or a lost node's slot fits nowhere else).

A bind request (`Binds`; the commit is `Ledger.commit`), keyed by its pod's uid:

              wait                    commit: quorum assembled, every
   (none) ----------> Waiting ------------------------------------> Binding
    ^  ^  |             |                waiting node still fits    ^     |
    |  |  |             | reject: slot dropped or moved off a       |     |
    |  |  |             | lost node (repair), pod gone or           |     |
    |  |  |             | relabelled, gang released, timed out      |     |
    |  |  |             | or bound (RejectWaitingBind);             |     |
    |  +--|-------------+ reject(None): the adapter gave up         |     |
    |     +------------ bind_now: a plain pod, an extra, -----------+     |
    |                   or a member once its quorum is bound        ^     |
    |                                                               |     |
    |   (no request) --- commit, direct: a reserved member with ----+     |
    |                    nothing for kube-scheduler's plugins to do       |
    |                    (`Ledger._direct`) once the rest of the quorum   |
    |                    is ready                                         |
    +---------- finished: bound, or refused (kube-scheduler retries) -----+

A Binding in flight (`Binds`), from the commit (or `bind_now`) that decides it to its
answer:

    decided --- post_due: None, sent --> sent --- finished(error=None) --> bound
      |  ^  |                             |
      |  |  +-- post_due: why not --------+---- finished(error) --------> refused
      |  |      (gang released: withdrawn;
      |  |       pod gone; a watch behind;
      |  +----- node short of room since, or
      |         nominated to another pod)
      |      a 429/5xx or a lost answer: the retry is decided again;
      |      every answer lost and the pod not readable: finished(unknown) --> unknown
      |      (charged until `settle`: the pod seen bound or gone, or a later list
      |      shows it unbound)

Its capacity is charged from the decision to the answer, whatever happens to its gang
meanwhile: by its slot while the reservation lasts, then (released, deleted, recreated,
quorum bound by a lower minMember) by an assumption on the Binding's node (`unreserve`,
`assume`), which the answer ends (`finished`) and the watch's bound pod replaces. A
released gang's Bindings not yet sent are withdrawn: `post_due` refuses them, and the
adapter ends them with that error. `post_due` is asked right before every POST, so the
first try, one held for kube-scheduler's bind request, one queued behind a big commit and
each retry are all decided against the cache as it is when they leave.
"""

from __future__ import annotations

from extender.core.ledger._binds import Binds
from extender.core.ledger._commit import Ledger
from extender.core.ledger._reservations import Reservation, Reservations, Slot, plain_key
from extender.core.ledger._staleness import FRESH_LIMIT_SECONDS, FRESH_MARGIN_SECONDS, Staleness

__all__ = ["FRESH_LIMIT_SECONDS", "FRESH_MARGIN_SECONDS", "Binds", "Ledger", "Reservation",
           "Reservations", "Slot", "Staleness", "plain_key"]

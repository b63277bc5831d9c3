"""Capacity placed for a gang is not taken away by the autoscaler's scale-down.

The autoscaler's booking of a provisioned request lives in its scale-up simulation only:
its scale-down sees a new node with no pod yet as empty and removes it after
`--scale-down-unneeded-time` unless the node is annotated scale-down-disabled. So every
node with a reserved slot carries that annotation while the reservation lasts, with the
extender's own key beside it, so that only the nodes it marked are unmarked later.
"""

from __future__ import annotations

import math

from extender.core.cache import Cache
from extender.core.ledger import Reservations
from extender.core.model.vocabulary import ProtectNode
from extender.core.outbox import Outbox

# How often the protection is brought up to date, and how long an asked-for node patch
# may take to show in the watch before it is asked again.
PROTECT_EVERY_SECONDS = 1.0
PROTECT_RETRY_SECONDS = 30.0


class ScaleDownGuard:
    def __init__(self, cache: Cache, reservations: Reservations, outbox: Outbox) -> None:
        self._cache = cache
        self._reservations = reservations
        self._outbox = outbox
        self._marking: dict[str, tuple[bool, float]] = {}  # node -> (on, asked at)
        self._protected_at = -math.inf

    def tick(self, now: float, served: bool) -> None:
        if now - self._protected_at >= PROTECT_EVERY_SECONDS:
            self._protected_at = now
            self.protect(now, served)

    def protect(self, now: float, served: bool) -> None:
        """Nodes with a reserved slot carry the scale-down-disabled annotation (with ours
        beside it); nodes we marked that have none lose both (all of them once the API is
        no longer served). A node someone else marked is left alone either way."""
        want = self._reservations.gangs_by_node() if served else {}
        for name, node in self._cache.nodes.items():
            on = name in want
            if node.scale_down_ours == on:
                self._marking.pop(name, None)
                continue
            if on and node.scale_down_disabled:
                continue  # an operator's own: nothing to add, nothing to remove later
            asked = self._marking.get(name)
            if asked is not None and asked[0] == on and now - asked[1] < PROTECT_RETRY_SECONDS:
                continue
            self._marking[name] = (on, now)
            self._outbox.append(ProtectNode(name, on, want[name][0] if on else ""))

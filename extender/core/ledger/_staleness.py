"""Where the extender's cache and kube-scheduler's, or the extender's and the API's, may
disagree for a moment: the two cases in which a fit check must not be trusted as is.

Apart from the ledger because neither is about reservations: both are what the commit,
the filter and the bind verb ask before they trust a node's free capacity.
"""

from __future__ import annotations

FRESH_SECONDS = 10.0
"""How long a node a direct commit bound pods on is checked by the filter for every pod
(`Staleness.fresh_nodes`): kube-scheduler's watch delivers within a second here; ten
leaves room for a loaded API server."""


class Staleness:
    def __init__(self) -> None:
        # node -> when a direct commit last bound a pod there (`fresh_nodes`).
        self._direct_at: dict[str, float] = {}
        # Watches broken and not listed again yet: no commit meanwhile (`behind`).
        self._behind: set[str] = set()

    def bound_directly(self, node: str, now: float) -> None:
        self._direct_at[node] = now

    def fresh_nodes(self, now: float) -> set[str]:
        """Nodes where a direct commit bound pods in the last `FRESH_SECONDS`. kube-
        scheduler learns of those pods only through its watch, so until then its own fit
        check of the node is stale, and a plain pod or elastic extra it finds feasible
        there may not fit: the filter checks these nodes against the extender's cache
        too, as it does nodes with reservations. (On the barrier path kube-scheduler
        assumed every pod it bound, so its check was never behind.)"""
        if not self._direct_at:
            return set()
        stale = [n for n, at in self._direct_at.items() if now - at > FRESH_SECONDS]
        for n in stale:
            del self._direct_at[n]
        return set(self._direct_at)

    def behind(self, kind: str) -> None:
        """The watch of `kind` (pods, nodes) broke: until it is listed again, the cache
        may miss what others bound or changed meanwhile (a spec.nodeName pod made while
        kube-apiserver came back), and the commit's check of each member's node could
        not see it. So no gang commits until then: binds wait at the barrier, direct
        members stay unbound (architecture.md §11)."""
        self._behind.add(kind)

    def is_behind(self) -> bool:
        return bool(self._behind)

    def caught_up(self, kind: str) -> bool:
        """`kind` is listed again; whether the cache is caught up on every kind now (the
        commits held meanwhile are due)."""
        was = kind in self._behind
        self._behind.discard(kind)
        return was and not self._behind

"""Where the extender's cache and kube-scheduler's, or the extender's and the API's, may
disagree for a moment: the cases in which a fit check, or kube-scheduler's queue, must not
be trusted as is.

Apart from the ledger because none is about reservations: they are what the commit, the
filter and the bind verb ask before they trust a node's free capacity, and what the
filter verb asks before it lets kube-scheduler's serial loop go on (`landing`).
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
        # Members a commit let through, until the watch delivers them bound (`landing`):
        # gang -> uids, and uid -> gang to drop one.
        self._landing: dict[str, set[str]] = {}
        self._landing_gang: dict[str, str] = {}
        # The nodes kube-scheduler passed in members' filter calls in progress (`sample`).
        self._samples: dict[str, list[str]] = {}

    def bound_directly(self, node: str, now: float) -> None:
        self._direct_at[node] = now

    def committed(self, uid: str, gang: str) -> None:
        """A commit let `uid` through: its Binding is posted now (directly, or for its
        waiting bind request)."""
        self._landing.setdefault(gang, set()).add(uid)
        self._landing_gang[uid] = gang

    def landed(self, uid: str) -> None:
        """The watch delivered `uid` bound, or its Binding failed, or it is gone."""
        gang = self._landing_gang.pop(uid, None)
        if gang is None:
            return
        uids = self._landing[gang]
        uids.discard(uid)
        if not uids:
            del self._landing[gang]

    def landing(self, gang: str | None, but: str | None = None) -> bool:
        """Whether members `gang`'s commit let through (any gang's if None; `but`
        aside) are not yet seen bound by the watch. kube-scheduler's own watch delivers
        them at about the same moment; until then each one still in its queue costs a
        whole scheduling cycle (the filter verb's commit wait, architecture.md §7)."""
        if gang is None:
            return len(self._landing_gang) > (1 if but in self._landing_gang else 0)
        uids = self._landing.get(gang)
        if not uids:
            return False
        return but is None or len(uids) > 1 or but not in uids

    def is_landing(self, uid: str) -> bool:
        return uid in self._landing_gang

    def sample(self, uid: str, node_names: list[str] | None) -> None:
        """The nodes kube-scheduler passed in `uid`'s filter call, while the call is in
        progress and its Binding would be held for the call's bind request (None once it
        ended). A commit meanwhile puts the member on one of them if one takes it
        (`Ledger.commit`): on a node outside them the call would turn the member away
        (kube-scheduler samples a tenth of 5,000 nodes), and its gang would wait for the
        held Binding's timer."""
        if node_names is None:
            self._samples.pop(uid, None)
        else:
            self._samples[uid] = node_names

    def samples(self) -> list[tuple[str, list[str]]]:
        return list(self._samples.items())

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

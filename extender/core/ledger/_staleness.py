"""Where the extender's cache and kube-scheduler's, or the extender's and the API's, may
disagree for a moment: the cases in which a fit check, or kube-scheduler's queue, must not
be trusted as is.

Apart from the ledger because none is about reservations: they are what the commit, the
filter and the bind verb ask before they trust a node's free capacity, and what the
filter verb asks before it lets kube-scheduler's serial loop go on (`landing`).
"""

from __future__ import annotations

import heapq
from collections.abc import Set

from extender.core.keyed_sets import KeyedSets
from extender.core.model.types import PodInfo

FRESH_MARGIN_SECONDS = 5.0
"""How long a pod a direct commit bound stays fresh after the extender's own watch
delivered it bound (`Staleness.fresh_nodes`). kube-scheduler's informer watches the same
API server but is a different client: it may get the event later (its own connection,
a slower decode) and applies it behind the scheduling cycle it is running, so for a
moment after ours it can still filter the node without the pod. Not measured: seconds,
since a fresh node costs a plain pod's filter call one more node checked, while a margin
too short lets kube-scheduler's stale check through unchecked."""

FRESH_LIMIT_SECONDS = 60.0
"""The longest a pod a direct commit bound stays fresh when the watch never delivers it
bound (an event lost with a broken watch, whose relist should have delivered it): a
bound, so one lost event cannot keep a node checked for every pod for good."""


class Staleness:
    def __init__(self) -> None:
        # Pods a direct commit bound, until they stop being fresh (`fresh_nodes`):
        # uid -> (node, pod, until, delivered bound by the watch); node -> uids; and
        # (until, uid) in time order, to drop them without a walk (an entry whose
        # `until` moved since it was pushed is skipped when popped).
        self._fresh: dict[str, tuple[str, PodInfo, float, bool]] = {}
        self._fresh_on: dict[str, set[str]] = {}
        self._fresh_by_time: list[tuple[float, str]] = []
        # The fresh pods with required anti-affinity, which may repel any pod
        # (`fresh_pods(repelling=True)`): nearly always none, so a plain pod's filter call with no
        # constraint of its own looks at no fresh pod.
        self._fresh_repelling: set[str] = set()
        # Watches broken and not listed again yet: no commit meanwhile (`behind`).
        self._behind: set[str] = set()
        # Members a commit let through, under their gang, until the watch delivers them
        # bound (`landing`).
        self._landing = KeyedSets()
        # The nodes kube-scheduler passed in members' filter calls in progress (`sample`).
        self._samples: dict[str, list[str]] = {}

    def bound_directly(self, pod: PodInfo, node: str, now: float) -> None:
        """A direct commit let `pod` through to `node`: kube-scheduler did not assume it
        and learns of it only from its watch, so the node is fresh until then."""
        if pod.uid in self._fresh:  # a retry's: the first commit of a pod has none
            self._forget_fresh(pod.uid)
        until = now + FRESH_LIMIT_SECONDS
        self._fresh[pod.uid] = (node, pod, until, False)
        self._fresh_on.setdefault(node, set()).add(pod.uid)
        if pod.required_anti_affinity:
            self._fresh_repelling.add(pod.uid)
        heapq.heappush(self._fresh_by_time, (until, pod.uid))

    def seen_bound(self, uid: str, now: float) -> None:
        """The extender's own watch delivered `uid` bound: kube-scheduler's watch
        delivers it at about the same moment, so it stays fresh only for
        `FRESH_MARGIN_SECONDS` more."""
        entry = self._fresh.get(uid)
        if entry is None or entry[3]:
            return
        node, pod, until, _ = entry
        until = min(until, now + FRESH_MARGIN_SECONDS)
        self._fresh[uid] = (node, pod, until, True)
        heapq.heappush(self._fresh_by_time, (until, uid))

    def _forget_fresh(self, uid: str) -> None:
        entry = self._fresh.pop(uid, None)
        if entry is None:
            return
        self._fresh_repelling.discard(uid)
        uids = self._fresh_on[entry[0]]
        uids.discard(uid)
        if not uids:
            del self._fresh_on[entry[0]]

    def committed(self, uid: str, gang: str) -> None:
        """A commit let `uid` through: its Binding is posted now (directly, or for its
        waiting bind request)."""
        self._landing.put(uid, gang)

    def landed(self, uid: str) -> None:
        """The watch delivered `uid` bound, or its Binding failed, or it is gone. Not
        delivered bound (`seen_bound`), it never landed: nothing of it is fresh."""
        entry = self._fresh.get(uid)
        if entry is not None and not entry[3]:
            self._forget_fresh(uid)
        self._landing.drop(uid)

    def landing(self, gang: str | None, but: str | None = None) -> bool:
        """Whether members `gang`'s commit let through (any gang's if None; `but`
        aside) are not yet seen bound by the watch. kube-scheduler's own watch delivers
        them at about the same moment; until then each one still in its queue costs a
        whole scheduling cycle (the filter verb's commit wait, architecture.md §7)."""
        if gang is None:
            return len(self._landing) > (1 if but in self._landing else 0)
        uids = self._landing.under(gang)
        if not uids:
            return False
        return but is None or len(uids) > 1 or but not in uids

    def is_landing(self, uid: str) -> bool:
        return uid in self._landing

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

    def fresh_nodes(self, now: float) -> Set[str]:
        """Nodes with a fresh pod: one a direct commit bound there that the extender's
        own watch has not delivered bound yet, or delivered less than
        `FRESH_MARGIN_SECONDS` ago (at most `FRESH_LIMIT_SECONDS` after the commit).
        kube-scheduler learns of those pods only through its watch, so until then its
        own checks of the node are stale: a plain pod or elastic extra it finds feasible
        there may not fit, or may clash with a fresh pod by required anti-affinity or
        spread. The filter and the bind verb check these nodes against the extender's
        cache too (`core/node_claims.py`), as they do nodes with reservations. (On the
        barrier path kube-scheduler assumed every pod it bound, so its view was never
        behind.) A failed Binding or a deleted pod is not fresh (`landed`). O(1) but for
        the pods that stopped being fresh since the last call."""
        by_time = self._fresh_by_time
        while by_time and by_time[0][0] <= now:
            until, uid = heapq.heappop(by_time)
            entry = self._fresh.get(uid)
            if entry is not None and entry[2] == until:
                self._forget_fresh(uid)
        return self._fresh_on.keys()

    def fresh_pods(self, now: float, repelling: bool = False) -> list[tuple[str, PodInfo]]:
        """(node, pod as the commit bound it) of every fresh pod (`fresh_nodes`); with
        `repelling`, only those with required anti-affinity."""
        self.fresh_nodes(now)
        fresh = self._fresh
        if repelling:
            return [(fresh[u][0], fresh[u][1]) for u in self._fresh_repelling]
        return [(e[0], e[1]) for e in fresh.values()]

    def behind(self, kind: str) -> None:
        """The watch of `kind` (pods, nodes) broke, or a Binding's try lost its answer
        (the API server failed mid-request or is going away, which its watches may
        learn only later): until the informer has caught the kind up, the cache may miss
        what others bound or changed meanwhile (a spec.nodeName pod made while
        kube-apiserver came back), and the commit's check of each member's node could
        not see it. So no gang commits until then: binds wait at the barrier, direct
        members stay unbound, and no Binding decided earlier is posted (`Binds.post_due`:
        one let through now could be held on its way and land after such a pod;
        architecture.md §11)."""
        self._behind.add(kind)

    def is_behind(self) -> bool:
        return bool(self._behind)

    def caught_up(self, kind: str) -> bool:
        """`kind` is listed again; whether the cache is caught up on every kind now (the
        commits held meanwhile are due)."""
        was = kind in self._behind
        self._behind.discard(kind)
        return was and not self._behind

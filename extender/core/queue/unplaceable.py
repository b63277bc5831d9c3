"""Gangs that can never be placed as the cluster is, set aside (architecture.md §3).

A gang is *unplaceable* when its plan fails even on the cluster's nodes emptied of every
pod: no set of nodes fits its members whatever finishes, leaves or comes. A member asks
for more of a resource than any node has, its node selector, node affinity or
tolerations match too few nodes, its topology domains are too small, or its PodGroup's
`minResources` exceed the whole cluster. Only what no change of pods can cure: a member
whose required pod affinity selects no pod yet is planned as if such a pod could come
in any domain of the term's key (`planner.Awaited`), so a gang blocked only by that waits
as an ordinary gang (`Reason.WAITING_FOR_POD_AFFINITY`) and is planned again when such a
pod is bound (`GangQueue.members_changed`). Pods of other schedulers do not count here,
although the starvation guard takes them to stay: they may go (a Deployment scaled
down, a node drained), and a gang called unplaceable that is not would lose the guard's
protection, while the other way round costs only a forward plan that fails.

Such a gang says so (`Reason.UNPLACEABLE`, with what can never fit and the most that
could), searches for no preemption victims and takes no part in the starvation guard,
so a gang that no freed capacity can ever satisfy cannot keep the guard from the ones
it would help. It is still planned like any other on every pass that plans it, so it
is placed as soon as it fits. The test is made once per gang and set of nodes: it is
made again when a node is added, changed (labels, taints, allocatable, cordon) or
removed, or the gang changes (`node_epoch`, `members_epoch`), never on a pod coming or
going, so it costs nothing per tick.
"""

from __future__ import annotations

from collections.abc import Sequence

from extender.core.cache import Cache
from extender.core.cache.devices import DeviceView
from extender.core.cache.snapshot import Snapshot
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.planner import GangPlanner, Shortfall, awaited_words

# What the test depends on: the nodes, the gang's members and its PodGroup.
_Signature = tuple[int, int, int]


class Unplaceable:
    def __init__(self, cache: Cache, planner: GangPlanner) -> None:
        self._cache = cache
        self._plan = planner
        # gang -> (what the test depended on, why it can never be placed or None).
        self._known: dict[str, tuple[_Signature, Shortfall | None]] = {}
        self._empty: tuple[int, Snapshot] | None = None

    def check(self, group: GroupInfo, members: Sequence[PodInfo]) -> Shortfall | None:
        """Why the gang can never be placed on the cluster's nodes as they are, None if
        it could be on them emptied, with the pods its members' affinity awaits wherever
        they are needed. A malformed PodGroup is another matter
        (`Reason.INVALID_TOPOLOGY`): None."""
        sig = self._signature(group)
        known = self._known.get(group.key)
        if known is not None and known[0] == sig:
            return known[1]
        succeeded, emptied = self._cache.succeeded(group), self._emptied()
        result = self._plan(group, members, succeeded, emptied, explain=False)
        out: Shortfall | None = None
        if isinstance(result, Shortfall) and not result.invalid and not result.fits_otherwise:
            # Rare: only then is the plan made again to say why.
            explained = self._plan(group, members, succeeded, emptied)
            out = explained if isinstance(explained, Shortfall) else result
        self._known[group.key] = (sig, out)
        return out

    def set_aside(self, gang: str) -> bool:
        """The gang's last test, still valid, found it unplaceable."""
        known = self._known.get(gang)
        group = self._cache.groups.get(gang)
        return (known is not None and known[1] is not None and group is not None
                and known[0] == self._signature(group))

    def drop(self, gang: str) -> None:
        self._known.pop(gang, None)

    def _signature(self, group: GroupInfo) -> _Signature:
        return (self._cache.node_epoch, self._cache.members_epoch.get(group.key, 0),
                group.min_member)

    def _emptied(self) -> Snapshot:
        """The cluster's nodes with all of their allocatable free and no pod on them;
        made once per set of nodes."""
        cache = self._cache
        if self._empty is None or self._empty[0] != cache.node_epoch:
            free = {name: node.allocatable for name, node in cache.nodes.items()}
            # No claim's allocation and no slot's devices either (`DeviceView.emptied`).
            self._empty = (cache.node_epoch,
                           Snapshot(cache.nodes, free, {}, domains=cache.domains, repellers={},
                                    devices=DeviceView(cache.devices, cache.nodes,
                                                       emptied=True)))
        return self._empty[1]


def message(group: GroupInfo, why: Shortfall) -> str:
    """What can never fit and the most that could, for users."""
    # The plan's own count, unless it says it already or the PodGroup's minResources
    # ruled the gang out before any member was planned.
    said = "members placed in all" in why.message or why.message.startswith("minResources")
    most = "" if said else f"; at most {why.fit} of {why.need} members could ever fit"
    # Said too, since it is why no autoscaler is asked for nodes (`Explanations`).
    besides = f"; besides, {awaited_words(why.awaits)}" if why.awaits else ""
    return (f"gang {group.key}: can never be placed on this cluster's nodes, even emptied "
            f"of every pod: {why.message}{most}{besides}")

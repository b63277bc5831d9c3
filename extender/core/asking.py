"""What a gang short of capacity asks the autoscaler for, and when a live request of
its asks for too little (`core/provisioning.py` decides when to ask).

Only the members without room are asked for: the autoscaler books pending pods that fit
its nodes before it looks at a request's pods, so pods asked for on top of members that
already have room would each get a node of their own (the reasoning is in
`core/provisioning.py`).
"""

from __future__ import annotations

from extender.core.cache import Cache
from extender.core.model.provisioning_request import RequestInfo, request_name, tally
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.planner import without_room


class Asking:
    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        # gang -> members asked for, by shape (`tally`), as this process asked
        self._counts: dict[str, dict[tuple[object, ...], int]] = {}
        self._checked: dict[str, tuple[int, int]] = {}  # gang -> epochs last checked
        self._fits: dict[str, tuple[int, bool]] = {}  # gang -> (node epoch, more would do)

    def without_room(self, group: GroupInfo, members: list[PodInfo]) -> list[PodInfo]:
        """The members the gang's own plan finds no room for on the free capacity the
        extender counts (reserved and held room of other gangs taken)."""
        return without_room(group, members, self._cache.succeeded(group), self._cache.snapshot)

    def asked(self, gang: str, missing: list[PodInfo]) -> None:
        self._counts[gang] = tally(missing)
        self._checked.pop(gang, None)

    def too_little(self, group: GroupInfo, req: RequestInfo) -> str | None:
        """Why the gang's live request `req` asks for too little now, if it does: more
        members of some shape lack room than it asks for. One that asks for more than
        the members now without room (one found room elsewhere) is kept: the autoscaler
        books that room for the members first, and a new request would start over.
        Looked at once per change of the gang's members or of the nodes."""
        gang = group.key
        sig = (self._cache.members_epoch.get(gang, 0), self._cache.node_epoch)
        if self._checked.get(gang) == sig:
            return None
        self._checked[gang] = sig
        members, _, present = self._cache.quorum_counts(group)
        if present < group.min_member:
            return None
        missing = self.without_room(group, members)
        asked = self._counts.get(gang)
        if asked is not None:
            short = any(n > asked.get(shape, 0) for shape, n in tally(missing).items())
            total = sum(asked.values())
        else:  # asked before a restart: only its size is known
            short, total = req.count > 0 and len(missing) > req.count, req.count
        if not short:
            return None
        return (f"gang {gang}: {len(missing)} member(s) now without room, more than the "
                f"{total} its ProvisioningRequest {req.key} asks for; asks again once it "
                f"is gone")

    def drop(self, gang: str) -> None:
        self._counts.pop(gang, None)
        self._checked.pop(gang, None)
        self._fits.pop(gang, None)

    def more_nodes_would_do(self, group: GroupInfo, members: list[PodInfo]) -> bool:
        """A gang set aside as unplaceable asks only when each of its members alone fits
        some node the cluster has (by its requests, emptied): then it is short of nodes,
        not held back by its own rules (a member larger than any node, a PodGroup that
        contradicts itself), and nodes like those may place it. Checked once per set of
        nodes."""
        known = self._fits.get(group.key)
        if known is not None and known[0] == self._cache.node_epoch:
            return known[1]
        nodes = [n.allocatable for n in self._cache.nodes.values()]
        fits = bool(members) and not group.topology_error and all(
            any(all(a.get(r, 0) >= v for r, v in m.requests.items()) for a in nodes)
            for m in members if not m.node_name)
        self._fits[group.key] = (self._cache.node_epoch, fits)
        return fits


def foreign(group: GroupInfo, members: list[PodInfo]) -> str:
    """The request another controller made for these pods, if their annotations name one
    that is not the gang's own. "<name>-capacity" is the gang's own too: the name every
    gang's request had before names carried the source, which members annotated then
    still name (asked again, they are annotated with the new one)."""
    mine = (request_name(group.key), f"{group.name}-capacity")
    return min((p.provisioning_request for p in members
                if p.provisioning_request and p.provisioning_request not in mine), default="")

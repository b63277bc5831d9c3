"""A gang's pods counted as members, bound members and succeeded pods, kept as each pod
changes, and the named tuples the cache answers with.

Why: a gang's quorum is looked at on every watch event of each of its pods (its Binding,
the kubelet's status write) and on every filter and bind call of each member. Counting
by walking the gang made a 1,000-pod gang's commit walk its 1,000 pods some 2,000 times:
in a profile of that commit the walk was half the extender's CPU (docs/performance.md,
"The commit of a planned gang"). Kept here, a count costs the same for any gang size;
the members themselves are still listed on demand (`Cache.summary`).
"""

from __future__ import annotations

from typing import NamedTuple

from extender.core.model.types import PodInfo


class GangPods(NamedTuple):
    """A gang's pods as they are: `bound_members` are members with a node; succeeded
    pods are not members (they finished) and are counted apart, those being deleted
    not at all (`counts_as_succeeded`)."""
    members: tuple[PodInfo, ...]
    bound_members: int
    succeeded: int


class QuorumCounts(NamedTuple):
    """A gang's pods as its quorum counts them: succeeded pods count as bound and as
    present, since they ran as part of a formed quorum (failed ones do not)."""
    members: list[PodInfo]
    bound_or_succeeded: int
    present_or_succeeded: int


class Tally(NamedTuple):
    """`GangPods` without the members: how many."""
    members: int
    bound_members: int
    succeeded: int

    @property
    def bound_or_succeeded(self) -> int:
        return self.bound_members + self.succeeded

    @property
    def present_or_succeeded(self) -> int:
        return self.members + self.succeeded


NONE = Tally(0, 0, 0)


def is_member(pod: PodInfo) -> bool:
    """Whether the pod counts for its gang (architecture.md §1)."""
    return not (pod.terminal or pod.deleting or pod.gated)


def counts_as_succeeded(pod: PodInfo) -> bool:
    """Whether the pod counts toward its gang's quorum as one that ran to success.

    Not once it is being deleted, as no pod being deleted counts for its gang
    (architecture.md §1). A job restarted whole deletes its old pods and creates new
    ones at once; a worker that exits 0 on SIGTERM is written Succeeded by the kubelet
    while its deletion is still in progress. Counted, those dying pods made up the
    quorum of the new attempt, whose pods were then bound one by one as elastic
    extras as far as room went: part of the new gang bound, the rest without room,
    the hung job gang scheduling exists to prevent. A finished pod nobody deletes
    (a Job with more completions than parallelism) still counts."""
    return pod.phase == "Succeeded" and not pod.deleting


class Tallies:
    """gang key -> its `Tally`, told of every copy of a gang's pod that comes and goes."""

    def __init__(self) -> None:
        self._counts: dict[str, Tally] = {}

    def get(self, key: str) -> Tally:
        return self._counts.get(key, NONE)

    def add(self, key: str, pod: PodInfo) -> None:
        self._move(key, pod, 1)

    def remove(self, key: str, pod: PodInfo) -> None:
        self._move(key, pod, -1)

    def _move(self, key: str, pod: PodInfo, sign: int) -> None:
        member = is_member(pod)
        old = self._counts.get(key, NONE)
        new = Tally(old.members + sign * member,
                    old.bound_members + sign * (member and bool(pod.node_name)),
                    old.succeeded + sign * counts_as_succeeded(pod))
        if new == NONE:
            self._counts.pop(key, None)  # no entry per gang ever seen
        else:
            self._counts[key] = new

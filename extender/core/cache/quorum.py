"""Which groups are short of a bound quorum, kept as their pods change.

Why: every pass of the gang queue looks for the gangs that wait, and a finished Job
leaves its PodGroup behind until someone deletes it. Walking every group ever seen made
a pass, and so the filter call that runs it, grow with the cluster's history rather
than with what waits (bench: `python -m lab.experiments.finished_groups`). Only groups
whose pods or spec changed since the last look are counted again.

A group with no member at all (a PodGroup whose Job and pods are gone, left behind) is
not short either: the pass has nothing to plan or tell for it, and would walk every one
of them, every time (docs/reliability.md, "History at scale"). Its first member
arriving changes it, and it is counted again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from extender.core.model.types import GroupInfo

# Changed groups beyond which each further change counts the waiting ones at once: a
# list of 100,000 PodGroups left them all to the next pass, a single stretch of about
# 5 µs per group on the event loop.
_CATCH_UP_AT = 256

# How many members, bound members and succeeded pods a group has: `Cache.tally`.
Counts = Callable[[GroupInfo], tuple[int, int, int]]


class QuorumIndex:
    def __init__(self, groups: Mapping[str, GroupInfo], counts: Counts) -> None:
        self._groups = groups
        self._counts = counts
        # An ordered set (dict keys): a set's order would vary with the hash seed, and
        # with it the order of the pass's actions; sorting on every pass cost 60 µs at
        # 400 waiting gangs (lab.experiments.finished_groups).
        self._short: dict[str, None] = {}
        self._changed: dict[str, None] = {}  # ordered too

    def changed(self, key: str) -> None:
        """A pod of the group, or the group itself, changed (or went). The caller may
        be in the middle of that change: this group is counted later, never now."""
        if key not in self._changed and len(self._changed) >= _CATCH_UP_AT:
            self._count_changed()
        self._changed[key] = None

    def short(self) -> list[tuple[str, GroupInfo]]:
        """The groups that have members, and whose bound members and succeeded pods are
        fewer than minMember, with their keys (`GroupInfo.key` is computed), in the
        order they fell short."""
        self._count_changed()
        return [(k, self._groups[k]) for k in self._short]

    def _count_changed(self) -> None:
        for key in self._changed:
            group = self._groups.get(key)
            if group is None:
                self._short.pop(key, None)
                continue
            members, bound, succeeded = self._counts(group)
            if bound + succeeded >= group.min_member or not members:
                self._short.pop(key, None)
            else:
                self._short[key] = None
        self._changed.clear()

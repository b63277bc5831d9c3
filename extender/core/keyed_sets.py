"""Uids filed each under one key, and the uids under each key, kept in step.

Several parts ask both ways: which pods a commit let through for a gang and whether one
pod still is (the ledger's landing members), which pods of a JobSet attempt to move when
its split arrives (the watch input), which foreign pods name a group (reporting). Kept
by hand, that is two dicts to change together on every move and every drop, and an
empty set to delete; a uid moved to another key but left in its old key's set would be
counted twice. Here it is done once.
"""

from __future__ import annotations

from collections.abc import Set

_NONE: frozenset[str] = frozenset()


class KeyedSets:
    __slots__ = ("_key_of", "_under")

    def __init__(self) -> None:
        self._key_of: dict[str, str] = {}
        self._under: dict[str, set[str]] = {}

    def put(self, uid: str, key: str) -> str | None:
        """Files `uid` under `key`, out of the key it was under, which is returned: a
        caller that reports a move says where from."""
        old = self._key_of.get(uid)
        if old == key:
            return old
        if old is not None:
            self.drop(uid)
        self._key_of[uid] = key
        self._under.setdefault(key, set()).add(uid)
        return old

    def drop(self, uid: str) -> str | None:
        key = self._key_of.pop(uid, None)
        if key is None:
            return None
        uids = self._under[key]
        uids.discard(uid)
        if not uids:
            del self._under[key]
        return key

    def key_of(self, uid: str) -> str | None:
        return self._key_of.get(uid)

    def under(self, key: str) -> Set[str]:
        """A view, not a copy (callers count or walk it at once): not to be kept
        across a change."""
        return self._under.get(key, _NONE)

    def __contains__(self, uid: object) -> bool:
        return uid in self._key_of

    def __len__(self) -> int:
        return len(self._key_of)

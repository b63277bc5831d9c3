"""Pods deleted a moment ago, remembered against late filter calls.

kube-scheduler's informer lags the API too: a filter call for a pod may arrive after
its DELETE, and must not bring the pod back into the cache as a phantom gang member.
"""

from __future__ import annotations

# At most this many (a few MB), and none longer than this: a late call trails the
# DELETE by kube-scheduler's informer lag, seconds, so the memo stops growing once the
# cluster's churn fills the window.
_REMEMBERED = 50_000
_TTL_SECONDS = 600.0


class Tombstones:
    def __init__(self) -> None:
        self._deleted: dict[str, float] = {}  # uid -> when, oldest first

    def add(self, uid: str, now: float | None) -> None:
        self._deleted.pop(uid, None)
        self._deleted[uid] = now if now is not None else float("-inf")
        while len(self._deleted) > _REMEMBERED or (
            now is not None and now - next(iter(self._deleted.values())) > _TTL_SECONDS
        ):
            del self._deleted[next(iter(self._deleted))]

    def oldest(self) -> float | None:
        """When the oldest remembered pod was deleted."""
        return next(iter(self._deleted.values()), None)

    def __contains__(self, uid: object) -> bool:
        return uid in self._deleted

    def __len__(self) -> int:
        return len(self._deleted)

"""Which pods sit on a node, as the planner reads them: the pods bound there and the
slots reserved there, one view over the cache's two separate maps."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from extender.core.model.types import PodInfo


class PodsOnNode(Mapping[str, list[PodInfo]]):
    """Read-only view: node -> pods bound to it plus pods a reservation is made for.

    Bound pods and reserved slots are kept apart so that a pod whose slot turns into a
    binding is never counted twice nor dropped while the two updates interleave.
    """

    def __init__(
        self, bound: dict[str, dict[str, PodInfo]], reserved: dict[str, dict[str, PodInfo]]
    ) -> None:
        self._bound = bound
        self._reserved = reserved

    def __getitem__(self, node: str) -> list[PodInfo]:
        bound = self._bound.get(node)
        reserved = self._reserved.get(node)
        if bound is None and reserved is None:
            raise KeyError(node)
        return [*(bound or {}).values(), *(reserved or {}).values()]

    def get(self, node: str, default: object = None) -> list[PodInfo]:
        return [*self._bound.get(node, {}).values(), *self._reserved.get(node, {}).values()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._bound.keys() | self._reserved.keys())

    def __len__(self) -> int:
        return len(self._bound.keys() | self._reserved.keys())

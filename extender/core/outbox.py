"""Where the core leaves the I/O it wants done, in order, for the adapters to take."""

from __future__ import annotations

from extender.core.model.vocabulary import Action


class Outbox:
    def __init__(self) -> None:
        self._actions: list[Action] = []

    def append(self, action: Action) -> None:
        self._actions.append(action)

    def take(self) -> list[Action]:
        actions, self._actions = self._actions, []
        return actions

    def __len__(self) -> int:
        return len(self._actions)

"""PodDisruptionBudgets, as the Eviction API applies them: the preemption never picks a
victim whose eviction a budget would refuse, so that a victim gang is not left half
evicted by a refusal halfway through (a race can still refuse one: `core/preemption/evictions.py`).

The Eviction API lets a pod go when every budget covering it still allows a disruption,
and counts each eviction against them; pods that are not running (Pending, finished,
being deleted) are let go whatever the budgets say. A pod covered by more than one
budget cannot be evicted at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from extender.core.model.constraints import label_selector_matches
from extender.core.model.types import BudgetInfo, PodInfo


def _counts(pod: PodInfo) -> bool:
    """Whether evicting `pod` spends a disruption of the budgets covering it."""
    return pod.phase == "Running" and not pod.deleting


class Budgets:
    def __init__(self) -> None:
        self._by_ns: dict[str, dict[str, BudgetInfo]] = {}
        # Grows on every change: a preemption search that found no victim is made again
        # once a budget moved.
        self.epoch = 0

    def upsert(self, budget: BudgetInfo) -> None:
        ns = self._by_ns.setdefault(budget.namespace, {})
        if ns.get(budget.name) != budget:
            ns[budget.name] = budget
            self.epoch += 1

    def remove(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        ns = self._by_ns.get(namespace)
        if ns is not None and ns.pop(name, None) is not None:
            self.epoch += 1
            if not ns:
                del self._by_ns[namespace]

    def covering(self, pod: PodInfo) -> list[BudgetInfo]:
        return [b for b in self._by_ns.get(pod.namespace, {}).values()
                if label_selector_matches(b.selector, pod.labels)]

    def refusal(self, pods: Iterable[PodInfo], spent: Mapping[str, int] | None = None
                ) -> str | None:
        """Why evicting all of `pods` at once would be refused, given `spent`
        disruptions (budget key -> count) already promised to other victims; None if it
        would not."""
        use: dict[str, int] = {}
        budgets: dict[str, BudgetInfo] = {}
        for pod in pods:
            if not self._by_ns.get(pod.namespace) or not _counts(pod):
                continue
            cover = self.covering(pod)
            if len(cover) > 1:
                names = ", ".join(sorted(b.key for b in cover))
                return (f"pod {pod.key} is covered by more than one PodDisruptionBudget "
                        f"({names}), which the Eviction API refuses")
            for b in cover:
                use[b.key] = use.get(b.key, 0) + 1
                budgets[b.key] = b
        for key, n in sorted(use.items()):
            allowed = budgets[key].disruptions_allowed - (spent or {}).get(key, 0)
            if n > allowed:
                return (f"PodDisruptionBudget {key} allows {max(allowed, 0)} disruption(s) "
                        f"and evicting the whole unit needs {n}")
        return None

    def spends(self, pods: Iterable[PodInfo]) -> dict[str, int]:
        """The disruptions evicting `pods` spends, per budget."""
        use: dict[str, int] = {}
        for pod in pods:
            if self._by_ns.get(pod.namespace) and _counts(pod):
                for b in self.covering(pod):
                    use[b.key] = use.get(b.key, 0) + 1
        return use

    def __len__(self) -> int:
        return sum(len(ns) for ns in self._by_ns.values())

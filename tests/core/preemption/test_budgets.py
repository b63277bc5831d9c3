"""PodDisruptionBudgets as the Eviction API applies them (`core/preemption/budgets.py`)."""

from __future__ import annotations

import dataclasses

from extender.core.model.types import BudgetInfo, LabelSelector, PodInfo
from extender.core.preemption.budgets import Budgets
from tests.core.sim import pod


def running(name: str, **labels: str) -> PodInfo:
    return dataclasses.replace(pod(name, labels=labels), node_name="n0", phase="Running")


def test_a_budget_refuses_more_evictions_than_it_allows() -> None:
    b = Budgets()
    b.upsert(BudgetInfo("ns", "pdb", LabelSelector((("app", "a"),)), disruptions_allowed=1))
    one, two, other = (running("a1", app="a"), running("a2", app="a"), running("b", app="b"))
    assert b.refusal([one]) is None
    why = b.refusal([one, two])
    assert why is not None and "PodDisruptionBudget ns/pdb allows 1" in why
    assert b.refusal([other, other]) is None  # not covered
    assert b.refusal([one], spent={"ns/pdb": 1}) is not None  # promised to another victim
    assert b.spends([one, two, other]) == {"ns/pdb": 2}


def test_pods_that_are_not_running_spend_nothing() -> None:
    b = Budgets()
    b.upsert(BudgetInfo("ns", "pdb", LabelSelector(), disruptions_allowed=0))  # every pod
    pending = dataclasses.replace(pod("p"), node_name="n0", phase="Pending")
    assert b.refusal([pending]) is None
    assert b.refusal([running("r")]) is not None


def test_two_budgets_over_one_pod_refuse_it_and_a_missing_selector_covers_nothing() -> None:
    b = Budgets()
    b.upsert(BudgetInfo("ns", "x", LabelSelector(), disruptions_allowed=5))
    b.upsert(BudgetInfo("ns", "y", LabelSelector(), disruptions_allowed=5))
    b.upsert(BudgetInfo("ns", "none", None, disruptions_allowed=0))
    why = b.refusal([running("r")])
    assert why is not None and "more than one PodDisruptionBudget (ns/x, ns/y)" in why
    b.remove("ns/y")
    assert b.refusal([running("r")]) is None
    epoch = b.epoch
    b.upsert(BudgetInfo("ns", "x", LabelSelector(), disruptions_allowed=5))  # unchanged
    assert b.epoch == epoch and len(b) == 2

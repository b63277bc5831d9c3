"""Victim selection (`core/preemption/victims.py`): units, the harm order, the search."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.model.types import BudgetInfo, LabelSelector
from extender.core.model.vocabulary import GANG, POD, RESERVATION
from extender.core.preemption.victims import (
    PRUNE_LIMIT,
    Unit,
    candidates,
    select,
)
from tests.core.sim import SimScheduler, group, node, pod


def unit(key: str, need: int = 0) -> Unit:
    return Unit(key, POD, 0, (), (), 0.0, (0, 0, 0.0, 0.0, key))


def test_select_takes_the_shortest_prefix_then_reprieves_what_is_not_needed() -> None:
    units = [unit(f"u{i}") for i in range(10)]
    calls: list[int] = []

    def fits(victims: Sequence[Unit]) -> bool:
        calls.append(len(victims))
        keys = {u.key for u in victims}
        return {"u5", "u2"} <= keys  # only u2 and u5 free the right node

    chosen = select(units, fits)
    assert chosen is not None and [u.key for u in chosen] == ["u2", "u5"]
    assert len(calls) <= 1 + 4 + 3 + 6  # none, doubling, binary search, prune: not one per unit


def test_select_none_when_even_everything_would_not_do() -> None:
    assert select([unit("a"), unit("b"), unit("c")], lambda v: False) is None
    assert select([], lambda v: False) is None
    assert select([unit("a")], lambda v: True) == []  # fits already: nobody is evicted


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.sets(st.integers(0, 59), min_size=1, max_size=5))
def test_select_finds_a_set_that_fits_and_is_minimal(n: int, needed: set[int]) -> None:
    units = [unit(f"u{i:02d}") for i in range(n)]
    want = {f"u{i:02d}" for i in needed if i < n}

    def fits(victims: Sequence[Unit]) -> bool:
        return want <= {u.key for u in victims}

    chosen = select(units, fits)
    if not want:
        assert chosen == []
        return
    assert chosen is not None and want <= {u.key for u in chosen}
    if max(i for i in needed if i < n) < PRUNE_LIMIT:
        assert {u.key for u in chosen} == want  # every victim not needed was reprieved


def cluster() -> SimScheduler:
    sim = SimScheduler()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    return sim


def test_candidates_are_whole_gangs_and_plain_pods_below_the_priority_in_harm_order() -> None:
    sim = cluster()
    sim.add_group(group("low", 2, creation=5.0))
    for i in range(2):
        sim.bind_foreign(pod(f"low-{i}", "low", cpu=1000, priority=1), f"n{i}")
    sim.add_group(group("same", 1))
    sim.bind_foreign(pod("same-0", "same", cpu=1000, priority=5), "n0")
    old = sim.bind_foreign(pod("old", cpu=500, priority=1, creation=1.0), "n1")
    young = sim.bind_foreign(pod("young", cpu=500, priority=1, creation=9.0), "n1")
    zero = sim.bind_foreign(pod("zero", cpu=2000, priority=0), "n1")
    units, protected = candidates(sim.cache, sim.core.ledger.reservations, sim.core.budgets, 5,
                                  {}, {})
    assert not protected
    names = [u.name for u in units]
    # Lowest priority first; then fewest pods; among equals the youngest first.
    assert names == [f"pod {zero.key}", f"pod {young.key}", f"pod {old.key}", "gang ns/low"]
    low = units[-1]
    assert low.kind == GANG and {p.name for p in low.pods} == {"low-0", "low-1"}


def test_a_budget_that_would_refuse_a_whole_gang_leaves_it_out() -> None:
    sim = cluster()
    sim.add_group(group("low", 2))
    for i in range(2):
        p = pod(f"low-{i}", "low", cpu=1000, priority=1, labels={"app": "low"})
        sim.manager.on_pod(dataclasses.replace(p, node_name=f"n{i}", phase="Running"), sim.now)
    sim.manager.on_budget(BudgetInfo("ns", "pdb", LabelSelector((("app", "low"),)), 1))
    units, protected = candidates(sim.cache, sim.core.ledger.reservations, sim.core.budgets, 5,
                                  {}, {})
    assert units == []
    assert protected == ["gang ns/low: PodDisruptionBudget ns/pdb allows 1 disruption(s) "
                         "and evicting the whole unit needs 2"]
    sim.manager.on_budget(BudgetInfo("ns", "pdb", LabelSelector((("app", "low"),)), 2))
    units, _ = candidates(sim.cache, sim.core.ledger.reservations, sim.core.budgets, 5, {}, {})
    assert [u.key for u in units] == ["ns/low"]


def test_a_lower_priority_reservation_is_a_unit_that_evicts_nothing() -> None:
    sim = cluster()
    sim.add_group(group("res", 2))
    a, _ = (sim.add_pod(pod(f"res-{i}", "res", cpu=3000, priority=1)) for i in range(2))
    sim.manager.filter(a, ["n0", "n1"], sim.now)
    assert "ns/res" in sim.core.ledger.reservations
    units, _ = candidates(sim.cache, sim.core.ledger.reservations, sim.core.budgets, 5, {}, {})
    assert [(u.kind, u.key, len(u.pods), len(u.frees)) for u in units] == [
        (RESERVATION, "ns/res", 0, 2)]
    units, _ = candidates(sim.cache, sim.core.ledger.reservations, sim.core.budgets, 1, {}, {})
    assert units == []  # equal priority never

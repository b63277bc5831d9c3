"""`Explanations.reasons`, read by every /metrics scrape: kept as statuses change, it
must equal a count over every gang's status, whatever the sequence of changes."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.model.vocabulary import Reason
from extender.core.wiring import Core

GANGS = ("ns/a", "ns/b", "ns/c")
REASONS = (Reason.WAITING_FOR_MEMBERS, Reason.INSUFFICIENT_CAPACITY, Reason.BOUND,
           Reason.FAILED)
_op = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(GANGS), st.sampled_from(REASONS),
              st.integers(0, 2)),
    st.tuples(st.just("forget"), st.sampled_from(GANGS), st.just(Reason.BOUND), st.just(0)),
    st.tuples(st.just("lift"), st.sampled_from(GANGS), st.just(Reason.BOUND), st.just(0)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_op, max_size=30))
def test_reasons_equal_a_count_over_every_gang(ops: list[tuple[str, str, Reason, int]]
                                                ) -> None:
    ex = Core.wire().explanations
    for op, gang, reason, n in ops:
        if op == "set":
            ex.set(gang, reason, f"gang {gang}: {n}", 1.0)
        elif op == "forget":
            ex.drop(gang)
        else:
            ex.retry_limit_lifted(gang)
        expected = Counter(s.reason for g in GANGS if (s := ex.get(g)) is not None)
        assert ex.reasons() == dict(expected)


def test_a_scrape_does_not_walk_every_explained_gang(monkeypatch: pytest.MonkeyPatch) -> None:
    ex = Core.wire().explanations
    for i in range(100):
        ex.set(f"ns/g{i}", Reason.BOUND, "bound", 1.0)
    ex.set("ns/w", Reason.INSUFFICIENT_CAPACITY, "no room", 1.0)
    monkeypatch.setattr(ex, "_status", {})  # what a walk would find: nothing
    assert ex.reasons() == {Reason.BOUND: 100, Reason.INSUFFICIENT_CAPACITY: 1}

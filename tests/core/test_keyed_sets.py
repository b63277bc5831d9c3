"""`KeyedSets`: each uid under one key, both ways kept in step."""

from __future__ import annotations

from extender.core.keyed_sets import KeyedSets


def test_a_uid_moved_to_another_key_is_under_that_key_alone() -> None:
    sets = KeyedSets()
    assert sets.put("u1", "a") is None
    assert sets.put("u2", "a") is None
    assert sets.put("u1", "b") == "a"
    assert set(sets.under("a")) == {"u2"} and set(sets.under("b")) == {"u1"}
    assert sets.key_of("u1") == "b" and len(sets) == 2


def test_putting_a_uid_under_its_own_key_again_changes_nothing() -> None:
    sets = KeyedSets()
    sets.put("u1", "a")
    assert sets.put("u1", "a") == "a"
    assert set(sets.under("a")) == {"u1"} and len(sets) == 1


def test_a_dropped_uid_is_forgotten_both_ways_and_says_where_it_was() -> None:
    sets = KeyedSets()
    sets.put("u1", "a")
    sets.put("u2", "a")
    assert sets.drop("u1") == "a"
    assert "u1" not in sets and sets.key_of("u1") is None
    assert set(sets.under("a")) == {"u2"}
    assert sets.drop("u2") == "a"
    assert not sets.under("a") and len(sets) == 0
    assert sets.drop("u2") is None  # twice: nothing to forget


def test_an_unknown_key_has_no_uid_and_an_unknown_uid_is_not_in() -> None:
    sets = KeyedSets()
    assert not sets.under("nothing") and None not in sets and "u9" not in sets

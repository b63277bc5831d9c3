"""`Cache.short_of_quorum`: the gang queue's candidates, kept as pods and groups change
(cache/quorum.py), must be exactly the groups a walk of all of them would find."""

from __future__ import annotations

import dataclasses
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.cache import quorum
from extender.core.cache.cache import Cache
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GroupInfo, PodInfo
from extender.core.wiring import Core
from tests.core.sim import group, node, pod

GROUPS = ("a", "b", "c")
# (op, pod slot or group, argument)
_op = st.one_of(
    st.tuples(st.just("group"), st.sampled_from(GROUPS), st.integers(1, 3)),
    st.tuples(st.just("ungroup"), st.sampled_from(GROUPS), st.just(0)),
    st.tuples(st.just("pod"), st.integers(0, 5),
              st.tuples(st.sampled_from((*GROUPS, None)),
                        st.sampled_from(("", "n1", "n2")),
                        st.sampled_from(("Pending", "Running", "Succeeded", "Failed")),
                        st.booleans())),
    st.tuples(st.just("unpod"), st.integers(0, 5), st.just(0)),
)


def _walk(cache: Cache) -> set[str]:
    """Groups with members whose quorum is not bound."""
    return {k for k, g in cache.groups.items()
            if cache.quorum_counts(g)[0] and cache.quorum_counts(g)[1] < g.min_member}


def _short(cache: Cache) -> set[str]:
    return {k for k, _ in cache.short_of_quorum()}


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=30), st.sampled_from((1, 2, 3, 256)))
def test_short_of_quorum_is_what_a_walk_of_every_group_finds(
        ops: list[tuple[str, object, object]], catch_up_at: int) -> None:
    """`catch_up_at`: changed groups beyond which a change counts the others at once
    (in the middle of another change, which must not be counted half done)."""
    with mock.patch.object(quorum, "_CATCH_UP_AT", catch_up_at):
        _check(ops)


def _check(ops: list[tuple[str, object, object]]) -> None:
    cache = Cache()
    for n in ("n1", "n2"):
        cache.upsert_node(node(n))
    uids: dict[int, PodInfo] = {}
    for op, target, arg in ops:
        if op == "group":
            assert isinstance(target, str) and isinstance(arg, int)
            cache.upsert_group(group(target, arg))
        elif op == "ungroup":
            assert isinstance(target, str)
            cache.remove_group(f"ns/{target}")
        elif op == "pod":
            assert isinstance(target, int) and isinstance(arg, tuple)
            gang, node_name, phase, deleting = arg
            old = uids.get(target)
            base = old if old is not None else pod(f"p{target}", gang)
            labels = dict(pod(f"p{target}", gang).labels)
            uids[target] = new = dataclasses.replace(
                base, labels=labels, node_name=node_name, deleting=deleting,
                phase=phase if node_name or phase in ("Pending", "Failed") else "Pending")
            cache.upsert_pod(new)
        else:
            old = uids.pop(int(str(target)), None)
            if old is not None:
                cache.remove_pod(old.uid)
        # After every change: a later change to the same group would hide a missed one.
        assert _short(cache) == _walk(cache)
        for g in cache.groups.values():  # the kept counts are what a walk counts
            pods = cache.gang_pods(g.key)
            members = [p for p in pods if not (p.terminal or p.deleting or p.gated)]
            walked = (len(members), sum(1 for m in members if m.node_name),
                      sum(1 for p in pods if p.phase == "Succeeded" and not p.deleting))
            assert cache.tally(g) == walked, g.key
            assert cache.summary(g) == (tuple(members), *walked[1:]), g.key


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The groups whose members are counted (`Cache.summary`) from now on, in order:
    what a pass visits."""
    seen: list[str] = []
    real = Cache.summary

    def counting(self: Cache, g: GroupInfo) -> tuple[tuple[PodInfo, ...], int, int]:
        seen.append(g.key)
        return real(self, g)

    monkeypatch.setattr(Cache, "summary", counting)
    return seen


def one_node() -> GangManager:
    """A gang manager that knows one 64-CPU node, n1."""
    mgr = GangManager(Core.wire(Config(default_timeout_seconds=30)))
    mgr.on_node(node("n1", cpu=64000))
    return mgr


def test_a_pass_does_not_visit_groups_whose_quorum_is_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the index: 200 finished gangs beside one that waits, and the pass
    counts the members of the one only (it counted all 201 before)."""
    seen = counted(monkeypatch)
    mgr = one_node()
    for i in range(200):
        mgr.on_group(group(f"done{i}", 1), 0.0)
        mgr.on_pod(pod(f"done{i}-0", f"done{i}", cpu=10, node_name="n1",
                       phase="Succeeded"), 0.0)
    mgr.on_group(group("wait", 2), 0.0)
    mgr.on_pod(pod("wait-0", "wait"), 0.0)
    mgr.tick(1.0)  # the index catches up with the changes above: each group once
    seen.clear()
    mgr.on_pod(pod("wait-1", "wait"), 2.0)
    mgr.tick(3.0)
    assert set(seen) == {"ns/wait"}
    assert "ns/wait" in {r.gang for r in mgr.reads.reservations()}  # and it was planned


def test_a_pass_does_not_visit_groups_left_without_members(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """PodGroups whose Jobs and pods are gone, left behind: nothing to plan or say, and
    every pass counted the members of each (issue 27: 100,000 of them slowed the
    planning of an ordinary gang)."""
    seen = counted(monkeypatch)
    mgr = one_node()
    for i in range(200):
        mgr.on_group(group(f"empty{i}", 2), 0.0)
    mgr.on_group(group("gone", 2), 0.0)
    last = pod("gone-0", "gone")
    mgr.on_pod(last, 0.0)
    mgr.tick(1.0)
    mgr.on_pod_deleted(last.uid, 1.5)  # its last member went
    mgr.on_group(group("wait", 2), 0.0)
    mgr.on_pod(pod("wait-0", "wait"), 0.0)
    mgr.tick(2.0)
    seen.clear()
    mgr.on_pod(pod("wait-1", "wait"), 2.5)
    mgr.tick(3.0)
    assert set(seen) == {"ns/wait"}
    assert "ns/wait" in {r.gang for r in mgr.reads.reservations()}
    # A member arriving makes an empty group one the pass looks at again.
    mgr.on_pod(pod("empty7-0", "empty7"), 4.0)
    mgr.tick(5.0)
    assert "ns/empty7" in {k for k, _ in mgr._cache.short_of_quorum()}


def test_a_long_list_leaves_the_next_pass_little_to_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a list of every group and pod, the first pass counted the members of all
    of them in one go (about 5 µs each: half a second at 100,000 groups); the index
    counts them as they come, a few hundred at a time."""
    mgr = one_node()
    for i in range(2000):
        mgr.on_group(group(f"g{i}", 2), 0.0)
        mgr.on_pod(pod(f"g{i}-0", f"g{i}", cpu=1, node_name="n1", phase="Succeeded"), 0.0)
        mgr.on_pod(pod(f"g{i}-1", f"g{i}", cpu=1, node_name="n1", phase="Succeeded"), 0.0)
    seen = counted(monkeypatch)
    mgr.tick(1.0)
    assert len(seen) <= quorum._CATCH_UP_AT

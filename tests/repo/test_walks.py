"""The walks of a bind, a filter and a commit through the extender (tools/walk.py), held
to their bounds: a change that scatters a request over more files, or sends it back and
forth between them, fails here and not in a reader's head.

The bounds are today's counts: lower them when a change shortens a walk; raising one is
a decision to make in review, with the walk's listing (`--stops`) beside it (the
disruption policy raised the bind and commit walks by one file: a member's Binding is a
pod change it must see; the reserved message naming the devices (DRA) each member is
planned on raised the commit walk by one more, the cache's devices). docs/architecture.md
lists the walks and the command that prints them.
"""

from __future__ import annotations

import pytest

from tools.walk import WALKS, Stop, count, walk

# (files, returns to a file already left) at most, per walk, as measured by
# `python -m tools.walk`.
BOUNDS = {"bind": (19, 20), "filter": (8, 2), "commit": (26, 36)}


def _stops(*files: str) -> list[Stop]:
    return [Stop(f, "f", 0) for f in files]


def test_count_folds_consecutive_stops_and_counts_returns() -> None:
    c = count(_stops("a.py", "a.py", "b.py", "a.py", "c.py", "b.py"))
    assert (c.stops, c.files, c.returns) == (6, 3, 2)


def test_count_of_a_straight_walk_has_no_return() -> None:
    assert count(_stops("a.py", "b.py", "b.py", "c.py")).returns == 0


@pytest.mark.parametrize("which", WALKS)
def test_each_walk_stays_within_its_bound(which: str) -> None:
    stops = walk(which)
    got = count(stops)
    files, returns = BOUNDS[which]
    listing = "\n".join(f"{s.file}:{s.function}" for s in stops)
    assert got.files <= files and got.returns <= returns, f"{which}: {got}\n{listing}"


def test_the_bind_walk_follows_the_pod_from_the_route_to_its_binding_and_back() -> None:
    stops = [f"{s.file}:{s.function}" for s in walk("bind")]
    assert stops[0].startswith("scheduler/http.py:")
    assert any(s.startswith("kube/client.py:Kube.bind") for s in stops), stops
    assert any(s.endswith("GangManager.binding_finished") for s in stops), stops


def test_following_the_pod_leaves_out_the_helpers_it_is_not_handed() -> None:
    followed, everything = count(walk("filter")), count(walk("filter", everything=True))
    assert followed.stops < everything.stops

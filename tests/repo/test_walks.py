"""The walks of a bind, a filter and a commit through the extender (tools/walk.py), held
to their bounds: a change that scatters a request over more files, or sends it back and
forth between them, fails here and not in a reader's head.

The bounds are today's counts: lower them when a change shortens a walk; raising one is
a decision to make in review, with the walk's listing (`--stops`) beside it (the
disruption policy raised the bind and commit walks by one file: a member's Binding is a
pod change it must see; the reserved message naming the devices (DRA) each member is
planned on raised the commit walk by one more, the cache's devices; the binding cycle
brought in one place, scheduler/binding.py, took the adapters' share of the bind walk
from 4 files and 7 returns to 3 and 3, the bind walk from 20 files and 19 returns to 19
and 15, and the commit walk's returns from 37 to 33; by then the JobSet pods' index and
`core/keyed_sets.py` had raised the core's share of the bind and commit walks; the
ledger split into the parts its callers reach, reservations and bind requests, took one
return off each).
docs/architecture.md lists the walks and the command that prints them.

The adapters' share (`--parts`) has bounds of its own: the core's share is the gang
manager's decision and its bookkeeping, the adapters' is the path around it, and a
change that sends a bind back and forth between the dispatcher and the binding cycle
again fails here even when the core's share shrinks meanwhile.
"""

from __future__ import annotations

import pytest

from tools.walk import WALKS, Stop, by_part, count, walk

# (files, returns to a file already left) at most, per walk, as measured by
# `python -m tools.walk`.
BOUNDS = {"bind": (19, 14), "bind-held": (15, 10), "filter": (8, 2), "commit": (28, 32)}
# The same for the adapters' share of each walk (`python -m tools.walk --parts`).
ADAPTER_BOUNDS = {"bind": (3, 3), "bind-held": (3, 3), "filter": (3, 0), "commit": (5, 2)}


def _stops(*files: str) -> list[Stop]:
    return [Stop(f, "f", 0) for f in files]


def test_count_folds_consecutive_stops_and_counts_returns() -> None:
    c = count(_stops("a.py", "a.py", "b.py", "a.py", "c.py", "b.py"))
    assert (c.stops, c.files, c.returns) == (6, 3, 2)


def test_count_of_a_straight_walk_has_no_return() -> None:
    assert count(_stops("a.py", "b.py", "b.py", "c.py")).returns == 0


def test_the_parts_share_the_count_out() -> None:
    stops = _stops("scheduler/a.py", "core/m.py", "core/l.py", "scheduler/a.py", "core/m.py",
                   "kube/c.py", "scheduler/a.py")
    parts = by_part(stops)
    assert (parts["adapters"].stops, parts["adapters"].files, parts["adapters"].returns) == (
        4, 2, 2)
    assert (parts["core"].stops, parts["core"].files, parts["core"].returns) == (3, 2, 1)
    assert parts["adapters"].returns + parts["core"].returns == count(stops).returns


@pytest.mark.parametrize("which", WALKS)
def test_each_walk_stays_within_its_bound(which: str) -> None:
    stops = walk(which)
    got, adapters = count(stops), by_part(stops)["adapters"]
    files, returns = BOUNDS[which]
    listing = "\n".join(f"{s.file}:{s.function}" for s in stops)
    assert got.files <= files and got.returns <= returns, f"{which}: {got}\n{listing}"
    files, returns = ADAPTER_BOUNDS[which]
    assert adapters.files <= files and adapters.returns <= returns, (
        f"{which}, the adapters' share: {adapters}\n{listing}")


@pytest.mark.parametrize("which", ["bind", "bind-held"])
def test_the_bind_walk_follows_the_pod_from_the_route_to_its_binding_and_back(
        which: str) -> None:
    stops = [f"{s.file}:{s.function}" for s in walk(which)]
    assert stops[0].startswith("scheduler/http.py:")
    assert any(s.startswith("kube/client.py:Kube.bind") for s in stops), stops
    assert any(s.endswith("GangManager.binding_finished") for s in stops), stops
    # The adapters' side of it is the binding cycle alone, between the route and the POST.
    adapters = {s.split(":")[0] for s in stops if not s.startswith("core/")}
    assert adapters == {"scheduler/http.py", "scheduler/binding.py", "kube/client.py"}, stops


def test_following_the_pod_leaves_out_the_helpers_it_is_not_handed() -> None:
    followed, everything = count(walk("filter")), count(walk("filter", everything=True))
    assert followed.stops < everything.stops

"""An amount beyond int64 is "more than any node has", the same way everywhere: fit,
the minResources check, preemption and the messages (issue 27, hostile input)."""

from __future__ import annotations

import dataclasses
from typing import Any

from extender.core.model.config import Config
from extender.core.model.convert import node_from_k8s
from extender.core.model.convert_groups import group_from_k8s
from extender.core.model.resources import SATURATED, fits, format_resources, shortfall
from extender.core.model.vocabulary import EvictPods
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, node, pod
from tests.core.workload import Driver, Job

INT64_MAX = (1 << 63) - 1
HOSTILE = "1e30000000"


def huge_node(name: str) -> Any:
    """A node whose allocatable cpu is beyond int64, as the API would hand it over."""
    return node_from_k8s({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": HOSTILE, "memory": "64Gi", "pods": "110"}},
    })


def podgroup(name: str, min_member: int, **spec: Any) -> Any:
    return group_from_k8s({
        "metadata": {"name": name, "namespace": "ns", "uid": f"g-{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min_member, **spec},
    })


def test_a_saturated_request_fits_no_node_however_large() -> None:
    n = huge_node("n0")
    assert n.allocatable["cpu"] == INT64_MAX
    assert not fits({"cpu": SATURATED}, n.allocatable)
    assert fits({"cpu": INT64_MAX}, n.allocatable)  # the largest countable amount does


def test_a_saturated_minimum_is_short_even_of_a_total_beyond_int64() -> None:
    """Summed over nodes, free capacity may pass int64; a saturated minimum is still
    missing whole, and says so without printing its digits."""
    total = {"cpu": 2 * INT64_MAX}
    assert shortfall({"cpu": SATURATED}, total) == {"cpu": SATURATED}
    assert format_resources({"cpu": SATURATED}) == (
        "{cpu: beyond int64}")


def test_a_hostile_min_resources_gang_waits_and_the_ordinary_one_is_placed() -> None:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30)))
    for i in range(2):
        sim.add_node(huge_node(f"n{i}"))
    hostile = podgroup("hostile", 2, minResources={"cpu": HOSTILE})
    assert hostile.min_resources == {"cpu": SATURATED}
    sim.add_group(hostile)
    sim.add_group(podgroup("ordinary", 2))
    bad = [sim.add_pod(pod(f"hostile-{i}", "hostile", creation=0.0)) for i in range(2)]
    good = [sim.add_pod(pod(f"ordinary-{i}", "ordinary", creation=1.0)) for i in range(2)]
    sim.run_all()
    assert {p.name for p in sim.bound()} == {p.name for p in good}
    out = sim.manager.filter(sim.cache.pods[bad[0].uid], ["n0", "n1"], sim.now)
    assert not out.nodes
    msg = next(iter(out.unresolvable.values()))
    assert "minResources {cpu: beyond int64}" in msg and len(msg) < 400, msg
    assert "ns/hostile" not in {r.gang for r in sim.manager.reads.reservations()}


def test_a_saturated_gang_evicts_nothing_and_says_what_does_not_fit() -> None:
    """Preemption cannot make room for more than any node has: no victim is chosen."""
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30,
                                        starvation_after_seconds=None)))
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    low = Job("low", at=0, run=1000, cpu=4000, members=2, priority=1)
    high = Job("high", at=1, run=10, cpu=SATURATED, members=2, priority=10)
    driver = Driver(sim, [low, high])
    driver.run(5)
    assert driver.gang_bound_at(low) is not None
    assert driver.gang_bound_at(high) is None
    assert not [a for a in sim.actions if isinstance(a, EvictPods)]
    st = sim.status("ns/high")
    assert "{cpu: beyond int64, memory: 1Mi}" in st.message and len(st.message) < 400, st


def test_a_huge_but_countable_request_is_compared_exactly() -> None:
    """Below int64 nothing saturates: a request one millicore over a node is short by
    exactly that much."""
    n = dataclasses.replace(huge_node("n0"), allocatable={"cpu": INT64_MAX - 1})
    assert shortfall({"cpu": INT64_MAX}, n.allocatable) == {"cpu": 1}

"""The planner's FitIndex gives exactly the plans of the full scan it replaces.

A random cache is driven through node and pod changes (bindings, finished pods, holds,
released holds, relabelled and tainted nodes, removed and re-added nodes); after every
step random gangs are planned both ways and the results must be identical, assignments,
shortfall messages and all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.cache import Cache
from extender.core.cache.snapshot import Snapshot
from extender.core.cache.topology import Domains, domain_of
from extender.core.model.fit import fit_count
from extender.core.model.types import (
    GroupInfo,
    LabelSelector,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    Resources,
    Taint,
    Toleration,
)
from extender.core.planner import Plan, Shortfall, plan_gang, plan_group

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
Gi = 1 << 30
ZONES = ("a", "b")
# `DataObject.draw`: its `label` has no default, so it is not an `st.DrawFn`.
Draw = Callable[..., Any]


def _node(draw: Draw, name: str) -> NodeInfo:
    alloc: Resources = {"cpu": draw(st.sampled_from((2000, 4000, 8000))),
                        "memory": draw(st.sampled_from((4, 8, 16))) * Gi,
                        "pods": draw(st.integers(2, 12))}
    if draw(st.booleans()):
        alloc[GPU] = draw(st.integers(1, 4))
    taints = (Taint("dedicated", "x", "NoSchedule"),) if draw(st.integers(0, 3)) == 0 else ()
    return NodeInfo(name, alloc, {HOST: name, "zone": draw(st.sampled_from(ZONES))}, taints,
                    unschedulable=draw(st.integers(0, 9)) == 0)


def _pod(draw: Draw, uid: str, node: str = "") -> PodInfo:
    req: Resources = {"cpu": draw(st.integers(0, 8)) * 250,
                      "memory": draw(st.integers(0, 4)) * (Gi // 2), "pods": 1}
    if draw(st.integers(0, 3)) == 0:
        req[GPU] = draw(st.integers(1, 2))
    anti: tuple[PodAffinityTerm, ...] = ()
    if draw(st.integers(0, 3)) == 0:
        anti = (PodAffinityTerm(LabelSelector((("app", draw(st.sampled_from("xyz"))),)), HOST),)
    return PodInfo(uid, "ml", uid, req, labels={"app": draw(st.sampled_from("xyz"))},
                   node_name=node, phase="Running" if node else "Pending",
                   required_anti_affinity=anti)


def _gang(draw: Draw, tag: str) -> list[PodInfo]:
    pods: list[PodInfo] = []
    for s in range(draw(st.integers(1, 3))):
        req: Resources = {"cpu": draw(st.integers(0, 8)) * 250,
                          "memory": draw(st.integers(0, 3)) * (Gi // 2), "pods": 1}
        if draw(st.integers(0, 3)) == 0:
            req[GPU] = draw(st.integers(1, 2))
        selector = {"zone": draw(st.sampled_from(ZONES))} if draw(st.booleans()) else {}
        tol = (Toleration("dedicated", "Exists"),) if draw(st.booleans()) else ()
        anti: tuple[PodAffinityTerm, ...] = ()
        if draw(st.integers(0, 2)) == 0:
            anti = (PodAffinityTerm(LabelSelector((("app", draw(st.sampled_from("gxyz"))),)),
                                    HOST),)
        for m in range(draw(st.integers(1, 5))):
            pods.append(PodInfo(f"{tag}-{s}-{m}", "ml", f"{tag}-{s}-{m}", dict(req),
                                labels={"app": "g", "index": str(m)}, node_selector=selector,
                                tolerations=tol, required_anti_affinity=anti))
    return list(draw(st.permutations(pods)))


def _same(a: Plan | Shortfall, b: Plan | Shortfall) -> bool:
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_indexed_plans_equal_scanned_plans(data: st.DataObject) -> None:
    draw = data.draw
    cache = Cache()
    names = [f"n{i}" for i in range(draw(st.integers(1, 8)))]
    for name in names:
        cache.upsert_node(_node(draw, name))
    uid = 0
    held: list[tuple[str, PodInfo]] = []
    for step in range(draw(st.integers(2, 10))):
        op = draw(st.sampled_from(
            ("bind", "bind", "finish", "reserve", "unreserve", "node", "remove", "add")))
        live = list(cache.nodes)
        if op == "bind" and live:
            uid += 1
            cache.upsert_pod(_pod(draw, f"p{uid}", draw(st.sampled_from(live))))
        elif op == "finish":
            running = [p for p in cache.pods.values() if p.takes_capacity]
            if running:
                p = draw(st.sampled_from(running))
                cache.upsert_pod(PodInfo(p.uid, p.namespace, p.name, p.requests, p.labels,
                                         node_name=p.node_name, phase="Succeeded"))
        elif op == "reserve" and live:
            uid += 1
            slot = (draw(st.sampled_from(live)), _pod(draw, f"h{uid}"))
            cache.reserve(*slot)
            held.append(slot)
        elif op == "unreserve" and held:
            node, pod = held.pop(draw(st.integers(0, len(held) - 1)))
            cache.unreserve(node, pod, freed=draw(st.booleans()))
        elif op == "node" and live:
            cache.upsert_node(_node(draw, draw(st.sampled_from(live))))
        elif op == "remove" and live:
            cache.remove_node(draw(st.sampled_from(live)))
        elif op == "add":
            cache.upsert_node(_node(draw, draw(st.sampled_from(names))))
        for g in range(draw(st.integers(1, 3))):
            gang = _gang(draw, f"g{step}-{g}")
            need = draw(st.integers(1, len(gang)))
            indexed = plan_gang(gang, need, cache.snapshot)
            scanned = plan_gang(gang, need, cache.snapshot.with_free(cache.free))
            assert _same(indexed, scanned), (op, indexed, scanned)
            # The same gang asked to fit in one zone: the domain is chosen from the
            # index's rooms and the cache's kept grouping, or from scratch; same plan.
            group = GroupInfo("ml", f"g{step}-{g}", need, topology_required="zone")
            fresh = Snapshot(cache.nodes, dict(cache.free), cache.pods_on_node)
            indexed = plan_group(group, gang, 0, cache.snapshot)
            assert _same(indexed, plan_group(group, gang, 0, fresh)), (op, indexed)
            check_rooms(cache, gang[0])
        check_rooms(cache, PodInfo("fixed", "ml", "fixed", {"cpu": 500, "pods": 1}))
        assert cache.domains.groups(("zone",)) == Domains(cache.nodes).groups(("zone",))


def check_rooms(cache: Cache, proto: PodInfo) -> None:
    """The index's rooms per zone, kept through every change, are a fresh count's."""
    items = tuple((k, v) for k, v in proto.requests.items() if v > 0)
    plain = not proto.node_selector and proto.required_node_affinity is None
    selector = tuple(proto.node_selector.items())
    want: dict[tuple[str, ...], list[int]] = {}
    for name, node in cache.nodes.items():
        cnt = fit_count(items, cache.free.get(name), node, proto, plain, selector)
        d = domain_of(node.labels, ("zone",))
        if cnt > 0 and d is not None:
            r = want.setdefault(d, [0, 0])
            r[0] += cnt
            r[1] += 1
    of_node = cache.domains.of_node(("zone",))
    assert cache.fit_index.rooms(items, proto, plain, ("zone",), of_node) == want


def test_index_is_never_used_for_other_capacity_maps() -> None:
    cache = Cache()
    cache.upsert_node(NodeInfo("n0", {"cpu": 1000, "pods": 10}, {HOST: "n0"}))
    other = {"n0": {"cpu": 0, "pods": 10}}
    gang = [PodInfo("u", "ml", "p", {"cpu": 500, "pods": 1})]
    result = plan_gang(gang, 1, cache.snapshot.with_free(other))
    assert isinstance(result, Shortfall)  # planned against `other`, not the cache
    with pytest.raises(ValueError, match="fit index belongs"):
        Snapshot(cache.nodes, other, {}, cache.fit_index)


def test_many_changes_compact_the_log_and_plans_stay_right() -> None:
    cache = Cache()
    for i in range(4):
        cache.upsert_node(NodeInfo(f"n{i}", {"cpu": 8000, "pods": 110}, {HOST: f"n{i}"}))
    gang = [PodInfo(f"g{i}", "ml", f"g{i}", {"cpu": 1000, "pods": 1}) for i in range(3)]
    for i in range(20_000):
        pod = PodInfo(f"p{i}", "ml", f"p{i}", {"cpu": 500, "pods": 1}, node_name=f"n{i % 4}",
                      phase="Running")
        cache.upsert_pod(pod)
        cache.remove_pod(pod.uid)
        if i % 997 == 0:
            a = plan_gang(gang, 3, Snapshot(cache.nodes, cache.free, {}, cache.fit_index))
            b = plan_gang(gang, 3, Snapshot(cache.nodes, cache.free, {}))
            assert a == b


def test_a_gangs_indexes_are_built_when_its_members_arrive_not_when_it_is_planned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The view of a new request shape and a topology gang's rooms cost milliseconds at
    5,000 nodes; the watch pays for them, not the filter call that plans the gang."""
    from extender.core.cache import fitindex
    from extender.core.manager import GangManager

    builds: list[str] = []
    real = fitindex.FitIndex._build

    def counted(self: fitindex.FitIndex, view: Any) -> None:
        builds.append("view")
        real(self, view)

    monkeypatch.setattr(fitindex.FitIndex, "_build", counted)
    manager = GangManager()
    for i in range(4):
        manager.on_node(NodeInfo(f"n{i}", {"cpu": 8000, "pods": 110},
                                 {HOST: f"n{i}", "zone": ZONES[i % 2]}))
    manager.on_group(GroupInfo("ml", "g", 2, topology_required="zone"), 0.0)
    for i in range(2):
        manager.on_pod(PodInfo(f"g{i}", "ml", f"g-{i}", {"cpu": 1000, "pods": 1},
                               labels={"scheduling.x-k8s.io/pod-group": "g"},
                               scheduler_name="gang-scheduler"), 0.0)
    assert builds == ["view"]
    index = manager._core.cache.fit_index
    rooms = index._views[next(iter(index._views))].rooms
    assert set(rooms) == {("zone",)}
    res = manager.filter(manager.reads.pod("g0") or PodInfo("x", "ml", "x", {}), ["n0", "n1", "n2",
                                                                          "n3"], 0.0)
    assert res.nodes and builds == ["view"]  # planned without building anything
    # A full index is not made room for: the plan builds what it needs, as before.
    index.MAX_VIEWS = len(index._views)
    manager.on_pod(PodInfo("h0", "ml", "h-0", {"cpu": 3000, "pods": 1},
                           labels={"scheduling.x-k8s.io/pod-group": "g"}), 0.0)
    assert builds == ["view"]

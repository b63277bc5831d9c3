"""The stand-in scheduler's fit check (bench/core/simulator.py) is kept incrementally; here it
must name the same nodes as checking every node against every pod on it would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core.simulator import KubeSchedulerView
from extender.core.model.constraints import node_matches
from extender.core.model.resources import fits
from extender.core.model.types import NodeInfo, PodInfo, Resources, Taint, Toleration

GPU = "nvidia.com/gpu"


def _scan(nodes: list[NodeInfo], placed: dict[str, tuple[str, Resources]],
          pod: PodInfo) -> list[str]:
    out = []
    for n in nodes:
        used: Resources = {}
        for on, req in placed.values():
            if on == n.name:
                for k, v in req.items():
                    used[k] = used.get(k, 0) + v
        free = {k: v - used.get(k, 0) for k, v in n.allocatable.items()}
        if node_matches(pod, n) is None and fits(pod.requests, free):
            out.append(n.name)
    return out


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_feasible_nodes_equal_a_full_scan(data: st.DataObject) -> None:
    def node(i: int) -> NodeInfo:
        alloc: Resources = {"cpu": data.draw(st.integers(0, 4)) * 1000, "pods": 110}
        if data.draw(st.booleans()):
            alloc[GPU] = data.draw(st.integers(1, 4))
        taints = (Taint(GPU, "present", "NoSchedule"),) if data.draw(st.booleans()) else ()
        return NodeInfo(f"n{i}", alloc, {"zone": f"z{i % 2}"}, taints,
                        unschedulable=data.draw(st.integers(0, 5)) == 0)

    def pod(i: int) -> PodInfo:
        req: Resources = {"cpu": data.draw(st.integers(0, 3)) * 500, "pods": 1}
        if data.draw(st.booleans()):
            req[GPU] = data.draw(st.integers(1, 2))
        tol = (Toleration(GPU, "Exists"),) if data.draw(st.booleans()) else ()
        sel = {"zone": "z0"} if data.draw(st.integers(0, 3)) == 0 else {}
        return PodInfo(f"u{i}", "ns", f"p{i}", req, tolerations=tol, node_selector=sel)

    nodes = [node(i) for i in range(data.draw(st.integers(1, 6)))]
    view = KubeSchedulerView(nodes)
    placed: dict[str, tuple[str, Resources]] = {}
    names = [n.name for n in nodes] + ["gone"]  # a pod may be bound to an unlisted node
    for i in range(data.draw(st.integers(1, 40))):
        step = data.draw(st.sampled_from(["place", "place", "remove", "nodes", "ask"]))
        if step == "place":
            p, on = pod(i), data.draw(st.sampled_from(names))
            view.charge(on, p.requests)
            placed[p.uid] = (on, p.requests)
        elif step == "remove" and placed:
            uid = data.draw(st.sampled_from(sorted(placed)))
            on, req = placed.pop(uid)
            view.credit(on, req)
        elif step == "nodes":  # one node changes or goes, or the order changes
            nodes = data.draw(st.permutations(nodes))
            if data.draw(st.booleans()):
                nodes[0] = node(int(nodes[0].name[1:]))
            if len(nodes) > 1 and data.draw(st.booleans()):
                nodes.pop()
            view.set_nodes(nodes)
        p = pod(1000 + i)
        assert view.feasible(view.shape_of(p)) == _scan(nodes, placed, p)

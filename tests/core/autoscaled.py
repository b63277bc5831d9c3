"""A gang manager on an autoscaled node pool, the cluster autoscaler played by the test
(`tests/core/test_provisioning*.py`): the manager and its nodes, the gangs short of
capacity that ask for a ProvisioningRequest, the autoscaler's answers, and the request
objects as the watch delivers them. Shared so that each test says only what differs."""

from __future__ import annotations

from typing import Any

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.provisioning_request import ATOMIC_CLASS, RequestInfo
from extender.core.model.types import PodInfo
from extender.core.model.vocabulary import CreateRequest
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod


def sim_with(nodes: int = 2, served: bool = True, **kw: Any) -> SimScheduler:
    """`nodes` nodes of 4 CPUs; the request API served unless `served` is False; `kw`
    overrides the Config fields."""
    # The bind barrier, as these tests were written for: a reservation whose binds wait
    # (`sim.schedule`) is what several of them are about; whatever the default.
    cfg: dict[str, Any] = {"default_timeout_seconds": 30, "starvation_after_seconds": None,
                           "preemption": False, "backoff": BackoffPolicy(10.0, 60.0),
                           "direct_commit": False}
    cfg.update(kw)
    sim = SimScheduler(Core.wire(Config(**cfg)))
    sim.manager.provisioning_served(served)
    for i in range(nodes):
        sim.add_node(node(f"n{i}", cpu=4000))
    return sim


def gang(sim: SimScheduler, name: str = "g", size: int = 4, **kw: Any) -> list[PodInfo]:
    """A PodGroup of `size` members of 3 CPUs each: one member a node."""
    sim.add_group(group(name, size))
    return [sim.add_pod(pod(f"{name}-{i}", name, cpu=3000, **kw)) for i in range(size)]


def shapes(sim: SimScheduler, members: int = 35) -> list[PodInfo]:
    """Gang "g" whose `members` all differ in shape (3 CPUs and i millicores): with the
    two nodes of `sim_with`, two fit and the rest need a pod set each."""
    sim.add_group(group("g", members))
    return [sim.add_pod(pod(f"g-{i}", "g", cpu=3000 + i)) for i in range(members)]


def settle(sim: SimScheduler) -> None:
    sim.run_all()
    sim.tick(0.1)
    sim.run_all()
    sim.tick(0.1)


def settled(nodes: int = 2, served: bool = True, **kw: Any) -> SimScheduler:
    """`sim_with` and one `gang` of four, settled: with the two nodes of the default, a
    gang short of two nodes."""
    sim = sim_with(nodes, served, **kw)
    gang(sim)
    settle(sim)
    return sim


def of(sim: SimScheduler, kind: type) -> list[Any]:
    return [a for a in sim.actions if isinstance(a, kind)]


def asked(nodes: int = 2, **kw: Any) -> tuple[SimScheduler, CreateRequest]:
    """`settled`, and the one request its gang asked for (more than one fails here)."""
    sim = settled(nodes, **kw)
    [create] = of(sim, CreateRequest)
    return sim, create


def answer(sim: SimScheduler, create: CreateRequest, state: str, uid: str = "r1",
           message: str = "") -> RequestInfo:
    """The autoscaler's answer: the request as the watch shows it, in `state`."""
    req = RequestInfo(create.group.namespace, create.name, uid, create.gang, create.class_name,
                      sim.now, state, sim.now, message,
                      tuple(f"{create.name}-{i}" for i in range(len(create.pod_sets))))
    sim.manager.on_provisioning_request(req, sim.now)
    sim.drain()
    return req


def request_json(conditions: list[dict[str, str]]) -> dict[str, Any]:
    """Gang ns/g's request for four pods as the API serves it, with `conditions`."""
    return {"metadata": {"name": "g-capacity", "namespace": "ns", "uid": "u",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"gang-extender.x-k8s.io/gang": "ns/g"}},
            "spec": {"provisioningClassName": ATOMIC_CLASS,
                     "podSets": [{"podTemplateRef": {"name": "g-capacity-0"}, "count": 4}]},
            "status": {"conditions": conditions}}


def condition(type_: str, status: str = "True", at: str = "2026-01-01T00:01:00Z"
              ) -> dict[str, str]:
    return {"type": type_, "status": status, "lastTransitionTime": at, "message": type_}

"""Property tests of the gang manager's invariants under random clusters and event orders.

* never a partial bind: before a gang's quorum is first bound, 0 < bound < minMember
  is never observed;
* never an over-committed node: bound pods plus held slots fit every node;
* gang order: a reservation is never granted to a gang while an older eligible gang
  would have fitted into the capacity it took; and after a tick no eligible gang that
  fits is left without a reservation (capacity is not left idle), pending members moved
  from gang to gang by a relabel included.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.order import queue_sort_key
from extender.core.model.types import GROUP_LABEL, GroupInfo, PodInfo
from extender.core.planner import Plan, plan_gang
from extender.core.wiring import Core
from tests.core.sim import SimScheduler, group, node, pod

CPUS = (500, 1000, 2000, 4000)


def eligible(sim: SimScheduler) -> list[tuple[GroupInfo, list[PodInfo]]]:
    cache = sim.cache
    out = []
    for key, g in cache.groups.items():
        bo = sim.core.backoffs.get(key)
        if key in sim.core.ledger.reservations or (
                bo is not None and (bo.failed or bo.until > sim.now)):
            continue
        members = cache.members(g)
        done = cache.succeeded(g)  # succeeded members keep counting toward the quorum
        bound = sum(1 for m in members if m.node_name) + done
        if len(members) + done >= g.min_member and bound < g.min_member:
            out.append((g, members))
    out.sort(key=lambda x: queue_sort_key(x[0], x[1]))
    return out


def fits_now(sim: SimScheduler, g: GroupInfo, members: list[PodInfo],
             extra: dict[str, dict[str, int]] | None = None) -> bool:
    cache = sim.cache
    free = {n: dict(r) for n, r in cache.free.items()}
    for n, add in (extra or {}).items():
        for k, v in add.items():
            free[n][k] = free[n].get(k, 0) + v
    unbound = [m for m in members if not m.node_name]
    need = g.min_member - (len(members) - len(unbound)) - cache.succeeded(g)
    return isinstance(plan_gang(unbound, need, cache.snapshot.with_free(free)), Plan)


def check_invariants(sim: SimScheduler, quorum_reached: set[str],
                     before: set[str], order_before: list[tuple[GroupInfo, list[PodInfo]]]) -> None:
    cache, reservations = sim.cache, sim.core.ledger.reservations
    # No over-commit: bound pods and held slots fit every node.
    for name, n in cache.nodes.items():
        used: dict[str, int] = {}
        for p in cache.pods.values():
            if p.takes_capacity and p.node_name == name:
                for k, v in p.requests.items():
                    used[k] = used.get(k, 0) + v
        for r in reservations.values():
            if r.held:
                continue  # charged ahead of capacity by design, never bound as such
            for s in r.slots.values():
                if s.node == name:
                    for k, v in s.pod.requests.items():
                        used[k] = used.get(k, 0) + v
        for k, v in used.items():
            assert v <= n.allocatable.get(k, 0), f"node {name} over-committed on {k}"
    # Never a partial bind.
    for key, g in cache.groups.items():
        bound = sum(1 for p in cache.group_pods(g.namespace, g.name) if p.node_name)
        if bound >= g.min_member:
            quorum_reached.add(key)
        if key not in quorum_reached:
            assert bound == 0, f"gang {key}: {bound} of {g.min_member} bound before quorum"
    # Gang order: a gang granted capacity in this step must not have taken capacity an
    # older eligible gang fits into.
    new = [k for k in reservations if k not in before]
    for key in new:
        res = reservations[key]
        taken: dict[str, dict[str, int]] = {}
        for s in res.slots.values():
            acc = taken.setdefault(s.node, {})
            for k, v in s.pod.requests.items():
                acc[k] = acc.get(k, 0) + v
        g_new = cache.groups[key]
        new_rank = queue_sort_key(g_new, cache.members(g_new))
        for g, members in eligible(sim):
            if queue_sort_key(g, members) < new_rank and any(
                og.key == g.key for og, _ in order_before
            ):
                assert not fits_now(sim, g, members, taken), (
                    f"younger gang {key} took capacity older gang {g.key} fits into"
                )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[tuple[int, int, list[int]]],
                                        list[tuple[str, int]]]:
    nodes = draw(st.lists(st.tuples(st.sampled_from((2000, 4000, 8000)),
                                    st.integers(0, 4)), min_size=1, max_size=5))
    gangs = []
    for _ in range(draw(st.integers(1, 4))):
        min_member = draw(st.integers(1, 4))
        size = min_member + draw(st.integers(0, 2))
        cpus = [draw(st.sampled_from(CPUS)) for _ in range(size)]
        gangs.append((min_member, draw(st.integers(0, 3)), cpus))
    ops = draw(st.lists(st.tuples(st.sampled_from(("sched", "sched", "sched", "finish",
                                                   "delete", "tick", "plain", "relabel")),
                                  st.integers(0, 40)), max_size=60))
    return nodes, gangs, ops


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_under_random_event_orders(
    scenario: tuple[list[tuple[int, int]], list[tuple[int, int, list[int]]], list[tuple[str, int]]],
) -> None:
    node_specs, gangs, ops = scenario
    sim = SimScheduler(Core.wire(Config(20, BackoffPolicy(3, 12))))
    for i, (cpu, gpu) in enumerate(node_specs):
        sim.add_node(node(f"n{i}", cpu=cpu, gpu=gpu))
    for gi, (min_member, age, cpus) in enumerate(gangs):
        sim.add_group(group(f"g{gi}", min_member, creation=float(age)))
        for pi, cpu in enumerate(cpus):
            sim.add_pod(pod(f"g{gi}-{pi}", f"g{gi}", cpu=cpu, memory=1 << 20))
    quorum_reached: set[str] = set()
    plain = 0
    for op, arg in ops:
        before = set(sim.core.ledger.reservations)
        order_before = eligible(sim)
        uids = sorted(sim.cache.pods)
        if op == "sched" and uids:
            uid = uids[arg % len(uids)]
            if uid not in sim.held:
                sim.schedule(uid)
        elif op == "finish" and uids:
            bound = [u for u in uids if sim.cache.pods[u].node_name
                     and not sim.cache.pods[u].terminal]
            if bound:
                sim.finish(bound[arg % len(bound)])
        elif op == "delete" and uids:
            sim.delete(uids[arg % len(uids)])
        elif op == "tick":
            sim.tick(float(arg % 15))
            # Work conservation: after a tick no eligible gang that fits is left waiting.
            for g, members in eligible(sim):
                assert not fits_now(sim, g, members), f"gang {g.key} fits but waits"
        elif op == "plain":
            plain += 1
            p = sim.add_pod(pod(f"plain-{plain}", None, cpu=CPUS[arg % len(CPUS)], memory=1))
            sim.schedule(p.uid)
        elif op == "relabel":
            # A pending member moved to another gang, nothing else of it changed.
            pending = [u for u in uids if sim.cache.pods[u].gang is not None
                       and not sim.cache.pods[u].node_name]
            if pending:
                moved = sim.cache.pods[pending[arg % len(pending)]]
                to = f"g{(arg // len(pending)) % len(gangs)}"
                sim.manager.on_pod(dataclasses.replace(moved, labels={GROUP_LABEL: to}),
                                   sim.now)
                sim.drain()
        check_invariants(sim, quorum_reached, before, order_before)

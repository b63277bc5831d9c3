"""Shared nodes on plain data: pods bound by others never over-commit a node through a
gang commit, and never leave a gang partly bound (architecture.md §11).

Two mechanisms, each tested on its own: a slot on a node that is lost (a foreign pod,
a cordon, a taint, a deletion, a smaller allocatable) is re-planned the moment the
watch says so (`core/ledger/`: `Reservations.repair`), and the commit checks every waiting
member's node once more before it lets anyone through (`Ledger.commit`).
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.model.types import PodInfo, Taint
from extender.core.model.vocabulary import BindOutcome, BindPod, Transition
from tests.core.sim import SimScheduler, group, node, pod


def cluster(n: int = 4, cpu: int = 4000) -> SimScheduler:
    """Nodes of 4 cpu: one 3-cpu member each, and one spare for a moved slot."""
    sim = SimScheduler()
    for i in range(n):
        sim.add_node(node(f"n{i}", cpu=cpu))
    return sim


def slot_node(sim: SimScheduler, gang: str, p: PodInfo) -> str:
    return sim.core.ledger.reservations[gang].slots[p.uid].node


def test_the_issue_case_a_foreign_pod_fills_a_node_where_a_bind_waits() -> None:
    """Two members of a 3-member gang wait on reserved nodes; a pod created with
    spec.nodeName takes all of one of those nodes' CPU; the third member arrives. The
    member on the lost node is moved (its bind fails with the reason), the gang is
    committed only once all three fit, and no node is over-committed."""
    sim = cluster()
    sim.add_group(group("g", 3))
    a, b, _ = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(3))
    assert sim.schedule(a.uid) == "held"
    assert sim.schedule(b.uid) == "held"
    lost = slot_node(sim, "ns/g", a)
    sim.bind_foreign(pod("intruder", cpu=4000), lost)
    assert lost not in {s.node for s in sim.core.ledger.reservations["ns/g"].slots.values()}
    assert a.uid not in sim.core.ledger.binds.waiting
    rejected = dict(sim.failed_binds)[a.uid]
    assert f"node {lost} is short of {{cpu: 3}}" in rejected, rejected
    assert "pod ns/g-0 is not bound there" in rejected, rejected
    assert not sim.bound("g")
    # The member kube-scheduler retries goes to its new slot; then the whole gang binds.
    sim.run_all()
    assert len(sim.bound("g")) == 3
    assert lost not in {p.node_name for p in sim.bound("g")}
    assert sim.overcommits == []


def test_a_foreign_pod_on_a_reserved_node_moves_the_slot_at_once() -> None:
    """No bind waits yet: the slot moves when the watch says so, not at the member's next
    filter call, and free capacity is never driven below zero by a reservation."""
    sim = cluster()
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(2))
    sim.manager.filter(a, ["n0", "n1", "n2", "n3"], sim.now)  # reserves both slots
    before = slot_node(sim, "ns/g", b)
    sim.bind_foreign(pod("intruder", cpu=2000), before)
    after = slot_node(sim, "ns/g", b)
    assert after != before
    assert sim.cache.free[before]["cpu"] == 2000  # 4 cpu less the intruder, no slot left
    assert all(v >= 0 for f in sim.cache.free.values() for v in f.values())


def test_slots_move_only_as_far_as_the_shortfall() -> None:
    """Two slots on a node, a foreign pod squeezes out one: the other stays."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=4000))
    sim.add_node(node("n1", cpu=2000))
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=2000)) for i in range(2))
    sim.manager.filter(a, ["n0"], sim.now)  # both on n0 (the only feasible node for a)
    assert {slot_node(sim, "ns/g", a), slot_node(sim, "ns/g", b)} == {"n0"}
    sim.bind_foreign(pod("intruder", cpu=1000), "n0")
    assert sorted([slot_node(sim, "ns/g", a), slot_node(sim, "ns/g", b)]) == ["n0", "n1"]


def test_cordon_taint_shrink_and_delete_each_move_the_slot_at_once() -> None:
    changes = {
        "cordon": lambda n: dataclasses.replace(n, unschedulable=True),
        "NoSchedule": lambda n: dataclasses.replace(n, taints=(Taint("k", "v", "NoSchedule"),)),
        "NoExecute": lambda n: dataclasses.replace(n, taints=(Taint("k", "v", "NoExecute"),)),
        "shrink": lambda n: dataclasses.replace(n, allocatable={**n.allocatable, "cpu": 1000}),
    }
    for what, change in [*changes.items(), ("delete", None)]:
        sim = cluster()
        sim.add_group(group("g", 2))
        a, _ = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(2))
        assert sim.schedule(a.uid) == "held"
        lost = slot_node(sim, "ns/g", a)
        if change is None:
            sim.manager.on_node_deleted(lost)
        else:
            sim.manager.on_node(change(sim.cache.nodes[lost]))
        sim.drain()
        assert slot_node(sim, "ns/g", a) != lost, what
        assert a.uid in dict(sim.failed_binds), what  # its waiting bind was rejected
        sim.run_all()
        assert len(sim.bound("g")) == 2, what
        assert lost not in {p.node_name for p in sim.bound("g")}, what


def test_no_room_elsewhere_drops_the_slot_and_the_gang_does_not_commit() -> None:
    sim = SimScheduler()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu=4000))
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(2))
    assert sim.schedule(a.uid) == "held"
    lost = slot_node(sim, "ns/g", a)
    other = "n1" if lost == "n0" else "n0"
    sim.bind_foreign(pod("intruder", cpu=4000), lost)
    assert a.uid not in sim.core.ledger.reservations["ns/g"].slots
    assert "no other node has {cpu: 3" in dict(sim.failed_binds)[a.uid]
    assert sim.schedule(b.uid) == "held"  # b still fits on its own slot
    assert slot_node(sim, "ns/g", b) == other
    sim.run_all()  # a is turned away: nowhere to go, and b's bind keeps waiting
    assert not sim.bound("g") and sim.overcommits == []
    sim.tick(31)  # the deadline releases it whole
    assert not sim.core.ledger.reservations and not sim.bound("g")


def test_the_commit_checks_the_nodes_itself() -> None:
    """If the cache learns of a foreign pod without the watch path (a state the repair
    has not seen), the commit still refuses the member on the lost node."""
    sim = cluster()
    sim.add_group(group("g", 3))
    a, b, c = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(3))
    assert sim.schedule(a.uid) == "held"
    assert sim.schedule(b.uid) == "held"
    lost = slot_node(sim, "ns/g", a)
    # Straight into the cache: the repair hook in GangManager.on_pod does not run.
    sim.cache.upsert_pod(dataclasses.replace(pod("intruder", cpu=4000), node_name=lost,
                                             phase="Running"))
    assert sim.schedule(c.uid) == "held"  # the quorum is assembled: the commit checks
    assert not [x for x in sim.actions if isinstance(x, BindPod)]
    assert a.uid in dict(sim.failed_binds)
    assert slot_node(sim, "ns/g", a) != lost
    sim.run_all()
    assert len(sim.bound("g")) == 3 and sim.overcommits == []
    assert sum(isinstance(x, Transition) and x.reason == "Bound" for x in sim.actions) == 1


@st.composite
def shared_scenarios(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, list[int]]],
                                                list[tuple[str, int, int]]]:
    nodes = draw(st.lists(st.sampled_from((2000, 4000, 8000)), min_size=2, max_size=5))
    gangs = []
    for _ in range(draw(st.integers(1, 3))):
        min_member = draw(st.integers(1, 4))
        cpus = [draw(st.sampled_from((500, 1000, 2000, 3000)))
                for _ in range(min_member + draw(st.integers(0, 1)))]
        gangs.append((min_member, cpus))
    ops = draw(st.lists(st.tuples(
        st.sampled_from(("sched", "sched", "sched", "foreign", "foreign", "gone", "finish",
                         "tick", "cordon")),
        st.integers(0, 40), st.sampled_from((500, 1000, 2000, 4000, 8000))), max_size=60))
    return nodes, gangs, ops


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_scenarios())
def test_foreign_binds_never_make_a_commit_over_commit_or_a_gang_partial(
    scenario: tuple[list[int], list[tuple[int, list[int]]], list[tuple[str, int, int]]],
) -> None:
    """Random pods bound by others (some over-committing a node all by themselves, as a
    spec.nodeName pod can), cordons and finishing foreign pods, interleaved with gang
    scheduling: no Binding of the extender leaves its node over-committed on what the
    pod requests, and no gang is ever bound short of its quorum."""
    node_cpus, gangs, ops = scenario
    sim = SimScheduler()
    for i, cpu in enumerate(node_cpus):
        sim.add_node(node(f"n{i}", cpu=cpu))
    for gi, (min_member, cpus) in enumerate(gangs):
        sim.add_group(group(f"g{gi}", min_member))
        for pi, cpu in enumerate(cpus):
            sim.add_pod(pod(f"g{gi}-{pi}", f"g{gi}", cpu=cpu, memory=1 << 20))
    names = [f"n{i}" for i in range(len(node_cpus))]
    foreign: list[str] = []
    quorum_reached: set[str] = set()
    for op, arg, cpu in ops:
        uids = sorted(u for u, p in sim.cache.pods.items() if p.gang is not None)
        if op == "sched" and uids:
            uid = uids[arg % len(uids)]
            if uid not in sim.held:
                sim.schedule(uid)
        elif op == "foreign":
            p = sim.bind_foreign(pod(f"f-{len(foreign)}", cpu=cpu, memory=1),
                                 names[arg % len(names)])
            foreign.append(p.uid)
        elif op == "gone" and foreign:
            sim.delete(foreign.pop(arg % len(foreign)))
        elif op == "finish" and uids:
            bound = [u for u in uids if sim.cache.pods[u].node_name
                     and not sim.cache.pods[u].terminal]
            if bound:
                sim.finish(bound[arg % len(bound)])
        elif op == "tick":
            sim.tick(float(arg % 15))
        elif op == "cordon":
            n = sim.cache.nodes[names[arg % len(names)]]
            sim.manager.on_node(dataclasses.replace(n, unschedulable=not n.unschedulable))
            sim.drain()
        assert sim.overcommits == [], sim.overcommits
        for key, g in sim.cache.groups.items():
            bound_now = sum(1 for p in sim.cache.group_pods(g.namespace, g.name) if p.node_name)
            if bound_now >= g.min_member:
                quorum_reached.add(key)
            if key not in quorum_reached:
                assert bound_now == 0, f"gang {key}: {bound_now} of {g.min_member} bound"


def test_a_bound_pod_seen_before_its_binding_reply_is_not_counted_twice() -> None:
    """The watch delivers a plain pod bound before its Binding's reply is handled: it is
    charged once, so the node does not look over-committed, and the slot reserved next
    to it stays where it is."""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=8000))
    sim.add_node(node("n1", cpu=8000))
    sim.add_group(group("g", 2))
    a, _ = (sim.add_pod(pod(f"g-{i}", "g", cpu=2000)) for i in range(2))
    sim.manager.filter(a, ["n0"], sim.now)  # a's slot on n0
    slots_before = {u: s.node for u, s in sim.core.ledger.reservations["ns/g"].slots.items()}
    rest = sim.cache.free["n0"]["cpu"]
    plain = sim.add_pod(pod("plain", cpu=rest))  # exactly what n0 has left
    assert sim.manager.bind("ns", "plain", plain.uid, "n0", sim.now).outcome.value == "wait"
    assert sim.cache.free["n0"]["cpu"] == 0  # assumed
    sim.manager.on_pod(dataclasses.replace(plain, node_name="n0", phase="Running"),
                       sim.now)  # the watch first
    assert sim.cache.free["n0"]["cpu"] == 0
    sim.manager.binding_finished(plain.uid, "n0", None, sim.now)  # then the reply
    assert sim.cache.free["n0"]["cpu"] == 0
    res = sim.core.ledger.reservations["ns/g"]
    assert {u: s.node for u, s in res.slots.items()} == slots_before


def test_a_slot_whose_binding_is_in_flight_is_not_the_one_moved() -> None:
    """Gang x's member is committed to n0 (its Binding in flight), gang y's member waits
    on n0 too, and a spec.nodeName pod takes what n0 had left for both. The in-flight
    pod lands on n0 whatever the book says, so the member that gives way is y's: its
    waiting bind is rejected and its slot moves, and y's commit never binds onto n0.
    (Moving x's slot instead hid x's charge on n0: n0 looked fitting, y's commit bound
    its member there, and n0 ended with 6 cpu on 4.)"""
    sim = SimScheduler()
    sim.add_node(node("n0", cpu=4000))
    sim.add_group(group("x", 1))
    x0 = sim.add_pod(pod("x-0", "x", cpu=2000))
    assert sim.manager.filter(x0, ["n0"], sim.now).nodes == ["n0"]
    sim.manager.bind("ns", "x-0", x0.uid, "n0", sim.now)
    flying = [a for a in sim.manager.take_actions() if isinstance(a, BindPod)]
    assert [(a.pod.uid, a.node) for a in flying] == [(x0.uid, "n0")]  # not answered yet
    for n in ("n1", "n2"):
        sim.add_node(node(n, cpu=4000))
    sim.add_group(group("y", 2))
    y0, _ = (sim.add_pod(pod(f"y-{i}", "y", cpu=2000)) for i in range(2))
    assert sim.schedule(y0.uid) == "held"
    assert slot_node(sim, "ns/y", y0) == "n0"  # beside x's member, the best fit
    sim.bind_foreign(pod("intruder", cpu=2000), "n0")
    assert slot_node(sim, "ns/x", x0) == "n0"
    assert slot_node(sim, "ns/y", y0) != "n0"
    assert "node n0 is short of {cpu: 2}" in dict(sim.failed_binds)[y0.uid]
    sim.run_all()  # y's members bind, y-0 on its new slot
    for a in flying:  # x's Binding lands where it was sent
        sim._do_bind(a.pod.uid, a.node)
    assert len(sim.bound("y")) == 2 and "n0" not in {p.node_name for p in sim.bound("y")}
    assert sim.overcommits == []
    assert sim.cache.free["n0"]["cpu"] == 0


def _over_committed(sim: SimScheduler) -> list[str]:
    """Nodes whose bound pods request more cpu than they have, as the cache now knows."""
    used: dict[str, int] = {}
    for p in sim.cache.pods.values():
        if p.takes_capacity:
            used[p.node_name] = used.get(p.node_name, 0) + p.requests.get("cpu", 0)
    return sorted(n for n, cpu in used.items()
                  if cpu > sim.cache.nodes[n].allocatable["cpu"])


def test_no_commit_while_the_pod_watch_is_broken() -> None:
    """kube-apiserver restarts: the pod watch breaks, and a spec.nodeName pod is created
    on a member's reserved node before the extender lists pods again. The commit's check
    of each member's node reads the cache, which cannot know that pod yet, so the gang
    must not commit until the list is in: then the member on the lost node is moved, and
    the gang binds whole on nodes that fit. (Committed at once, it bound a-member onto
    the node the intruder had filled: found by the chaos soak, seed 9.)"""
    sim = cluster()
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(2))
    assert sim.schedule(a.uid) == "held"
    lost = slot_node(sim, "ns/g", a)
    sim.manager.watch_broken("pods")
    intruder = dataclasses.replace(pod("intruder", cpu=4000), node_name=lost,
                                   phase="Running", scheduler_name="default-scheduler")
    assert sim.schedule(b.uid) == "held"  # the quorum is ready: the commit waits
    assert not [x for x in sim.actions if isinstance(x, BindPod)]
    sim.manager.on_pod(intruder, sim.now)  # the list after the restart brings it
    sim.drain()
    assert slot_node(sim, "ns/g", a) != lost and a.uid in dict(sim.failed_binds)
    sim.manager.watch_listed("pods", sim.now)
    sim.drain()
    sim.run_all()  # a, retried, goes to its new slot: the gang commits
    assert len(sim.bound("g")) == 2
    assert lost not in {p.node_name for p in sim.bound("g")}
    assert _over_committed(sim) == []


def test_commits_held_while_a_watch_was_broken_are_made_once_every_list_is_in() -> None:
    """Both members wait; the node watch is broken too: listing pods alone is not
    enough, and once nodes are listed the held commit goes ahead without any new call."""
    sim = cluster()
    sim.add_group(group("g", 2))
    a, b = (sim.add_pod(pod(f"g-{i}", "g", cpu=3000)) for i in range(2))
    assert sim.schedule(a.uid) == "held"
    sim.manager.watch_broken("pods")
    sim.manager.watch_broken("nodes")
    assert sim.schedule(b.uid) == "held"
    sim.manager.watch_listed("pods", sim.now)
    sim.drain()
    assert not sim.bound("g")
    sim.manager.watch_listed("groups", sim.now)  # a kind that was not behind: no change
    sim.drain()
    assert not sim.bound("g")
    sim.manager.watch_listed("nodes", sim.now)
    sim.drain()
    assert len(sim.bound("g")) == 2 and sim.overcommits == []


def test_an_extra_is_not_bound_onto_a_node_kube_scheduler_has_not_seen_filled() -> None:
    """An elastic gang's quorum is bound, no reservation is left anywhere, and a
    spec.nodeName pod fills n0. kube-scheduler's view lags (its watch is re-listing
    after a kube-apiserver restart) and sends two extras to n0: the extender's cache
    knows the node is full and refuses them, naming the node, what is free and what
    the pod needs; kube-scheduler retries them elsewhere. (Found by the chaos soak,
    seed 9: two extras bound onto a node a spec.nodeName pod had filled 1.3 s before.)"""
    sim = SimScheduler()
    for n in ("n0", "n1"):
        sim.add_node(node(n, cpu=8000))
    sim.add_group(group("g", 1))
    first, *extras = (sim.add_pod(pod(f"g-{i}", "g", cpu=2000)) for i in range(3))
    assert sim.schedule(first.uid) == "bound"
    assert not sim.core.ledger.reservations
    full = "n1" if sim.cache.pods[first.uid].node_name == "n0" else "n0"
    sim.bind_foreign(pod("nb", cpu=6500), full)
    for p in extras:  # what a kube-scheduler that has not seen "nb" would ask
        d = sim.manager.bind("ns", p.name, p.uid, full, sim.now)
        assert d.outcome is BindOutcome.ERROR, d
        assert (f"gang ns/g: node {full} has {{cpu: 1500m, memory: 31Gi}} free and "
                f"pod {p.key} needs {{cpu: 2, memory: 1Gi}}") in d.message, d.message
    sim.drain()
    assert not [a for a in sim.actions if isinstance(a, BindPod) and a.node == full]
    sim.run_all()  # a kube-scheduler that has caught up places them where they fit
    assert len(sim.bound("g")) == 3 and sim.overcommits == []
    assert _over_committed(sim) == []


def test_no_plain_pod_or_extra_is_bound_while_the_pod_watch_is_broken() -> None:
    sim = cluster()
    sim.add_group(group("g", 1))
    first, extra = (sim.add_pod(pod(f"g-{i}", "g", cpu=1000)) for i in range(2))
    plain = sim.add_pod(pod("plain", cpu=1000))
    assert sim.schedule(first.uid) == "bound"
    sim.manager.watch_broken("pods")
    for p in (extra, plain):
        d = sim.manager.bind("ns", p.name, p.uid, "n3", sim.now)
        assert d.outcome is BindOutcome.ERROR
        assert (f"pod {p.key} is not bound to node n3 yet: gang-extender is listing pods "
                f"and nodes again after its watch broke") in d.message, d.message
    sim.manager.watch_listed("pods", sim.now)
    sim.run_all()
    assert extra.uid in {p.uid for p in sim.bound("g")} and sim.cache.pods[plain.uid].node_name

"""The direct commit (architecture.md §7): once a gang's members all exist and it is
reserved, the extender binds them itself, all at once, without waiting for a bind
request (a kube-scheduler cycle) of each; members kube-scheduler's own plugins must
place (claim volumes, resource claims, host ports) still wait at the barrier, and the
rest of their gang commits with them. A bind or filter call for a member being committed
is answered from that commit."""

from __future__ import annotations

import dataclasses

from extender.core.ledger import FRESH_LIMIT_SECONDS, FRESH_MARGIN_SECONDS
from extender.core.model.config import Config
from extender.core.model.constraints import HOSTNAME
from extender.core.model.types import LabelSelector, PodAffinityTerm, PodInfo, SpreadConstraint
from extender.core.model.vocabulary import BindOutcome, EvictPods, WakePods
from extender.core.wiring import Core
from tests.core.ledger.direct_commit_sim import binds, direct_sim, run_pass, taken
from tests.core.sim import SimScheduler, group, node, pod

ZONE = "topology.kubernetes.io/zone"


def cluster(sim: SimScheduler, nodes: int = 4, members: int = 3,
            min_member: int | None = None, **kw: object) -> list[PodInfo]:
    for i in range(nodes):
        sim.add_node(node(f"n{i}"))
    sim.add_group(group("g", min_member or members))
    return [pod(f"g-{i}", "g", **kw) for i in range(members)]  # type: ignore[arg-type]


def arrived(sim: SimScheduler, nodes: int = 4, members: int = 3,
            min_member: int | None = None, **kw: object) -> list[PodInfo]:
    """`cluster` with every member created."""
    pods = cluster(sim, nodes, members, min_member, **kw)
    for p in pods:
        sim.add_pod(p)
    return pods


def committed(nodes: int = 4, members: int = 3, **kw: object
              ) -> tuple[SimScheduler, list[PodInfo], dict[str, str]]:
    """A complete gang the first pass reserved and committed: its Bindings in flight
    (pod uid -> node), none answered yet."""
    sim = direct_sim()
    pods = arrived(sim, nodes, members, None, **kw)
    run_pass(sim)
    return sim, pods, binds(taken(sim))


def test_a_complete_reserved_gang_is_bound_without_a_bind_request_of_any_member() -> None:
    sim = direct_sim()
    pods = cluster(sim)
    for p in pods[:2]:
        sim.add_pod(p)
    run_pass(sim)
    assert not binds(taken(sim))  # two of three: not reserved, nothing bound
    sim.add_pod(pods[2])
    assert not binds(taken(sim))  # all exist, not yet planned: the pass decides
    run_pass(sim)
    out = taken(sim)
    assert set(binds(out)) == {p.uid for p in pods}  # one batch, all three in flight
    assert not sim.held  # no member asked to be bound
    res = sim.manager.reads.reservations()[0]
    assert {s.pod.uid: s.node for s in res.slots} == binds(out)  # the reserved nodes
    for uid, n in binds(out).items():
        sim.manager.binding_finished(uid, n, None, sim.now)
    sim.drain()
    assert len(sim.bound("g")) == 3 and not sim.manager.reads.reservations()


def test_the_first_members_filter_call_commits_the_whole_gang_and_gets_its_node() -> None:
    sim = direct_sim()
    pods = arrived(sim)
    first = pods[0]
    result = sim.manager.filter(first, sim.feasible(first), sim.now)
    out = binds(taken(sim))
    assert set(out) == {p.uid for p in pods}
    assert result.nodes == [out[first.uid]]


def test_off_every_member_waits_at_the_barrier_as_before() -> None:
    sim = SimScheduler(Core.wire(Config(default_timeout_seconds=30, direct_commit=False)))
    arrived(sim)
    run_pass(sim)
    assert sim.manager.reads.reservations() and not binds(taken(sim))


def test_members_with_volumes_or_claims_wait_at_the_barrier_and_the_rest_commit_with_them(
) -> None:
    sim = direct_sim()
    pods = cluster(sim)
    pods[1] = dataclasses.replace(pods[1], binds_via_scheduler=True)  # a PVC, a claim
    for p in pods:
        sim.add_pod(p)
    run_pass(sim)
    assert sim.manager.reads.reservations() and not binds(taken(sim))  # waits for pods[1]
    # kube-scheduler's cycle for the PVC member: filter, then bind, which commits all.
    target = sim.manager.filter(pods[1], sim.feasible(pods[1]), sim.now).nodes[0]
    assert sim.manager.bind("ns", "g-1", pods[1].uid, target, sim.now).outcome is (
        BindOutcome.WAIT)
    assert set(binds(taken(sim))) == {p.uid for p in pods}


def test_a_bind_or_filter_call_for_a_member_being_committed_is_answered_from_the_commit(
) -> None:
    sim, pods, out = committed()
    p = pods[0]
    target = out[p.uid]
    other = next(n for n in ("n0", "n1", "n2", "n3") if n != target)
    # The filter: its node if kube-scheduler's sample has it, else a clear rejection.
    assert sim.manager.filter(p, [other, target], sim.now).nodes == [target]
    rejected = sim.manager.filter(p, [other], sim.now)
    assert not rejected.nodes
    assert "the extender is committing the gang" in rejected.unresolvable[other]
    assert f"node {target}" in rejected.unresolvable[other]
    # The bind: waits for the Binding in flight; another node is refused, clearly.
    assert sim.manager.bind("ns", p.name, p.uid, target, sim.now).outcome is BindOutcome.WAIT
    refused = sim.manager.bind("ns", p.name, p.uid, other, sim.now)
    assert refused.outcome is BindOutcome.ERROR
    assert f"committing pod ns/{p.name} to node {target}, not {other}" in refused.message
    assert not binds(taken(sim))  # no second Binding for either request
    sim.manager.binding_finished(p.uid, target, None, sim.now)
    # Bound, before kube-scheduler's informer knows: its node passes (the bind that
    # follows succeeds); without it in the list, the pod is turned away as bound.
    assert sim.manager.filter(p, [other, target], sim.now).nodes == [target]
    bound = sim.manager.filter(p, [other], sim.now)
    assert not bound.nodes and f"already bound to node {target}" in bound.unresolvable[other]
    assert sim.manager.bind("ns", p.name, p.uid, target, sim.now).outcome is (
        BindOutcome.BOUND)
    assert sim.manager.bind("ns", p.name, p.uid, other, sim.now).outcome is (
        BindOutcome.ERROR)


def test_members_being_committed_are_not_woken() -> None:
    """A wake-up patch for a member the commit binds would be one API write competing
    with its Binding, for nothing."""
    sim = direct_sim()
    pods = cluster(sim)
    sim.add_pod(pods[0])
    assert sim.schedule(pods[0].uid) == "rejected"  # 1 of 3 exist: parked
    # kube-scheduler's PodScheduled=False, which a restarted extender would go by.
    sim.add_pod(dataclasses.replace(pods[0], unschedulable=True))
    for p in pods[1:]:
        sim.add_pod(p)
    run_pass(sim)
    out = taken(sim)
    assert len(binds(out)) == 3
    assert not [a for a in out if isinstance(a, WakePods)]


def test_a_failed_direct_binding_is_not_retried_in_a_loop_but_by_the_members_retry() -> None:
    sim, pods, out = committed()
    bad = pods[2].uid
    for uid, n in out.items():
        sim.manager.binding_finished(uid, n, None if uid != bad else "etcd timeout", sim.now)
    run_pass(sim)
    assert not binds(taken(sim))  # the failure itself sets nothing off
    assert len(sim.bound("g")) == 2
    # kube-scheduler retries the pod: its filter call commits it again, to its slot.
    result = sim.manager.filter(pods[2], sim.feasible(pods[2]), sim.now)
    again = binds(taken(sim))
    assert again == {bad: out[bad]} and result.nodes == [out[bad]]


def test_a_gang_whose_direct_binding_fails_for_good_is_partial_and_evicted() -> None:
    sim, pods, out = committed()
    for uid, n in out.items():
        sim.manager.binding_finished(uid, n, None if uid != pods[2].uid else "gone", sim.now)
    sim.delete(pods[2].uid)
    sim.tick(31)
    evict = [a for a in sim.actions if isinstance(a, EvictPods)]
    assert evict and {p.uid for p in evict[0].pods} == {pods[0].uid, pods[1].uid}


def test_a_held_reservation_is_never_committed() -> None:
    """Capacity held ahead of its victims' exit (here a preemption) is not free:
    nothing is bound until the hold becomes a reservation."""
    sim = direct_sim()
    sim.add_node(node("n0", cpu=2000))
    victim = sim.bind_foreign(pod("victim", cpu=2000, priority=0), "n0")
    sim.add_group(group("g", 2))
    pods = [pod(f"g-{i}", "g", priority=100) for i in range(2)]
    for p in pods:
        sim.add_pod(p)
    run_pass(sim)
    out = taken(sim)
    assert [a for a in out if isinstance(a, EvictPods)]  # the victim is asked to leave
    [res] = sim.manager.reads.reservations()
    assert res.held and not binds(out)
    sim.add_group(group("g", 2))  # its status write coming back: the group is looked at
    sim.manager.eviction_answered(victim.uid, None, sim.now)
    run_pass(sim)
    assert not binds(taken(sim))  # still held: the victim's capacity is still taken
    sim.manager.on_pod_deleted(victim.uid, sim.now)
    run_pass(sim)
    assert set(binds(taken(sim))) == {p.uid for p in pods}


def test_a_lost_node_moves_the_slot_before_the_commit_binds_anything() -> None:
    """Mixed gang: its direct members wait for the PVC member; a foreign pod squeezes a
    direct member's node meanwhile, and the commit binds that member elsewhere."""
    sim = direct_sim()
    for i in range(4):
        sim.add_node(node(f"n{i}", cpu=1000))
    sim.add_group(group("g", 3))
    pods = [pod(f"g-{i}", "g") for i in range(3)]
    pods[0] = dataclasses.replace(pods[0], binds_via_scheduler=True)
    for p in pods:
        sim.add_pod(p)
    sim.tick(1)
    [res] = sim.manager.reads.reservations()
    slots = {s.pod.uid: s.node for s in res.slots}
    squeezed = slots[pods[1].uid]
    sim.bind_foreign(pod("intruder", cpu=1000, scheduler_name="default-scheduler"), squeezed)
    assert sim.schedule(pods[0].uid) == "bound"  # the PVC member's bind commits the gang
    placed = {p.uid: p.node_name for p in sim.bound("g")}
    assert len(placed) == 3 and placed[pods[1].uid] != squeezed
    assert not sim.overcommits


def test_a_restarted_extender_commits_only_the_members_not_yet_bound() -> None:
    """What a restart finds: some members bound by the commit before it, the rest
    pending. The new process rebuilds from that alone, and binds only the rest."""
    _, pods, out = committed(members=4)
    done = [p for p in pods[:2]]
    after = direct_sim()  # the new process lists the API's state
    cluster(after, members=4)
    for p in pods:
        after.add_pod(dataclasses.replace(p, node_name=out[p.uid]) if p in done else p)
    assert not binds(taken(after))  # nothing before its first pass
    run_pass(after)
    again = binds(taken(after))
    assert set(again) == {p.uid for p in pods[2:]}
    assert not after.overcommits


def test_a_node_the_commit_just_filled_is_checked_for_plain_pods_and_extras() -> None:
    """kube-scheduler hears of the pods a direct commit bound only through its watch,
    so for a moment its own fit check passes a node they filled. The extender's filter
    then checks that node itself, as it does nodes with reservations (the hostile soak's
    over-commit: an elastic extra bound onto a node the commit had just filled). The
    node stays checked until the extender's own watch has delivered every such pod
    bound, however long that takes, and a margin after (kube-scheduler's informer may
    trail ours); not a fixed window from the commit."""
    sim, pods, out = committed(nodes=1, members=4, cpu=2000)
    for uid, where in out.items():  # all four land on n0, 8000m of 8000m
        sim.manager.binding_finished(uid, where, None, sim.now)
    assert not sim.manager.reads.reservations()  # the quorum is bound: n0 holds no slot
    plain = sim.add_pod(pod("plain", cpu=1000))
    result = sim.manager.filter(plain, ["n0"], sim.now)
    assert result.nodes == [] and "n0 is full" in result.unresolvable["n0"]
    sim.now += 11  # the Bindings' answers are in, the watch has not delivered them
    assert sim.manager.filter(plain, ["n0"], sim.now).nodes == []
    for p in pods[:3]:
        sim.add_pod(dataclasses.replace(p, node_name=out[p.uid], phase="Running"))
    sim.now += FRESH_MARGIN_SECONDS + 1
    assert sim.manager.filter(plain, ["n0"], sim.now).nodes == []  # one still unseen
    sim.add_pod(dataclasses.replace(pods[3], node_name=out[pods[3].uid], phase="Running"))
    sim.now += FRESH_MARGIN_SECONDS - 1
    assert sim.manager.filter(plain, ["n0"], sim.now).nodes == []  # within the margin
    sim.now += 2  # kube-scheduler has seen them: its own check decides again
    assert sim.manager.filter(plain, ["n0"], sim.now).nodes == ["n0"]


def test_a_node_stays_checked_at_most_the_limit_if_the_watch_never_delivers() -> None:
    """A watch event lost for good (the relist should have delivered it) must not keep
    a node checked for every pod forever; a failed Binding is not fresh at all."""
    sim, pods, out = committed(nodes=2, members=2, cpu=6000)
    sim.manager.binding_finished(pods[0].uid, out[pods[0].uid], None, sim.now)
    sim.manager.binding_finished(pods[1].uid, out[pods[1].uid], "refused", sim.now)
    plain = sim.add_pod(pod("plain", cpu=4000))
    first, second = out[pods[0].uid], out[pods[1].uid]
    assert sim.manager.filter(plain, [first], sim.now).nodes == []
    sim.now += FRESH_LIMIT_SECONDS - 1
    assert sim.manager.filter(plain, [first], sim.now).nodes == []
    sim.now += 2
    assert sim.manager.filter(plain, [first], sim.now).nodes == [first]
    # The refused member keeps its slot on its node: checked as a reserved node, not
    # as a fresh one.
    assert "held for" in sim.manager.filter(plain, [second], sim.now).unresolvable[second]


def test_a_plain_pod_repelled_by_a_freshly_committed_member_is_turned_away_there() -> None:
    """kube-scheduler's InterPodAffinity filter runs without the pods a direct commit
    bound until its watch delivers them: a plain pod with required anti-affinity to the
    gang's members passes its check on their nodes. The extender's filter and bind turn
    it away there, both ways (its terms, and the members' terms selecting it)."""
    app = {"app": "trainer"}
    away = (PodAffinityTerm(LabelSelector(tuple(app.items())), HOSTNAME),)
    sim, pods, out = committed(nodes=4, members=2, cpu=1000, labels=app)
    for uid, where in out.items():
        sim.manager.binding_finished(uid, where, None, sim.now)
    taken_nodes = sorted(set(out.values()))
    free_nodes = sorted({"n0", "n1", "n2", "n3"} - set(taken_nodes))
    shy = sim.add_pod(pod("shy", cpu=100, required_anti_affinity=away))
    result = sim.manager.filter(shy, taken_nodes + free_nodes, sim.now)
    assert result.nodes == free_nodes
    assert "anti-affinity of ns/shy with pod ns/g-" in result.unresolvable[taken_nodes[0]]
    decision = sim.manager.bind("ns", "shy", shy.uid, taken_nodes[0], sim.now)
    assert decision.outcome is BindOutcome.ERROR and "anti-affinity" in decision.message
    # The other way: members that repel what the plain pod carries.
    sim2, _, out2 = committed(nodes=4, members=2, cpu=1000,
                                  required_anti_affinity=away)
    target = sim2.add_pod(pod("target", cpu=100, labels=app))
    on = sorted(set(out2.values()))
    assert sim2.manager.filter(target, on, sim2.now).nodes == []
    # Once kube-scheduler has seen them, its own filter is the one that decides.
    for p in pods:
        sim.add_pod(dataclasses.replace(p, node_name=out[p.uid], phase="Running"))
    sim.now += FRESH_MARGIN_SECONDS + 1
    assert sim.manager.filter(shy, taken_nodes, sim.now).nodes == taken_nodes


def test_a_plain_pods_spread_counts_the_freshly_committed_members() -> None:
    """The same for `DoNotSchedule` spread: kube-scheduler counted the zones without the
    members just bound, so a zone they filled passes its check; the extender's filter
    counts them and turns the zone away."""
    sim = direct_sim()
    for i, zone in enumerate(["a", "a", "b", "b"]):
        sim.add_node(dataclasses.replace(node(f"n{i}"), labels={
            "kubernetes.io/hostname": f"n{i}", ZONE: zone}))
    sim.add_group(group("g", 2))
    app = {"app": "trainer"}
    spread = (SpreadConstraint(1, ZONE, LabelSelector(tuple(app.items()))),)
    members = [sim.add_pod(pod(f"g-{i}", "g", labels=app,
                               node_selector={ZONE: "a"})) for i in range(2)]
    run_pass(sim)
    out = binds(taken(sim))
    assert set(out) == {m.uid for m in members}
    assert {sim.cache.nodes[n].labels[ZONE] for n in out.values()} == {"a"}
    spreader = sim.add_pod(pod("spreader", cpu=100, labels=app,
                               spread_constraints=spread))
    result = sim.manager.filter(spreader, ["n0", "n1", "n2", "n3"], sim.now)
    assert result.nodes == ["n2", "n3"]  # zone a holds 2 of the app, b none
    assert "maxSkew 1" in result.unresolvable["n0"]


def test_no_direct_commit_while_the_pod_watch_is_broken() -> None:
    """The direct commit checks each member's node against the cache as well: while the
    pod watch is broken (kube-apiserver restarting) a reserved gang is not bound; once
    pods are listed again it is, at once, on nodes as the list left them."""
    sim = direct_sim()
    pods = cluster(sim)
    sim.manager.watch_broken("pods")
    for p in pods:
        sim.add_pod(p)
    run_pass(sim)
    assert not binds(taken(sim))
    assert sim.manager.reads.reservations()  # planned and reserved, only the commit waits
    sim.manager.watch_listed("pods", sim.now)
    assert set(binds(taken(sim))) == {p.uid for p in pods}


def test_committed_members_are_landing_until_the_watch_delivers_them_bound() -> None:
    """What the filter verb's commit wait asks (`Reads.landing`): a Binding's own
    answer is not enough, since kube-scheduler learns of the pod only from its watch;
    a failed Binding or a deleted pod never comes back bound, so it ends too."""
    sim, pods, flying = committed(members=4)
    assert sim.manager.reads.landing("ns/g")
    for p in pods[:3]:  # every Binding answered: three bound, one refused
        sim.manager.binding_finished(p.uid, flying[p.uid], None, sim.now)
    sim.manager.binding_finished(pods[3].uid, flying[pods[3].uid], "refused", sim.now)
    assert sim.manager.reads.landing("ns/g")  # bound, but the watch has not said so
    sim.add_pod(dataclasses.replace(pods[0], node_name=flying[pods[0].uid]))
    sim.add_pod(dataclasses.replace(pods[1], node_name=flying[pods[1].uid]))
    assert sim.manager.reads.landing("ns/g")
    sim.delete(pods[2].uid)  # deleted before its bound copy arrived
    assert not sim.manager.reads.landing("ns/g")
    assert not sim.manager.reads.landing("ns/other")


def planned_node(tick: bool) -> str:
    """The node the plan gives the first member of `arrived`'s gang with no sample: its
    own filter call commits the gang, or (`tick`) the pass does."""
    sim = direct_sim()
    first = arrived(sim, nodes=6)[0]
    if tick:
        run_pass(sim)
    else:
        sim.manager.filter(first, sim.feasible(first), sim.now)
    return binds(taken(sim))[first.uid]


def test_a_filter_call_that_commits_its_gang_gets_a_node_kube_scheduler_passed() -> None:
    """kube-scheduler passes a sample of the feasible nodes (a tenth of 5,000). The
    member whose call sets the commit off is put on one of them: on its planned node
    outside the sample, the call would turn it away, and its Binding, held for a bind
    request that then never comes, would wait for its timer."""
    planned = planned_node(tick=False)
    sim = direct_sim()
    pods = arrived(sim, nodes=6)
    first = pods[0]
    passed = [n for n in sim.feasible(first) if n != planned]
    sim.manager.sample(first.uid, passed)
    result = sim.manager.filter(first, passed, sim.now)
    out = binds(taken(sim))
    assert set(out) == {p.uid for p in pods}
    assert result.nodes == [out[first.uid]] and out[first.uid] in passed


def test_a_pass_that_commits_the_gang_during_a_members_call_uses_that_calls_nodes() -> None:
    planned = planned_node(tick=True)
    sim = direct_sim()
    pods = arrived(sim, nodes=6)
    first = pods[0]
    passed = [n for n in sim.feasible(first) if n != planned]
    sim.manager.sample(first.uid, passed)  # its call waits (assembly wait, commit wait)
    run_pass(sim)
    out = binds(taken(sim))
    assert set(out) == {p.uid for p in pods} and out[first.uid] in passed
    # The call, woken, answers with that node.
    assert sim.manager.filter(first, passed, sim.now).nodes == [out[first.uid]]


def test_a_sample_is_forgotten_when_the_call_ends() -> None:
    planned = planned_node(tick=True)
    sim = direct_sim()
    first = arrived(sim, nodes=6)[0]
    sim.manager.sample(first.uid, [n for n in sim.feasible(first) if n != planned])
    sim.manager.sample(first.uid, None)
    run_pass(sim)
    assert binds(taken(sim))[first.uid] == planned

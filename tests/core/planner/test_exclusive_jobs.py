"""A gang of several Jobs, each exclusive to a rack, as JobSet's exclusive placement
(`alpha.jobset.sigs.k8s.io/exclusive-topology`) shapes its pods: every pod of a Job has
a required pod affinity to its own Job's pods and a required anti-affinity to other
Jobs' pods, both on the rack key. The planner gives each Job a rack of its own rather
than asking one rack to hold the whole gang (docs/integrations.md, JobSet)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from extender.core.cache.snapshot import Snapshot
from extender.core.model.types import (
    GroupInfo,
    LabelSelector,
    NodeInfo,
    PodAffinityTerm,
    PodInfo,
    Requirement,
)
from extender.core.planner import Plan, Shortfall, plan_group

HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"
JOB_KEY = "jobset.sigs.k8s.io/job-key"


def racked(name: str, rack: str, cpu: int = 4000) -> NodeInfo:
    return NodeInfo(name, {"cpu": cpu, "pods": 110}, {HOST: name, RACK: rack})


def cluster(*nodes: NodeInfo, on: Mapping[str, list[PodInfo]] | None = None) -> Snapshot:
    free = {n.name: dict(n.allocatable) for n in nodes}
    for name, pods in (on or {}).items():
        for p in pods:
            for r, q in p.requests.items():
                free[name][r] -= q
    return Snapshot({n.name: n for n in nodes}, free, dict(on or {}))


def exclusive(job: str, i: int, cpu: int = 4000, node: str = "") -> PodInfo:
    """Pod `i` of Job `job`, with the terms JobSet's pod webhook writes."""
    same = PodAffinityTerm(LabelSelector(match_expressions=(
        Requirement(JOB_KEY, "In", (job,)),)), RACK)
    others = PodAffinityTerm(LabelSelector(match_expressions=(
        Requirement(JOB_KEY, "Exists"), Requirement(JOB_KEY, "NotIn", (job,)))), RACK,
        namespace_selector=LabelSelector())
    return PodInfo(f"uid-{job}-{i}", "ml", f"{job}-{i}", {"cpu": cpu, "pods": 1},
                   labels={JOB_KEY: job}, creation=float(i), node_name=node,
                   required_affinity=(same,), required_anti_affinity=(others,))


def group(n: int) -> GroupInfo:
    return GroupInfo("ml", "js", n)


def racks(result: Plan | Shortfall, snap: Snapshot) -> dict[str, str]:
    """Pod name -> the rack it is planned in."""
    assert isinstance(result, Plan), result
    return {uid.split("-", 1)[1]: snap.nodes[n].labels[RACK]
            for uid, n in result.assignments.items()}


def by_job(placed: Mapping[str, str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, rack in placed.items():
        out.setdefault(name.split("-")[0], set()).add(rack)
    return out


def plan(n: int, pods: Sequence[PodInfo], snap: Snapshot) -> Plan | Shortfall:
    return plan_group(group(n), pods, 0, snap)


def test_three_job_leaders_take_one_rack_each() -> None:
    """Before a Job's leader is bound, JobSet's webhook has created no other pod of it:
    the gang is one leader per Job, each of which would fill a rack's only node."""
    snap = cluster(racked("a", "r1"), racked("b", "r2"), racked("c", "r3"))
    placed = racks(plan(3, [exclusive(j, 0) for j in ("x", "y", "z")], snap), snap)
    assert sorted(placed.values()) == ["r1", "r2", "r3"]


def test_two_jobs_of_two_pods_each_get_a_rack_of_their_own() -> None:
    """The node-selector strategy's shape: every pod exists; a rack holds one Job."""
    snap = cluster(racked("a1", "r1"), racked("a2", "r1"), racked("b1", "r2"),
                   racked("b2", "r2"))
    pods = [exclusive(j, i) for j in ("x", "y") for i in range(2)]
    jobs = by_job(racks(plan(4, pods, snap), snap))
    assert len(jobs["x"]) == 1 and len(jobs["y"]) == 1 and jobs["x"] != jobs["y"], jobs


def test_a_jobs_first_pod_goes_to_a_rack_that_holds_the_whole_job() -> None:
    """Rack r0's node is the tightest fit for one pod, but holds only one: member by
    member, Job x's first pod would go there and its second find no room beside it."""
    snap = cluster(racked("c0", "r0", cpu=4500), racked("a1", "r1"), racked("a2", "r1"),
                   racked("b1", "r2"), racked("b2", "r2"))
    pods = [exclusive(j, i) for j in ("x", "y") for i in range(2)]
    jobs = by_job(racks(plan(4, pods, snap), snap))
    assert sorted(map(sorted, jobs.values())) == [["r1"], ["r2"]], jobs


def test_two_jobs_that_need_more_racks_than_there_are_are_not_placed() -> None:
    snap = cluster(racked("a1", "r1"), racked("a2", "r1"), racked("b1", "r2"),
                   racked("b2", "r2"))
    pods = [exclusive(j, 0) for j in ("x", "y", "z")]
    assert isinstance(plan(3, pods, snap), Shortfall)


def test_a_job_whose_leader_is_bound_joins_it_and_the_others_keep_out() -> None:
    """Job x's leader runs in r2: its other pods go there; Job y's leader may not."""
    leader = exclusive("x", 0, node="b1")
    snap = cluster(racked("a1", "r1"), racked("a2", "r1"), racked("b1", "r2"),
                   racked("b2", "r2"), racked("c1", "r3"), on={"b1": [leader]})
    pods = [leader, exclusive("x", 1), exclusive("y", 0)]
    placed = racks(plan(3, pods, snap), snap)
    assert placed["x-1"] == "r2" and placed["y-0"] != "r2", placed


def test_a_gang_whose_members_all_share_one_affinity_stays_in_one_rack() -> None:
    """Every member selects every other: the whole gang is one group, in one rack (the
    tightest that holds it), as before."""
    snap = cluster(racked("a1", "r1"), racked("a2", "r1"), racked("b1", "r2"),
                   racked("b2", "r2"), racked("b3", "r2"))
    same = (PodAffinityTerm(LabelSelector((("job", "t"),)), RACK),)
    pods = [PodInfo(f"uid-t-{i}", "ml", f"t-{i}", {"cpu": 4000, "pods": 1},
                    labels={"job": "t"}, creation=float(i), required_affinity=same)
            for i in range(2)]
    result = plan(2, pods, snap)
    assert set(racks(result, snap).values()) == {"r1"}
    assert isinstance(result, Plan) and result.domain is not None
    assert result.domain.keys == (RACK,)

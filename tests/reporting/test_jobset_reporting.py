"""What users see of a JobSet split into several gangs (`gang-extender.x-k8s.io/jobset-gang`
on the JobSet): each gang's Events on its own pods (a JobSet gang has no PodGroup), each
gang in /debug/podgroups under its own name and in `gang_extender_gangs` with source
jobset, through the informer's kinds as extender/serve.py wires them. The JobSet's event
moves its pods between its gangs with no pod event, so the writer must hear of every
gang of the JobSet from it, and of the ones it dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import generate_latest

from extender.core.model.convert_jobset import JOBSET_GANG_ANNOTATION
from extender.core.model.sources import (
    JOBSET,
    JOBSET_ATTEMPT_LABEL,
    JOBSET_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_RJOB_LABEL,
    JOBSET_UID_LABEL,
)
from extender.core.model.types import gang_key
from extender.kube.informer import Kind
from extender.reporting.kinds import observed_kinds, source_kinds
from extender.scheduler.debug import install_podgroups_route
from tests.reporting.status_env import Env, make_env

UID = "5b1d9e0a-77c2-4f3e-8a6b-2d4e6f8a0c1e"
SET = gang_key(JOBSET, "ns", "train.0.5b1d9e0a")


def jobset(split: str | None) -> dict[str, Any]:
    """Replicated Jobs a and b, 1 Job x 2 pods each."""
    tpl = {"spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    return {"metadata": {"name": "train", "namespace": "ns", "uid": UID,
                         "creationTimestamp": "2027-01-15T08:00:00Z",
                         "annotations": {JOBSET_GANG_ANNOTATION: split} if split else {}},
            "spec": {"replicatedJobs": [{"name": r, "replicas": 1, "template": tpl}
                                        for r in ("a", "b")]},
            "status": {"restarts": 0}}


def jobset_pod(rjob: str, k: int) -> dict[str, Any]:
    """A pod of 3 CPUs, as the JobSet controller labels it: two fit the two 4-CPU nodes
    of the world (status_env.py), four do not."""
    return {"metadata": {"namespace": "ns", "name": f"train-{rjob}-0-{k}", "uid": f"u-{rjob}{k}",
                         "creationTimestamp": "2027-01-15T08:00:00Z",
                         "labels": {JOBSET_NAME_LABEL: "train", JOBSET_UID_LABEL: UID,
                                    JOBSET_ATTEMPT_LABEL: "0", JOBSET_RJOB_LABEL: rjob,
                                    JOBSET_INDEX_LABEL: "0"}},
            "spec": {"schedulerName": "gang-scheduler", "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "3"}}}]},
            "status": {"phase": "Pending"}}


class World:
    def __init__(self) -> None:
        self.env: Env = make_env()
        writer = self.env.writer
        self.kinds: dict[str, Kind] = {k.name: k for k in (*observed_kinds(writer),
                                                            *source_kinds(writer))}

    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        self.kinds[kind].apply(self.env.manager, obj, self.env.clock.now)
        self.env.sim.drain()

    def settle(self) -> None:
        """kube-scheduler offers every pending pod, time passes, the writer runs."""
        self.env.step(1)
        self.env.sim.run_all()
        self.env.tick(1)
        self.env.step(1)

    def pod_events(self, name: str) -> list[tuple[str, str]]:
        return sorted((e["reason"], e["message"]) for e in self.env.api.events.values()
                      if e["involvedObject"] == {**e["involvedObject"], "kind": "Pod",
                                                 "name": name})

    def gauge(self) -> dict[tuple[str, str], float]:
        """gang_extender_gangs{source="jobset"} by (phase, reason)."""
        self.env.refresh()
        out = {}
        for line in generate_latest(self.env.metrics.registry).decode().splitlines():
            if line.startswith("gang_extender_gangs{") and 'source="jobset"' in line:
                labels, value = line.rsplit(" ", 1)
                parts = dict(kv.split("=") for kv in labels[labels.index("{") + 1:-1].split(","))
                out[parts["phase"].strip('"'), parts["reason"].strip('"')] = float(value)
        return out

    def debug_rows(self) -> dict[str, dict[str, Any]]:
        app = FastAPI()
        env = self.env
        install_podgroups_route(app, env.writer, env.recorder, env.clock)

        async def go() -> Any:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://t") as client:
                return (await client.get("/debug/podgroups")).json()

        return {r["gang"]: r for r in asyncio.run(go())["podGroups"]}


@pytest.fixture(name="world")
def world_fixture() -> World:
    """The pods first (the JobSet not yet read: they wait in the set's gang), then the
    JobSet split per replicated Job: its event moves them, no pod event comes."""
    w = World()
    for r in ("a", "b"):
        for k in range(2):
            w.apply("pods", jobset_pod(r, k))
    w.env.step(1)
    w.apply("jobsets", jobset("per-replicated-job"))
    w.settle()
    return w


def test_each_gang_of_a_split_jobset_tells_its_own_pods(world: World) -> None:
    """One replicated Job fits the two nodes and is bound; the other is short of
    capacity. Each pod hears of its own gang only; no PodGroup Event, no status write."""
    a, b = f"{SET}.a", f"{SET}.b"
    for k in range(2):
        got = world.pod_events(f"train-a-0-{k}")
        assert {"Reserved", "Bound"} <= {r for r, _ in got}, got
        assert all(m.startswith(f"gang {a}: ") for _, m in got), got
        got = world.pod_events(f"train-b-0-{k}")
        assert "InsufficientCapacity" in {r for r, _ in got}, got
        assert all(m.startswith(f"gang {b}: ") for _, m in got), got
    kinds = {e["involvedObject"]["kind"] for e in world.env.api.events.values()}
    assert kinds == {"Pod"}
    assert world.env.api.patches == []


def test_debug_and_the_gauge_show_each_gang_of_a_split_jobset(world: World) -> None:
    """The set's own gang, every pod split off, is no gang waiting: before, it was
    counted and shown as "0 of 1 members exist" beside the two."""
    rows = world.debug_rows()
    a, b = rows[f"{SET}.a"], rows[f"{SET}.b"]
    assert (a["source"], a["minMember"], a["reason"], a["bound"]) == ("jobset", 2, "Bound", 2)
    assert (b["source"], b["minMember"], b["reason"], b["members"]) == (
        "jobset", 2, "InsufficientCapacity", 2)
    assert "phase" not in rows[SET], rows[SET]
    assert world.gauge() == {("Scheduling", "Bound"): 1.0,
                             ("Scheduling", "InsufficientCapacity"): 1.0}


def test_a_jobset_split_again_or_deleted_is_reported_again(world: World) -> None:
    """Split per Job instead: the pods move to gangs a-0 and b-0 with no pod event, and
    the old gangs a and b are dropped. Before, a-0 (its pods bound already, so the gang
    manager reports no change of it) was never computed: missing from the gauge and
    /debug. Deleted: no gang of it is left counted."""
    world.apply("jobsets", jobset("per-job"))
    world.settle()
    rows = world.debug_rows()
    assert rows[f"{SET}.a-0"]["reason"] == "Bound"
    assert rows[f"{SET}.b-0"]["reason"] == "InsufficientCapacity"
    assert not {f"{SET}.a", f"{SET}.b"} & set(rows)
    assert world.gauge() == {("Scheduling", "Bound"): 1.0,
                             ("Scheduling", "InsufficientCapacity"): 1.0}
    world.kinds["jobsets"].delete(world.env.manager, SET, world.env.clock.now)
    world.env.sim.drain()
    world.env.step(1)
    assert world.gauge() == {}
    assert world.env.writer.groups == {}


def theirs_pod(rjob: str, k: int) -> dict[str, Any]:
    """A pod of the JobSet that names the default scheduler: a JobSet made with no gang
    in mind, as most are."""
    pod = jobset_pod(rjob, k)
    return {**pod, "spec": {**pod["spec"], "schedulerName": "default-scheduler"}}


@pytest.mark.parametrize("split", [None, "per-job", "per-replicated-job"])
def test_a_jobset_of_the_default_scheduler_is_no_gang_of_ours(split: str | None) -> None:
    """Every JobSet's pods carry its labels; its gangs are ours only where its pods name
    the gang scheduler. Before, a JobSet of the default scheduler was counted in the
    gauge, and shown in /debug, as a gang of ours waiting for its members."""
    w = World()
    w.apply("jobsets", jobset(split))
    for r in ("a", "b"):
        for k in range(2):
            w.apply("pods", theirs_pod(r, k))
    w.settle()
    w.env.step(60)
    assert w.gauge() == {}
    assert [r for r in w.debug_rows().values() if "phase" in r] == []
    assert w.env.api.events == {}


def test_a_split_jobset_with_one_replicated_job_of_the_default_scheduler() -> None:
    """A driver left to the default scheduler beside workers placed as a gang: the
    workers' gang is ours and counted, the driver's is not."""
    w = World()
    w.apply("jobsets", jobset("per-replicated-job"))
    for k in range(2):
        w.apply("pods", jobset_pod("a", k))
        w.apply("pods", theirs_pod("b", k))
    w.settle()
    rows = w.debug_rows()
    assert rows[f"{SET}.a"]["reason"] == "Bound"
    assert "phase" not in rows[f"{SET}.b"], rows[f"{SET}.b"]
    assert w.gauge() == {("Scheduling", "Bound"): 1.0}

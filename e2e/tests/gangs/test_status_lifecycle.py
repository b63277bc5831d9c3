"""What a user sees on the real control plane (issue 4): PodGroup status, conditions,
printer columns and Events through the whole life of a gang.

Each test keeps a trail of every distinct status the PodGroup showed (polled every
0.1 s), so the assertions are about the sequence a user would have seen, not a sample.
One member of a gang that must time out asks for a hostPort taken on every node:
kube-scheduler never offers it to the extender, so the reservation cannot complete.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import pytest

from e2e.gang import GangStack, port_pod, start_extender
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import (
    GANG_SCHEDULER,
    PG_GROUP,
    PG_PLURAL,
    PG_VERSION,
    create_job,
    create_pod,
    create_podgroup,
)
from e2e.harness.queries import get_podgroup
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.gang_reads import scheduled

pytestmark = pytest.mark.e2e


class Trail:
    """Every distinct (phase, reason, running, succeeded, failed) a PodGroup showed."""

    def __init__(self, ns: str, name: str) -> None:
        self.ns, self.name = ns, name
        self.seen: list[tuple[str, str, int, int, int]] = []
        self.messages: dict[str, str] = {}  # reason -> last message
        self.status: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Trail:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a transient API error: poll again
                self.observe()
            time.sleep(0.1)

    def observe(self) -> dict[str, Any]:
        pg = get_podgroup(self.ns, self.name) or {}
        st = pg.get("status") or {}
        cond = scheduled(st)
        row = (str(st.get("phase", "")), str(cond.get("reason", "")), int(st.get("running", 0)),
               int(st.get("succeeded", 0)), int(st.get("failed", 0)))
        if row[0] and (not self.seen or self.seen[-1] != row):
            self.seen.append(row)
        if cond:
            self.messages[row[1]] = str(cond.get("message", ""))
        self.status = st
        return st

    def phases(self) -> list[str]:
        out: list[str] = []
        for phase, *_ in self.seen:
            if not out or out[-1] != phase:
                out.append(phase)
        return out

    def reasons(self) -> list[str]:
        out: list[str] = []
        for _, reason, *_ in self.seen:
            if not out or out[-1] != reason:
                out.append(reason)
        return out

    def wait(self, pred: Any, timeout: float, what: str, gang: GangStack) -> dict[str, Any]:
        def check() -> dict[str, Any] | NotYet:
            st = self.observe()
            return st if pred(st) else NotYet({"status": st, "trail": self.seen})

        out = wait_for(check, timeout, f"{self.ns}/{self.name}: {what}", logs=gang.logs())
        assert isinstance(out, dict)  # NotYet is falsy, never returned
        return out


def events(ns: str, name: str, kind: str) -> dict[str, dict[str, Any]]:
    """reason -> Event (the latest) for one object."""
    raw = kube().core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name},involvedObject.kind={kind}",
        _preload_content=False)
    out: dict[str, dict[str, Any]] = {}
    for e in sorted(json.loads(raw.data)["items"], key=lambda e: e.get("lastTimestamp") or ""):
        out[e["reason"]] = e
    return out


def wait_events(ns: str, name: str, kind: str, reasons: set[str], gang: GangStack,
                timeout: float = 10) -> dict[str, dict[str, Any]]:
    def check() -> dict[str, dict[str, Any]] | NotYet:
        got = events(ns, name, kind)
        return got if reasons <= set(got) else NotYet(sorted(got))

    out = wait_for(check, timeout, f"events {sorted(reasons)} on {kind} {ns}/{name}",
                   logs=gang.logs())
    assert isinstance(out, dict)
    return out


def table_row(ns: str, name: str) -> dict[str, Any]:
    """The row `kubectl get pg` prints: the API server's Table rendering of the CRD's
    printer columns (no kubectl needed)."""
    api = kube().api
    url = f"{api.configuration.host}/apis/{PG_GROUP}/{PG_VERSION}/namespaces/{ns}/{PG_PLURAL}"
    resp = api.call_api("GET", url, header_params={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    resp.read()
    table = json.loads(resp.data)
    names = [c["name"] for c in table["columnDefinitions"]]
    for row in table["rows"]:
        if row["cells"][0] == name:
            return dict(zip(names, row["cells"], strict=True))
    raise AssertionError(f"no row for {name} in {table['rows']}")


def test_job_waits_for_members_then_runs_and_finishes(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    fake_nodes.add_nodes(2, prefix="st-wait", cpu="4", memory="8Gi")
    create_podgroup(ns, "train", 3)
    create_job(ns, "train", parallelism=2, completions=3, scheduler_name=GANG_SCHEDULER,
               pod_group="train", run_seconds=3, cpu="1")
    with Trail(ns, "train") as trail:
        st = trail.wait(lambda s: scheduled(s).get("message", "").endswith(
            "2 of 3 members exist"), 20, "waiting for its third member", gang)
        assert st["phase"] == "Pending"
        assert scheduled(st)["reason"] == "WaitingForMembers"
        assert scheduled(st)["status"] == "False"
        assert st["occupiedBy"] == f"{ns}/train", "the owning Job, as scheduler-plugins shows"
        assert "scheduleStartTime" not in st, "not tried yet"
        row = table_row(ns, "train")
        assert (row["Phase"], row["MinMember"], row["Running"], row["Succeeded"],
                row["Failed"], row["Reason"]) == ("Pending", 3, 0, 0, 0, "WaitingForMembers")
        assert row["Age"]
        ev = wait_events(ns, "train", "PodGroup", {"WaitingForMembers"}, gang)
        assert ev["WaitingForMembers"]["type"] == "Normal"
        assert ev["WaitingForMembers"]["source"]["component"] == "gang-extender"

        kube().batch.patch_namespaced_job("train", ns, {"spec": {"parallelism": 3}})
        st = trail.wait(lambda s: s.get("phase") == "Running", 20, "Running", gang)
        assert (st["running"], st["failed"]) == (3, 0)
        assert scheduled(st)["status"] == "True" and scheduled(st)["reason"] == "Bound"
        assert scheduled(st)["message"] == f"gang {ns}/train: quorum of 3 bound"
        assert st["scheduleStartTime"]
        st = trail.wait(lambda s: s.get("phase") == "Finished", 20, "Finished", gang)
        assert (st["succeeded"], st["running"], st["failed"]) == (3, 0, 0)
        assert table_row(ns, "train")["Phase"] == "Finished"

    phases = trail.phases()
    assert phases[0] == "Pending" and phases[-1] == "Finished", trail.seen
    assert "Running" in phases and "Failed" not in phases, trail.seen
    assert phases.index("Running") < phases.index("Finished")
    ev = wait_events(ns, "train", "PodGroup",
                     {"WaitingForMembers", "Reserved", "Bound", "Running", "Finished"}, gang)
    assert "reserved 3 slot(s)" in ev["Reserved"]["message"]
    assert all(e["count"] == 1 for e in ev.values()), {r: e["count"] for r, e in ev.items()}
    pods = json.loads(kube().core.list_namespaced_pod(ns, _preload_content=False).data)
    pod_events = events(ns, pods["items"][0]["metadata"]["name"], "Pod")
    assert "Reserved" in pod_events, sorted(pod_events)
    assert "reserved for this pod" in pod_events["Reserved"]["message"]


def test_older_gang_times_out_and_backs_off_younger_waits_behind_it_then_runs(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(2, prefix="st-old", cpu="4", memory="8Gi")
    for n in nodes:
        port_pod(ns, f"blocker-{n}", node=n)
    create_podgroup(ns, "old", 2, timeout=4)
    time.sleep(1.1)  # creationTimestamp has second resolution
    create_podgroup(ns, "young", 2)
    with Trail(ns, "old") as old, Trail(ns, "young") as young:
        create_pod(ns, "old-0", cpu="3", scheduler_name=GANG_SCHEDULER, pod_group="old")
        port_pod(ns, "old-1", group="old", cpu="3")  # never offered to the extender
        st = old.wait(lambda s: scheduled(s).get("reason") == "Reserved", 20, "Reserved", gang)
        assert st["phase"] == "Scheduling" and st["scheduleStartTime"]
        for i in range(2):
            create_pod(ns, f"young-{i}", cpu="3", scheduler_name=GANG_SCHEDULER,
                       pod_group="young", run_seconds=5)
        st = young.wait(lambda s: scheduled(s).get("reason") == "WaitingBehindOlderGang", 20,
                        "waits behind the older gang", gang)
        assert st["phase"] == "Scheduling"
        assert f"waiting behind older gang {ns}/old" in scheduled(st)["message"]
        assert table_row(ns, "young")["Reason"] == "WaitingBehindOlderGang"

        st = old.wait(lambda s: scheduled(s).get("reason") == "BackingOff", 20,
                      "timed out and backing off", gang)
        assert st["phase"] == "Scheduling"
        msg = scheduled(st)["message"]
        assert "timed out after 4s with 1 of 2 members ready (attempt 1)" in msg, msg
        assert "backing off 2s" in msg, msg
        ev = wait_events(ns, "old", "PodGroup", {"Reserved", "TimedOut", "Released",
                                                 "BackingOff"}, gang)
        assert ev["TimedOut"]["type"] == "Warning" and ev["BackingOff"]["type"] == "Warning"
        assert "released 2 slot(s) on 2 node(s)" in ev["Released"]["message"]
        assert "next attempt in 2s" in ev["BackingOff"]["message"]
        for pod in ("old-0", "old-1"):
            pev = wait_events(ns, pod, "Pod", {"TimedOut"}, gang)
            assert pev["TimedOut"]["type"] == "Warning"

        young.wait(lambda s: s.get("phase") == "Running", 20, "young runs", gang)
        # While young holds the nodes, old's next attempt finds no room.
        st = old.wait(lambda s: scheduled(s).get("reason") == "InsufficientCapacity", 20,
                      "old waits for capacity after its backoff", gang)
        assert "needs 1 × {cpu: 3, memory: 0}" in scheduled(st)["message"] or \
            "fit" in scheduled(st)["message"], scheduled(st)
        young.wait(lambda s: s.get("phase") == "Finished", 20, "young finishes", gang)

    reasons = [r for r in young.reasons() if r != "WaitingForMembers"]
    assert reasons[0] == "WaitingBehindOlderGang" and reasons[-1] == "Bound", young.seen
    assert young.phases()[-2:] == ["Running", "Finished"], young.seen
    assert set(old.phases()) <= {"Pending", "Scheduling"}, old.seen
    assert {"Reserved", "BackingOff", "InsufficientCapacity"} <= set(old.reasons()), old.seen
    yev = wait_events(ns, "young", "PodGroup", {"WaitingBehindOlderGang", "Reserved", "Bound",
                                                "Running", "Finished"}, gang)
    assert f"{ns}/old" in yev["WaitingBehindOlderGang"]["message"]


def test_member_failures_elastic_gang_keeps_running_then_fails(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    fake_nodes.add_nodes(2, prefix="st-fail", cpu="4", memory="8Gi")
    create_podgroup(ns, "mpi", 2)
    with Trail(ns, "mpi") as trail:
        create_pod(ns, "mpi-0", cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="mpi",
                   run_seconds=1, fail=True)
        create_pod(ns, "mpi-1", cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="mpi",
                   run_seconds=4, fail=True)
        create_pod(ns, "mpi-2", cpu="1", scheduler_name=GANG_SCHEDULER, pod_group="mpi")
        trail.wait(lambda s: s.get("failed") == 1, 20, "first member failed", gang)
        st = trail.wait(lambda s: s.get("failed") == 1 and s.get("running") == 2, 5,
                        "two still running", gang)
        assert st["phase"] == "Running", "an elastic gang that keeps its quorum keeps running"
        st = trail.wait(lambda s: s.get("phase") == "Failed", 20, "Failed", gang)
        assert (st["failed"], st["running"]) == (2, 1)
        failed = scheduled(st, "Failed")
        assert failed["reason"] == "MemberFailed" and failed["status"] == "True"
        assert "mpi-0, mpi-1" in failed["message"] and "minMember 2" in failed["message"]
        assert scheduled(st)["reason"] == "Bound", "it had been placed whole"
        assert table_row(ns, "mpi")["Phase"] == "Failed"
    phases = trail.phases()
    assert phases[-2:] == ["Running", "Failed"], trail.seen
    assert "Finished" not in phases
    ev = wait_events(ns, "mpi", "PodGroup", {"Bound", "Running", "MemberFailed"}, gang)
    assert ev["MemberFailed"]["type"] == "Warning"


def test_status_and_events_switched_off_gang_still_placed_nothing_written(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """`--podgroup-status off --events off` (another controller owns PodGroup status, or
    Events are unwanted): the gang is placed exactly as before, its computed status is
    in /debug/podgroups, and the extender writes neither status nor Events."""
    ns = namespace
    fake_nodes.add_nodes(2, prefix="quiet", cpu="4", memory="8Gi")
    gang.extender.stop()
    quiet = start_extender(gang.cluster, gang.port,
                           [*gang.extra_args, "--podgroup-status", "off", "--events", "off"],
                           "gang-extender-quiet")
    try:
        create_podgroup(ns, "quiet", 3)
        create_job(ns, "quiet", parallelism=3, scheduler_name=GANG_SCHEDULER,
                   pod_group="quiet", cpu="1")

        def running() -> dict[str, Any] | NotYet:
            rows = {r["gang"]: r for r in gang.get("/debug/podgroups")["podGroups"]}
            row = rows.get(f"{ns}/quiet")
            return row if row and row.get("phase") == "Running" else NotYet(row)

        row = wait_for(running, 30, "the gang running, as the extender computes it",
                       logs=[quiet, gang.scheduler])
        assert (row["bound"], row["running"]) == (3, 3)
        assert row["statusWritten"] is False
        time.sleep(1.5)  # past the status writer's rounds and the event sender's pace
        assert not (get_podgroup(ns, "quiet") or {}).get("status"), "status was written"
        raw = kube().core.list_namespaced_event(ns, _preload_content=False)
        ours = [e["reason"] for e in json.loads(raw.data)["items"]
                if (e.get("source") or {}).get("component") == "gang-extender"]
        assert ours == [], ours
    finally:
        quiet.stop()
        gang.extender.restart()
        gang.extender.wait_ready(30)

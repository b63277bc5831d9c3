"""Third-party operators, unchanged, against the gang scheduler: what their tests share.

Users do not write PodGroups and labels by hand, their operator does. Kubeflow's operators
create the scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``) of a job, label
its pods and set their ``schedulerName`` when told a gang scheduler's name; only the real
binaries show that what they write is what the extender reads. Each operator is built by
``e2e/build-operator.sh`` and run as a local process (:mod:`e2e.integrations.mpi_operator`,
:mod:`e2e.integrations.training_operator`); this module has what their tests have in common:

* :class:`JobKind`: how a test creates, reads and deletes one operator's job kind;
* :func:`use_scheduler`: makes sure the scheduler the operator is pointed at is running;
* the two scenarios of issue 19, run once with ``gang-scheduler`` and once with
  ``default-scheduler`` as the control (same operator, same jobs; the stock scheduler
  ignores PodGroups), on 4 fake nodes of 4 CPUs:

  * :func:`scenario_too_big`: a job of 17 CPUs. Gang: no pod bound, the PodGroup says
    why. Control: 4 of 5 pods bound, hung.
  * :func:`scenario_two_at_75_percent`: two jobs of 12 CPUs at once. Gang: one bound
    whole, the other bound whole after it finished, its PodGroup saying why it waited.
    Control: both half-placed (typically), at least one always.

  A job's pods form one fake-kubelet rendezvous, so a job missing a member hangs, as
  ``mpirun`` or ``torch.distributed`` does.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.base import E2E_DIR, HarnessError
from e2e.harness.k8s import ApiException, client
from e2e.harness.kubelet.pod import ANN_RENDEZVOUS, ANN_RENDEZVOUS_SIZE, ANN_RUN_SECONDS
from e2e.harness.objects import GANG_SCHEDULER, POD_GROUP_LABEL
from e2e.harness.process import ManagedProcess
from e2e.harness.queries import get_podgroup, list_pods
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for

DEFAULT_SCHEDULER = "default-scheduler"
NODES, NODE_CPU, NODE_MEMORY = 4, "4", "16Gi"
HOLD = 3.0
"""Seconds a placement is watched after it settled, to show it does not change."""
WAITING_REASONS = {"InsufficientCapacity", "WaitingBehindOlderGang"}

MakeJob = Callable[[str, int, Mapping[str, str], Mapping[str, str], float], dict[str, Any]]
"""(name, workers, worker resources, leader resources, run seconds) -> job object."""


def find_operator(name: str) -> Path:
    """The cache directory of ``e2e/build-operator.sh <name>``, building on first use
    (minutes, once per machine; instant afterwards; the script serialises builds)."""
    script = E2E_DIR / "build-operator.sh"
    res = subprocess.run(["bash", str(script), name], capture_output=True, text=True,
                         check=False)
    out = res.stdout.strip().splitlines()
    if res.returncode != 0 or not out:
        raise HarnessError(
            f"{script} {name} failed (exit {res.returncode}):\n{res.stderr[-4000:]}\n"
            f"{res.stdout}")
    return Path(out[-1])


def obtain_operator(name: str) -> Path:
    """:func:`find_operator` for a fixture: fails the test (skips with ``E2E_SKIP=1``)."""
    try:
        return find_operator(name)
    except HarnessError as e:
        if os.environ.get("E2E_SKIP") == "1":
            pytest.skip(f"E2E_SKIP=1 and {name} is unavailable: {e}")
        pytest.fail(f"cannot build {name}: {e}", pytrace=False)


def wait_crd_established(name: str, timeout: float = 60.0) -> None:
    """Until the CRD ``name`` serves its kind (an operator exits or errors before that)."""
    ext = client.ApiextensionsV1Api(kube().api)

    def established() -> object:
        crd = ext.read_custom_resource_definition(name)
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        return conds.get("Established") == "True" or NotYet(conds)

    wait_for(established, timeout, f"CRD {name} Established", logs=[])


def use_scheduler(request: pytest.FixtureRequest, name: str) -> None:
    """Make sure the scheduler ``name`` runs: the session's gang stack (restarted if an
    earlier test killed a part, as the ``gang`` fixture does) or the default scheduler."""
    if name == GANG_SCHEDULER:
        stack: GangStack = request.getfixturevalue("gang_stack")
        for p, wait in ((stack.extender, 30), (stack.scheduler, 60)):
            if not p.running():
                p.restart()
                p.wait_ready(wait)
    else:
        sched: ManagedProcess | None = request.getfixturevalue("default_scheduler")
        assert sched is not None and sched.running()


@dataclass(frozen=True)
class JobKind:
    """One operator's job kind, as the scenarios drive it."""

    kind: str
    group: str
    version: str
    plural: str
    role_label: str
    """Pod label whose value is the pod's role."""
    leader_role: str
    """Value of ``role_label`` on the one leader pod (launcher, master)."""
    make: MakeJob

    def create(self, ns: str, body: Mapping[str, Any]) -> None:
        kube().custom.create_namespaced_custom_object(
            self.group, self.version, ns, self.plural, dict(body), _preload_content=False)

    def get(self, ns: str, name: str) -> dict[str, Any] | None:
        try:
            resp = kube().custom.get_namespaced_custom_object(
                self.group, self.version, ns, self.plural, name, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        out: dict[str, Any] = json.loads(resp.data)
        return out

    def condition(self, ns: str, name: str, cond_type: str) -> bool:
        """True if the job has condition ``cond_type`` (Created, Running, Succeeded...)."""
        conds = ((self.get(ns, name) or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == cond_type and c.get("status") == "True" for c in conds)

    def succeeded(self, ns: str, name: str) -> bool:
        return self.condition(ns, name, "Succeeded")

    def delete_all(self, ns: str) -> None:
        """Delete every job of this kind in ``ns`` (background: the garbage collector
        removes their pods and PodGroups). Tests do it themselves: the namespace fixture
        does not know these kinds, and the operator would recreate the pods it deletes."""
        with contextlib.suppress(ApiException):
            kube().custom.delete_collection_namespaced_custom_object(
                self.group, self.version, ns, self.plural, propagation_policy="Background",
                _preload_content=False)


# ----------------------------------------------------------------------------------------
# Checks


def scheduled_condition(ns: str, group: str) -> tuple[str, str] | None:
    """(reason, message) of the PodGroup's ``Scheduled`` condition, if written yet."""
    pg = get_podgroup(ns, group) or {}
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Scheduled":
            return str(c.get("reason")), str(c.get("message"))
    return None


def pods_of(ns: str, group: str) -> list[dict[str, Any]]:
    return list_pods(ns, f"{POD_GROUP_LABEL}={group}")


def check_podgroup(kind: JobKind, pg: dict[str, Any] | None, group: str,
                   min_member: int) -> None:
    """The PodGroup is the operator's: owned by the job, minMember = all its pods."""
    assert pg is not None, f"the operator made no PodGroup {group}"
    owners = [(o["kind"], o["name"]) for o in pg["metadata"].get("ownerReferences", [])]
    assert owners == [(kind.kind, group)], owners
    assert pg["spec"]["minMember"] == min_member, pg["spec"]


def check_pods(kind: JobKind, ns: str, group: str, min_member: int, scheduler: str) -> None:
    """The operator labelled leader and workers and set their schedulerName."""
    pods = pods_of(ns, group)
    roles = sorted(p["metadata"]["labels"].get(kind.role_label, "?") for p in pods)
    assert roles == sorted([kind.leader_role] + ["worker"] * (min_member - 1)), roles
    assert {p["spec"]["schedulerName"] for p in pods} == {scheduler}


def wait_all_pods(ns: str, group: str, count: int, logs: list[str]) -> None:
    """Until the operator (and, for a launcher Job, the job controller) made every pod."""
    def made() -> object:
        n = len(pods_of(ns, group))
        return n >= count or NotYet({"pods of " + group: n})

    wait_for(made, 60, f"{count} pods of {group}", logs=logs)


def half_placed(rec: Recorder, group: str, min_member: int) -> str | None:
    """A description of how the gang is partly bound now, or None if it is not."""
    n = len(rec.bound(group))
    if 0 < n < min_member:
        return f"{group}: {n} of {min_member} pods bound"
    return None


def wait_settled(rec: Recorder, count: int) -> None:
    """Until ``count`` pods are bound (the cluster is full), then ``HOLD`` more seconds."""
    wait_for(lambda: len(rec.bound()) >= count or NotYet(
        {n: r.node for n, r in rec.bound().items()}), 60, f"{count} pods bound")
    time.sleep(HOLD)


# ----------------------------------------------------------------------------------------
# Scenarios


def scenario_too_big(kind: JobKind, scheduler: str, ns: str, operator_log: str) -> str:
    """A leader of 1 CPU and 4 workers of 4 CPUs (17 CPUs) on 16 CPUs.

    Gang: nothing is bound, and the PodGroup says the job does not fit. Control: 4 of the 5
    pods are bound (4 workers, or the leader and 3 workers) and hang. Returns what was
    seen, for the test's output.
    """
    name, members = "big", 5
    with Recorder(ns) as rec:
        kind.create(ns, kind.make(name, 4, {"cpu": "4", "memory": "1Gi"},
                                  {"cpu": "1", "memory": "1Gi"}, 2.0))
        wait_all_pods(ns, name, members, [operator_log])
        check_podgroup(kind, get_podgroup(ns, name), name, members)
        check_pods(kind, ns, name, members, scheduler)
        if scheduler == GANG_SCHEDULER:
            def explained() -> tuple[str, str] | NotYet:
                c = scheduled_condition(ns, name)
                # 17 CPUs on 16: Unplaceable (InsufficientCapacity where more nodes exist).
                ok = c is not None and c[0] in ("InsufficientCapacity", "Unplaceable")
                return c if ok and c is not None else NotYet(c)

            cond = wait_for(explained, 30, f"PodGroup {name} explains why it waits")
            time.sleep(HOLD)
            assert rec.bound() == {}, f"gang scheduler bound part of {name}: {rec.history}"
            return f"[gang] PodGroup {name}: {cond[0]}: {cond[1]}; 0 of {members} pods bound"
        wait_settled(rec, 4)
        partial = half_placed(rec, name, members)
        assert partial is not None, (
            f"control: the default scheduler was expected to half-place {name}, "
            f"bound: {rec.bound()}")
        assert not kind.succeeded(ns, name)
        return f"[default] half-placed, hung: {partial}: {sorted(rec.bound())}"


def scenario_two_at_75_percent(kind: JobKind, scheduler: str, ns: str,
                               logs: list[str]) -> str:
    """Two jobs of a leader and 11 workers, 1 CPU each (12 of 16 CPUs), created at once.

    Gang: one is bound whole and runs; the other's PodGroup says why it waits; it is bound
    whole once the first finished; both succeed. Control: the two interleave and at least
    one is half-placed (both, typically, and then both hang). Returns what was seen.
    """
    members = 12
    jobs = ("alpha", "beta")
    res = {"cpu": "1", "memory": "256Mi"}
    # Long enough that the operator has made all of the second job's pods while the first
    # still runs: then its PodGroup waits for capacity, not for members, and says so. With
    # 2 s it sometimes only ever said WaitingForMembers (the MPI Operator makes 5 API
    # calls a second by default).
    run_seconds = 6.0
    reasons: dict[str, set[tuple[str, str]]] = {j: set() for j in jobs}
    # Operators delete their PodGroups once a job finished: keep what was seen.
    pgs: dict[str, dict[str, Any] | None] = dict.fromkeys(jobs)
    with Recorder(ns) as rec:
        for j in jobs:
            kind.create(ns, kind.make(j, members - 1, res, res, run_seconds))
        if scheduler != GANG_SCHEDULER:
            wait_settled(rec, 16)
            partial = [p for j in jobs if (p := half_placed(rec, j, members))]
            assert partial, (f"control: the default scheduler was expected to half-place "
                             f"one of {jobs}; bound: {rec.bound()}")
            hung = [j for j in jobs if not kind.succeeded(ns, j)]
            return (f"[default] half-placed: {partial}; not succeeded after {HOLD:.0f}s "
                    f"settled: {hung}")

        def both_succeeded() -> object:
            for j in jobs:
                pgs[j] = pgs[j] or get_podgroup(ns, j)
                if not rec.bound(j) and (c := scheduled_condition(ns, j)):
                    reasons[j].add(c)
            done = [j for j in jobs if kind.succeeded(ns, j)]
            return len(done) == len(jobs) or NotYet(
                {"succeeded": done, "bound": {j: len(rec.bound(j)) for j in jobs},
                 "conditions": {j: scheduled_condition(ns, j) for j in jobs}})

        wait_for(both_succeeded, 120, f"both {kind.kind}s Succeeded", logs=logs)
        for j in jobs:
            check_podgroup(kind, pgs[j], j, members)
            check_pods(kind, ns, j, members, scheduler)
            rec.assert_never_partial(j, members)
            assert len(rec.bound(j)) == members, rec.bound(j)
        first, second = sorted(jobs, key=lambda j: rec.bind_times(j)[0])
        first_done = min(r.phase_at["Succeeded"] for r in rec.bound(first).values()
                         if "Succeeded" in r.phase_at)
        assert rec.bind_times(second)[0] >= first_done, (
            f"{second} was bound before {first} finished: {rec.history}")
        seen = {r for r, _ in reasons[second]}
        assert seen & WAITING_REASONS, (
            f"PodGroup {second} never said why it waited: {reasons[second]}")
        return (f"[gang] {first} ran first; {second} bound "
                f"{rec.bind_times(second)[0] - first_done:.1f}s after {first} finished; "
                f"PodGroup {second} said: {sorted(reasons[second])}")


def rendezvous_annotations(name: str, size: int, run_seconds: float) -> dict[str, str]:
    """The fake kubelet's annotations making ``size`` pods one rendezvous ``name``."""
    return {ANN_RENDEZVOUS: name, ANN_RENDEZVOUS_SIZE: str(size),
            ANN_RUN_SECONDS: str(run_seconds)}

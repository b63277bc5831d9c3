"""A real JobSet controller beside the gang scheduler, for the module that needs it, and
the wait until the extender has read a JobSet as the gang a test expects. The JobSet
tests and the JobSet-under-Kueue tests both run on it, so it is a module of its own
rather than a test module the other imports from. How the controller itself runs:
:mod:`e2e.integrations.jobset`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.gang import GangStack
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.waiting import NotYet, wait_for
from e2e.integrations.jobset import JobSetController
from e2e.integrations.operators import obtain_operator

JOBSET_LOGS = ["jobset", "gang-extender", "gang-kube-scheduler"]


@pytest.fixture(scope="module")
def controller(control_plane: Cluster) -> Iterator[JobSetController]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("runs the JobSet controller as a local process on the local control plane")
    c = JobSetController(control_plane, obtain_operator("jobset"))
    c.install()
    c.start()
    try:
        yield c
    finally:
        c.stop()


def wait_known(gang: GangStack, ns: str, group: str, quorum: int) -> None:
    """Until the extender has read the JobSet as this gang of ``quorum``: a JobSet made
    just after its CRD was installed is read once discovery has seen the API (within
    10 s); a pod turned away before that ("JobSet not known") shows nothing about
    quorums."""
    def known() -> object:
        rows = {r["gang"]: r for r in gang.get("/debug/podgroups")["podGroups"]}
        row = rows.get(f"jobset:{ns}/{group}")
        return (row is not None and row.get("minMember") == quorum) or NotYet(row)

    wait_for(known, 30, f"the extender reads gang {group} of {quorum}", logs=JOBSET_LOGS)

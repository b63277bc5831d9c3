"""The kind code path, in CI (issue 19): the gang tests marked ``any_cluster`` run in
external mode (``$E2E_KUBECONFIG``), as e2e/kind/run.sh runs them on kind, against the
local control plane with the gang scheduler installed the way deploy/ installs it.

kind needs Docker, which CI lacks; what kind adds beyond this run is the image build and
real kubelets. Here the extender runs with the Deployment's arguments under the
ServiceAccount and roles from deploy/, next to a stock kube-scheduler configured by the
ConfigMap (leader election included), both as local processes
(e2e/deploy_kit.start_deployed_stack), and four fake nodes stand in for kind's workers.
A child pytest then sees only a kubeconfig, discovers those nodes, sizes its pods from
them and uses the installed scheduler, exactly as on kind. It must not skip anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from e2e import deploy_kit as dk
from e2e.anycluster import SCHEDULER_ENV
from e2e.harness.base import REPO_ROOT
from e2e.harness.cluster import ControlPlane
from e2e.harness.fixtures import NodeSet
from e2e.harness.target import kube

pytestmark = pytest.mark.e2e

# Its own name: the session's gang stack (e2e/gang.py) may be running as gang-scheduler.
SCHEDULER = "gang-scheduler-external"


def test_any_cluster_gang_tests_pass_in_external_mode(
    local_control_plane: ControlPlane, fake_nodes: NodeSet, tmp_path: Path
) -> None:
    cp = local_control_plane
    docs = dk.kustomize_build()
    errors = dk.apply(dk.dynamic_client(kube().api), dk.rbac_docs(docs))
    assert not errors, "\n".join(errors)
    sched_kc, ext_kc = dk.deployed_kubeconfigs(cp, kube().core, tmp_path)
    fake_nodes.add_nodes(4, prefix="external", cpu="4", memory="8Gi")
    stack = dk.start_deployed_stack(cp, docs, sched_kc, "external", scheduler_name=SCHEDULER,
                                    extender_kubeconfig=ext_kc)
    junit = tmp_path / "junit.xml"
    try:
        env = dict(os.environ)
        env.update({"E2E_KUBECONFIG": str(cp.kubeconfig), SCHEDULER_ENV: SCHEDULER})
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "e2e", "-m", "any_cluster", "-q", "-rA",
             "-p", "no:cacheprovider", f"--junitxml={junit}"],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
        logs = "\n".join(f"----- {p.name} -----\n{p.log_tail(40)}" for p in stack.logs())
        assert res.returncode == 0, f"{res.stdout[-8000:]}\n{res.stderr[-3000:]}\n{logs}"
    finally:
        stack.stop()
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    ran, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    print(f"MEASURED external mode: {ran} tests in {float(suite.get('time', 0)):.1f}s")
    assert skipped == 0, f"{skipped} skipped in external mode:\n{res.stdout[-4000:]}"
    assert ran >= 7, f"expected every any_cluster test, ran {ran}:\n{res.stdout[-4000:]}"

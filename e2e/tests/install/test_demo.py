"""The demo (``python -m demo``) keeps working: a smaller run of the same command.

Run as a subprocess: the demo starts its own control plane and points the harness helpers
at it (``use_cluster``), which must not disturb the session's cluster used by other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.harness.base import REPO_ROOT, HarnessError
from e2e.harness.binaries import find_etcd, find_k8s_bin

pytestmark = pytest.mark.e2e

BIG, QUICK = 10, 10


def binaries_env() -> dict[str, str]:
    """Same rule as the harness fixtures: missing binaries fail, unless E2E_SKIP=1."""
    if os.environ.get("E2E_KUBECONFIG"):
        pytest.skip("the demo runs its own local control plane")
    try:
        bin_dir, etcd = find_k8s_bin(), find_etcd()
    except HarnessError as e:
        if os.environ.get("E2E_SKIP") == "1":
            pytest.skip(f"E2E_SKIP=1 and control-plane binaries unavailable: {e}")
        pytest.fail(f"cannot obtain control-plane binaries: {e}", pytrace=False)
    return {**os.environ, "E2E_K8S_BIN": str(bin_dir), "E2E_ETCD": str(etcd)}


@pytest.mark.timeout(150)
def test_demo_stock_hangs_gang_completes(tmp_path: Path) -> None:
    out = tmp_path / "demo-out"
    cmd = [sys.executable, "-m", "demo", "--out", str(out), "--stock-wait", "10",
           "--big-pods", str(BIG), "--quick-pods", str(QUICK), "--run-seconds", "3",
           "--timeout", "100"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=binaries_env(), capture_output=True,
                          text=True, timeout=140, check=False)
    output = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, output
    assert "DEADLOCK" in proc.stdout and "job-b complete" in proc.stdout, output

    doc = json.loads((out / "timeline.json").read_text())
    stock, gang = doc["runs"]["stock"], doc["runs"]["gang"]

    # Stock: both big Jobs partially placed, neither finished; the quick Job did.
    assert stock["ok"], stock["verdict"]
    for job in ("job-a", "job-b"):
        s = stock["jobs"][job]
        assert 0 < s["bound"] < BIG and s["succeeded"] == 0 and s["complete_at"] is None, s
    assert stock["jobs"]["quick"]["complete_at"] is not None

    # Gang: one big Job placed whole, the other whole only after it finished; all complete.
    # Normally job-a (older PodGroup) goes first; job-b may, if the job controller created
    # all of job-b's pods before job-a's (a gang is placed once all its members exist).
    assert gang["ok"], gang["verdict"]
    jobs = gang["jobs"]
    first, second = sorted(("job-a", "job-b"), key=lambda j: jobs[j]["first_bound"])
    assert jobs[first]["succeeded"] == jobs[second]["succeeded"] == BIG
    assert jobs["quick"]["succeeded"] == QUICK
    for j in (first, second):
        assert jobs[j]["all_bound"] - jobs[j]["first_bound"] <= 2.0, jobs[j]
    pods = gang["pods"].values()
    first_done = max(p["finished"] for p in pods if p["job"] == first)
    second_bound = min(p["bound"] for p in pods if p["job"] == second)
    assert second_bound >= first_done - 0.5, (
        f"{second} bound at {second_bound}, {first} done at {first_done}")

    png = out / "demo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000

"""e2e/harness/versions.py and the harness's choice of binaries: `K8S=<minor>` (or nothing,
for the default) selects one pinned release, the same one e2e/build-k8s.sh builds, and a
cache holding several releases side by side never hands out the wrong one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from e2e.harness import binaries
from e2e.harness.base import E2E_DIR, HarnessError
from e2e.harness.versions import pinned_version, podgroups_served

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def test_the_default_is_1_37_and_1_36_stays_pinned_beside_it() -> None:
    default = pinned_version()
    assert default is not None and default.startswith("v1.37.")
    assert pinned_version("1.37") == default  # the default's own minor names it too
    assert (pinned_version("1.36") or "").startswith("v1.36.")
    assert pinned_version("1.99") is None


@pytest.mark.parametrize("minor", ["", "1.36", "1.35"])
def test_the_build_script_and_the_harness_agree_on_the_release(
        minor: str, tmp_path: Path) -> None:
    """build-k8s.sh, given a cache whose stamp matches, prints that directory without
    building: the release the harness's pinned_version names. Without `go` on PATH, so a
    stamp that does not match fails here instead of starting a build."""
    version = pinned_version(minor)
    assert version is not None
    cache = tmp_path / "gang-extender" / "k8s" / version
    cache.mkdir(parents=True)
    moddir = E2E_DIR / (f"k8sbuild-{minor}" if minor else "k8sbuild")
    modhash = subprocess.run(
        ["bash", "-c", "grep -v '^module ' go.mod | cat - go.sum | sha256sum | cut -c1-12"],
        cwd=moddir, capture_output=True, text=True, check=True).stdout.strip()
    (cache / f".built-{modhash}").touch()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "K8S": minor,
           "PATH": "/usr/bin:/bin"}
    env.pop("E2E_K8S_BIN", None)
    out = subprocess.run(["bash", str(E2E_DIR / "build-k8s.sh")], env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == str(cache)


def test_a_warm_cache_answers_the_pinned_release_not_the_first_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "gang-extender" / "k8s"
    for v in ("v1.35.4", "v1.36.3", "v1.37.2"):
        d = root / v
        d.mkdir(parents=True)
        (d / ".built-0").touch()
        for b in BINARIES:
            (d / b).write_text("#!/bin/sh\n")
            (d / b).chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("E2E_K8S_BIN", raising=False)
    monkeypatch.delenv("K8S", raising=False)
    assert binaries.find_k8s_bin(build=False) == root / (pinned_version() or "")
    monkeypatch.setenv("K8S", "1.36")
    assert binaries.find_k8s_bin(build=False) == root / (pinned_version("1.36") or "")
    monkeypatch.setenv("K8S", "1.34")
    with pytest.raises(HarnessError, match="no cached Kubernetes"):
        binaries.find_k8s_bin(build=False)


def test_only_releases_with_a_podgroup_get_the_workload_api_flags() -> None:
    """1.35's API server refuses TopologyAwareWorkloadScheduling and v1alpha2, so asking
    for them there would keep the control plane from starting at all."""
    assert podgroups_served((1, 36)) and podgroups_served((1, 37))
    assert not podgroups_served((1, 35))
    assert podgroups_served((0, 0))

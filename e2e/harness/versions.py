"""Which Kubernetes minor version the local control plane runs, and what the upstream
Workload API needs to be served on it.

The harness runs the default version (e2e/k8sbuild/go.mod) or, with ``K8S=<minor>``
(``make e2e-k8s K8S=1.36``), the one pinned in ``e2e/k8sbuild-<minor>/go.mod``;
``e2e/build-k8s.sh`` reads the same variable. The PodGroup API moved between the two:

* 1.36: ``scheduling.k8s.io/v1alpha2`` (alpha), ``GenericWorkload`` alpha;
* 1.37: ``scheduling.k8s.io/v1beta1`` (beta, still off by default, so it needs the
  runtime-config and the gate too); v1alpha2 is gone, and an API server asked to serve
  it refuses to start. ``GangScheduling`` and ``WorkloadAwarePreemption`` were folded
  into ``GenericWorkload``, so the same gates serve the API on both; a component given
  ``GangScheduling=true`` on 1.37 refuses to start (``unrecognized feature gate``), which
  is why the in-tree gang scheduler's gates depend on the version (upstream_gang_gates).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

from .base import E2E_DIR


def pinned_version(minor: str = "") -> str | None:
    """The release e2e/build-k8s.sh builds for ``K8S=<minor>`` ("v1.36.3"): the one pinned
    in e2e/k8sbuild-<minor>/go.mod, or the default's (e2e/k8sbuild/go.mod) when `minor`
    is empty or is the default's own minor version; None when nothing pins it."""
    moddir = E2E_DIR / f"k8sbuild-{minor}" if minor else E2E_DIR / "k8sbuild"
    if not (moddir / "go.mod").is_file():
        moddir = E2E_DIR / "k8sbuild"
    try:
        text = (moddir / "go.mod").read_text()
    except OSError:
        return None
    m = re.search(r"^require k8s\.io/kubernetes (v(\d+\.\d+)\.\d+)$", text, re.M)
    if m is None or (minor and m.group(2) != minor):
        return None
    return m.group(1)


@cache
def k8s_minor(bin_dir: Path) -> tuple[int, int]:
    """(1, 37) for the kube-apiserver in `bin_dir`, from its ``--version``; the build
    script stamps the release into it (e2e/build-k8s.sh). (0, 0) when unreadable."""
    try:
        out = subprocess.run([str(bin_dir / "kube-apiserver"), "--version"],
                             capture_output=True, text=True, check=False, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0, 0)
    m = re.search(r"v(\d+)\.(\d+)\.", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def podgroups_served(minor: tuple[int, int]) -> bool:
    """Whether that release has a PodGroup object at all. 1.35 (GenericWorkload alpha)
    has only scheduling.k8s.io/v1alpha1 Workloads with their pod groups inline and pods
    joined by spec.workloadRef, which the extender does not read; its API server knows
    neither TopologyAwareWorkloadScheduling nor v1alpha2, and its controller manager no
    podgroup-protection-controller, so the harness asks for none of them there. An
    unreadable version (0, 0) is taken as new."""
    return minor >= (1, 36) or minor == (0, 0)


def workload_api_version(minor: tuple[int, int]) -> str:
    """The scheduling.k8s.io version that serves PodGroups on that release."""
    return "v1beta1" if minor >= (1, 37) else "v1alpha2"


def workload_runtime_config(minor: tuple[int, int]) -> str:
    """The PodGroups' version, and on 1.37 also v1alpha3, which serves CompositePodGroups
    (with the gate of `composite_gates`; it serves v1alpha3 PodGroups too, which the
    extender does not watch: v1beta1 is how it reads them)."""
    own = f"scheduling.k8s.io/{workload_api_version(minor)}=true"
    return f"{own},scheduling.k8s.io/v1alpha3=true" if composites_served(minor) else own


def composites_served(minor: tuple[int, int]) -> bool:
    """Whether that release has CompositePodGroups (scheduling.k8s.io/v1alpha3, alpha
    since 1.37; found by experiment on v1.37.2: served with the gate and the runtime-config
    of `workload_runtime_config`, and a PodGroup naming one in
    spec.parentCompositePodGroupName must then have spec.workloadRef)."""
    return minor >= (1, 37)


def composite_gates(minor: tuple[int, int]) -> str:
    """The API server's gate for CompositePodGroups on releases that have them."""
    return "CompositePodGroup=true" if composites_served(minor) else ""


def dra_workload_gates(minor: tuple[int, int]) -> str:
    """The gate that serves an upstream PodGroup's spec.resourceClaims (claims its pods
    share; alpha since 1.37) on the API server, and has the controller manager's
    resourceclaim controller make the group's claims from their templates."""
    return "DRAWorkloadResourceClaims=true" if minor >= (1, 37) else ""


def upstream_gang_gates(minor: tuple[int, int]) -> str:
    """Feature gates that make the stock kube-scheduler of that release a gang scheduler
    (its default profile gains the GangScheduling plugin), for the peer the benchmarks
    compare with. 1.36 needs GangScheduling beside GenericWorkload; 1.37 enables the
    plugin with GenericWorkload alone (pkg/scheduler/apis/config/v1/default_plugins.go)
    and rejects the old gate."""
    if minor >= (1, 37):
        return "GenericWorkload=true"
    return "GenericWorkload=true,GangScheduling=true"

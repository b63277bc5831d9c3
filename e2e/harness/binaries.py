"""Where the harness's upstream binaries come from: etcd and the Kubernetes components.

Why apart: finding (and, on a cold cache, building) the binaries is a question of the
machine, not of the control plane; callers that only need to know whether the binaries
are there (skip rules, version checks) ask it without starting anything.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from .base import E2E_DIR, HarnessError
from .versions import pinned_version


def find_etcd() -> Path:
    """etcd from ``$E2E_ETCD``, ``PATH`` or the Debian ``etcd-server`` location."""
    candidates = [os.environ.get("E2E_ETCD"), shutil.which("etcd"), "/usr/bin/etcd"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return Path(c)
    raise HarnessError("etcd not found (set E2E_ETCD or run e2e/setup-deps.sh)")


def find_k8s_bin(build: bool = True) -> Path:
    """Directory with kube-apiserver, kube-controller-manager and kube-scheduler.

    ``$E2E_K8S_BIN`` wins; otherwise ``e2e/build-k8s.sh`` is run, which returns at once when
    its cache is warm and builds (minutes) otherwise. ``build=False`` only accepts a warm
    cache, for callers that must not block.
    """
    names = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

    def ok(d: Path) -> bool:
        return all(os.access(d / n, os.X_OK) for n in names)

    env_dir = os.environ.get("E2E_K8S_BIN")
    if env_dir:
        if not ok(Path(env_dir)):
            raise HarnessError(f"E2E_K8S_BIN={env_dir} lacks one of {', '.join(names)}")
        return Path(env_dir)
    script = E2E_DIR / "build-k8s.sh"
    if not build:
        # Same cache rule as the script: any .built-* stamp with all binaries present.
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        # The release the script would build: K8S=1.36's, or the default's (versions.py),
        # never another one that happens to be cached beside it.
        version = pinned_version(os.environ.get("K8S", ""))
        d = cache / "gang-extender" / "k8s" / (version or "none")
        if version and any(d.glob(".built-*")) and ok(d):
            return d
        raise HarnessError(f"no cached Kubernetes {version or os.environ.get('K8S', '')} "
                           "binaries (run e2e/setup-deps.sh)")
    # Same lock as setup-deps.sh: never two compiles at once, a second caller waits.
    cache_root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    lock_path = cache_root / "gang-extender" / "k8s" / ".build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        res = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                             check=False)
    out = res.stdout.strip().splitlines()
    if res.returncode != 0 or not out or not ok(Path(out[-1])):
        raise HarnessError(
            f"{script} failed (exit {res.returncode}):\n{res.stderr[-4000:]}\n{res.stdout}"
        )
    return Path(out[-1])

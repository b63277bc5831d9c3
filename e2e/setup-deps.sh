#!/usr/bin/env bash
# Makes the e2e harness runnable on a fresh Debian/Ubuntu machine and prints the directory
# holding kube-apiserver, kube-controller-manager and kube-scheduler (the only stdout line).
# Idempotent: installs etcd-server only if no etcd is found (E2E_ETCD, PATH, /usr/bin/etcd),
# openssl only if missing, then runs build-k8s.sh (instant when its cache is warm).
# Concurrent runs are serialised on a lock so two callers never compile at the same time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

apt_install() {
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "setup-deps: installing $*" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

if [[ -n "${E2E_ETCD:-}" ]]; then
  [[ -x "$E2E_ETCD" ]] || { echo "E2E_ETCD=$E2E_ETCD is not executable" >&2; exit 1; }
elif ! command -v etcd >/dev/null 2>&1 && [[ ! -x /usr/bin/etcd ]]; then
  apt_install etcd-server
fi
command -v openssl >/dev/null 2>&1 || apt_install openssl

# The lock lives next to the build cache (same path as e2e/harness/cluster.py uses).
lockdir=${XDG_CACHE_HOME:-$HOME/.cache}/gang-extender/k8s
mkdir -p "$lockdir"
exec 9>"$lockdir/.build.lock"
if ! flock -n 9; then
  echo "setup-deps: another build of the Kubernetes components is running; waiting" >&2
  flock 9
fi
"$here/build-k8s.sh"

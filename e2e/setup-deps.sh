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

# The lock lives next to the build cache (same path as e2e/harness/binaries.py uses).
lockdir=${XDG_CACHE_HOME:-$HOME/.cache}/gang-extender/k8s
mkdir -p "$lockdir"
exec 9>"$lockdir/.build.lock"
if ! flock -n 9; then
  echo "setup-deps: another build of the Kubernetes components is running; waiting" >&2
  flock 9
fi
"$here/build-k8s.sh"

# ---- helm and kustomize (deploy/ and charts/ tests; block owned by the install story) ----
# Pinned versions built from the Go module proxy into a cache outside the checkout, one
# directory per version, with $tools/helm and $tools/kustomize pointing at the pinned ones.
# Skipped when already built. All output goes to stderr: stdout is the k8s binary directory.
helm_version=v3.22.0        # go 1.26, k8s.io/client-go v0.37
kustomize_version=v5.8.2    # go 1.26 (v5.8.3 needs go 1.27)
tools=${XDG_CACHE_HOME:-$HOME/.cache}/gang-extender/tools
mkdir -p "$tools"
exec 8>"$tools/.install.lock"
flock 8
if [[ ! -x "$tools/helm-$helm_version/helm" ]]; then
  echo "setup-deps: building helm $helm_version into $tools (first run only)" >&2
  # The ldflags a release build sets: its version, and the Kubernetes version `helm
  # template` assumes (otherwise v1.20, which fails charts declaring kubeVersion).
  hpkg=helm.sh/helm/v3
  GOBIN="$tools/helm-$helm_version" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w \
    -X $hpkg/internal/version.version=$helm_version \
    -X $hpkg/pkg/lint/rules.k8sVersionMajor=1 -X $hpkg/pkg/lint/rules.k8sVersionMinor=37 \
    -X $hpkg/pkg/chartutil.k8sVersionMajor=1 -X $hpkg/pkg/chartutil.k8sVersionMinor=37" \
    "$hpkg/cmd/helm@$helm_version" >&2
fi
if [[ ! -x "$tools/kustomize-$kustomize_version/kustomize" ]]; then
  echo "setup-deps: building kustomize $kustomize_version into $tools (first run only)" >&2
  GOBIN="$tools/kustomize-$kustomize_version" CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$kustomize_version" >&2
fi
ln -sfn "helm-$helm_version/helm" "$tools/helm"
ln -sfn "kustomize-$kustomize_version/kustomize" "$tools/kustomize"
flock -u 8

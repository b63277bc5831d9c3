#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kube-scheduler from the pinned
# Kubernetes Go modules into a cache outside the checkout, so only the first run on a
# machine pays the ~7 minute compile. Prints the directory holding the binaries.
#
#   build-k8s.sh            the default control plane (e2e/k8sbuild/go.mod, 1.37)
#   build-k8s.sh 1.36       another minor version, pinned by e2e/k8sbuild-1.36/go.mod
#                           (the K8S environment variable does the same), cached beside
#                           the default in ~/.cache/gang-extender/k8s/<version>
#
# The cache is stamped with a hash of go.mod (all but its `module` line, which only
# names the directory) and go.sum, so moving a pin between module dirs (a new default)
# reuses binaries already built from it.
#
# E2E_K8S_BIN=<dir> skips the build and uses binaries already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
minor=${1:-${K8S:-}}
moddir="$here/k8sbuild"
if [[ -n "$minor" && -f "$here/k8sbuild-$minor/go.mod" ]]; then
  moddir="$here/k8sbuild-$minor"
elif [[ -n "$minor" ]]; then
  default=$(sed -n 's/^require k8s.io\/kubernetes v\([0-9]*\.[0-9]*\)\.[0-9]*$/\1/p' "$moddir/go.mod")
  if [[ "$minor" != "$default" ]]; then
    echo "no module dir for Kubernetes $minor: make one with" \
      "e2e/k8sbuild/gen_gomod.sh v$minor.<patch> e2e/k8sbuild-$minor" >&2
    exit 1
  fi
fi
version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$moddir/go.mod")
if [[ -n "${E2E_K8S_BIN:-}" ]]; then
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$E2E_K8S_BIN/$b" ]] || { echo "E2E_K8S_BIN=$E2E_K8S_BIN has no executable $b" >&2; exit 1; }
  done
  echo "$E2E_K8S_BIN"; exit 0
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gang-extender/k8s/$version
modhash=$(grep -v '^module ' "$moddir/go.mod" | cat - "$moddir/go.sum" | sha256sum | cut -c1-12)
stamp="$cache/.built-$modhash"
if [[ -f "$stamp" ]]; then echo "$cache"; exit 0; fi
mkdir -p "$cache"
echo "building Kubernetes $version components into $cache (first run only, ~7 min on 2 cores)" >&2
cd "$moddir"
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitVersion=$version" \
    -o "$cache/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2
  mv "$cache/$b.tmp" "$cache/$b"
done
touch "$stamp"
echo "$cache"

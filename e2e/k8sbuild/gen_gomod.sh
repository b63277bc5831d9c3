#!/usr/bin/env bash
# Regenerates go.mod for a Kubernetes release: k8s.io/kubernetes cannot be required
# without pinning each staging module it replaces with a local path upstream.
#
#   gen_gomod.sh v1.37.2              (rewrites e2e/k8sbuild, the default control plane)
#   gen_gomod.sh v1.36.3 DIR          (writes DIR, e.g. e2e/k8sbuild-1.36, another minor
#                                      version built side by side by build-k8s.sh K8S=1.36)
set -euo pipefail
ver=${1:?usage: gen_gomod.sh v1.37.2 [DIR]}
here=$(cd "$(dirname "$0")" && pwd)
dir=${2:-$here}
staging=${ver/v1./v0.}
mkdir -p "$dir"
cd "$dir"
# Each module dir needs the import list that keeps the commands' dependencies in go.sum.
[[ -f tools.go ]] || cp "$here/tools.go" tools.go
modfile=$(go mod download -json "k8s.io/kubernetes@${ver}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
{
  echo "module gang-extender/e2e/$(basename "$dir")"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes ${ver}"
  echo
  echo "replace ("
  grep -E '=> ./staging/src/' "$modfile" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} > go.mod
go mod tidy

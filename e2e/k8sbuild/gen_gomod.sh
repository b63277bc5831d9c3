#!/usr/bin/env bash
# Regenerates go.mod for a Kubernetes release: k8s.io/kubernetes cannot be required
# without pinning each staging module it replaces with a local path upstream.
set -euo pipefail
ver=${1:?usage: gen_gomod.sh v1.36.3}
staging=${ver/v1./v0.}
cd "$(dirname "$0")"
modfile=$(go mod download -json "k8s.io/kubernetes@${ver}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
{
  echo "module gang-extender/e2e/k8sbuild"
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

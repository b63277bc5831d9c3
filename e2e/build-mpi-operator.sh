#!/usr/bin/env bash
# Builds the Kubeflow MPI Operator, unchanged, from its Go module into a cache outside the
# checkout, next to the release manifest of the same module (its CRD and RBAC), so the e2e
# test runs a real third-party operator against the gang scheduler. Only the first run on a
# machine pays the compile; afterwards this returns at once. Prints the cache directory
# (the only stdout line), which holds `mpi-operator` and `mpi-operator.yaml`.
#
# Why a copy of the module: the module cache is read-only, and building from the module's
# own directory makes its go.mod (and any replace directive in it) decide the dependency
# versions, exactly as upstream's release build does, instead of a go.mod of ours.
# E2E_MPI_OPERATOR_DIR=<dir> skips the build and uses a directory laid out the same way.
set -euo pipefail

module=github.com/kubeflow/mpi-operator
version=v0.6.0   # issue 19: served by the proxy as an exact version

if [[ -n "${E2E_MPI_OPERATOR_DIR:-}" ]]; then
  for f in mpi-operator mpi-operator.yaml; do
    [[ -e "$E2E_MPI_OPERATOR_DIR/$f" ]] || {
      echo "E2E_MPI_OPERATOR_DIR=$E2E_MPI_OPERATOR_DIR has no $f" >&2; exit 1; }
  done
  echo "$E2E_MPI_OPERATOR_DIR"; exit 0
fi

root=${XDG_CACHE_HOME:-$HOME/.cache}/gang-extender/mpi-operator
cache=$root/$version
# The ldflags of upstream's Makefile (target mpi-operator.v2), minus the build date so the
# binary is reproducible; GitSHA is filled in from the module's origin below.
pkg=$module/pkg/version
ldflags="-s -w -X $pkg.Version=$version -X $pkg.GitSHA=@SHA@"
# The stamp names what decides the binary (module version, flags), not this file's text,
# so editing a comment here does not cost every machine a rebuild.
recipe=$(echo "$module@$version CGO_ENABLED=0 -trimpath $ldflags" | sha256sum | cut -c1-12)
stamp="$cache/.built-$recipe"
if [[ -f "$stamp" ]]; then echo "$cache"; exit 0; fi

mkdir -p "$root"
exec 9>"$root/.build.lock"
if ! flock -n 9; then
  echo "build-mpi-operator: another build is running; waiting" >&2
  flock 9
  if [[ -f "$stamp" ]]; then echo "$cache"; exit 0; fi
fi

command -v go >/dev/null || { echo "build-mpi-operator: go not found (Go >= 1.23 needed)" >&2; exit 1; }
t0=$(date +%s)
echo "build-mpi-operator: building $module@$version into $cache (first run only)" >&2
# Fetched by exact version: the proxy refuses version listings, so never @latest.
info=$(go mod download -json "$module@$version")
read -r src sha < <(python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("Error"):
    sys.exit("go mod download: " + d["Error"])
print(d["Dir"], (d.get("Origin") or {}).get("Hash", "unknown"))' <<<"$info")

work=$(mktemp -d "${TMPDIR:-/tmp}/mpi-operator-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$src/." "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$cache"
rm -f "$cache"/.built-*
cd "$work/src"
# nice: the compile shares the machine with whatever else runs (the tests, other builds).
CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags "${ldflags/@SHA@/$sha}" \
  -o "$cache/mpi-operator.tmp" ./cmd/mpi-operator >&2
mv "$cache/mpi-operator.tmp" "$cache/mpi-operator"
# The release manifest of the same version: Namespace, CRD mpijobs.kubeflow.org, the
# operator's ServiceAccount and RBAC, and its Deployment (whose args the test reuses).
cp deploy/v2beta1/mpi-operator.yaml "$cache/mpi-operator.yaml"
chmod 0644 "$cache/mpi-operator.yaml"
touch "$stamp"
echo "build-mpi-operator: done in $(( $(date +%s) - t0 ))s" >&2
echo "$cache"

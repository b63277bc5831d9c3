#!/usr/bin/env bash
# Writes extender/kube/k8s_core_v1.binpb: the protobuf descriptors of k8s.io/api's core/v1
# and everything it imports from k8s.io/apimachinery, compiled by protoc (grpcio-tools, a
# dev dependency) from the generated.proto files of the module versions that go.mod here
# pins for the control plane the tests run. extender/kube/protobuf.py builds its message
# classes from it; tests/kube/test_protobuf.py checks it matches what this script writes.
#
#   bash e2e/k8sbuild/gen-proto.sh [OUT]     (OUT defaults to the file in the package)
#
# Why descriptors rather than protoc's generated Python: the same classes (the protobuf
# runtime builds them from the same descriptors either way), without 1,500 lines of
# generated modules whose absolute imports ("k8s.io.api...") would need rewriting.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/extender/kube/k8s_core_v1.binpb}
python=${PYTHON:-$repo/.venv/bin/python}
version() { sed -n "s|^\s*$1 => $1 \(v[0-9.]*\)\$|\1|p" "$here/go.mod"; }
api=$(version k8s.io/api)
machinery=$(version k8s.io/apimachinery)
[[ -n "$api" && -n "$machinery" ]] || { echo "no k8s.io/api or apimachinery pin in go.mod" >&2; exit 1; }
# `go mod download` fetches exact versions from the module proxy (or finds them cached).
dir() { (cd "$here" && go mod download -json "$1@$2") | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'; }
api_dir=$(dir k8s.io/api "$api")
machinery_dir=$(dir k8s.io/apimachinery "$machinery")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/k8s.io"
ln -s "$api_dir" "$tmp/k8s.io/api"
ln -s "$machinery_dir" "$tmp/k8s.io/apimachinery"
"$python" -m grpc_tools.protoc -I"$tmp" --include_imports --descriptor_set_out="$out" \
  k8s.io/api/core/v1/generated.proto 2> >(grep -v "is unused" >&2)
echo "$out: k8s.io/api $api, k8s.io/apimachinery $machinery" >&2

#!/usr/bin/env bash
# Runs the e2e suite against a kind cluster with gang-extender deployed from deploy/:
#   1. kind create cluster (e2e/kind/kind-config.yaml)
#   2. docker build the repo's Dockerfile with the image name deploy/ references, kind load it
#   3. kubectl apply --server-side -k deploy/ and wait for the Deployments to be Available
#   4. pytest e2e -m e2e with E2E_KUBECONFIG set (tests needing the local control plane or
#      fake nodes skip themselves; the gang tests marked any_cluster size their pods from
#      the real nodes and use the installed gang-scheduler: e2e/anycluster.py). CI runs
#      the same any_cluster tests in external mode against the local control plane
#      (e2e/tests/install/test_external_mode.py), since it has no Docker.
# Needs: docker, kind, kubectl on PATH. Not run on machines without Docker.
#
# Environment:
#   KIND_CLUSTER     cluster name (default gang-e2e)
#   KIND_NODE_IMAGE  node image, e.g. kindest/node:v1.36.x (default: kind's default)
#   KEEP_CLUSTER=1   do not delete the cluster at the end (it is reused if it exists)
#   ARTIFACTS        where to export cluster logs on failure (default /tmp/gang-e2e-kind-logs)
#   PYTEST_ARGS      extra pytest arguments (e.g. "-k quorum -x")
#   E2E_IMAGE        test container image the suite uses (default busybox:1.36), preloaded
#   E2E_GANG_SCHEDULER  schedulerName of the installed gang scheduler (default gang-scheduler)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${KIND_CLUSTER:-gang-e2e}
artifacts=${ARTIFACTS:-/tmp/gang-e2e-kind-logs}
test_image=${E2E_IMAGE:-busybox:1.36}
python=${PYTHON:-$repo/.venv/bin/python}
workdir=$(mktemp -d)
kubeconfig="$workdir/kubeconfig"

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null 2>&1 || { echo "run.sh: $tool not found on PATH" >&2; exit 2; }
done

created=0
cleanup() {
  local rc=$?
  if [[ $rc -ne 0 ]] && kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    echo "run.sh: failed (exit $rc); exporting cluster logs to $artifacts" >&2
    kind export logs "$artifacts" --name "$cluster" >&2 || true
  fi
  if [[ $created -eq 1 && "${KEEP_CLUSTER:-0}" != "1" ]]; then
    kind delete cluster --name "$cluster" >&2 || true
  fi
  rm -rf "$workdir"
  exit $rc
}
trap cleanup EXIT

# 1. Cluster (reused when KEEP_CLUSTER=1 left one behind).
if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  echo "run.sh: reusing kind cluster $cluster" >&2
else
  image_args=()
  [[ -n "${KIND_NODE_IMAGE:-}" ]] && image_args=(--image "$KIND_NODE_IMAGE")
  kind create cluster --name "$cluster" --config "$repo/e2e/kind/kind-config.yaml" \
    "${image_args[@]}" --wait 180s
  created=1
fi
kind get kubeconfig --name "$cluster" > "$kubeconfig"
export KUBECONFIG="$kubeconfig"

# 2. Image: build it under the exact name the rendered deploy/ manifests use, so the
#    Deployment (imagePullPolicy IfNotPresent) finds it on the nodes without a registry.
kubectl kustomize "$repo/deploy" > "$workdir/deploy.yaml"
image=$(sed -n 's/^[[:space:]]*image:[[:space:]]*\([^[:space:]]*gang-extender[^[:space:]]*\)[[:space:]]*$/\1/p' \
  "$workdir/deploy.yaml" | head -n1)
[[ -n "$image" ]] || { echo "run.sh: no gang-extender image found in deploy/" >&2; exit 1; }
echo "run.sh: building $image" >&2
docker build -t "$image" "$repo"
kind load docker-image "$image" --name "$cluster"
# The test pods' image, preloaded so the suite does not depend on registry rate limits.
if docker pull "$test_image" >/dev/null 2>&1; then
  kind load docker-image "$test_image" --name "$cluster"
fi

# 3. Deploy and wait for every Deployment of deploy/.
kubectl apply --server-side -k "$repo/deploy"
kubectl get -f "$workdir/deploy.yaml" \
  -o jsonpath='{range .items[?(@.kind=="Deployment")]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' |
while read -r ns name; do
  [[ -n "$name" ]] || continue
  kubectl -n "$ns" rollout status "deployment/$name" --timeout=180s
done

# 4. The suite.
cd "$repo"
# shellcheck disable=SC2086 # PYTEST_ARGS is split on purpose
E2E_KUBECONFIG="$kubeconfig" "$python" -m pytest e2e -m e2e -ra ${PYTEST_ARGS:-}

#!/usr/bin/env bash
# Builds a third-party Kubernetes operator, unchanged, from its Go module into a cache outside
# the checkout, next to the manifests of the same module (CRD, RBAC, Deployment), so the e2e
# tests run real operators against the gang scheduler. Only the first run on a machine pays
# the compile; afterwards this returns at once. Prints the cache directory (the only stdout
# line), which holds the binary, named like the operator, and the copied manifests.
#
#   e2e/build-operator.sh mpi-operator       # Kubeflow MPI Operator (e2e/integrations/mpi_operator.py)
#   e2e/build-operator.sh training-operator  # Kubeflow Training Operator (e2e/integrations/training_operator.py)
#   e2e/build-operator.sh scheduler-plugins  # Coscheduling's kube-scheduler (bench/e2e/systems.py, system D)
#   e2e/build-operator.sh kueue              # Kueue's manager (e2e/integrations/kueue.py)
#   e2e/build-operator.sh cluster-autoscaler # Cluster Autoscaler, kwok provider (e2e/integrations/autoscaler.py)
#   e2e/build-operator.sh jobset             # JobSet's controller manager (e2e/integrations/jobset.py)
#
# Why a copy of the module: the module cache is read-only, and building from the module's
# own directory makes its go.mod (and any replace directive in it) decide the dependency
# versions, exactly as upstream's release build does, instead of a go.mod of ours.
# E2E_<NAME>_DIR (E2E_MPI_OPERATOR_DIR, E2E_TRAINING_OPERATOR_DIR) skips the build and
# uses a directory laid out the same way.
set -euo pipefail

edits=()   # go mod edit flags, for a module whose go.mod needs a change to build
tags=""    # go build -tags
git_repo="" git_tag="" git_commit="" git_subdir=""   # source from git, not the proxy
name=${1:?usage: build-operator.sh mpi-operator|training-operator|scheduler-plugins|kueue|cluster-autoscaler|jobset}
case "$name" in
  mpi-operator)
    module=github.com/kubeflow/mpi-operator
    version=v0.6.0   # issue 19: served by the proxy as an exact version
    package=./cmd/mpi-operator
    # The ldflags of upstream's Makefile (target mpi-operator.v2), minus the build date so
    # the binary is reproducible; @SHA@ becomes the module's origin commit.
    pkg=$module/pkg/version
    xflags="-X $pkg.Version=$version -X $pkg.GitSHA=@SHA@"
    # The release manifest: Namespace, CRD mpijobs.kubeflow.org, ServiceAccount, RBAC and
    # the Deployment whose args the test reuses.
    copies=("deploy/v2beta1/mpi-operator.yaml:mpi-operator.yaml")
    ;;
  training-operator)
    module=github.com/kubeflow/training-operator
    # v1.7.0: the last release without admission webhooks. v1.8 serves validating
    # webhooks with its own certificates, which the API server must reach through a
    # Service; a process on loopback cannot be that.
    version=v1.7.0
    package=./cmd/training-operator.v1
    xflags=""        # upstream's Dockerfile builds without version ldflags
    # Kustomize bases: crds/ (one CRD per job kind), rbac/, deployment.yaml.
    copies=("manifests/base:manifests")
    ;;
  scheduler-plugins)
    # Not an operator: kube-scheduler with the out-of-tree plugins compiled in, the peer
    # the benchmark compares with (issue 20, system D). Same recipe: module copy, its go.mod.
    module=sigs.k8s.io/scheduler-plugins
    version=v0.34.7
    package=./cmd/scheduler
    # Stamped with the Kubernetes version its kube-scheduler is built from (its go.mod's
    # k8s.io/kubernetes). Upstream's Makefile stamps the plugins' tag, v0.34.7, which this
    # kube-scheduler reads as Kubernetes 0.34 and refuses to start ("emulation version 0.34
    # is not between [1.31, 0.34.0]").
    xflags="-X k8s.io/component-base/version.gitVersion=v1.34.7"
    # go.mod replaces k8s.io/csi-translation-lib with v0.34.7, which the module proxy refuses
    # (its zip is not served); v0.34.3 is served and builds. The only deviation from the
    # module's own go.mod; go.sum gains its hashes through -mod=mod.
    edits=("-replace=k8s.io/csi-translation-lib=k8s.io/csi-translation-lib@v0.34.3")
    # The PodGroup CRD and the Coscheduling profile of the same module.
    copies=("config/crd/bases/scheduling.x-k8s.io_podgroups.yaml:podgroups-crd.yaml"
            "manifests/coscheduling/scheduler-config.yaml:coscheduling-config.yaml")
    ;;
  kueue)
    # Quotas in front of the scheduler (issue 28, item 6): admits a Job or a pod group by
    # ClusterQueue quota, then leaves placement to the pods' scheduler, here ours.
    module=sigs.k8s.io/kueue
    version=v0.17.0   # served by the proxy as an exact version
    package=./cmd/kueue
    # upstream's Makefile ldflags (LD_FLAGS), minus the build date
    pkg=$module/pkg/version
    xflags="-X $pkg.GitVersion=$version -X $pkg.GitCommit=@SHA@"
    # CRDs of the same version (the bases: no conversion-webhook patches, see e2e/integrations/kueue.py),
    # the webhook configurations with the kustomize patch that gives the pod webhook its
    # namespace selector, and the sample Configuration the manager's Deployment mounts.
    copies=("config/components/crd/bases:crds"
            "config/components/webhook:webhook"
            "config/components/manager/controller_manager_config.yaml:controller_manager_config.yaml"
            "config/components/rbac:rbac")
    ;;
  cluster-autoscaler)
    # Capacity for whole gangs through ProvisioningRequests (issue 31). The module proxy
    # serves no version of k8s.io/autoscaler/cluster-autoscaler (403 "not available" for
    # every release tried, v1.30.0 to v1.36.0; the repository tags its releases
    # cluster-autoscaler-X.Y.Z, not as Go module versions), so the source is the
    # repository at the release tag, checked against its commit; its go.mod (with its
    # replace of ./apis) still decides every dependency, fetched from the proxy.
    # E2E_AUTOSCALER_GIT: a clone or mirror to read it from instead of GitHub.
    module=k8s.io/autoscaler/cluster-autoscaler
    version=v1.36.1
    git_repo=${E2E_AUTOSCALER_GIT:-https://github.com/kubernetes/autoscaler}
    git_tag=cluster-autoscaler-1.36.1
    git_commit=35e8a280425c76a4040f57ae0fa232a952c02024
    git_subdir=cluster-autoscaler
    package=.
    # Only the kwok cloud provider (cloudprovider/router/router_kwok.go): Node objects
    # made from a template, which the fake kubelet runs. Upstream's Makefile ldflags are
    # -s plus the version, which version/version.go of the tag already holds.
    tags=kwok
    xflags=""
    # The ProvisioningRequest CRD of the same source.
    copies=("apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml:crds/autoscaling.x-k8s.io_provisioningrequests.yaml")
    ;;
  jobset)
    # A set of Jobs gang-placed as one (issue 45, item 1): the controller that creates a
    # JobSet's replicated Jobs, labels their pods and restarts the whole set on failure.
    module=sigs.k8s.io/jobset
    version=v0.11.1   # served by the proxy as an exact version
    package=.         # main.go at the module's root (upstream's Makefile: go build main.go)
    # upstream's Makefile LD_FLAGS (it stamps no build date)
    pkg=$module/pkg/version
    xflags="-X $pkg.GitVersion=$version -X $pkg.GitCommit=@SHA@"
    # The CRD bases (no conversion patches), the webhook configurations the manager
    # serves, the sample Configuration and the RBAC of the same version.
    copies=("config/components/crd/bases:crds"
            "config/components/webhook:webhook"
            "config/components/manager/controller_manager_config.yaml:controller_manager_config.yaml"
            "config/components/rbac:rbac")
    ;;
  *) echo "build-operator: unknown operator $name" >&2; exit 2 ;;
esac

envvar=E2E_$(echo "$name" | tr 'a-z-' 'A-Z_')_DIR
if [[ -n "${!envvar:-}" ]]; then
  dir=${!envvar}
  [[ -x "$dir/$name" ]] || { echo "$envvar=$dir has no executable $name" >&2; exit 1; }
  echo "$dir"; exit 0
fi

root=${XDG_CACHE_HOME:-$HOME/.cache}/gang-extender/$name
cache=$root/$version
ldflags="-s -w${xflags:+ $xflags}"
# The stamp names what decides the result (module version, flags), not this file's text, so
# editing a comment here does not cost every machine a rebuild.
recipe=$(echo "$module@$version${git_commit:+ $git_commit} CGO_ENABLED=0 -trimpath $ldflags${tags:+ -tags $tags}${edits[*]:+ ${edits[*]}}" \
  | sha256sum | cut -c1-12)
stamp="$cache/.built-$recipe"
if [[ -f "$stamp" ]]; then echo "$cache"; exit 0; fi

# The autoscaler's source is on GitHub only, which CI and fresh machines may not reach:
# there the e2e tests use the stand-in (e2e/integrations/autoscaler_standin.py), and `make operators` goes on.
# Nothing on stdout then, so a test that asks for the real one still fails to find it.
if [[ "$name" == cluster-autoscaler && -z "${E2E_AUTOSCALER_GIT:-}" ]] &&
   ! GIT_TERMINAL_PROMPT=0 timeout 5 git ls-remote --exit-code "$git_repo" "refs/tags/$git_tag" \
     >/dev/null 2>&1; then
  echo "build-operator: $git_repo not reachable; the e2e tests will use the ProvisioningRequest stand-in (e2e/integrations/autoscaler_standin.py)" >&2
  exit 0
fi

mkdir -p "$root"
exec 9>"$root/.build.lock"
if ! flock -n 9; then
  echo "build-operator: another build of $name is running; waiting" >&2
  flock 9
  if [[ -f "$stamp" ]]; then echo "$cache"; exit 0; fi
fi

command -v go >/dev/null || { echo "build-operator: go not found" >&2; exit 1; }
t0=$(date +%s)
echo "build-operator: building $module@$version into $cache (first run only)" >&2
work=$(mktemp -d "${TMPDIR:-/tmp}/$name-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
if [[ -n "$git_repo" ]]; then
  git clone --quiet --bare --depth 1 --branch "$git_tag" "$git_repo" "$work/git" >&2
  sha=$(git --git-dir="$work/git" rev-parse "$git_tag^{commit}")
  [[ "$sha" == "$git_commit" ]] || {
    echo "build-operator: $git_repo tag $git_tag is $sha, expected $git_commit" >&2; exit 1; }
  mkdir -p "$work/src"
  git --git-dir="$work/git" archive "$sha" "$git_subdir" \
    | tar -x -C "$work/src" --strip-components=1
else
  # Fetched by exact version: the proxy refuses version listings, so never @latest.
  info=$(go mod download -json "$module@$version")
  read -r src sha < <(python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("Error"):
    sys.exit("go mod download: " + d["Error"])
print(d["Dir"], (d.get("Origin") or {}).get("Hash", "unknown"))' <<<"$info")
  cp -r "$src/." "$work/src"
fi
chmod -R u+w "$work/src"
mkdir -p "$cache"
rm -f "$cache"/.built-*
cd "$work/src"
modflag=""
if (( ${#edits[@]} )); then go mod edit "${edits[@]}"; modflag="-mod=mod"; fi
# nice: the compile shares the machine with whatever else runs (the tests, other builds).
CGO_ENABLED=0 nice -n 19 go build $modflag ${tags:+-tags "$tags"} -trimpath \
  -ldflags "${ldflags//@SHA@/$sha}" -o "$cache/$name.tmp" "$package" >&2
mv "$cache/$name.tmp" "$cache/$name"
for c in "${copies[@]}"; do
  from=${c%%:*} to=${c#*:}
  rm -rf "${cache:?}/$to"
  mkdir -p "$(dirname "$cache/$to")"
  cp -r "$from" "$cache/$to"
  chmod -R u+w,a+rX "$cache/$to"
done
touch "$stamp"
echo "build-operator: $name done in $(( $(date +%s) - t0 ))s" >&2
echo "$cache"

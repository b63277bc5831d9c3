# Two entry points (README): `make demo` and `make test`. Everything else they need is
# installed here: a virtualenv with the package, etcd from Debian, and kube-apiserver,
# kube-controller-manager and kube-scheduler built from the pinned Kubernetes Go modules
# (v1.37.2, e2e/k8sbuild/go.mod) into ~/.cache/gang-extender (once per machine, seconds
# afterwards).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup deps operators demo test lint unit e2e e2e-k8s bench clean crds

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) deps

deps:
	bash e2e/setup-deps.sh >/dev/null

# The Kubeflow MPI Operator v0.6.0 and Training Operator v1.7.0 that e2e/tests/ runs
# unchanged (test_mpi_operator.py, test_training_operator.py), and scheduler-plugins
# v0.34.7 (Coscheduling, the peer bench.e2e compares with; test_peer_schedulers.py), and
# Kueue v0.17.0 (test_kueue.py), built
# from their Go modules into ~/.cache/gang-extender/<name>/ (once per machine: about 5, 3,
# 7 and 8 minutes of CPU; instant afterwards). Not part of setup, so `make demo` does not wait for them; built here
# rather than inside pytest, whose per-test timeout a cold build could exceed.
# The Cluster Autoscaler 1.36.1 (test_provisioning.py) is built the same way from the
# autoscaler repository's release tag, which the module proxy does not serve (about 8
# minutes of CPU). JobSet v0.11.1 (test_jobset.py): about 3 minutes of CPU (a cold
# build took 128 s, 160 s of CPU, on 2 cores, downloading its dependencies too).
operators:
	bash e2e/build-operator.sh mpi-operator >/dev/null
	bash e2e/build-operator.sh training-operator >/dev/null
	bash e2e/build-operator.sh scheduler-plugins >/dev/null
	bash e2e/build-operator.sh kueue >/dev/null
	bash e2e/build-operator.sh cluster-autoscaler >/dev/null
	bash e2e/build-operator.sh jobset >/dev/null

# The Helm chart's copy of each CRD, written from its one source in crds/ (deploy/ reads
# crds/ itself). tests/repo/test_crds.py fails while a copy differs.
crds: $(STAMP)
	$(PY) -m tools.sync_crds

demo: setup
	$(PY) -m demo --out demo-out

lint: $(STAMP)
	$(VENV)/bin/ruff check extender tests e2e bench demo tools
	$(VENV)/bin/mypy --strict extender bench e2e tests demo tools

unit: $(STAMP)
	$(VENV)/bin/pytest tests -q

e2e: setup operators
	$(VENV)/bin/pytest e2e -q

# The whole suite: lint, unit and property tests, then the e2e tests on the local
# control plane. pytest exits 5 when it collected nothing, which fails this target.
test: setup operators lint
	$(VENV)/bin/pytest tests e2e -q -p no:cacheprovider

# The e2e gang tests on another minor version of Kubernetes, side by side with the
# default (1.37, e2e/k8sbuild/go.mod): `make e2e-k8s K8S=1.36` builds (once, ~10+
# minutes of CPU) and caches the binaries pinned by e2e/k8sbuild-1.36/go.mod in
# ~/.cache/gang-extender/k8s/<version>, then runs TESTS on a control plane of that
# version (K8S reaches e2e/build-k8s.sh through the harness). K8S=1.37 names the default.
# TESTS=e2e runs the whole e2e suite there. docs/testing.md says what each version
# passed.
K8S ?=
TESTS ?= e2e/tests/gangs/test_smoke_extender.py e2e/tests/gangs/test_gang_lifecycle.py \
	e2e/tests/gangs/test_gang_placement.py e2e/tests/gangs/test_gang_sources.py \
	e2e/tests/harness/test_job_completes.py e2e/tests/gangs/test_topology.py \
	e2e/tests/integrations/test_upstream_status.py e2e/tests/integrations/test_in_tree_gangs.py \
	e2e/tests/integrations/test_job_gangs.py e2e/tests/integrations/test_kueue.py
e2e-k8s: setup
	@test -n "$(K8S)" || { echo "usage: make e2e-k8s K8S=1.36 [TESTS=...]" >&2; exit 2; }
	K8S=$(K8S) bash e2e/build-k8s.sh >/dev/null
	K8S=$(K8S) $(VENV)/bin/pytest $(TESTS) -q -p no:cacheprovider

clean:
	rm -rf $(VENV) demo-out .pytest_cache .mypy_cache .ruff_cache

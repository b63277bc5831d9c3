"""How the install keeps each part to its own (issue 27, item 6), read from deploy/ and
the Dockerfile; what the accounts may do is tests/deploy/test_security.py, and the behaviour on a
real API server is e2e test_deploy and test_admission_policy.

* Each container reads only its own account's token: the kube-scheduler the pod's
  projected token, the extender its account's token Secret.
* The ValidatingAdmissionPolicies on pod and node patches judge the extender's account
  and let through the annotations the code writes, only where the code writes them; the
  one on deletes lets it delete only PodTemplates and ProvisioningRequests carrying its
  marker.
* A PodDisruptionBudget and a priority keep the scheduler up; a NetworkPolicy admits only
  scrapes of the metrics ports.
* The image's inputs are pinned: requirements.lock covers every runtime dependency with
  hashes, and the Dockerfile installs from it with --require-hashes on a base image
  pinned by version and digest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from extender.core.model.provisioning_request import (
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    CONSUMES_FOR,
    DNS_SUBDOMAIN,
    GANG_ANNOTATION,
    MAX_REQUEST_NAME,
    SCALE_DOWN_DISABLED,
    SCALE_DOWN_OURS,
    request_name,
)
from extender.core.model.sources import (
    JOBSET_GANG_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_PER_JOB,
    JOBSET_RJOB_LABEL,
    KUEUE_GROUP_LABEL,
    PRECEDENCE,
    VOLCANO_GROUP_ANNOTATION,
)
from extender.core.model.types import GROUP_LABEL
from extender.scheduler.wakeups import WAKE_ANNOTATION
from tests.deploy.accounts import EXTENDER_SA, NS, SCHEDULER_SA

REPO = Path(__file__).resolve().parents[2]


def _rbac_docs() -> list[dict[str, Any]]:
    return [doc for f in sorted((REPO / "deploy" / "rbac").glob("*.yaml"))
            for doc in yaml.safe_load_all(f.read_text()) if isinstance(doc, dict)]


# ----- each container gets its own account's token ------------------------------------

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def _deploy_docs(*names: str) -> list[dict[str, Any]]:
    return [d for name in names
            for d in yaml.safe_load_all((REPO / "deploy" / name).read_text())
            if isinstance(d, dict)]


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = _deploy_docs("deployment.yaml")[0]["spec"]["template"]["spec"]
    return spec


def _mounts(container: str) -> dict[str, str]:
    spec = _pod_spec()
    c = next(c for c in [*spec["initContainers"], *spec["containers"]]
             if c["name"] == container)
    return {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}


def test_each_container_reads_only_its_own_accounts_token() -> None:
    """The pod's account is the kube-scheduler's; nothing is automounted, the
    kube-scheduler mounts the pod's projected token and the extender the token Secret
    of its own account, both at the path in-cluster credentials are read from."""
    spec = _pod_spec()
    assert spec["serviceAccountName"] == SCHEDULER_SA
    assert spec["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in spec["volumes"]}

    sched_volume = volumes[_mounts("kube-scheduler")[TOKEN_PATH]]
    sources = sched_volume["projected"]["sources"]
    assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}} in sources

    ext_volume = volumes[_mounts("gang-extender")[TOKEN_PATH]]
    secret_name = ext_volume["secret"]["secretName"]
    assert [i["key"] for i in ext_volume["secret"]["items"]] == ["token", "ca.crt", "namespace"]
    secret = next(d for d in _rbac_docs() if d["kind"] == "Secret")
    assert secret["metadata"]["name"] == secret_name
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": EXTENDER_SA}
    # No container sees the other's token.
    for container, own in (("kube-scheduler", sched_volume), ("gang-extender", ext_volume)):
        others = {name for name, v in volumes.items()
                  if ("secret" in v or "projected" in v) and v is not own}
        assert not set(_mounts(container).values()) & others, container


# ----- the extender's pod patches: its wake-up annotation only ------------------------


def _extender_patch_policy(name: str, resource: str, operation: str = "UPDATE"
                           ) -> dict[str, str]:
    """deploy/admission/`name`: shipped, a ValidatingAdmissionPolicy that fails closed on
    the extender's account's `operation`s of `resource`, bound to deny; its variables (what
    it lets through) for the caller to check against the code."""
    kustomization = yaml.safe_load((REPO / "deploy" / "kustomization.yaml").read_text())
    assert f"admission/{name}" in kustomization["resources"]
    policy, binding = _deploy_docs(f"admission/{name}")
    assert policy["kind"] == "ValidatingAdmissionPolicy"
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["failurePolicy"] == "Fail"
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert all(r["operations"] == [operation] for r in rules)
    assert any(resource in r["resources"] for r in rules)
    condition, = policy["spec"]["matchConditions"]
    assert f"'system:serviceaccount:{NS}:{EXTENDER_SA}'" in condition["expression"]
    assert binding["kind"] == "ValidatingAdmissionPolicyBinding"
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Deny"]}
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_the_pod_patch_policy_is_shipped_for_the_extenders_account() -> None:
    """Which requests it judges (the extender's updates of pods) and the annotation it
    lets through are the ones the code uses; its behaviour is e2e
    test_admission_policy."""
    variables = _extender_patch_policy("extender-pod-patches.yaml", "pods")
    assert variables["wake"] == f"'{WAKE_ANNOTATION}'"
    # The consume annotations of a gang's ProvisioningRequest (scheduler/provisioner.py)
    # are the only others it may set, with its own marker naming the gang beside them.
    assert yaml.safe_load(variables["provisioning"]) == [CONSUME_ANNOTATION, CLASS_ANNOTATION]
    assert variables["consumesFor"] == f"'{CONSUMES_FOR}'"


def test_the_pod_patch_policy_puts_the_consume_annotation_only_on_its_gangs_pods() -> None:
    """Not on any pod: only on a member of a gang, marked for that gang, naming that
    gang's request as `request_name` names it (the CEL computes the same plain name and
    hashes nothing: only the ending is checked where `request_name` hashes). Its
    behaviour is e2e test_admission_policy."""
    variables = _extender_patch_policy("extender-pod-patches.yaml", "pods")
    policy, _ = _deploy_docs("admission/extender-pod-patches.yaml")
    rule = policy["spec"]["validations"][1]["expression"]
    for term in ("variables.gangSource != ''", "variables.marks.all(k, k in "
                 "variables.newAnnotations)", "variables.newAnnotations[variables.consumesFor] "
                 "== variables.gang", "== variables.requestName",
                 "|| variables.jobsetSplits.exists(n, variables.newAnnotations"
                 "[variables.consumesFor] == 'jobset:' + oldObject.metadata.namespace + '/' + n",
                 f"size(n + variables.suffix) <= {MAX_REQUEST_NAME}",
                 f"'^{DNS_SUBDOMAIN.pattern}$'"):
        assert term in " ".join(rule.split()), term
    # A JobSet's pod: its replicated Job's gang and its Job's, as sources.jobset_resolve
    # names them, unless its template chose per-job itself.
    splits = " ".join(variables["jobsetSplits"].split())
    assert (f"'{JOBSET_GANG_ANNOTATION}' in variables.oldAnnotations && "
            f"variables.oldAnnotations['{JOBSET_GANG_ANNOTATION}'] == '{JOBSET_PER_JOB}'"
            ) in splits
    assert "? [variables.gangName + '.' + variables.labels['" + JOBSET_RJOB_LABEL + "']," \
        in splits
    # The sources' keys, in sources.PRECEDENCE, and the names request_name makes.
    keys = [GROUP_LABEL, "schedulingGroup", VOLCANO_GROUP_ANNOTATION, JOBSET_NAME_LABEL,
            KUEUE_GROUP_LABEL]
    at = [variables["gangSource"].index(k) for k in keys]
    assert at == sorted(at)
    assert [f"'{s}'" in variables["gangSource"] for s in PRECEDENCE] == [True] * 5
    assert f"size(variables.requestName) <= {MAX_REQUEST_NAME}" in variables["plainName"]
    assert f"'^{DNS_SUBDOMAIN.pattern}$'" in variables["plainName"]
    assert request_name("ns/train") == "train-capacity"  # '-capacity' and no source
    assert request_name("volcano:ns/train") == "train-capacity.volcano"
    assert "'-capacity' + (variables.gangSource == 'scheduler-plugins' ? '' : '.' + " \
           "variables.gangSource)" in " ".join(variables["suffix"].split())


def test_the_node_patch_policy_is_shipped_for_the_extenders_account() -> None:
    """"patch nodes" is for the autoscaler's scale-down-disabled annotation and the
    extender's own beside it (scheduler/provisioner.py); its behaviour is e2e
    test_admission_policy."""
    variables = _extender_patch_policy("extender-node-patches.yaml", "nodes")
    assert yaml.safe_load(variables["scaleDown"]) == [SCALE_DOWN_DISABLED, SCALE_DOWN_OURS]


def test_the_node_patch_policy_leaves_an_operators_annotation_alone() -> None:
    """The scale-down-disabled annotation changes only where the extender's marker was
    (removed) or comes with it (set); the marker is neither added beside an operator's
    annotation nor removed from under ours. Its behaviour is e2e test_admission_policy."""
    policy, _ = _deploy_docs("admission/extender-node-patches.yaml")
    rules = [" ".join(v["expression"].split()) for v in policy["spec"]["validations"]]
    assert ("!variables.disabledChanged || (variables.disabledBefore ? variables.oursBefore "
            ": variables.oursAfter)") in rules
    assert ("(variables.oursBefore || !variables.oursAfter || !variables.disabledBefore) && "
            "(!variables.oursBefore || variables.oursAfter || !variables.disabledAfter)"
            ) in rules


def test_the_extender_may_delete_only_what_carries_its_marker() -> None:
    """RBAC's "delete podtemplates" and "delete provisioningrequests" cover any object of
    the kind: the policy on the extender's DELETEs of both requires our marker (the one
    scheduler/provisioner.py writes) on the object deleted. Its behaviour is e2e
    test_admission_policy."""
    variables = _extender_patch_policy("extender-deletes.yaml", "podtemplates", "DELETE")
    policy, _ = _deploy_docs("admission/extender-deletes.yaml")
    by_group = {g: r["resources"] for r in policy["spec"]["matchConstraints"]["resourceRules"]
                for g in r["apiGroups"]}
    assert by_group == {"": ["podtemplates"], "autoscaling.x-k8s.io": ["provisioningrequests"]}
    assert variables["marker"] == f"'{GANG_ANNOTATION}'"
    rule, = policy["spec"]["validations"]
    assert "variables.marker in oldObject.metadata.annotations" in rule["expression"]


# ----- availability: disruption budget, priority --------------------------------------


def test_the_scheduler_has_a_disruption_budget_and_a_priority() -> None:
    kustomization = yaml.safe_load((REPO / "deploy" / "kustomization.yaml").read_text())
    assert {"pdb.yaml", "network-policy.yaml"} <= set(kustomization["resources"])
    pdb, = _deploy_docs("pdb.yaml")
    deployment = _deploy_docs("deployment.yaml")[0]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    # Never blocks a drain of a single replica; one of two stays up.
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert _pod_spec()["priorityClassName"] == "system-cluster-critical"


def test_the_network_policy_admits_only_scrapes_of_the_metrics_ports() -> None:
    policy, = _deploy_docs("network-policy.yaml")
    deployment = _deploy_docs("deployment.yaml")[0]
    assert policy["spec"]["podSelector"]["matchLabels"] == (
        deployment["spec"]["selector"]["matchLabels"])
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rule, = policy["spec"]["ingress"]
    assert rule["from"], "an empty 'from' would admit every source"
    ports = {p["port"] for p in rule["ports"]}
    named = {p["name"] for c in [*_pod_spec()["initContainers"], *_pod_spec()["containers"]]
             for p in c.get("ports", [])}
    assert ports == named == {"metrics", "https-metrics"}


# ----- the image's pinned inputs ------------------------------------------------------


def _lock() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock: name -> (version, hashes)."""
    text = (REPO / "requirements.lock").read_text().replace("\\\n", " ")
    out: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *rest = line.split(" --hash=")
        req = Requirement(spec.strip())
        pins = [s for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1, f"not pinned exactly: {spec}"
        out[canonicalize_name(req.name)] = (pins[0].version, [h.strip() for h in rest])
    return out


def _pyproject() -> dict[str, Any]:
    import tomllib

    out: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())
    return out


def test_the_lock_pins_every_runtime_dependency_with_hashes() -> None:
    lock = _lock()
    project = _pyproject()
    declared = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    for dep in declared:
        req = Requirement(dep)
        name = str(canonicalize_name(req.name))
        assert name in lock, f"{req.name} is not in requirements.lock: compile it again"
        version, _ = lock[name]
        assert req.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {name}=={version}, pyproject.toml wants {req.specifier}")
    for name, (_, hashes) in lock.items():
        assert hashes and all(h.startswith("sha256:") and len(h) == 71 for h in hashes), name


def test_the_lock_is_closed_over_what_it_pins() -> None:
    """Every requirement of a locked package (for Linux, CPython 3.12) is locked too, so
    --require-hashes finds nothing missing. Read from the installed metadata of packages
    installed at the locked version (the test environment is built from the same
    versions); the rest cannot be checked here."""
    from importlib import metadata

    lock = _lock()
    env = {"python_version": "3.12", "python_full_version": "3.12.14",
           "sys_platform": "linux", "platform_system": "Linux",
           "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix"}
    checked = 0
    for name, (version, _) in lock.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        checked += 1
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
                continue
            assert canonicalize_name(req.name) in lock, f"{name} needs {raw}, not locked"
    assert checked >= len(lock) // 2, "too few locked packages installed to check"


def test_the_dockerfile_installs_only_from_the_lock_on_a_pinned_base() -> None:
    text = (REPO / "Dockerfile").read_text()
    logical = text.replace("\\\n", " ")
    froms = [ln.split()[1] for ln in logical.splitlines() if ln.startswith("FROM ")]
    assert froms and all(f == "${BASE_IMAGE}" for f in froms), froms
    base = next(ln.split("=", 1)[1] for ln in logical.splitlines()
                if ln.startswith("ARG BASE_IMAGE="))
    image, _, digest = base.partition("@")
    tag = image.rsplit(":", 1)[1]
    assert tag.split("-")[0].count(".") == 2, f"not an exact version: {tag}"
    assert digest.startswith("sha256:") and len(digest) == 71, base
    assert "COPY requirements.lock" in logical
    installs = [ln for ln in logical.splitlines() if "pip install" in ln]
    assert installs
    for ln in installs:
        # Either every dependency from the lock, by hash, or the package itself, offline.
        ok = ("--require-hashes" in ln and "-r requirements.lock" in ln) or (
            "--no-index" in ln and "--no-deps" in ln and "--no-build-isolation" in ln)
        assert ok, ln

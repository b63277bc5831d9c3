"""The install story: deploy/ (kustomize) and charts/gang-scheduler (Helm) are accepted by a
real API server, say the same thing, and their RBAC is exactly enough.

* Both renderings pass a server-side dry run (admission, schema and RBAC escalation checks)
  and the KubeSchedulerConfiguration passes the kube-scheduler's own validation.
* The two ServiceAccounts from deploy/, with only the roles from deploy/, run a stock
  kube-scheduler (configured from the ConfigMap, leader election on) and the extender (with
  the token the extender's Secret receives) and schedule a gang end to end: the
  permissions are sufficient. Calls outside each account's set are refused.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import deploy_kit as dk
from e2e.harness.cluster import ControlPlane
from e2e.harness.clusterbase import Cluster
from e2e.harness.fixtures import NodeSet
from e2e.harness.k8s import ApiException, client
from e2e.harness.objects import create_pod, create_podgroup
from e2e.harness.process import START_MARKER
from e2e.harness.queries import list_pods
from e2e.harness.target import ClusterApis
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e

# A schedulerName of its own: the suite's other gang scheduler (e2e/gang.py) may be running
# in the same session under "gang-scheduler", and must not be the one placing these pods.
SCHED_NAME = "gang-scheduler-rbac-e2e"


@pytest.fixture(scope="module")
def kustomize_docs() -> list[dk.Doc]:
    return dk.kustomize_build()


@pytest.fixture(scope="module")
def helm_docs() -> list[dk.Doc]:
    return dk.helm_template(kube_version=dk.k8s_version())


# ----------------------------------------------------------------------------------------
# Static checks (no cluster)


def test_scheduler_config_follows_the_design(kustomize_docs: list[dk.Doc]) -> None:
    cfg = dk.scheduler_config(kustomize_docs)
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["gang-scheduler"]
    # kube-scheduler's own node sampling: plain pods do not pay for the gangs (issue 30).
    assert "percentageOfNodesToScore" not in cfg["profiles"][0]
    assert cfg["podInitialBackoffSeconds"] == 1 and cfg["podMaxBackoffSeconds"] == 2
    le = cfg["leaderElection"]
    assert le["leaderElect"] is True
    assert le["resourceName"] != "kube-scheduler"
    assert le["resourceNamespace"] == dk.INSTALL_NS
    fp, bind = cfg["extenders"]
    assert fp["urlPrefix"] == bind["urlPrefix"] == "http://127.0.0.1:8888"
    assert (fp["filterVerb"], fp["prioritizeVerb"], fp["weight"]) == ("filter", "prioritize", 1)
    assert "bindVerb" not in fp and bind["bindVerb"] == "bind"
    assert not {"filterVerb", "prioritizeVerb"} & bind.keys()
    for e in (fp, bind):
        assert e["nodeCacheCapable"] is True and e["ignorable"] is False
    assert _seconds(fp["httpTimeout"]) <= 10 < 120 <= _seconds(bind["httpTimeout"])

    args = dk.container(kustomize_docs, dk.EXTENDER_CONTAINER)["args"]
    flags = dict(a.removeprefix("--").split("=", 1) for a in args[1:])
    assert flags["listen"] == "127.0.0.1:8888"
    assert flags["scheduler-name"] == "gang-scheduler"
    assert float(flags["bind-wait-limit"]) < _seconds(bind["httpTimeout"])
    assert 0 < float(flags["assembly-wait"]) < _seconds(fp["httpTimeout"])
    # One filter call may wait for its gang's members, then for its commit to land.
    assert 0 < float(flags["assembly-wait"]) + float(flags["commit-wait"]) < _seconds(
        fp["httpTimeout"])
    assert float(flags["assembly-gap"]) > 0
    assert (flags["podgroup-status"], flags["events"]) == ("on", "on")
    image = dk.container(kustomize_docs, dk.SCHEDULER_CONTAINER)["image"]
    assert image == f"registry.k8s.io/kube-scheduler:{dk.k8s_version()}"



def test_every_object_but_the_crd_carries_the_uninstall_label(
    kustomize_docs: list[dk.Doc], helm_docs: list[dk.Doc]
) -> None:
    """docs/install.md uninstalls by this label to keep the CRD (and users' PodGroups)."""
    for docs in (kustomize_docs, helm_docs):
        unlabelled = [(d["kind"], d["metadata"]["name"]) for d in docs
                      if d["kind"] != "CustomResourceDefinition"
                      and (d["metadata"].get("labels") or {}).get("app.kubernetes.io/part-of")
                      != "gang-extender"]
        assert not unlabelled

def _seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1}
    assert duration[-1] in units and duration[:-1].isdigit(), duration
    return int(duration[:-1]) * units[duration[-1]]


def _normalise(docs: list[dk.Doc]) -> dict[tuple[str, str], dk.Doc]:
    """Objects by (kind, name) without what legitimately differs between kustomize and
    Helm: labels and annotations (Helm's standard ones, the config checksum), the
    ConfigMap's content hash suffix, the selector labels."""
    out = {}
    for d in docs:
        d = yaml.safe_load(yaml.safe_dump(d))
        name = d["metadata"]["name"]
        if d["kind"] == "ConfigMap":
            name = "gang-scheduler-config"
            d["data"] = {k: yaml.safe_load(v) for k, v in d["data"].items()}
        d["metadata"] = {"name": name, "namespace": d["metadata"].get("namespace")}
        if d["kind"] == "Deployment":
            spec = d["spec"]
            spec.pop("selector")
            spec["template"].pop("metadata")
            for v in spec["template"]["spec"]["volumes"]:
                if "configMap" in v:
                    v["configMap"]["name"] = "gang-scheduler-config"
        if d["kind"] == "Service":
            d["spec"].pop("selector")
        if d["kind"] == "NetworkPolicy":
            d["spec"].pop("podSelector")
        if d["kind"] == "PodDisruptionBudget":
            d["spec"].pop("selector")
        out[(d["kind"], name)] = d
    return out


def test_helm_chart_renders_the_same_install_as_kustomize(
    kustomize_docs: list[dk.Doc], helm_docs: list[dk.Doc]
) -> None:
    k = _normalise(kustomize_docs)
    h = _normalise(helm_docs)
    # Helm does not create the release namespace (helm install --create-namespace does).
    assert set(k) - set(h) == {("Namespace", dk.INSTALL_NS)}
    assert set(h) <= set(k)
    for key in sorted(h):
        assert h[key] == k[key], f"{key} differs between Helm and kustomize"


def test_helm_values_reach_the_manifests() -> None:
    docs = dk.helm_template(kube_version=dk.k8s_version(), values={
        "extender.image.repository": "registry.example.com/gang-extender",
        "extender.image.tag": "1.2.3",
        "scheduler.image.tag": "v1.36.0",
        "extender.filterTimeout": "3s",
        "extender.bindTimeout": "10m",
        "extender.bindWaitLimit": "500",
        "extender.assemblyWait": "0.25",
        "extender.assemblyGap": "0.1",
        "extender.commitWait": "0.5",
        "extender.podgroupStatus": "false",
        "extender.events": "false",
        "extender.defaultScheduleTimeoutSeconds": "120",
        "extender.maxScheduleTimeoutSeconds": "900",
        "extender.backoff.baseSeconds": "30",
        "extender.backoff.capSeconds": "600",
        "extender.backoff.limit": "5",
        "extender.resources.limits.memory": "1Gi",
        "scheduler.resources.requests.cpu": "500m",
    })
    cfg = dk.scheduler_config(docs)
    assert [e["httpTimeout"] for e in cfg["extenders"]] == ["3s", "10m"]
    ext = dk.container(docs, dk.EXTENDER_CONTAINER)
    assert ext["image"] == "registry.example.com/gang-extender:1.2.3"
    for flag in ("--bind-wait-limit=500", "--default-timeout=120", "--max-schedule-timeout=900",
                 "--backoff-base=30",
                 "--backoff-cap=600", "--backoff-limit=5", "--assembly-wait=0.25",
                 "--assembly-gap=0.1", "--commit-wait=0.5", "--podgroup-status=off",
                 "--events=off"):
        assert flag in ext["args"]
    assert ext["resources"]["limits"]["memory"] == "1Gi"
    sched = dk.container(docs, dk.SCHEDULER_CONTAINER)
    assert sched["image"] == "registry.k8s.io/kube-scheduler:v1.36.0"
    assert sched["resources"]["requests"]["cpu"] == "500m"

    with pytest.raises(AssertionError, match=r"must be below extender\.bindTimeout"):
        dk.helm_template(kube_version=dk.k8s_version(),
                         values={"extender.bindWaitLimit": "300"})
    with pytest.raises(AssertionError, match=r"must be below extender\.filterTimeout"):
        dk.helm_template(kube_version=dk.k8s_version(),
                         values={"extender.assemblyWait": "5"})
    with pytest.raises(AssertionError, match=r"commitWait \(1\.5 \+ 4 s\) must be below"):
        dk.helm_template(kube_version=dk.k8s_version(),
                         values={"extender.commitWait": "4"})


def test_helm_reads_the_deprecated_bind_hold_limit_value_for_one_release() -> None:
    """extender.bindHoldLimit was renamed bindWaitLimit (a bind request waits; capacity
    is held): the old value still reaches the flag and is still checked."""
    docs = dk.helm_template(kube_version=dk.k8s_version(),
                            values={"extender.bindHoldLimit": "200"})
    assert "--bind-wait-limit=200" in dk.container(docs, dk.EXTENDER_CONTAINER)["args"]
    with pytest.raises(AssertionError, match=r"must be below extender\.bindTimeout"):
        dk.helm_template(kube_version=dk.k8s_version(),
                         values={"extender.bindHoldLimit": "300"})


def test_helm_extender_follows_the_lease_its_scheduler_elects_with() -> None:
    docs = dk.helm_template(namespace="sched", kube_version=dk.k8s_version(),
                            values={"scheduler.leaderElection.leaseName": "my-lease",
                                    "replicaCount": "2"})
    le = dk.scheduler_config(docs)["leaderElection"]
    assert (le["resourceNamespace"], le["resourceName"]) == ("sched", "my-lease")
    assert "--leader-lease=sched/my-lease" in dk.container(docs, dk.EXTENDER_CONTAINER)["args"]
    role = dk.find(docs, "Role", "gang-scheduler-extender-leader-election")
    assert role["rules"][0]["resourceNames"] == ["my-lease"]
    assert dk.find(docs, "Deployment")["spec"]["replicas"] == 2

    off = dk.helm_template(kube_version=dk.k8s_version(),
                           values={"scheduler.leaderElection.enabled": "false"})
    assert "--leader-lease=off" in dk.container(off, dk.EXTENDER_CONTAINER)["args"]
    assert not [d for d in off if d["kind"] == "Role"]
    with pytest.raises(AssertionError, match=r"replicaCount above 1 needs"):
        dk.helm_template(kube_version=dk.k8s_version(),
                         values={"scheduler.leaderElection.enabled": "false",
                                 "replicaCount": "2"})


def test_helm_exposure_values_reach_the_manifests() -> None:
    """Accounts, the pod patch policy, the NetworkPolicy, the budget and the priority
    follow their values, and an empty metricsFrom is refused rather than read as
    "everyone"."""
    docs = dk.helm_template(namespace="sched", kube_version=dk.k8s_version(), values={
        "extender.serviceAccount.name": "my-extender",
        "networkPolicy.metricsFrom[0].podSelector.matchLabels.app": "prometheus",
        "podDisruptionBudget.maxUnavailable": "0",
        "priorityClassName": "gang-critical",
    })
    user = "'system:serviceaccount:sched:my-extender'"
    for which in ("pod", "node"):
        policy = dk.find(docs, "ValidatingAdmissionPolicy",
                         f"gang-scheduler-extender-{which}-patches")
        assert user in policy["spec"]["matchConditions"][0]["expression"]
    secret = dk.find(docs, "Secret")
    assert secret["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": "my-extender"}
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"} == {
        "gang-scheduler", "my-extender"}
    for kind, name in (("ClusterRoleBinding", "gang-scheduler-extender"),
                       ("RoleBinding", "gang-scheduler-extender-leader-election")):
        assert [s["name"] for s in dk.find(docs, kind, name)["subjects"]] == ["my-extender"]
    for kind, name in (("ClusterRoleBinding", "gang-scheduler"),
                       ("RoleBinding", "gang-scheduler-leader-election")):
        assert [s["name"] for s in dk.find(docs, kind, name)["subjects"]] == ["gang-scheduler"]
    netpol = dk.find(docs, "NetworkPolicy")
    assert netpol["spec"]["ingress"][0]["from"] == [
        {"podSelector": {"matchLabels": {"app": "prometheus"}}}]
    assert dk.find(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 0
    assert dk.pod_spec(docs)["priorityClassName"] == "gang-critical"

    off = dk.helm_template(kube_version=dk.k8s_version(), values={
        "networkPolicy.enabled": "false", "podDisruptionBudget.enabled": "false",
        "priorityClassName": "", "extender.podPatchPolicy.enabled": "false"})
    kinds = {d["kind"] for d in off}
    assert not kinds & {"NetworkPolicy", "PodDisruptionBudget", "ValidatingAdmissionPolicy",
                        "ValidatingAdmissionPolicyBinding"}
    assert "priorityClassName" not in dk.pod_spec(off)
    with pytest.raises(AssertionError, match=r"networkPolicy\.metricsFrom is empty"):
        dk.helm_template(kube_version=dk.k8s_version(),
                         values={"networkPolicy.metricsFrom": "null"})


def _kube_scheduler_bin() -> Path:
    from e2e.harness.binaries import find_k8s_bin

    return find_k8s_bin() / "kube-scheduler"


@pytest.mark.parametrize("renderer", ["kustomize", "helm"])
def test_kube_scheduler_accepts_the_config(
    renderer: str, kustomize_docs: list[dk.Doc], helm_docs: list[dk.Doc], tmp_path: Path
) -> None:
    """The kube-scheduler binary decodes, defaults and validates the configuration
    (``--write-config-to`` exits after that)."""
    docs = kustomize_docs if renderer == "kustomize" else helm_docs
    cfg = dk.scheduler_config(docs)
    # It builds a client before writing; any syntactically valid kubeconfig will do.
    kc = tmp_path / "dummy.kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    cfg["clientConnection"] = {"kubeconfig": str(kc)}
    src, out = tmp_path / "in.yaml", tmp_path / "out.yaml"
    src.write_text(yaml.safe_dump(cfg))
    res = subprocess.run([str(_kube_scheduler_bin()), f"--config={src}",
                          f"--write-config-to={out}"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    full = yaml.safe_load(out.read_text())
    prof = full["profiles"][0]
    assert prof["schedulerName"] == "gang-scheduler"
    assert "DefaultPreemption" in [p["name"] for p in prof["plugins"]["postFilter"]["disabled"]]
    assert [e.get("httpTimeout") for e in full["extenders"]] == ["5s", "5m0s"]


# ----------------------------------------------------------------------------------------
# Server-side dry run


@pytest.fixture
def install_namespace(
    control_plane: Cluster, kube: ClusterApis, kustomize_docs: list[dk.Doc]
) -> Iterator[str]:
    """gang-scheduler-system as deploy/ defines it (with its Pod Security label), applied for
    real if absent: a dry run cannot create objects in a namespace that does not exist yet.
    Deleted afterwards if created here on an external cluster."""
    created = False
    try:
        kube.core.read_namespace(dk.INSTALL_NS)
    except ApiException as e:
        if e.status != 404:
            raise
        errors = dk.apply(dk.dynamic_client(kube.api),
                          [dk.find(kustomize_docs, "Namespace", dk.INSTALL_NS)])
        assert not errors, errors
        created = True
    yield dk.INSTALL_NS
    if created and not isinstance(control_plane, ControlPlane):
        kube.core.delete_namespace(dk.INSTALL_NS)


def test_kustomize_output_passes_server_side_dry_run(
    kustomize_docs: list[dk.Doc], kube: ClusterApis, install_namespace: str
) -> None:
    errors = dk.apply(dk.dynamic_client(kube.api), kustomize_docs, dry_run=True)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("renderer", ["kustomize", "helm"])
def test_scheduler_pod_is_admitted_under_restricted_pod_security(
    renderer: str, kustomize_docs: list[dk.Doc], helm_docs: list[dk.Doc], kube: ClusterApis,
    install_namespace: str,
) -> None:
    """The namespace enforces the "restricted" Pod Security level; the Deployment's pod
    must pass it (a Deployment is only warned about, its pods would be refused)."""
    ns = kube.core.read_namespace(install_namespace)
    assert ns.metadata.labels.get("pod-security.kubernetes.io/enforce") == "restricted"
    docs = kustomize_docs if renderer == "kustomize" else helm_docs
    spec = copy.deepcopy(dk.pod_spec(docs))
    # Only Pod Security is under test: the ServiceAccount admission plugin would refuse a
    # pod whose account does not exist yet.
    spec.pop("serviceAccountName")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"psa-check-{renderer}", "namespace": install_namespace},
           "spec": spec}
    kube.core.create_namespaced_pod(install_namespace, pod, dry_run="All")


def test_helm_output_passes_server_side_dry_run(kube: ClusterApis, namespace: str) -> None:
    # Installed into an arbitrary namespace, as `helm install -n <ns>` would.
    docs = dk.helm_template(namespace=namespace, kube_version=dk.k8s_version())
    errors = dk.apply(dk.dynamic_client(kube.api), docs, dry_run=True)
    assert not errors, "\n".join(errors)


# ----------------------------------------------------------------------------------------
# The ServiceAccount's own credentials


@pytest.fixture(scope="module")
def sa_kubeconfigs(
    control_plane: Cluster, kustomize_docs: list[dk.Doc], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """deploy/'s namespace, ServiceAccounts, token Secret, roles, bindings and admission
    policy applied for real; returns kubeconfigs of the kube-scheduler's account (a
    requested token, as the pod's) and of the extender's (the token the controller put
    into its Secret, as the extender container mounts it)."""
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane (E2E_KUBECONFIG is set)")
    from e2e.harness.target import kube as admin

    errors = dk.apply(dk.dynamic_client(admin().api), dk.rbac_docs(kustomize_docs))
    assert not errors, "\n".join(errors)
    return dk.deployed_kubeconfigs(control_plane, admin().core,
                                   tmp_path_factory.mktemp("sa"))


def _current_log(p: Any) -> str:
    text: str = Path(p.log_path).read_text(errors="replace")
    return text.rsplit(START_MARKER, 1)[-1]


def test_service_account_rbac_is_sufficient_to_schedule_a_gang(
    local_control_plane: ControlPlane,
    kustomize_docs: list[dk.Doc],
    sa_kubeconfigs: tuple[Path, Path],
    fake_nodes: NodeSet,
    namespace: str,
    kube: ClusterApis,
) -> None:
    nodes = fake_nodes.add_nodes(3, prefix=namespace, cpu="2", memory="4Gi")
    sched_kc, ext_kc = sa_kubeconfigs
    stack = dk.start_deployed_stack(local_control_plane, kustomize_docs, sched_kc,
                                    "rbac-e2e", scheduler_name=SCHED_NAME,
                                    extender_kubeconfig=ext_kc)
    try:
        create_podgroup(namespace, "trio", min_member=3)
        for i in range(3):
            create_pod(namespace, f"trio-{i}", cpu="1", memory="1Gi", pod_group="trio",
                       scheduler_name=SCHED_NAME)

        def all_running() -> object:
            pods = list_pods(namespace)
            state = {p["metadata"]["name"]: (p["status"].get("phase"), p["spec"].get("nodeName"))
                     for p in pods}
            ok = len(pods) == 3 and all(ph == "Running" for ph, _ in state.values())
            return state if ok else NotYet(state)

        state = wait_for(all_running, 60, "the 3-pod gang Running under the SA's credentials",
                         logs=[*stack.logs(), "kube-apiserver"])
        assert isinstance(state, dict)
        assert {node for _, node in state.values()} <= set(nodes)

        # Leader election used the lease deploy/ grants, under the kube-scheduler's account.
        le = dk.scheduler_config(kustomize_docs)["leaderElection"]
        lease = client.CoordinationV1Api(kube.api).read_namespaced_lease(
            le["resourceName"], le["resourceNamespace"])
        assert lease.spec.holder_identity

        # Nothing was refused along the way (a missing read right shows up only as a
        # retrying informer in the log, not as a failure).
        for p in stack.logs():
            refused = [ln for ln in _current_log(p).splitlines() if "forbidden" in ln.lower()]
            assert not refused, f"{p.name} was refused:\n" + "\n".join(refused[:10])
    finally:
        stack.stop()


# (verb, group, resource, subresource, namespace, name)
# Refused to both accounts.
REFUSED = [
    ("delete", "", "pods", "", "default", ""),        # evictions only, never a delete
    ("create", "", "pods", "", "default", ""),
    ("update", "", "pods", "", "default", ""),
    ("list", "", "secrets", "", "", ""),
    ("get", "", "secrets", "", dk.INSTALL_NS, ""),
    ("get", "", "configmaps", "", "default", ""),
    ("delete", "", "nodes", "", "", ""),
    # ProvisioningRequests and their PodTemplates: created and deleted, never changed;
    # the autoscaler writes the status.
    ("update", "autoscaling.x-k8s.io", "provisioningrequests", "", "default", ""),
    ("patch", "autoscaling.x-k8s.io", "provisioningrequests", "status", "default", ""),
    ("update", "", "podtemplates", "", "default", ""),
    ("list", "", "podtemplates", "", "default", ""),
    # Budgets are read (a preemption never picks a victim one would refuse), never written.
    ("create", "policy", "poddisruptionbudgets", "", "default", ""),
    ("patch", "policy", "poddisruptionbudgets", "", "default", ""),
    ("delete", "policy", "poddisruptionbudgets", "", "default", ""),
    # The main scheduler's lease, and any other lease than its own.
    ("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"),
    ("update", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, "kube-scheduler"),
    ("delete", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, "gang-scheduler"),
    # PodGroups are the users'; the extender writes only their status.
    ("update", "scheduling.x-k8s.io", "podgroups", "", "default", ""),
    ("create", "scheduling.x-k8s.io", "podgroups", "", "default", ""),
    ("delete", "scheduling.x-k8s.io", "podgroups", "", "default", ""),
    ("create", "batch", "jobs", "", "default", ""),
    # The other sources' PodGroups are read only, Volcano's status included (Volcano's);
    # the upstream PodGroup's status is patched (conditions of our gangs, below).
    ("patch", "scheduling.volcano.sh", "podgroups", "status", "default", ""),
    ("update", "scheduling.k8s.io", "podgroups", "", "default", ""),
    ("update", "scheduling.k8s.io", "podgroups", "status", "default", ""),
    ("list", "scheduling.k8s.io", "priorityclasses", "", "", ""),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", ""),
    ("list", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, ""),
    ("watch", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"),
    ("create", "", "serviceaccounts", "token", dk.INSTALL_NS, dk.EXTENDER_SERVICE_ACCOUNT),
]

# What only the extender may do: refused to the kube-scheduler's account.
EXTENDER_ONLY = [
    # Evictions: a partial gang's members (issue 16), a preemption's victims (issue 17).
    ("create", "", "pods", "eviction", "default", ""),
    ("patch", "", "pods", "", "default", ""),  # the wake-up annotation (and only it: VAP)
    ("patch", "scheduling.x-k8s.io", "podgroups", "status", "default", ""),
    # The scheduling and DisruptionTarget conditions of upstream PodGroups whose pods name
    # this scheduler (issue 28): a patch, never an update.
    ("patch", "scheduling.k8s.io", "podgroups", "status", "default", ""),
    ("list", "scheduling.x-k8s.io", "podgroups", "", "", ""),
    ("watch", "scheduling.volcano.sh", "podgroups", "", "", ""),
    ("watch", "scheduling.k8s.io", "podgroups", "", "", ""),
    # Gangs on autoscaled pools: their ProvisioningRequests and PodTemplates, and the
    # scale-down-disabled annotation on reserved nodes.
    ("create", "autoscaling.x-k8s.io", "provisioningrequests", "", "default", ""),
    ("delete", "autoscaling.x-k8s.io", "provisioningrequests", "", "default", ""),
    ("watch", "autoscaling.x-k8s.io", "provisioningrequests", "", "", ""),
    ("create", "", "podtemplates", "", "default", ""),
    ("delete", "", "podtemplates", "", "default", ""),
    # Read back: an object in the way of a create (adopted only with our marker), and a
    # PodTemplate before it is deleted.
    ("get", "", "podtemplates", "", "default", ""),
    ("get", "autoscaling.x-k8s.io", "provisioningrequests", "", "default", ""),
    ("patch", "", "nodes", "", "", ""),
    # It follows the lease by list and watch, by name.
    ("list", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, "gang-scheduler"),
    ("watch", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, "gang-scheduler"),
]

# What only the kube-scheduler may do: refused to the extender's account.
SCHEDULER_ONLY = [
    ("patch", "", "pods", "status", "default", ""),
    ("create", "", "bindings", "", "default", ""),
    ("get", "", "namespaces", "", "", ""),
    ("list", "", "services", "", "", ""),
    ("list", "apps", "statefulsets", "", "", ""),
    ("update", "", "persistentvolumes", "", "", ""),
    ("list", "storage.k8s.io", "storageclasses", "", "", ""),
    ("create", "resource.k8s.io", "resourceclaims", "", "default", ""),
    ("create", "authentication.k8s.io", "tokenreviews", "", "", ""),
    ("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""),
    ("create", "events.k8s.io", "events", "", "default", ""),
    # Its leader election, and the cluster's authentication settings (metrics auth).
    ("get", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, "gang-scheduler"),
    ("update", "coordination.k8s.io", "leases", "", dk.INSTALL_NS, "gang-scheduler"),
    ("get", "", "configmaps", "", "kube-system", "extension-apiserver-authentication"),
]

# Both: each binds pods, posts Events and reads pods and nodes itself.
BOTH = [
    ("create", "", "pods", "binding", "default", ""),
    ("create", "", "events", "", "default", ""),
    ("watch", "", "nodes", "", "", ""),
    ("list", "", "pods", "", "", ""),
    ("list", "policy", "poddisruptionbudgets", "", "", ""),
    ("watch", "policy", "poddisruptionbudgets", "", "", ""),
]


def _can(api: Any, verb: str, group: str, resource: str, sub: str, ns: str, name: str) -> bool:
    attrs = {"verb": verb, "group": group, "resource": resource}
    attrs.update({k: v for k, v in (("subresource", sub), ("namespace", ns), ("name", name))
                  if v})
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {"spec": {"resourceAttributes": attrs}})
    return bool(review.status.allowed)


@pytest.mark.parametrize("account", ["kube-scheduler", "extender"])
def test_service_accounts_are_refused_outside_their_roles(
    account: str, sa_kubeconfigs: tuple[Path, Path], namespace: str, kube: ClusterApis
) -> None:
    sched_kc, ext_kc = sa_kubeconfigs
    kubeconfig, name, own, others = (
        (sched_kc, dk.SERVICE_ACCOUNT, SCHEDULER_ONLY, EXTENDER_ONLY)
        if account == "kube-scheduler" else
        (ext_kc, dk.EXTENDER_SERVICE_ACCOUNT, EXTENDER_ONLY, SCHEDULER_ONLY))
    api = dk.sa_api_client(kubeconfig)
    try:
        who = client.AuthenticationV1Api(api).create_self_subject_review({}).status
        assert who.user_info.username == f"system:serviceaccount:{dk.INSTALL_NS}:{name}"

        wrongly_allowed = [r for r in [*REFUSED, *others] if _can(api, *r)]
        assert not wrongly_allowed, f"{name} may: {wrongly_allowed}"
        missing = [r for r in [*own, *BOTH] if not _can(api, *r)]
        assert not missing, f"{name} may not: {missing}"

        # And real calls, not just the authorizer's opinion.
        victim = f"victim-{account}"
        create_pod(namespace, victim)
        core = client.CoreV1Api(api)
        calls: dict[str, Callable[[], object]] = {
            "delete pod": lambda: core.delete_namespaced_pod(victim, namespace),
            "list secrets": lambda: core.list_secret_for_all_namespaces(),
            "update the main scheduler's lease": lambda: client.CoordinationV1Api(
                api).patch_namespaced_lease("kube-scheduler", "kube-system",
                                            {"spec": {"holderIdentity": "gang"}}),
        }
        for what, call in calls.items():
            with pytest.raises(ApiException) as exc:
                call()
            assert exc.value.status == 403, f"{what}: {exc.value.status} {exc.value.reason}"
        assert kube.core.read_namespaced_pod(victim, namespace).metadata.deletion_timestamp \
            is None
    finally:
        api.close()


def test_metrics_port_serves_only_metrics_and_probes(
    local_control_plane: ControlPlane, kustomize_docs: list[dk.Doc],
    sa_kubeconfigs: tuple[Path, Path]
) -> None:
    import httpx

    sched_kc, ext_kc = sa_kubeconfigs
    stack = dk.start_deployed_stack(local_control_plane, kustomize_docs, sched_kc,
                                    "metrics-port", scheduler_name=SCHED_NAME + "-metrics",
                                    extender_kubeconfig=ext_kc)
    try:
        url = f"http://127.0.0.1:{stack.metrics_port}"
        for path in ("/metrics", "/healthz", "/readyz"):
            assert httpx.get(url + path, timeout=5).status_code == 200, path
        body = {"PodName": "x", "PodNamespace": "default", "PodUID": "u", "Node": "n"}
        for verb in ("filter", "prioritize", "bind"):
            r = httpx.post(f"{url}/{verb}", json=body, timeout=5)
            assert r.status_code in (404, 405), f"POST /{verb} on the metrics port: {r.status_code}"
        assert httpx.get(url + "/debug/gangs", timeout=5).status_code == 404
    finally:
        stack.stop()

"""Security properties of the extender (issue 7, part 4).

* It listens on loopback unless told otherwise, and the shipped manifests keep the
  verbs there (only the metrics port is exposed, and it serves no verb: e2e
  test_deploy.test_metrics_port_serves_only_metrics_and_probes).
* No credential reaches its logs or its answers: `gang-extender serve` runs at DEBUG
  against a stand-in API server that fails every write, and its whole output and the
  /bind answer are searched for the bearer token.
* The kube-scheduler and the extender run as two ServiceAccounts, each bound to exactly
  its own rules (issue 27): the extender's grants are what its code calls, the
  kube-scheduler's what a stock kube-scheduler needs, and neither has the other's. The
  Deployment gives each container only its own account's token. That the rules are
  *sufficient* and that everything else is refused is shown on a real API server by e2e
  test_deploy (test_service_account_rbac_is_sufficient_to_schedule_a_gang,
  test_service_accounts_are_refused_outside_their_roles), and that the extender's pod
  patches are limited to its wake-up annotation by e2e test_admission_policy.
  tests/deploy/test_install_hardening.py checks how each container gets its own token, the
  admission policy, the exposure and availability objects and the image's pinned inputs.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import yaml

from extender.cli import build_parser
from tests.deploy.accounts import EXTENDER_SA, NS, SCHEDULER_SA
from tests.support.serve_process import stand_in, start_serve, wait_until, write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cr3t-token-" + "7f1d2c9e4b8a"  # a marker searched for in logs


# ----- listening address ----------------------------------------------------------------


def test_serve_listens_on_loopback_by_default() -> None:
    args = build_parser().parse_args(["serve"])
    assert args.listen == ("127.0.0.1", 8888)
    assert args.metrics_listen is None, "no second listener unless asked for"


def test_an_address_without_a_host_means_loopback() -> None:
    args = build_parser().parse_args(["serve", "--listen", ":9999"])
    assert args.listen == ("127.0.0.1", 9999)


def _manifest_args() -> list[list[str]]:
    out = []
    for doc in yaml.safe_load_all((REPO / "deploy" / "deployment.yaml").read_text()):
        if not isinstance(doc, dict) or doc.get("kind") != "Deployment":
            continue
        spec = doc["spec"]["template"]["spec"]
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            if "serve" in (c.get("args") or []):
                out.append([str(a) for a in c["args"]])
    return out


def test_shipped_deployment_keeps_the_verbs_on_loopback() -> None:
    found = _manifest_args()
    assert found, "no extender container in deploy/deployment.yaml"
    for args in found:
        listen = [a.split("=", 1)[1] for a in args if a.startswith("--listen=")]
        assert listen and all(v.startswith("127.0.0.1:") for v in listen), args


# ----- no credentials in logs or answers ---------------------------------------------------


def _item_list(kind: str, items: list[dict[str, Any]]) -> bytes:
    return json.dumps({"kind": kind, "metadata": {"resourceVersion": "1"},
                       "items": items}).encode()


NODE = {"metadata": {"name": "n1", "uid": "node-uid", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
POD = {"metadata": {"name": "p1", "namespace": "default", "uid": "pod-uid",
                    "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
       "spec": {"schedulerName": "gang-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
       "status": {"phase": "Pending"}}


class FakeApi(BaseHTTPRequestHandler):
    """Lists succeed; watches, Bindings, patches and creates fail, so every error path
    that logs an API answer runs. It records the Authorization headers it was sent."""

    seen_tokens: ClassVar[list[str]] = []
    stop: ClassVar[threading.Event] = threading.Event()  # ends the open watches

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _reply(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _fail(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.seen_tokens.append(auth)
        status = {"kind": "Status", "status": "Failure", "reason": "InternalError",
                  "message": f"request {self.command} {self.path} failed", "code": 500}
        self._reply(500, json.dumps(status).encode())

    def do_GET(self) -> None:
        self.seen_tokens.append(self.headers.get("Authorization", ""))
        if "watch=1" in self.path and self.path.startswith(("/api/v1/pods", "/api/v1/nodes")):
            # Open and silent: with the pod or node watch broken the extender binds
            # nothing (its cache could be behind), and the Binding's failure path must run.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.flush()
            self.stop.wait(60)
        elif "watch=1" in self.path:
            self._reply(403, b"forbidden: the request was not allowed", "text/plain")
        elif self.path.startswith("/api/v1/nodes"):
            self._reply(200, _item_list("NodeList", [NODE]))
        elif self.path.startswith("/api/v1/pods"):
            self._reply(200, _item_list("PodList", [POD]))
        elif "/podgroups" in self.path:
            self._reply(200, _item_list("PodGroupList", []))
        elif "/poddisruptionbudgets" in self.path:
            self._reply(200, _item_list("PodDisruptionBudgetList", []))
        else:
            self._fail()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._fail()

    def do_PATCH(self) -> None:
        self.do_POST()


@pytest.fixture
def fake_api() -> Iterator[str]:
    FakeApi.stop.clear()
    with stand_in(FakeApi, release=FakeApi.stop.set) as url:
        yield url


def test_no_token_in_logs_or_answers(fake_api: str, tmp_path: Path) -> None:
    log_path = tmp_path / "extender.log"
    proc, url = start_serve(write_kubeconfig(tmp_path / "kubeconfig", fake_api, TOKEN),
                            log_path, "--log-level", "DEBUG", "--leader-lease", "off")
    answers = []
    try:
        wait_until(lambda: httpx.get(url + "/readyz", timeout=1).status_code == 200, 30,
                   "the extender never became ready", log_path, proc)
        args = {"Pod": POD, "NodeNames": ["n1"], "Nodes": None}
        answers.append(httpx.post(url + "/filter", json=args, timeout=5).text)
        answers.append(httpx.post(url + "/bind", json={
            "PodName": "p1", "PodNamespace": "default", "PodUID": "pod-uid", "Node": "n1"},
            timeout=10).text)
        answers.append(httpx.get(url + "/debug/gangs", timeout=5).text)
        answers.append(httpx.get(url + "/debug/podgroups", timeout=5).text)
        time.sleep(1.5)  # let the watch retries, status and event writers log their failures
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    output = log_path.read_text()
    assert any(TOKEN in t for t in FakeApi.seen_tokens), "the stand-in API never saw the token"
    assert "bind" in answers[1] and "failed" in answers[1], answers[1]
    assert "WARNING" in output, "the failures must have been logged"
    assert TOKEN not in output, "the bearer token appears in the extender's log"
    assert "Bearer" not in output and "Authorization" not in output
    for a in answers:
        assert TOKEN not in a


# ----- RBAC: two accounts, each with its own rules ------------------------------------

# (apiGroup, resource, verb) the extender's code uses, and where.
NEEDED = {
    ("", "nodes", "list"), ("", "nodes", "watch"),  # informer.NODES
    ("", "pods", "list"), ("", "pods", "watch"),  # informer.PODS
    ("", "pods", "get"),  # binding.BindingPoster: a 409 "already bound here"?
    ("", "pods", "patch"),  # wakeups.Wakeups._wake: the wake-up annotation (and only it:
    # admission/extender-pod-patches.yaml)
    ("", "pods/binding", "create"),  # kube.bind
    ("", "pods/eviction", "create"),  # kube.evict: a partial gang's members, preemption victims
    ("policy", "poddisruptionbudgets", "list"),  # informer.BUDGETS: victims no budget refuses
    ("policy", "poddisruptionbudgets", "watch"),
    # kube/device_kinds.py: DRA objects, listed and watched while served
    *{("resource.k8s.io", r, v)
      for r in ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")
      for v in ("list", "watch")},
    ("scheduling.x-k8s.io", "podgroups", "list"),  # informer.GROUPS
    ("scheduling.x-k8s.io", "podgroups", "watch"),
    ("scheduling.x-k8s.io", "podgroups/status", "patch"),  # status.StatusWriter.write
    # kube/source_kinds.py: the other sources' PodGroups, listed and watched while served
    ("scheduling.volcano.sh", "podgroups", "list"), ("scheduling.volcano.sh", "podgroups", "watch"),
    ("scheduling.k8s.io", "podgroups", "list"), ("scheduling.k8s.io", "podgroups", "watch"),
    ("scheduling.k8s.io", "podgroups/status", "patch"),  # upstream conditions (status.write)
    ("jobset.x-k8s.io", "jobsets", "list"), ("jobset.x-k8s.io", "jobsets", "watch"),  # JOBSETS
    ("scheduling.k8s.io", "compositepodgroups", "list"),  # COMPOSITES
    ("scheduling.k8s.io", "compositepodgroups", "watch"),
    ("scheduling.k8s.io", "compositepodgroups/status", "patch"),  # their conditions
    ("", "events", "create"), ("", "events", "patch"),  # events.EventRecorder
    # leader.Leadership: its kube-scheduler's lease, read only (list, then watch; a list
    # again to confirm an expiry), by name in a Role of its namespace
    ("coordination.k8s.io", "leases", "list"), ("coordination.k8s.io", "leases", "watch"),
    # scheduler/provisioner.py: ProvisioningRequests (watched while served, created and
    # deleted), their PodTemplates, and the scale-down-disabled annotation on nodes; get:
    # an object in the way of a create is read back for our marker (adopted only with
    # it), and a PodTemplate before it is deleted (admission/extender-deletes.yaml
    # refuses the delete of one without it)
    ("autoscaling.x-k8s.io", "provisioningrequests", "get"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "list"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "watch"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "create"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "delete"),
    ("", "podtemplates", "get"), ("", "podtemplates", "create"), ("", "podtemplates", "delete"),
    ("", "nodes", "patch"),
}
# Granted but not called today: reads of what the extender already lists. Listed so
# that any *new* grant fails this test.
TOLERATED = {
    ("", "nodes", "get"), ("scheduling.x-k8s.io", "podgroups", "get"),
}


def _expand(*rules: tuple[str, str, str]) -> set[tuple[str, str, str]]:
    """("", "pods nodes", "get list") -> every (group, resource, verb) combination."""
    return {(g, r, v) for groups, resources, verbs in rules for g in groups.split(",")
            for r in resources.split() for v in verbs.split()}


# What the kube-scheduler's account holds: upstream's system:kube-scheduler for a second
# scheduler (cluster-role.yaml says what is left out and why), plus its own lease.
SCHEDULER_GRANTS = _expand(
    (",events.k8s.io", "events", "create patch update"),
    ("", "nodes namespaces pods services replicationcontrollers", "get list watch"),
    ("", "pods/binding bindings", "create"),
    ("", "pods/status", "patch update"),
    ("", "pods/finalizers", "update"),
    ("apps", "replicasets statefulsets", "get list watch"),
    ("policy", "poddisruptionbudgets", "get list watch"),
    ("", "persistentvolumeclaims persistentvolumes", "get list watch update patch"),
    ("storage.k8s.io",
     "storageclasses csinodes csidrivers csistoragecapacities volumeattachments",
     "get list watch"),
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ("resource.k8s.io", "deviceclasses resourceslices devicetaintrules", "get list watch"),
    ("resource.k8s.io", "resourceclaims resourceclaims/status", "get list watch update patch"),
    ("resource.k8s.io", "resourceclaims", "create delete"),
    ("resource.k8s.io", "resourceclaims/binding", "update patch"),
    ("coordination.k8s.io", "leases", "create get update"),  # leader election
    ("", "configmaps", "get"),  # kube-system/extension-apiserver-authentication (auth-reader)
)

NEVER_VERBS = {"*", "delete", "deletecollection", "escalate", "bind", "impersonate"}
NEVER_RESOURCES = {"*", "secrets", "serviceaccounts/token", "configmaps", "clusterroles",
                   "clusterrolebindings", "roles", "rolebindings", "pods/exec",
                   "pods/eviction", "nodes/proxy", "leases"}


def _rbac_docs() -> list[dict[str, Any]]:
    return [doc for f in sorted((REPO / "deploy" / "rbac").glob("*.yaml"))
            for doc in yaml.safe_load_all(f.read_text()) if isinstance(doc, dict)]


def _roles() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Rules by (kind, name)."""
    return {(d["kind"], d["metadata"]["name"]): d.get("rules") or []
            for d in _rbac_docs() if d["kind"] in ("ClusterRole", "Role")}


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule.get("apiGroups", [])
            for r in rule.get("resources", []) for v in rule.get("verbs", [])}


def _account_roles() -> dict[str, list[tuple[str, str]]]:
    """The roles bound to each ServiceAccount of the install, by name."""
    out: dict[str, list[tuple[str, str]]] = {}
    for d in _rbac_docs():
        if d["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        for subject in d["subjects"]:
            assert subject["kind"] == "ServiceAccount" and subject["namespace"] == NS, d
            out.setdefault(subject["name"], []).append(
                (d["roleRef"]["kind"], d["roleRef"]["name"]))
    return out


def _account_grants(account: str) -> set[tuple[str, str, str]]:
    roles = _roles()
    builtin = {("Role", "extension-apiserver-authentication-reader"):
               [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
    return set().union(*(_grants({**roles, **builtin}[ref])
                         for ref in _account_roles()[account]))


def test_the_install_has_one_account_per_container() -> None:
    accounts = {d["metadata"]["name"] for d in _rbac_docs() if d["kind"] == "ServiceAccount"}
    assert accounts == {SCHEDULER_SA, EXTENDER_SA}
    assert set(_account_roles()) == accounts, "every account bound, no other subject"
    # Every binding names exactly one account: no role is shared between the two.
    for d in _rbac_docs():
        if d["kind"].endswith("Binding"):
            assert len(d["subjects"]) == 1, d["metadata"]["name"]


def test_extender_account_grants_what_the_code_calls_and_no_more() -> None:
    granted = _account_grants(EXTENDER_SA)
    assert granted >= NEEDED, f"missing: {sorted(NEEDED - granted)}"
    assert granted - NEEDED <= TOLERATED, f"not needed: {sorted(granted - NEEDED - TOLERATED)}"


def test_scheduler_account_grants_what_kube_scheduler_needs_and_no_more() -> None:
    granted = _account_grants(SCHEDULER_SA)
    assert granted == SCHEDULER_GRANTS, (
        f"missing: {sorted(SCHEDULER_GRANTS - granted)}; "
        f"extra: {sorted(granted - SCHEDULER_GRANTS)}")


def test_neither_account_holds_the_others_writes() -> None:
    """What only the extender does (patch pods, evict, write PodGroup status, follow the
    lease by watch) is not the kube-scheduler's, and the kube-scheduler's own writes
    (pod status, volumes, DRA claims, its lease, delegated auth) are not the extender's."""
    scheduler, extender = _account_grants(SCHEDULER_SA), _account_grants(EXTENDER_SA)
    extender_only = {("", "pods", "patch"), ("", "pods/eviction", "create"),
                     ("scheduling.x-k8s.io", "podgroups/status", "patch"),
                     ("scheduling.k8s.io", "podgroups/status", "patch"),
                     ("coordination.k8s.io", "leases", "list"),
                     ("coordination.k8s.io", "leases", "watch"),
                     ("", "nodes", "patch"), ("", "podtemplates", "create"),
                     ("autoscaling.x-k8s.io", "provisioningrequests", "create")}
    assert not scheduler & extender_only, sorted(scheduler & extender_only)
    writes = {"create", "update", "patch", "delete"}
    shared_writes = {g for g in scheduler & extender if g[2] in writes}
    # Both bind pods and post Events: each does so itself.
    assert shared_writes == {("", "pods/binding", "create"), ("", "events", "create"),
                             ("", "events", "patch")}, sorted(shared_writes)


def test_the_extender_reads_only_the_lease_its_scheduler_elects_with() -> None:
    """Least privilege: list and watch of one lease, by name, in its namespace; and it is
    the lease the shipped kube-scheduler elects with and the extender is told to follow."""
    cfg = yaml.safe_load((REPO / "deploy" / "scheduler-config.yaml").read_text())
    le = cfg["leaderElection"]
    assert le["leaderElect"] is True
    flags = [a for args in _manifest_args() for a in args if a.startswith("--leader-lease=")]
    assert flags == [f"--leader-lease={le['resourceNamespace']}/{le['resourceName']}"]
    docs = _rbac_docs()
    role = next(d for d in docs if d["kind"] == "Role"
                and d["metadata"]["name"] == "gang-scheduler-extender-leader-election")
    assert role["metadata"]["namespace"] == le["resourceNamespace"]
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "resourceNames": [le["resourceName"]],
                              "verbs": ["list", "watch"]}]
    binding = next(d for d in docs if d["kind"] == "RoleBinding"
                   and d["roleRef"]["name"] == role["metadata"]["name"])
    assert binding["metadata"]["namespace"] == le["resourceNamespace"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": EXTENDER_SA,
                                    "namespace": NS}]


# The kube-scheduler's own role keeps upstream's DRA rights (system:kube-scheduler): it
# creates and deletes the ResourceClaims of extended resources backed by DRA.
SCHEDULER_DRA = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                 "verbs": ["create", "delete"]}


# The extender evicts the bound members of a partial gang through the Eviction API (so a
# PodDisruptionBudget is respected): create on pods/eviction, in its own role, and nothing
# more on that resource anywhere.
EXTENDER_EVICTION = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
# It deletes what it creates for a gang on an autoscaled pool: its ProvisioningRequests
# and their PodTemplates, nothing else (admission/extender-deletes.yaml: only those
# carrying its marker).
EXTENDER_DELETES = (
    {"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests"],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["get", "create", "delete"]},
)


def test_no_shipped_role_grants_dangerous_rights() -> None:
    roles = {name: rules for (_, name), rules in _roles().items()}
    assert {"gang-scheduler", "gang-scheduler-extender"} <= roles.keys()
    for name, rules in roles.items():
        for rule in rules:
            if name == "gang-scheduler" and rule == SCHEDULER_DRA:
                continue
            if name == "gang-scheduler-extender" and (rule == EXTENDER_EVICTION
                                                      or rule in EXTENDER_DELETES):
                continue
            assert not set(rule.get("verbs", [])) & NEVER_VERBS, (name, rule)
            resources = set(rule.get("resources", []))
            if name.endswith("leader-election"):
                resources.discard("leases")  # its own lease, by name for get/update
            assert not resources & NEVER_RESOURCES, (name, rule)
            assert "*" not in rule.get("apiGroups", []), (name, rule)
            assert not rule.get("nonResourceURLs"), (name, rule)

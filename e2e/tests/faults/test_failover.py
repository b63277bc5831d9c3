"""Active/standby with two replicas of the gang scheduler on the local control plane.

Each replica is a kube-scheduler and its extender, configured as deploy/ ships them
(deploy/scheduler-config.yaml, the sidecar's args in deploy/deployment.yaml, leader
election on) and running under deploy/'s ServiceAccount and RBAC. On one machine both
would have one host name, so each kube-scheduler runs in a UTS namespace of its own with
the replica's name as host name (its lease identity is `<name>_<uuid>`), and its
extender is told that name with `--leader-identity`, as the pod's hostname does in a
cluster. Otherwise only ports, credentials, the profile's name and a 2 s backoff base
(for a wake-up within the test) differ from deploy/. The lease timings are
kube-scheduler's defaults (15 s lease): a failover takes about that long here too.

The test shows that
(a) only the leader's extender writes PodGroup status, posts Events, sends wake-ups and
    expires deadlines, while the standby writes nothing (its own /metrics counters, and
    the Events' reportingInstance);
(b) the standby answers a direct /filter and /bind with the standby error;
(c) when the leader's kube-scheduler dies while a gang's binds are held there, its
    extender exits by itself (status 1) once the lease runs out, the standby takes over,
    and every gang is placed whole: the one whose binds died, one created during the
    failover, and one whose last member is created after it. No gang is ever partly
    bound (every binding is recorded from a watch).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import deploy_kit as dk
from e2e.gang import Recorder
from e2e.harness.base import REPO_ROOT
from e2e.harness.cluster import ControlPlane
from e2e.harness.fixtures import NodeSet
from e2e.harness.k8s import ApiException, client
from e2e.harness.objects import create_pod, create_podgroup, delete_pod
from e2e.harness.process import START_MARKER, ManagedProcess, free_port
from e2e.harness.readiness import http_ok
from e2e.harness.target import ClusterApis
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.metrics import metric

pytestmark = pytest.mark.e2e

SCHED = "gang-scheduler-failover"  # its own profile: no other scheduler of the session
IDENTITIES = ("replica-a", "replica-b")
PORT = 9000
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass
class Replica:
    identity: str
    port: int
    extender: ManagedProcess
    scheduler: ManagedProcess

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:
            body = resp.read().decode()
        return json.loads(body) if path.startswith("/debug") else body

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())

    def metric(self, name: str, **labels: str) -> float:
        return metric(self, name, labels)

    def writes(self) -> dict[str, float]:
        """What this replica did to the cluster, by its own counters."""
        return {
            "status writes": self.metric("gang_extender_podgroup_status_writes_total"),
            "events": self.metric("gang_extender_events_total"),
            "wake-ups": self.metric("gang_extender_wakeups_total"),
            "deadlines expired": self.metric("gang_extender_timeouts_total"),
            "binds answered": self.metric("gang_extender_bindings_total"),
        }

    def mode(self) -> str:
        return str(self.get("/debug/gangs")["leader"]["mode"])


def _with_flag(args: list[str], flag: str, value: str | None) -> list[str]:
    out = [a for a in args if not a.startswith(f"{flag}=")]
    return out if value is None else [*out, f"{flag}={value}"]


@pytest.fixture
def replicas(local_control_plane: ControlPlane, kube: ClusterApis,
             tmp_path: Path) -> Iterator[Callable[[str], Replica]]:
    """Starts replicas as deploy/ runs them, under deploy/'s ServiceAccount."""
    cp = local_control_plane
    deploy = REPO_ROOT / "deploy"
    rbac = [d for f in [deploy / "namespace.yaml", *sorted((deploy / "rbac").glob("*.yaml"))]
            for d in dk.load_docs(f.read_text())]
    errors = dk.apply(dk.dynamic_client(kube.api), rbac)
    assert not errors, errors
    # Each under its own account, as in deploy/'s pod.
    sa, ext_sa = dk.deployed_kubeconfigs(cp, kube.core, tmp_path)
    deployment = next(d for d in dk.load_docs((deploy / "deployment.yaml").read_text())
                      if d["kind"] == "Deployment")
    sidecar = next(c for c in deployment["spec"]["template"]["spec"]["initContainers"]
                   if c["name"] == dk.EXTENDER_CONTAINER)
    shipped = yaml.safe_load((deploy / "scheduler-config.yaml").read_text())
    le = shipped["leaderElection"]
    assert le["leaderElect"] and "leaseDuration" not in le  # kube-scheduler's 15 s default
    assert f"--leader-lease={le['resourceNamespace']}/{le['resourceName']}" in sidecar["args"]
    # A lease left by an earlier test's scheduler must not delay this one.
    with contextlib.suppress(ApiException):
        client.CoordinationV1Api(kube.api).delete_namespaced_lease(
            le["resourceName"], le["resourceNamespace"])
    started: list[ManagedProcess] = []

    def start(identity: str) -> Replica:
        port = free_port()
        args = list(sidecar["args"])
        args = _with_flag(args, "--listen", f"127.0.0.1:{port}")
        args = _with_flag(args, "--metrics-listen", None)  # /metrics is on --listen too
        args = _with_flag(args, "--scheduler-name", SCHED)
        args = _with_flag(args, "--kubeconfig", str(ext_sa))
        args = _with_flag(args, "--leader-identity", identity)
        # A backoff that ends within the test (deploy/ has 10 s), for a certain wake-up.
        args = _with_flag(args, "--backoff-base", "2")
        ext = cp.start_process([sys.executable, "-m", "extender.cli", *args],
                               f"failover-{identity}-extender",
                               cwd=REPO_ROOT, env={"KUBECONFIG": str(ext_sa)},
                               ready=http_ok(f"http://127.0.0.1:{port}/readyz"),
                               ready_timeout=30)
        started.append(ext)
        cfg = json.loads(json.dumps(shipped))
        cfg["profiles"][0]["schedulerName"] = SCHED
        for e in cfg["extenders"]:
            e["urlPrefix"] = f"http://127.0.0.1:{port}"
        cfg["clientConnection"] = {"kubeconfig": str(sa)}
        sched = cp.start_scheduler(cfg, f"failover-{identity}-kube-scheduler",
                                   hostname=identity)
        started.append(sched)
        return Replica(identity, port, ext, sched)

    yield start
    for p in reversed(started):
        with contextlib.suppress(Exception):
            p.stop()


def current_log(p: ManagedProcess) -> str:
    return p.log_path.read_text(errors="replace").rsplit(START_MARKER, 1)[-1]


def lease_holder(kube: ClusterApis) -> str:
    lease = client.CoordinationV1Api(kube.api).read_namespaced_lease(
        "gang-scheduler", dk.INSTALL_NS)
    return str(lease.spec.holder_identity or "")


def member(ns: str, gang: str, i: int, hostport: bool = False) -> None:
    """A gang member of 100m CPU; with `hostport`, it asks for host port 9000, which
    kube-scheduler's own NodePorts filter keeps it off while a blocker holds it."""
    extra: dict[str, Any] = {}
    if hostport:
        extra = {"containers": [{"name": "main", "image": "busybox:1.36",
                                 "command": ["sleep", "1d"],
                                 "ports": [{"containerPort": PORT, "hostPort": PORT}],
                                 "resources": {"requests": {"cpu": "100m", "memory": "0"}}}]}
    create_pod(ns, f"{gang}-{i}", cpu="100m", memory="64Mi", pod_group=gang,
               scheduler_name=SCHED, spec_extra=extra)


def block_port(ns: str, nodes: list[str]) -> list[str]:
    """A pod holding host port 9000 on each node (placed by nodeName, no scheduler)."""
    names = []
    for node in nodes:
        name = f"blocker-{node}"
        create_pod(ns, name, cpu="0", memory="0", spec_extra={
            "nodeName": node,
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "1d"],
                            "ports": [{"containerPort": PORT, "hostPort": PORT}],
                            "resources": {"requests": {"cpu": "0", "memory": "0"}}}]})
        names.append(name)
    return names


def bound(rec: Recorder, gang: str) -> int:
    return len(rec.bound(gang))


def waiting_binds(r: Replica, gang: str, ns: str) -> list[str]:
    return [b["pod"] for b in r.get("/debug/gangs")["waitingBinds"]
            if b["pod"].startswith(f"{ns}/{gang}-")]


def test_only_the_leader_acts_and_a_failover_places_every_gang_whole(
    replicas: Callable[[str], Replica], kube: ClusterApis, fake_nodes: NodeSet, namespace: str,
) -> None:
    ns = namespace
    nodes = fake_nodes.add_nodes(3, prefix=ns, cpu="2", memory="4Gi")
    a = replicas("replica-a")
    wait_for(lambda: lease_holder(kube).startswith("replica-a_") or NotYet(lease_holder(kube)),
             30, "replica-a's kube-scheduler holding the lease", logs=[a.scheduler, a.extender])
    b = replicas("replica-b")
    logs = [a.extender, a.scheduler, b.extender, b.scheduler]

    with Recorder(ns) as rec:
        # ----- (a) work under replica-a: Events, status, a wake-up, an expired deadline
        create_podgroup(ns, "whole", min_member=2)
        for i in range(2):
            member(ns, "whole", i)
        # Two of three members turned away; the third comes a moment later.
        create_podgroup(ns, "late", min_member=3)
        for i in range(2):
            member(ns, "late", i)
        wait_for(lambda: a.metric("gang_extender_verb_duration_seconds_count", verb="filter",
                                  result="rejected") >= 2 or NotYet("not turned away yet"),
                 30, "late-0 and late-1 turned away", logs=logs)
        time.sleep(1)
        member(ns, "late", 2)
        # A reservation that cannot complete: its port member never reaches the extender.
        blockers = block_port(ns, nodes)
        create_podgroup(ns, "expire", min_member=2, timeout=3)
        member(ns, "expire", 0)
        member(ns, "expire", 1, hostport=True)
        wait_for(lambda: (bound(rec, "whole") == 2 and bound(rec, "late") == 3)
                 or NotYet({"whole": bound(rec, "whole"), "late": bound(rec, "late")}),
                 60, "gangs whole and late bound", logs=logs)
        wait_for(lambda: a.metric("gang_extender_timeouts_total") >= 1 or NotYet(a.writes()),
                 30, "the expire gang's deadline passing at replica-a", logs=logs)
        # Its backoff ending is news to kube-scheduler: the extender wakes its parked members.
        wait_for(lambda: a.metric("gang_extender_wakeups_total") >= 1 or NotYet(a.writes()),
                 30, "replica-a waking the expire gang after its backoff", logs=logs)
        # Status and Events are written off the request path: give them their time.
        wait_for(lambda: (a.metric("gang_extender_podgroup_status_writes_total", result="ok")
                          >= 3 and a.metric("gang_extender_events_total") > 0)
                 or NotYet(a.writes()), 30, "replica-a's status writes and Events", logs=logs)
        for name in ("expire-0", "expire-1"):
            delete_pod(ns, name)
        kube.custom.delete_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns,
                                                    "podgroups", "expire")
        time.sleep(2)  # anything a standby would do about all this, it would have done
        wrote_a, wrote_b = a.writes(), b.writes()
        assert wrote_b == dict.fromkeys(wrote_b, 0.0), (
            f"the standby replica-b acted: {wrote_b} (replica-a: {wrote_a})")
        assert all(v > 0 for v in wrote_a.values()), wrote_a
        events = kube.core.list_namespaced_event(ns).items
        # Only the two replicas count: in the full suite the session's own gang stack (no
        # lease, another scheduler name) also posts Events about every PodGroup it sees.
        instances = {e.reporting_instance for e in events
                     if e.reporting_component == "gang-extender"}
        assert instances & {"replica-a", "replica-b"} == {"replica-a"}, instances
        assert (a.metric("gang_extender_leader"), b.metric("gang_extender_leader")) == (1, 0)
        assert (a.mode(), b.mode()) == ("active", "standby")

        # ----- (b) the standby refuses the verbs with a clear error
        pod = kube.core.read_namespaced_pod("whole-0", ns, _preload_content=False)
        status, body = b.post("/filter", {"Pod": json.loads(pod.data), "NodeNames": nodes,
                                          "Nodes": None})
        prefix = ("gang-extender replica-b is on standby: its kube-scheduler does not hold "
                  "lease gang-scheduler-system/gang-scheduler (holder: replica-a_")
        assert status == 200 and body["Error"].startswith(prefix), body
        assert body["NodeNames"] is None
        status, body = b.post("/bind", {"PodName": "whole-0", "PodNamespace": ns,
                                        "PodUID": "x", "Node": nodes[0]})
        assert status == 200 and body["Error"].startswith(prefix), body

        # ----- (c) binds held at replica-a when its kube-scheduler dies
        create_podgroup(ns, "held", min_member=3, timeout=300)
        for i in range(2):
            member(ns, "held", i)
        member(ns, "held", 2, hostport=True)
        wait_for(lambda: len(waiting_binds(a, "held", ns)) == 2 or NotYet(a.get("/debug/gangs")),
                 30, "two binds of gang held waiting at replica-a", logs=logs)
        create_podgroup(ns, "slow", min_member=3)  # its last member comes after the failover
        for i in range(2):
            member(ns, "slow", i)
        time.sleep(1)

        killed = time.monotonic()
        a.scheduler.kill()
        create_podgroup(ns, "during", min_member=2)
        for i in range(2):
            member(ns, "during", i)
        # Its extender sees the lease run out and exits, its held binds dying with it.
        wait_for(lambda: not a.extender.running() or NotYet("replica-a's extender runs"), 40,
                 "replica-a's extender exiting after its lease ran out", logs=logs)
        exited = time.monotonic() - killed
        log = current_log(a.extender)
        assert a.extender.returncode() == 1, log[-3000:]
        assert "lost leadership of lease gang-scheduler-system/gang-scheduler" in log
        assert "exiting (status 1) after losing leadership: 2 waiting bind(s) answered" in log
        assert "Traceback" not in log, log[-3000:]
        wait_for(lambda: b.mode() == "active" or NotYet(b.get("/debug/gangs")["leader"]), 40,
                 "replica-b taking over", logs=logs, interval=0.05)
        took_over = time.monotonic() - killed
        assert lease_holder(kube).startswith("replica-b_")

        wait_for(lambda: bound(rec, "during") == 2 or NotYet(bound(rec, "during")), 60,
                 "gang during placed by replica-b", logs=logs)
        first_bound = time.monotonic() - killed
        wait_for(lambda: len(waiting_binds(b, "held", ns)) == 2 or NotYet(b.get("/debug/gangs")),
                 60, "gang held's binds waiting again, at replica-b", logs=logs)
        assert bound(rec, "held") == 0 and bound(rec, "slow") == 0
        for name in blockers:
            delete_pod(ns, name)
        member(ns, "slow", 2)
        wait_for(lambda: (bound(rec, "held") == 3 and bound(rec, "slow") == 3)
                 or NotYet({"held": bound(rec, "held"), "slow": bound(rec, "slow")}),
                 60, "gangs held and slow placed whole by replica-b", logs=logs)

        for gang, size in (("whole", 2), ("late", 3), ("held", 3), ("during", 2),
                           ("slow", 3)):
            assert bound(rec, gang) == size, (gang, rec.history)
            rec.assert_never_partial(gang, size)
        assert bound(rec, "expire") == 0
        # replica-b now owns the status too.
        wait_for(lambda: b.metric("gang_extender_podgroup_status_writes_total", result="ok") > 0
                 or NotYet(b.writes()), 30, "replica-b writing PodGroup status", logs=logs)
        print(f"\nfailover: replica-a's extender exited {exited:.1f}s after its "
              f"kube-scheduler was killed; replica-b active after {took_over:.1f}s; "
              f"first gang bound by replica-b after {first_bound:.1f}s")

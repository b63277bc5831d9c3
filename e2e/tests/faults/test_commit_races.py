"""A commit's Bindings in flight keep their capacity whatever happens to their gang
(architecture.md, "A Binding in flight"), on the real control plane.

The window is made wide on purpose, the way a slow admission webhook makes it in a real
cluster: a validating webhook on `pods/binding` (served by this test over TLS on
loopback) answers the gang's Bindings only after a few seconds, so they stay in flight
while the test deletes the PodGroup and lets kube-scheduler schedule plain pods of the
gang scheduler, each as big as what a node has free without the gang. Before the fix the
deletion freed the capacity of every member in flight, the extender bound plain pods onto
it, and both landed: more CPU bound to a node than it has.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.k8s import client
from e2e.harness.objects import GANG_SCHEDULER, create_pod, create_podgroup
from e2e.harness.pki import generate_serving_pki
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.test_direct_commit import kube_scheduler_paused

pytestmark = pytest.mark.e2e

_NODE_CPU_MILLI = 16_000
_HOLD_SECONDS = 5.0  # how long the webhook keeps each of the gang's Bindings


def _cpu_milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def cpu_bound_per_node(ns: str) -> dict[str, int]:
    """CPU requested by the pods of `ns` bound to each node, from the API."""
    used: dict[str, int] = {}
    for p in kube().core.list_namespaced_pod(ns).items:
        if not p.spec.node_name or (p.status and p.status.phase in ("Succeeded", "Failed")):
            continue
        for c in p.spec.containers:
            req: dict[str, Any] = (c.resources.requests or {}) if c.resources else {}
            used[p.spec.node_name] = (used.get(p.spec.node_name, 0)
                                      + _cpu_milli(str(req.get("cpu", "0"))))
    return used


def _handler(prefix: str, seconds: float) -> type[BaseHTTPRequestHandler]:
    class Slow(BaseHTTPRequestHandler):
        """Allows every Binding; those of pods named `prefix`* after `seconds`."""

        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            if str(request.get("name", "")).startswith(prefix):
                time.sleep(seconds)
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": {"uid": request["uid"], "allowed": True}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Slow


@contextmanager
def slow_bindings(ns: str, prefix: str, seconds: float) -> Iterator[None]:
    """Bindings of the pods of `ns` named `prefix`* answered `seconds` late, by a
    validating webhook on pods/binding that this test serves."""
    with tempfile.TemporaryDirectory() as d:
        ca, pair = generate_serving_pki(Path(d), "slow-bindings", ["IP:127.0.0.1"])
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(prefix, seconds))
        server.daemon_threads = True
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(pair.cert), str(pair.key))
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        name = f"slow-bindings-{ns}"
        webhook: dict[str, Any] = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": "slow-bindings.e2e.gang-extender.x-k8s.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{server.server_address[1]}/",
                    "caBundle": base64.b64encode(ca.cert.read_bytes()).decode()},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["pods/binding"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 15}],
        }
        admission = client.AdmissionregistrationV1Api(kube().api)
        admission.create_validating_webhook_configuration(webhook, _preload_content=False)
        try:
            time.sleep(1.0)  # the API server's webhook informer picks it up
            yield
        finally:
            admission.delete_validating_webhook_configuration(name, _preload_content=False)
            server.shutdown()


def test_a_podgroup_deleted_mid_commit_frees_no_capacity_still_in_flight(
    gang: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    fake_nodes.add_nodes(20, prefix="race", cpu="16", memory="64Gi")
    with Recorder(ns) as rec, slow_bindings(ns, "race-", _HOLD_SECONDS):
        with kube_scheduler_paused(gang):
            # First in kube-scheduler's queue once it runs again: 8 CPU each, which a
            # node holding its 10 members (15 CPU) cannot take, and one without them can.
            for i in range(40):
                create_pod(ns, f"plain-{i}", cpu="8", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER)
            create_podgroup(ns, "race", 200, timeout=120)
            for i in range(200):
                create_pod(ns, f"race-{i}", cpu="1500m", memory="64Mi",
                           scheduler_name=GANG_SCHEDULER, pod_group="race")
            wait_for(lambda: gang.debug()["bindingsInFlight"] or NotYet(gang.debug()), 60,
                     "the commit's Bindings in flight", interval=0.02, logs=gang.logs())
            kube().custom.delete_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "race")
            wait_for(lambda: not gang.debug()["reservations"] or NotYet(gang.debug()), 10,
                     "the extender saw the PodGroup go", interval=0.02, logs=gang.logs())
            assert not rec.bound("race")  # every member's Binding is still in flight
        # kube-scheduler runs again: the plain pods race onto the members' nodes.

        def settled() -> bool | NotYet:
            flying = gang.debug()["bindingsInFlight"]
            return not flying or NotYet(flying)

        wait_for(settled, 60, "no Binding in flight", logs=gang.logs())
        time.sleep(3)  # kube-scheduler's retries of the plain pods
    used = cpu_bound_per_node(ns)
    over = {n: u for n, u in used.items() if u > _NODE_CPU_MILLI}
    plain = len(rec.bound()) - len(rec.bound("race"))
    print(f"MEASURED podgroup deleted with its 200-pod gang's Bindings in flight: "
          f"{len(rec.bound('race'))} members landed, {plain} plain pods bound, "
          f"{len(over)} node(s) over-committed")
    assert not over, f"CPU bound beyond 16 on {over}"

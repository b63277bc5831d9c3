"""Faults the commit tests inject around a gang's Bindings: kube-scheduler paused (so that
whatever is bound meanwhile the extender bound alone), Bindings answered late by a
validating webhook this process serves, and the CPU the API says is bound on each node
(to find an over-commit). The direct-commit, commit-race and restart-race tests all use
them, so they are a module of their own rather than a test module the others import from."""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from e2e.gang import GangStack
from e2e.harness.k8s import client
from e2e.harness.pki import generate_serving_pki
from e2e.harness.target import kube


@contextmanager
def kube_scheduler_paused(gang: GangStack) -> Iterator[None]:
    """kube-scheduler stopped (SIGSTOP) for the block: it runs no cycle and sends no
    filter or bind request, so whatever is bound meanwhile the extender bound alone."""
    pid = gang.scheduler.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


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

"""A stock kube-scheduler calls an HTTP extender for filter, prioritize and bind.

The extender here is a few lines of http.server that records the verbs, passes every node,
scores 0 and binds by POSTing a v1 Binding; it proves the wiring (config, ports, RBAC,
binding subresource) the real extender depends on, independent of the extender's code.

The profile is named ``gang-scheduler-smoke``, not ``gang-scheduler``: other e2e modules keep
the real gang stack (profile ``gang-scheduler``) running for the whole session, and two
schedulers serving one profile would race for the pod.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from e2e.harness.cluster import ControlPlane
from e2e.harness.fixtures import NodeSet
from e2e.harness.objects import create_pod
from e2e.harness.queries import get_pod
from e2e.harness.target import kube
from e2e.harness.waiting import NotYet, wait_for

pytestmark = pytest.mark.e2e

SMOKE_SCHEDULER = "gang-scheduler-smoke"


class RecordingExtender:
    """Threaded HTTP extender on 127.0.0.1 that records (verb, pod) pairs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.errors: list[str] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                verb = self.path.rstrip("/").rsplit("/", 1)[-1]
                try:
                    reply = rec.handle(verb, body)
                except Exception as e:
                    rec.errors.append(f"{verb}: {e!r}")
                    reply = {"Error": repr(e)}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, verb: str, body: dict[str, Any]) -> Any:
        if verb == "bind":
            ns, name = body["PodNamespace"], body["PodName"]
            self.calls.append((verb, f"{ns}/{name}"))
            binding = {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns, "uid": body["PodUID"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]},
            }
            kube().core.create_namespaced_pod_binding(name, ns, binding,
                                                      _preload_content=False)
            return {"Error": ""}
        pod = body["Pod"]["metadata"]
        self.calls.append((verb, f"{pod['namespace']}/{pod['name']}"))
        names = body.get("NodeNames") or []
        if verb == "filter":
            return {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                    "Error": ""}
        if verb == "prioritize":
            return [{"Host": n, "Score": 0} for n in names]
        raise ValueError(f"unknown verb {verb}")

    def verbs(self) -> set[str]:
        return {v for v, _ in self.calls}


@pytest.fixture
def recording_extender() -> Iterator[RecordingExtender]:
    ext = RecordingExtender()
    ext.thread.start()
    try:
        yield ext
    finally:
        ext.server.shutdown()
        ext.server.server_close()


def test_scheduler_calls_extender_filter_prioritize_bind(
    local_control_plane: ControlPlane,
    fake_nodes: NodeSet,
    namespace: str,
    recording_extender: RecordingExtender,
) -> None:
    # Two nodes: with a single feasible node kube-scheduler skips prioritize.
    fake_nodes.add_nodes(2, prefix=namespace)
    sched = local_control_plane.start_scheduler({
        "profiles": [{"schedulerName": SMOKE_SCHEDULER, "percentageOfNodesToScore": 100}],
        "extenders": [{
            "urlPrefix": recording_extender.url,
            "filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
            "weight": 1, "nodeCacheCapable": True, "ignorable": False, "httpTimeout": "10s",
        }],
    }, name="gang-scheduler-smoke")
    try:
        create_pod(namespace, "p", scheduler_name=SMOKE_SCHEDULER)

        def running() -> object:
            pod = get_pod(namespace, "p") or {}
            st = pod.get("status") or {}
            if st.get("phase") == "Running":
                return pod
            return NotYet({"status": st, "extender calls": recording_extender.calls,
                           "extender errors": recording_extender.errors})

        pod = wait_for(running, 30, "pod p bound by the extender and Running",
                       logs=[sched, "fake-kubelet", "kube-apiserver"])
        assert isinstance(pod, dict)
        assert pod["spec"]["nodeName"].startswith(namespace)
        assert recording_extender.verbs() == {"filter", "prioritize", "bind"}, (
            recording_extender.calls)
        assert not recording_extender.errors
    finally:
        sched.stop()

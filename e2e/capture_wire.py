"""Record what a stock kube-scheduler sends to an HTTP extender, for the tests to replay.

The HTTP layer's tests (tests/scheduler/test_http_contract.py) and the converters' tests
(tests/core/model/test_convert.py) decode request bodies exactly as kube-scheduler sends them;
hand-written bodies would only show what their author believed. This script makes those
bodies with the project's own e2e control plane, so a fresh clone has them and a new
Kubernetes release can be recorded again with one command::

    .venv/bin/python -m e2e.capture_wire --out tests/wire
    K8S=1.36 .venv/bin/python -m e2e.capture_wire --out /tmp/wire-1.36   # another release

What it runs: etcd, kube-apiserver and kube-controller-manager (:mod:`e2e.harness.cluster`),
four fake nodes shaped like GPU machines, and kube-scheduler with deploy/'s
KubeSchedulerConfiguration, its extenders pointed at a small recording extender in this
process. The recorder passes every node, scores each 0 and binds by POSTing the Binding,
so the scheduler goes through filter, prioritize and bind once per pod. It runs twice:
with deploy's ``nodeCacheCapable: true``, then with the same configuration switched to
``false`` (kube-scheduler then sends whole Node objects instead of names); one pod each,
``gang-0`` and ``gang-1`` in ``default``.

What it writes, per mode ``nodecachecapable-<true|false>``: ``.<verb>.request.json`` and
``.<verb>.response.json`` (bodies as sent, pretty-printed, keys in the sender's order) and
``.http.json`` (request line, headers, status and reply headers per verb); then
``capture.json`` (the Kubernetes version, and each pod as the API server returned it on
create, which the tests compare the decoded bodies with) and a README.md saying the same
in words.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.base import REPO_ROOT
from e2e.harness.binaries import find_etcd, find_k8s_bin
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakenodes import FakeNodes
from e2e.harness.k8s import client
from e2e.harness.target import cluster_in_use, kube
from e2e.harness.waiting import NotYet, wait_for

DEPLOY_CONFIG = REPO_ROOT / "deploy" / "scheduler-config.yaml"
DEFAULT_OUT = REPO_ROOT / "tests" / "wire"
VERBS = ("filter", "prioritize", "bind")
NAMESPACE = "default"
NODES = tuple(f"fake-node-{i}" for i in range(4))
NODE_SHAPE: Mapping[str, Any] = {"cpu": "8", "memory": "32Gi", "pods": 110, "gpus": 8,
                                 "labels": {"pool": "gpu"}}
MANIFEST = "capture.json"


def mode_name(node_cache_capable: bool) -> str:
    """The file-name prefix of one mode: ``nodecachecapable-true``."""
    return f"nodecachecapable-{str(node_cache_capable).lower()}"


def wire_configs(deploy: Mapping[str, Any], url: str) -> dict[bool, dict[str, Any]]:
    """deploy/'s KubeSchedulerConfiguration for each ``nodeCacheCapable``, every extender
    pointed at ``url``.

    Derived, not written out: the point of the capture is what kube-scheduler sends under
    the configuration users install, so anything deploy/ changes (verbs, timeouts, the
    profile) is recorded too. Only what cannot hold on a loopback control plane changes:
    the extenders' address, and leader election (deploy's lease lives in a namespace the
    capture has no reason to create).
    """
    extenders = deploy.get("extenders")
    if not isinstance(extenders, list) or not extenders:
        raise ValueError("the scheduler configuration has no extenders to record")
    out: dict[bool, dict[str, Any]] = {}
    for capable in (True, False):
        cfg = copy.deepcopy(dict(deploy))
        cfg["leaderElection"] = {"leaderElect": False}
        for ext in cfg["extenders"]:
            if not isinstance(ext, dict):
                raise ValueError(f"an extender entry is not a mapping: {ext!r}")
            ext["urlPrefix"] = url
            ext["nodeCacheCapable"] = capable
        out[capable] = cfg
    return out


def profile_name(cfg: Mapping[str, Any]) -> str:
    """The scheduler name of the configuration's one profile (the pods name it)."""
    profiles = cfg.get("profiles") or []
    if len(profiles) != 1 or not profiles[0].get("schedulerName"):
        raise ValueError("expected exactly one profile with a schedulerName")
    return str(profiles[0]["schedulerName"])


def pod_body(name: str, scheduler_name: str) -> dict[str, Any]:
    """The pod recorded: one container asking for 1 CPU, 1Gi and a GPU, two labels and an
    annotation, nothing else; the API server's admission fills in the rest (tolerations,
    priority, the service-account volume) as on any cluster."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "labels": {"app": "wire", "gang": "g1"},
                     "annotations": {"example.com/note": "wire capture"}},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{
                "name": "main", "image": "registry.invalid/trainer:1",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}},
            }],
        },
    }


@dataclass
class Call:
    """One verb call as it crossed the wire."""

    verb: str
    request_line: str
    headers: dict[str, str]
    client: str
    request: Any
    status: int
    response_headers: dict[str, str]
    response: Any
    time: str
    seq: int

    def pod_key(self) -> str:
        """``namespace/name`` of the pod the call is about."""
        if self.verb == "bind":
            return f"{self.request['PodNamespace']}/{self.request['PodName']}"
        meta = self.request["Pod"]["metadata"]
        return f"{meta['namespace']}/{meta['name']}"


def answer(verb: str, body: Any) -> Any:
    """What the recorder replies: every node passes, every score is 0 (bind is done by
    the caller). The filter reply carries nodes the way the request did, as kube-scheduler
    reads only that one: names with nodeCacheCapable, Node objects without."""
    names = body.get("NodeNames")
    nodes = body.get("Nodes")
    if verb == "filter":
        return {"NodeNames": names, "Nodes": nodes, "FailedNodes": {},
                "FailedAndUnresolvableNodes": {}, "Error": ""}
    if verb == "prioritize":
        hosts = names if names is not None else [
            n["metadata"]["name"] for n in (nodes or {}).get("items") or []]
        return [{"Host": h, "Score": 0} for h in hosts]
    raise ValueError(f"unknown verb {verb!r}")


@dataclass
class RecordingExtender:
    """A threaded HTTP extender on 127.0.0.1 that answers and keeps every call."""

    calls: list[Call] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        rec = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keep-alive as a real extender serves it; a buffered writer sends
            # the status line, headers and body in one write (two writes on a kept-alive
            # connection cost ~40 ms each: Nagle and delayed ACK).
            protocol_version = "HTTP/1.1"
            wbufsize = -1

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                rec.serve(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        """Answer one call, POST the Binding for a bind, and record both sides."""
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        verb = h.path.rstrip("/").rsplit("/", 1)[-1]
        try:
            body = json.loads(raw)
            if verb == "bind":
                bind(body)
                reply: Any = {"Error": ""}
            else:
                reply = answer(verb, body)
        except Exception as e:  # recorded and answered: the capture fails on it later
            body = raw.decode(errors="replace")
            reply = {"Error": f"recorder: {e!r}"}
            with self._lock:
                self.errors.append(f"{verb}: {e!r}")
        data = json.dumps(reply).encode()
        reply_headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        h.send_response(200)
        for k, v in reply_headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        with self._lock:
            self.calls.append(Call(
                verb=verb, request_line=h.requestline, headers=dict(h.headers.items()),
                client=f"{h.client_address[0]}:{h.client_address[1]}", request=body,
                status=200, response_headers=reply_headers, response=reply,
                time=datetime.now(UTC).strftime("%H:%M:%S"), seq=len(self.calls) + 1))

    def calls_for(self, pod_key: str) -> dict[str, Call]:
        """The first call of each verb about the pod."""
        with self._lock:
            calls = list(self.calls)
        out: dict[str, Call] = {}
        for c in calls:
            if c.verb in VERBS and c.verb not in out and c.pod_key() == pod_key:
                out[c.verb] = c
        return out

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def bind(body: Mapping[str, Any]) -> None:
    """Bind as an extender does: POST the pod's Binding subresource."""
    ns, name = body["PodNamespace"], body["PodName"]
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": name, "namespace": ns, "uid": body["PodUID"]},
               "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]}}
    kube().core.create_namespaced_pod_binding(name, ns, binding,
                                              _preload_content=False).read()


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def write_mode(out: Path, capable: bool, calls: Mapping[str, Call]) -> list[str]:
    """Write one mode's bodies and its ``.http.json``; returns the file names."""
    prefix = mode_name(capable)
    written: list[str] = []
    http: dict[str, Any] = {}
    for verb in VERBS:
        c = calls[verb]
        for side, obj in (("request", c.request), ("response", c.response)):
            name = f"{prefix}.{verb}.{side}.json"
            (out / name).write_text(dump(obj))
            written.append(name)
        method, path, _ = c.request_line.split(" ", 2)
        http[verb] = {"method": method, "path": path, "request_line": c.request_line,
                      "headers": c.headers, "client": c.client,
                      "response_code": c.status, "response_headers": c.response_headers,
                      "time": c.time, "seq": c.seq}
    (out / f"{prefix}.http.json").write_text(dump(http))
    written.append(f"{prefix}.http.json")
    return written


def readme(manifest: Mapping[str, Any]) -> str:
    """The README.md written beside the files: what they are and how they were made."""
    shapes = {True: "true: `NodeNames` list, `Nodes: null`",
              False: "false: whole Node objects in `Nodes.items`, `NodeNames: null`"}
    rows = "\n".join(
        f"| `{mode_name(m['nodeCacheCapable'])}.*` | `{m['pod']['name']}` | "
        f"{shapes[m['nodeCacheCapable']]} |"
        for m in manifest["modes"])
    return f"""# Extender traffic recorded from kube-scheduler

Kubernetes {manifest['kubernetesVersion']}, recorded {manifest['recorded']} by
`python -m e2e.capture_wire`. Do not edit these files by hand: run that command again on a
new Kubernetes release (`K8S=<minor>` picks another pinned release, as for the e2e tests).

A stock kube-scheduler with deploy/scheduler-config.yaml (profile `{manifest['schedulerName']}`)
called a recording extender that passed every node, scored each 0 and bound by POSTing the
Binding. The cluster had {len(manifest['nodes'])} nodes, `{manifest['nodes'][0]}` to
`{manifest['nodes'][-1]}`: 8 CPU, 32Gi, 110 pods, 8 `nvidia.com/gpu`, label `pool=gpu`.
One pod per mode, asking for 1 CPU, 1Gi and a GPU.

| Files | Pod | `nodeCacheCapable` |
|---|---|---|
{rows}

Per mode and verb (`filter`, `prioritize`, `bind`): `.<verb>.request.json` is the body the
scheduler sent, `.<verb>.response.json` the reply it accepted, both pretty-printed with keys
in the order sent. `.http.json` has the request line, the scheduler's headers, the status
and the reply's headers. `{MANIFEST}` has the version and each pod as the API server
returned it on create (its uid and creation time, which the tests compare the decoded
bodies with).
"""


def k8s_version(bin_dir: Path) -> str:
    """The API server's own word for its version (``v1.37.2``)."""
    info = json.loads(client.VersionApi(kube().api).get_code(_preload_content=False).data)
    version = str(info.get("gitVersion") or "")
    if not version:  # never expected; the binary knows too
        out = subprocess.run([str(bin_dir / "kube-scheduler"), "--version"],
                             capture_output=True, text=True, check=False).stdout
        version = out.split()[-1] if out.split() else "unknown"
    return version


def capture_mode(cp: ControlPlane, rec: RecordingExtender, cfg: dict[str, Any], capable: bool,
                 pod_name: str) -> tuple[dict[str, Call], dict[str, Any]]:
    """Run kube-scheduler with ``cfg`` until one pod has gone through every verb; the
    scheduler is stopped afterwards so the next mode's is the only one serving the
    profile."""
    sched = cp.start_scheduler(cfg, name=f"wire-{mode_name(capable)}")
    try:
        created = json.loads(kube().core.create_namespaced_pod(
            NAMESPACE, pod_body(pod_name, profile_name(cfg)), _preload_content=False).data)
        key = f"{NAMESPACE}/{pod_name}"

        def recorded() -> dict[str, Call] | NotYet:
            calls = rec.calls_for(key)
            if rec.errors or set(calls) != set(VERBS):
                return NotYet({"verbs": sorted(calls), "errors": rec.errors})
            return calls

        calls = wait_for(recorded, 60, f"filter, prioritize and bind of {key}",
                         logs=[sched, "kube-apiserver"])
    finally:
        sched.stop()
    meta = created["metadata"]
    return calls, {"nodeCacheCapable": capable,
                   "pod": {"namespace": meta["namespace"], "name": meta["name"],
                           "uid": meta["uid"],
                           "creationTimestamp": meta["creationTimestamp"]},
                   "boundTo": calls["bind"].request["Node"]}


def capture(out: Path, deploy_config: Path = DEPLOY_CONFIG) -> dict[str, Any]:
    """Start a control plane of its own, record both modes into ``out``, stop everything;
    returns the manifest written.

    Its own, even inside an e2e session: the recording needs its node names and the
    ``gang-scheduler`` profile to itself, which the session's gang stack serves. The
    helpers point at it only for the recording (``cluster_in_use``), then back at the
    session's cluster.
    """
    deploy = yaml.safe_load(deploy_config.read_text())
    out.mkdir(parents=True, exist_ok=True)
    bin_dir = find_k8s_bin()
    cp = ControlPlane(bin_dir, find_etcd()).start()
    rec = RecordingExtender()
    try:
        with cluster_in_use(cp):
            return _record(cp, rec, deploy, out, bin_dir)
    finally:
        rec.stop()
        cp.stop()


def _record(cp: ControlPlane, rec: RecordingExtender, deploy: Mapping[str, Any], out: Path,
            bin_dir: Path) -> dict[str, Any]:
    nodes = FakeNodes(kube().api)
    for name in NODES:
        nodes.add_node(name, **NODE_SHAPE)

    # The ServiceAccount admission plugin refuses pods until the controller made the
    # namespace's default account.
    def account_made() -> bool:
        kube().core.read_namespaced_service_account(
            "default", NAMESPACE, _preload_content=False).read()
        return True

    wait_for(account_made, 30, "service account default/default",
             logs=["kube-controller-manager"])
    configs = wire_configs(deploy, rec.url)
    modes = []
    for i, capable in enumerate((True, False)):
        calls, mode = capture_mode(cp, rec, configs[capable], capable, f"gang-{i}")
        mode["files"] = write_mode(out, capable, calls)
        modes.append(mode)
    manifest = {
        "kubernetesVersion": k8s_version(bin_dir),
        "recorded": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": "python -m e2e.capture_wire",
        "schedulerName": profile_name(configs[True]),
        "nodes": list(NODES),
        "modes": modes,
    }
    (out / MANIFEST).write_text(dump(manifest))
    (out / "README.md").write_text(readme(manifest))
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.capture_wire", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="directory to write into (default: tests/wire of this checkout)")
    p.add_argument("--deploy-config", type=Path, default=DEPLOY_CONFIG,
                   help="the KubeSchedulerConfiguration to record under "
                        "(default: deploy/scheduler-config.yaml)")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    manifest = capture(args.out, args.deploy_config)
    files = sum(len(m["files"]) for m in manifest["modes"])
    print(f"recorded {files} files from Kubernetes {manifest['kubernetesVersion']} into "
          f"{args.out} in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

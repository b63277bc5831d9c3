"""Question: does a stock kube-scheduler keep its pods off a node that another scheduler's
pending pod is nominated to (issue 16, item 4)? Answer: docs/sharing-nodes.md, "What a
nomination does", and docs/sharing-nodes.md, "What other schedulers see of capacity held
for a gang" (e2e/tests/gangs/test_nomination.py keeps the finding checked).

Does a stock kube-scheduler keep its pods off a node that a pending pod of *another*
scheduler is nominated to (`status.nominatedNodeName`)? Issue 16, item 4.

    .venv/bin/python -m lab.experiments.nominate              # 20 tries per case, about 10 min
    .venv/bin/python -m lab.experiments.nominate --tries 5    # a quick look

Why: the extender holds node slots for a gang in its own memory until the quorum binds.
The cluster's default scheduler does not know and may put its pods there. Upstream
kube-scheduler counts nominated pods of equal or higher priority when it filters a node;
whether that includes pods it is not responsible for (another schedulerName, so another
process) decides whether patching `nominatedNodeName` on gang members would protect a
reservation. Measured, not assumed.

One local control plane (e2e harness: etcd, kube-apiserver, kube-controller-manager, the
fake kubelet) with two schedulers, as a cluster runs them: the default kube-scheduler
(profile `default-scheduler`, DefaultPreemption on) and the gang stack (our extender and
a kube-scheduler with deploy/scheduler-config.yaml's profile, DefaultPreemption off). A
recording proxy between the gang kube-scheduler and the extender keeps the NodeNames of
every filter call. Every trial gets fresh nodes, so no trial sees another's pods.

Cases (each a number of tries; priority variants P<D, P=D, P>D via PriorityClasses):

* `foreign`: node N (3 cpu); P (2 cpu, a schedulerName no scheduler serves, so it stays
  pending exactly as a gang member the extender holds) gets `nominatedNodeName=N` by a
  merge patch of pods/status; then D (2 cpu, default-scheduler, pinned to N) is created.
  D fits only if P is ignored.
* `own` (the control, to show the method can see the rule at work): the same, but P is
  the default scheduler's own pod, kept pending by a nodeSelector no node matches, and
  nominated only after the default scheduler has tried it once.
* `foreign-late`: D is created first and P is nominated right after.
* `node-name`: instead of D, a pod created with `spec.nodeName=N` (no scheduler involved).
* `gang`: the real thing on nodes N and M (4 cpu each): gang g (minMember 2) of a (1 cpu)
  and b (2 cpu, with a required anti-affinity to a blocker pod over the topology key
  `nominate-trial`, which both nodes share; the extender models only the hostname part of
  anti-affinity, so it plans b anyway): a's bind is held at the permit barrier and b is
  never offered to the extender, so both slots exist only in the extender's memory.
  In the `on` tries a and b are then patched to their slot nodes, as a nominating extender would;
  then D (3 cpu, default-scheduler) is pinned to b's node. Then the blocker goes (one
  delete frees both nodes for b at once), and the gang's time to bound, b's filter calls
  and b's nomination are recorded.
* `gang-start`: the same without D, nominations on and off: does a nomination change how
  the gang kube-scheduler retries b (its filter call's NodeNames), its start time, or
  does the scheduler keep, clear or overwrite the nomination?

Results: lab/results/nominate.{json,md}; docs/sharing-nodes.md says what they mean.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, machine, md_table, write_results
from e2e.gang import DEFAULT_ARGS, start_extender
from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.k8s import ApiException, client
from e2e.harness.objects import GANG_SCHEDULER, POD_GROUP_LABEL, create_podgroup
from e2e.harness.process import ManagedProcess, free_port
from e2e.harness.target import kube, use_cluster
from lab.common import RESULTS

NOBODY = "nominate-nobody"  # a schedulerName no scheduler serves
LOW, HIGH = "nominate-low", "nominate-high"
PRIORITIES = {  # variant -> (P's class, D's class)
    "P<D": (LOW, HIGH),
    "P=D": (None, None),
    "P>D": (HIGH, LOW),
}
TRIAL_LABEL = "nominate-trial"
BLOCKER_LABEL = "nominate-blocker"
Trial = dict[str, Any]


# ----- the recording proxy -------------------------------------------------------------------


class FilterLog:
    """The filter calls the gang kube-scheduler made: (time, pod name, NodeNames)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, list[str]]] = []
        self.lock = threading.Lock()

    def since(self, t0: float, pod: str) -> list[list[str]]:
        with self.lock:
            return [names for t, p, names in self.calls if t >= t0 and p == pod]


def start_proxy(target: int, log: FilterLog) -> ThreadingHTTPServer:
    """Forward every verb to the extender on `target`, noting each filter call's pod and
    NodeNames; one thread per request, so held binds do not block filter calls."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.endswith("/filter"):
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    args = json.loads(body)
                    with log.lock:
                        log.calls.append((time.monotonic(), args["Pod"]["metadata"]["name"],
                                          list(args.get("NodeNames") or [])))
            conn = http.client.HTTPConnection("127.0.0.1", target, timeout=400)
            try:
                conn.request("POST", self.path, body,
                             {"Content-Type": "application/json"})
                resp = conn.getresponse()
                out = resp.read()
                status = resp.status
            finally:
                conn.close()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def gang_scheduler_config(port: int) -> dict[str, Any]:
    """deploy/scheduler-config.yaml as shipped, pointed at `port`, without leader
    election (one replica here)."""
    cfg: dict[str, Any] = yaml.safe_load((REPO / "deploy" / "scheduler-config.yaml").read_text())
    cfg.pop("leaderElection", None)
    for ext in cfg["extenders"]:
        ext["urlPrefix"] = f"http://127.0.0.1:{port}"
    return cfg


# ----- small API helpers ---------------------------------------------------------------------


def pod_body(name: str, cpu: str, scheduler: str | None = None, *, node: str | None = None,
             pin: str | None = None, selector: dict[str, str] | None = None,
             priority: str | None = None, group: str | None = None,
             avoid: str | None = None, labels: dict[str, str] | None = None
             ) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main", "image": "busybox:1.36", "command": ["sleep", "1d"],
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if avoid:  # not in the same `nominate-trial` domain as the blocker of that trial
        spec["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {BLOCKER_LABEL: avoid}},
                "topologyKey": TRIAL_LABEL}]}}
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeName"] = node
    sel = dict(selector or {})
    if pin:
        sel["kubernetes.io/hostname"] = pin
    if sel:
        spec["nodeSelector"] = sel
    if priority:
        spec["priorityClassName"] = priority
    labels = dict(labels or {})
    if group:
        labels[POD_GROUP_LABEL] = group
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels}, "spec": spec}


def create(ns: str, body: dict[str, Any]) -> None:
    _ = kube().core.create_namespaced_pod(ns, body, _preload_content=False).data


def get(ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        kube().core.read_namespaced_pod(name, ns, _preload_content=False).data)
    return out


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def nnn(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def wait(check: Callable[[], Any], timeout: float, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(step)


def nominate_pod(ns: str, name: str, node: str | None) -> str:
    """A merge patch of pods/status, as an extender would send it; returns the nomination
    the API server stored."""
    out = kube().core.patch_namespaced_pod_status(
        name, ns, {"status": {"nominatedNodeName": node}},
        _content_type="application/merge-patch+json", _preload_content=False)
    return nnn(json.loads(out.data))


def outcome(ns: str, name: str, timeout: float = 10.0) -> tuple[str, str]:
    """("bound", node) or ("pending", the scheduler's message) once the scheduler has
    decided; a pod judged unschedulable is watched 1 s longer in case a retry lands it."""
    def decided() -> dict[str, Any] | None:
        p = get(ns, name)
        cond = scheduled_condition(p)
        if p["spec"].get("nodeName") or (cond and cond.get("status") == "False"):
            return p
        return None

    p = wait(decided, timeout)
    if p and not p["spec"].get("nodeName"):
        time.sleep(1.0)
        p = get(ns, name)
    if p and p["spec"].get("nodeName"):
        return "bound", str(p["spec"]["nodeName"])
    cond = scheduled_condition(p or get(ns, name)) or {}
    return "pending", str(cond.get("message") or "no decision within the timeout")


# ----- the bench -----------------------------------------------------------------------------


class NominateBench:
    def __init__(self, cp: ControlPlane, fk: FakeKubelet, log: FilterLog,
                 gang_url: str) -> None:
        self.cp, self.fk, self.log, self.gang_url = cp, fk, log, gang_url
        self.n = 0

    @contextlib.contextmanager
    def nodes(self, count: int, cpu: str) -> Iterator[list[str]]:
        self.n += 1
        names = [f"nom-{self.n}-{i}" for i in range(count)]
        for name in names:
            self.fk.add_node(name, cpu=cpu, memory="8Gi", labels={TRIAL_LABEL: str(self.n)})
        try:
            yield names
        finally:
            for name in names:
                self.fk.delete_node(name)

    def cleanup(self, ns: str) -> None:
        with contextlib.suppress(ApiException):
            kube().custom.delete_collection_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", _preload_content=False)
        with contextlib.suppress(ApiException):
            kube().core.delete_collection_namespaced_pod(ns, grace_period_seconds=0,
                                                         _preload_content=False)
        wait(lambda: not json.loads(kube().core.list_namespaced_pod(
            ns, _preload_content=False).data)["items"], 20, 0.1)

    def debug(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.gang_url + "/debug/gangs", timeout=5) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    # ----- the default scheduler and a nominated pod -------------------------------------

    def foreign(self, ns: str, i: int, variant: str, late: bool = False) -> Trial:
        p_class, d_class = PRIORITIES[variant]
        with self.nodes(1, "3") as (node,):
            create(ns, pod_body(f"p{i}", "2", NOBODY, pin=node, priority=p_class))
            if late:
                create(ns, pod_body(f"d{i}", "2", pin=node, priority=d_class))
                stored = nominate_pod(ns, f"p{i}", node)
            else:
                stored = nominate_pod(ns, f"p{i}", node)
                time.sleep(0.5)  # the informers of both schedulers have it
                create(ns, pod_body(f"d{i}", "2", pin=node, priority=d_class))
            result, detail = outcome(ns, f"d{i}")
            trial = {"variant": variant, "nominated": stored == node,
                     "d": result, "detail": detail,
                     "p_still_nominated": nnn(get(ns, f"p{i}")) == node}
            self.cleanup(ns)
        return trial

    def own(self, ns: str, i: int, variant: str) -> Trial:
        p_class, d_class = PRIORITIES[variant]
        with self.nodes(1, "3") as (node,):
            create(ns, pod_body(f"p{i}", "2", None, selector={"nominate/never": "true"},
                                priority=p_class))
            tried = wait(lambda: scheduled_condition(get(ns, f"p{i}")), 10)
            stored = nominate_pod(ns, f"p{i}", node)
            time.sleep(0.5)
            create(ns, pod_body(f"d{i}", "2", pin=node, priority=d_class))
            result, detail = outcome(ns, f"d{i}")
            trial = {"variant": variant, "p_tried_first": bool(tried),
                     "nominated": stored == node, "d": result, "detail": detail,
                     "p_still_nominated": nnn(get(ns, f"p{i}")) == node}
            self.cleanup(ns)
        return trial

    def node_name(self, ns: str, i: int) -> Trial:
        with self.nodes(1, "3") as (node,):
            create(ns, pod_body(f"p{i}", "2", NOBODY, pin=node))
            nominate_pod(ns, f"p{i}", node)
            time.sleep(0.5)
            create(ns, pod_body(f"e{i}", "2", node=node))
            running = wait(lambda: (get(ns, f"e{i}").get("status") or {}).get("phase")
                           == "Running", 10)
            trial = {"e_on_node": get(ns, f"e{i}")["spec"].get("nodeName") == node,
                     "e_running": bool(running)}
            self.cleanup(ns)
        return trial

    def binding(self, ns: str, i: int) -> Trial:
        """Does a nomination outlive the pod's Binding (a stale one left on a bound pod)?"""
        with self.nodes(1, "3") as (node,):
            create(ns, pod_body(f"p{i}", "2", NOBODY, pin=node))
            nominate_pod(ns, f"p{i}", node)
            uid = get(ns, f"p{i}")["metadata"]["uid"]
            _ = kube().core.create_namespaced_pod_binding(f"p{i}", ns, {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": f"p{i}", "namespace": ns, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
                _preload_content=False).data
            p = get(ns, f"p{i}")
            trial = {"bound": p["spec"].get("nodeName") == node, "nnn_after_binding": nnn(p)}
            self.cleanup(ns)
        return trial

    # ----- the gang stack --------------------------------------------------------------

    def gang(self, ns: str, i: int, nominate: bool, intruder: bool) -> Trial:
        g = f"g{i}"
        trial: Trial = {"nominate": nominate, "intruder": intruder}
        with self.nodes(2, "4") as nodes:
            trial_id = str(self.n)
            sel = {TRIAL_LABEL: trial_id}
            create(ns, pod_body(f"blocker-{i}", "0", node=nodes[1],
                                labels={BLOCKER_LABEL: trial_id}))
            create_podgroup(ns, g, 2, timeout=40)
            create(ns, pod_body(f"{g}-a", "1", GANG_SCHEDULER, selector=sel, group=g))
            create(ns, pod_body(f"{g}-b", "2", GANG_SCHEDULER, selector=sel, group=g,
                                avoid=trial_id))

            def reserved() -> dict[str, str] | None:
                d = self.debug()
                held = {b["pod"] for b in d["waitingBinds"]}
                for r in d["reservations"]:
                    if r["gang"] == f"{ns}/{g}" and f"{ns}/{g}-a" in held:
                        return {s["pod"].split("/")[1]: s["node"] for s in r["slots"]}
                return None

            slots = wait(reserved, 20, 0.1)
            if not slots:
                trial["error"] = "no reservation with a held bind"
                self.cleanup(ns)
                return trial
            trial["slots_same_node"] = len(set(slots.values())) == 1
            # Does kube-scheduler nominate a pod whose bind it is waiting for by itself?
            trial["a_nnn_while_held"] = nnn(get(ns, f"{g}-a"))
            b_node = slots[f"{g}-b"]
            if nominate:
                for pod, node in slots.items():
                    nominate_pod(ns, pod, node)
                time.sleep(0.5)
                # Make the gang kube-scheduler retry b once while the blocker still runs
                # (a label change requeues a pod): does its failure keep the nomination?
                before = self._failures(ns, f"{g}-b")
                kube().core.patch_namespaced_pod(f"{g}-b", ns,
                                                 {"metadata": {"labels": {"poke": "1"}}},
                                                 _preload_content=False)
                wait(lambda: self._failures(ns, f"{g}-b") > before, 5, 0.1)
                trial["b_nnn_after_failed_retry"] = nnn(get(ns, f"{g}-b"))
            if intruder:
                create(ns, pod_body(f"d{i}", "3", pin=b_node))
                result, detail = outcome(ns, f"d{i}")
                trial["d"] = result
                trial["detail"] = detail
            t0 = time.monotonic()
            kube().core.delete_namespaced_pod(f"blocker-{i}", ns, grace_period_seconds=0,
                                              _preload_content=False)

            def bound() -> bool:
                return all(get(ns, f"{g}-{m}")["spec"].get("nodeName") for m in "ab")

            ok = wait(bound, 15 if intruder else 30, 0.02)
            trial["gang_bound"] = bool(ok)
            trial["start_seconds"] = round(time.monotonic() - t0, 3) if ok else None
            calls = self.log.since(t0, f"{g}-b")
            trial["b_filter_calls"] = len(calls)
            trial["b_first_call_nodes"] = len(calls[0]) if calls else None
            b = get(ns, f"{g}-b")
            trial["b_moved"] = bool(ok) and b["spec"].get("nodeName") != b_node
            trial["b_nnn_after_bind"] = nnn(b)
            trial["b_nnn_was"] = b_node if nominate else ""
            self.cleanup(ns)
        return trial

    def _failures(self, ns: str, name: str) -> int:
        raw = kube().core.list_namespaced_event(
            ns, field_selector=f"involvedObject.name={name},reason=FailedScheduling",
            _preload_content=False)
        return sum(int(e.get("count") or 1) for e in json.loads(raw.data)["items"])


# ----- running it ----------------------------------------------------------------------------


def _ns(name: str) -> str:
    k = kube()
    k.core.create_namespace({"metadata": {"name": name}}, _preload_content=False)
    wait(lambda: _sa(name), 30, 0.1)
    return name


def _sa(ns: str) -> bool:
    try:
        kube().core.read_namespaced_service_account("default", ns, _preload_content=False)
        return True
    except ApiException:
        return False


def _priority_classes() -> None:
    api = client.SchedulingV1Api(kube().api)
    for name, value in ((LOW, 100), (HIGH, 1000)):
        with contextlib.suppress(ApiException):
            api.create_priority_class({"apiVersion": "scheduling.k8s.io/v1",
                                       "kind": "PriorityClass",
                                       "metadata": {"name": name}, "value": value},
                                      _preload_content=False)


def run(tries: int, gang_tries: int) -> dict[str, Any]:
    cp = ControlPlane().start()
    procs: list[ManagedProcess] = []
    try:
        use_cluster(cp)
        fk = FakeKubelet(cp).start()
        procs.append(cp.start_default_scheduler())
        port = free_port()
        procs.append(start_extender(cp, port, DEFAULT_ARGS, "gang-extender"))
        log = FilterLog()
        proxy = start_proxy(port, log)
        procs.append(cp.start_scheduler(gang_scheduler_config(proxy.server_address[1]),
                                        "gang-kube-scheduler"))
        _priority_classes()
        bench = NominateBench(cp, fk, log, f"http://127.0.0.1:{port}")
        cases: dict[str, list[Trial]] = {}

        def each(case: str, fn: Callable[[str, int], Trial], n: int) -> None:
            ns = _ns(f"nominate-{_slug(case)}")
            out = cases.setdefault(case, [])
            for i in range(n):
                trial = fn(ns, i)
                out.append(trial)
                print(case, json.dumps(trial), file=sys.stderr, flush=True)

        for variant in PRIORITIES:
            each(f"foreign {variant}", partial(bench.foreign, variant=variant), tries)
            each(f"own {variant}", partial(bench.own, variant=variant), tries)
        each("foreign-late P=D", partial(bench.foreign, variant="P=D", late=True), tries)
        each("node-name", bench.node_name, min(tries, 5))
        each("binding", bench.binding, min(tries, 5))
        for on in (False, True):
            mode = "on" if on else "off"
            each(f"gang {mode}", partial(bench.gang, nominate=on, intruder=True), gang_tries)
            each(f"gang-start {mode}", partial(bench.gang, nominate=on, intruder=False),
                 gang_tries)
        return {"benchmark": "nominate", "machine": machine(), "kubernetes": cp.bin_dir.name,
                "tries": tries, "gang_tries": gang_tries, "cases": cases}
    finally:
        cp.stop()


def _slug(case: str) -> str:
    out = case.lower().replace("<", " lt ").replace(">", " gt ").replace("=", " eq ")
    return "-".join(out.split())


def report(data: dict[str, Any]) -> str:
    rows = []
    for case, trials in data["cases"].items():
        if case.startswith("gang"):
            continue
        if case in ("node-name", "binding"):
            continue
        landed = sum(t["d"] == "bound" for t in trials)
        details = sorted({t["detail"] for t in trials if t["d"] == "pending"})
        kept = sum(t["p_still_nominated"] for t in trials)
        rows.append([case, len(trials), landed, len(trials) - landed, kept,
                     "; ".join(details)[:200] or "-"])
    out = ["# nominatedNodeName and the default scheduler (lab.experiments.nominate)", "",
           f"Kubernetes {data['kubernetes']}, {data['machine'].get('date')}, "
           f"commit {data['machine'].get('commit')}.", "",
           md_table(["case", "tries", "D bound on N", "D pending", "P still nominated",
                     "D's message when pending"], rows), ""]
    by = data["cases"]
    if "node-name" in by:
        t = by["node-name"]
        out += [f"`node-name`: a pod created with spec.nodeName=N was on N and Running in "
                f"{sum(x['e_on_node'] and x['e_running'] for x in t)} of {len(t)} tries.", ""]
    if "binding" in by:
        t = by["binding"]
        out += [f"`binding`: after a Binding of the nominated pod, its nominatedNodeName was "
                f"still set in {sum(bool(x['nnn_after_binding']) for x in t)} of {len(t)} "
                "tries.", ""]
    grows = []
    for case, trials in data["cases"].items():
        if not case.startswith("gang"):
            continue
        starts = [t["start_seconds"] for t in trials if t.get("start_seconds") is not None]
        grows.append([
            case, len(trials),
            sum(t.get("d") == "bound" for t in trials) if "start" not in case else "-",
            sum(bool(t.get("gang_bound")) for t in trials),
            statistics.median(starts) if starts else float("nan"),
            max(starts) if starts else float("nan"),
            sorted({t.get("b_first_call_nodes") for t in trials}, key=str),
            sorted({"kept" if t.get("b_nnn_after_failed_retry") == t.get("b_nnn_was")
                    else "cleared" for t in trials if "b_nnn_after_failed_retry" in t}),
            sorted({"kept" if t.get("b_nnn_after_bind") else "cleared" for t in trials}),
            sum(bool(t.get("b_moved")) for t in trials),
        ])
    out += [md_table(["case", "tries", "D bound on b's node", "gang bound",
                      "start median s", "start max s", "b's first filter: nodes",
                      "b's nomination after a failed retry", "after bind", "b moved"], grows), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--tries", type=int, default=20, help="tries per case (default 20)")
    ap.add_argument("--gang-tries", type=int, default=10,
                    help="tries per gang case (default 10)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    data = run(args.tries, args.gang_tries)
    for path in write_results(args.out, "nominate", data, report(data)):
        print(path)
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

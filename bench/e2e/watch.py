"""What `bench.e2e` observes of a run without touching the systems measured: a raw
watch for when each pod is bound (and Running, and turned away), and the components'
Prometheus metrics (kube-scheduler's, the extender's, kube-apiserver's request counters).
Raw JSON and urllib keep the observer's own CPU use small: it shares the cores."""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from e2e.harness.rawapi import watch_lines
from e2e.harness.target import kube


class BindWatch:
    """A raw watch on one namespace's pods: monotonic time each pod is first seen bound
    and Running. Raw JSON (no client models) keeps the observer's own CPU use small."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.bound: dict[str, float] = {}
        self.running: dict[str, float] = {}
        # Pods kube-scheduler marked PodScheduled=False at least once: turned away (by the
        # extender, in B: "N of M members exist"), so they wait out kube-scheduler's backoff.
        self.turned_away: set[str] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BindWatch:
        self.thread.start()
        if not self.ready.wait(15):
            raise RuntimeError("watch did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()

    def _observe(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        name = obj["metadata"]["name"]
        with self.lock:
            if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                self.bound[name] = now
            if (obj.get("status") or {}).get("phase") == "Running" and name not in self.running:
                self.running[name] = now
            for cond in (obj.get("status") or {}).get("conditions") or ():
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    self.turned_away.add(name)

    def _run(self) -> None:
        core = kube().core
        rv = json.loads(core.list_namespaced_pod(self.ns, _preload_content=False).data)[
            "metadata"]["resourceVersion"]
        self.ready.set()
        while not self.stop.is_set():
            try:
                resp = core.list_namespaced_pod(
                    self.ns, watch=True, resource_version=rv, timeout_seconds=5,
                    allow_watch_bookmarks=True, _preload_content=False)
                for line in watch_lines(resp):
                    ev = json.loads(line)
                    if ev.get("type") == "ERROR":
                        raise RuntimeError(str(ev))
                    obj = ev["object"]
                    rv = obj["metadata"]["resourceVersion"]
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self._observe(obj)
                    if self.stop.is_set():
                        break
            except Exception:
                if self.stop.is_set():
                    return
                listed = json.loads(core.list_namespaced_pod(self.ns,
                                                             _preload_content=False).data)
                for obj in listed["items"]:
                    self._observe(obj)
                rv = listed["metadata"]["resourceVersion"]

    def count(self) -> int:
        with self.lock:
            return len(self.bound)


def vm_hwm_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def scrape(url: str) -> dict[str, float]:
    """Prometheus text format to {"name{labels}": value} (HTTPS without verification:
    the local control plane's components use self-signed serving certificates)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    out: dict[str, float] = {}
    try:
        with urllib.request.urlopen(url, timeout=10, context=ctx) as resp:
            text = resp.read().decode()
    except OSError:
        return out
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[key] = float(value)
    return out


def hist_sum_count(metrics: dict[str, float], name: str, match: str = "") -> tuple[float, int]:
    """Sum (seconds) and count of a histogram, added up over the series whose labels
    contain `match`."""
    total = count = 0.0
    for key, v in metrics.items():
        if key.startswith(name + "_sum") and match in key:
            total += v
        elif key.startswith(name + "_count") and match in key:
            count += v
    return total, int(count)


def hist_mean_ms(metrics: dict[str, float], name: str, match: str = "") -> tuple[float, int]:
    """Mean (ms) and count of a histogram (see `hist_sum_count`)."""
    total, count = hist_sum_count(metrics, name, match)
    return (round(total / count * 1000, 3) if count else float("nan")), count


def apiserver_requests() -> dict[str, float]:
    """kube-apiserver's request counters, {"VERB resource[/subresource]": count}."""
    api = kube().api
    try:
        method, url, headers, _body, _post = api.param_serialize(
            "GET", "/metrics", auth_settings=["BearerToken"])
        resp = api.call_api(method, url, header_params=headers)
        resp.read()
        text = resp.data.decode()
    except Exception:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(",")
            if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("verb") == "WATCH":
            continue
        res = labels.get("resource", "")
        if labels.get("subresource"):
            res += "/" + labels["subresource"]
        key = f"{labels.get('verb', '')} {res}"
        out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out

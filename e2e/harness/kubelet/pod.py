"""A pod as the fake kubelet sees it: the annotations that say how long it runs, whether it
fails and which rendezvous it waits for, parsed from the pod's JSON.

Why apart: the annotations are the contract between tests (which set them, through
:mod:`e2e.harness.objects` or by hand in operators' manifests) and the kubelet loop (which
acts on them); either side reads them here without the other's machinery.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ANN_PREFIX = "e2e.gang-extender.io/"
ANN_RUN_SECONDS = ANN_PREFIX + "run-seconds"
ANN_FAIL = ANN_PREFIX + "fail"
ANN_RENDEZVOUS = ANN_PREFIX + "rendezvous"
ANN_RENDEZVOUS_SIZE = ANN_PREFIX + "rendezvous-size"

DEFAULT_RENDEZVOUS_RUN_SECONDS = 1.0


@dataclass
class KubeletPod:
    uid: str
    ns: str
    name: str
    node: str = ""
    phase: str = "Pending"
    deleting: bool = False
    run_seconds: float | None = None
    fail: bool = False
    rendezvous: str | None = None
    rendezvous_size: int = 0
    containers: list[tuple[str, str]] = field(default_factory=list)
    init_containers: list[tuple[str, str]] = field(default_factory=list)
    host_network: bool = False
    start_requested: bool = False
    running_since: float | None = None  # wall-clock seconds
    finish_requested: bool = False
    delete_requested: bool = False


@dataclass
class RendezvousGroup:
    size: int
    reached: set[str] = field(default_factory=set)
    met: bool = False


def pod_from_json(obj: Mapping[str, Any]) -> KubeletPod:
    md, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    ann = md.get("annotations") or {}
    run: float | None = None
    if ANN_RUN_SECONDS in ann:
        with contextlib.suppress(ValueError):
            run = float(ann[ANN_RUN_SECONDS])
    size = 0
    with contextlib.suppress(ValueError):
        size = int(ann.get(ANN_RENDEZVOUS_SIZE, "0"))
    return KubeletPod(
        uid=md["uid"], ns=md["namespace"], name=md["name"],
        node=spec.get("nodeName") or "",
        phase=st.get("phase") or "Pending",
        deleting=md.get("deletionTimestamp") is not None,
        run_seconds=run,
        fail=str(ann.get(ANN_FAIL, "")).lower() == "true",
        rendezvous=ann.get(ANN_RENDEZVOUS) or None,
        rendezvous_size=size,
        containers=[(c["name"], c.get("image", "")) for c in spec.get("containers") or []],
        init_containers=[(c["name"], c.get("image", ""))
                         for c in spec.get("initContainers") or []],
        host_network=bool(spec.get("hostNetwork")),
    )

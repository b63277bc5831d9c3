"""The devices reservation slots hold (extender/core/cache/devices.py), kept as slots come
and go rather than chosen again for every slot on each change: the same answer as choosing
them all again, never one device for two slots, and a slot moved does not keep the
devices it left."""

from __future__ import annotations

import random

from extender.cel_selectors import compile_selector
from extender.core.cache.devices import DeviceState
from extender.core.devices.model import (
    claim_template_from_k8s,
    device_class_from_k8s,
    resource_slice_from_k8s,
)
from extender.core.model.claims import ClaimRef, PodClaims
from extender.core.model.types import NodeInfo, PodInfo

CLASS = "gpu.example.com"


def _state(nodes: int, devices: int) -> tuple[DeviceState, dict[str, NodeInfo]]:
    state = DeviceState(compile_selector)
    state.apply("deviceclasses", CLASS, device_class_from_k8s({
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{CLASS}"'}}]}}))
    state.apply("resourceclaimtemplates", "ns/two", claim_template_from_k8s({
        "metadata": {"name": "two", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
            "deviceClassName": CLASS, "count": 2}}]}}}}))
    out = {}
    for i in range(nodes):
        name = f"n{i}"
        out[name] = NodeInfo(name, {"cpu": 16000}, {})
        state.apply("resourceslices", name, resource_slice_from_k8s({
            "metadata": {"name": name}, "spec": {
                "driver": CLASS, "pool": {"name": name, "generation": 1}, "nodeName": name,
                "devices": [{"name": f"gpu-{j}"} for j in range(devices)]}}))
    return state, out


def _pod(i: int) -> PodInfo:
    return PodInfo(f"u{i}", "ns", f"p{i}", {"cpu": 1000, "pods": 1},
                   claims=PodClaims((ClaimRef("gpu", None, "two"),), {}))


def test_slots_kept_as_they_come_and_go_hold_what_choosing_all_again_holds() -> None:
    rng = random.Random(44)
    for _ in range(30):
        state, nodes = _state(3, 4)
        live: dict[int, str] = {}
        for step in range(25):
            if live and rng.random() < 0.4:
                i = rng.choice(sorted(live))
                state.release(_pod(i).uid)
                del live[i]
            else:
                i, node = rng.randrange(8), rng.choice(sorted(nodes))
                if i in live:  # a slot moved: released, then made on the new node
                    state.release(_pod(i).uid)
                state.reserve(node, _pod(i))
                live[i] = node
            if step % 3 == 0:
                state.held(nodes)  # asked between changes, as plans ask
        kept = state.held(nodes)
        per_node = {n: sum(1 for k in kept if k[1] == n) for n in nodes}
        wanted = {n: min(4, 2 * sum(1 for v in live.values() if v == n)) for n in nodes}
        assert per_node == wanted, (per_node, wanted, live)
        # Choosing them all again (a slice changed) gives as many on each node.
        state.apply("deviceclasses", CLASS, state.inventory._classes[CLASS])
        again = state.held(nodes)
        assert {n: sum(1 for k in again if k[1] == n) for n in nodes} == wanted

"""DRA explained and observed (issue 44): the reserved message (the PodGroup's status
and its Event) and `/debug` name the devices each member is planned on, and a gauge
counts each DeviceClass's devices free, reserved and allocated."""

from __future__ import annotations

import dataclasses

import orjson

from extender.reporting.metrics import Metrics
from extender.scheduler.debug import gangs_view
from extender.scheduler.dispatch import Dispatcher
from tests.core.dra_cluster import CLASS, allocate_claim, dra_sim, gpu_member, slots_of
from tests.core.sim import SimScheduler, group


def _reserved() -> tuple[SimScheduler, dict[str, str]]:
    """Gang a (2 members × 2 devices) holds slots on two of four nodes of 2 devices,
    waiting for its third member."""
    sim = dra_sim((2, 2, 2, 2))
    sim.add_group(group("a", 2))
    a = [sim.add_pod(gpu_member(f"a-{i}", "a")) for i in range(2)]
    sim.schedule(a[0].uid)
    on = slots_of(sim, "a")
    assert len(set(on.values())) == 2
    return sim, on


def test_the_reserved_message_names_the_devices_each_member_is_planned_on() -> None:
    sim, on = _reserved()
    message = sim.status("ns/a").message
    for name, node in on.items():
        assert f"{name} on {node}/gpu-0,{node}/gpu-1" in message, message
    assert "; devices: " in message


def test_debug_names_each_slots_devices() -> None:
    sim, on = _reserved()
    view = gangs_view(Dispatcher(sim.manager, None, clock=lambda: sim.now))
    (res,) = view["reservations"]
    got = {s["pod"]: s["devices"] for s in res["slots"]}
    assert got == {f"ns/{name}": [f"{CLASS}/{node}/gpu-0", f"{CLASS}/{node}/gpu-1"]
                   for name, node in on.items()}, got
    orjson.dumps(view)


def test_devices_are_counted_per_class_free_reserved_and_allocated() -> None:
    sim, on = _reserved()
    m = Metrics()

    def counts() -> dict[str, float | None]:
        m.refresh(sim.manager.reads)
        return {state: m.registry.get_sample_value(
            "gang_extender_devices", {"device_class": CLASS, "state": state})
            for state in ("free", "reserved", "allocated")}

    assert counts() == {"free": 4, "reserved": 4, "allocated": 0}
    # kube-scheduler allocates one member's claim: its devices are allocated now.
    first = min(on)
    (pod,) = [p for p in sim.cache.pods.values() if p.name == first]
    allocate_claim(sim, dataclasses.replace(pod, node_name=on[first]))
    assert counts() == {"free": 4, "reserved": 2, "allocated": 2}

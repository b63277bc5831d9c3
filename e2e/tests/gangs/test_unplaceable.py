"""The starvation guard beside a gang that can never be placed, and across node pools
(issue 27), on the real control plane, with the stack of `priority_stack.py`
(`--starvation-after 10`).

* An older gang of 3 members × 4 GPUs on nodes that have 2 each, then the stream of
  the starvation work: the 4-node gang is still placed within the documented bound,
  and the GPU gang's PodGroup says `Unplaceable`. Before, the GPU gang was the head of
  the queue, the only gang the guard protected, and the 4-node gang starved.
* Two node pools (a nodeSelector), each with a starving gang under a stream of its
  own: both are placed within their bound. Before, only the older one was guarded,
  and the other waited for it first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from e2e.gang import GangStack, Recorder
from e2e.harness.fixtures import NodeSet as Nodes
from e2e.harness.objects import create_pod, create_podgroup
from e2e.harness.queries import get_podgroup
from e2e.harness.waiting import NotYet, wait_for
from e2e.tests.gangs.priority_stack import SCHED, STARVATION_AFTER, prio, queue_message
from e2e.tests.metrics import metric

pytestmark = pytest.mark.e2e
__all__ = ["prio"]  # the stack, a fixture of this module too

RETRY = 4.0  # kube-scheduler's retry of the members and a tick, as test_priorities allows


def gang(ns: str, name: str, size: int, cpu: str, run_seconds: float | None,
         pool: str = "", gpus: int = 0) -> None:
    create_podgroup(ns, name, size)
    selector = {"prio-e2e": ns, **({"pool": pool} if pool else {})}
    for i in range(size):
        create_pod(ns, f"{name}-{i}", cpu=cpu, memory="64Mi", gpus=gpus,
                   scheduler_name=SCHED, pod_group=name, run_seconds=run_seconds,
                   labels={"prio-e2e": ns}, node_selector=selector)


def streaming(make: Callable[[int], None], every: float) -> tuple[threading.Event,
                                                                  threading.Thread]:
    stop = threading.Event()

    def run() -> None:
        i = 0
        while not stop.is_set():
            make(i)
            i += 1
            stop.wait(every)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return stop, worker


def wait_bound(rec: Recorder, names: dict[str, int], since: float,
               limit: float) -> dict[str, float | None]:
    """Seconds from `since` until each gang's quorum was bound (None: not in `limit`)."""
    out: dict[str, float | None] = dict.fromkeys(names)
    while time.monotonic() - since < limit and any(v is None for v in out.values()):
        for name, size in names.items():
            if out[name] is None and len(rec.bound(name)) == size:
                out[name] = max(rec.bind_times(name)) - since
        time.sleep(0.25)
    return out


def test_an_unplaceable_older_gang_does_not_defeat_the_guard(
    prio: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    ns = namespace
    fake_nodes.add_nodes(4, prefix="unpl", cpu="4", memory="8Gi", gpus=2,
                         labels={"prio-e2e": ns})
    gang(ns, "gpu", 3, "100m", None, gpus=4)  # no node has 4 GPUs
    with Recorder(ns) as rec:
        stop, worker = streaming(lambda i: gang(ns, f"s{i:03d}", 1, "1", 4), 0.6)
        try:
            time.sleep(3)
            created = time.monotonic()
            gang(ns, "big", 4, "4", 5)
            waited = wait_bound(rec, {"big": 4}, created, 60)["big"]
        finally:
            stop.set()
            worker.join(10)
        print(f"MEASURED big gang waited {waited}s beside the unplaceable gang (bound "
              f"{STARVATION_AFTER:g} + 4 + {RETRY:g})")
        assert waited is not None, (queue_message(prio, f"{ns}/big"), prio.debug())
        rec.assert_never_partial("big", 4)
        assert not rec.bound("gpu")
    assert waited <= STARVATION_AFTER + 4 + RETRY, waited

    def unplaceable() -> str | NotYet:
        pg = get_podgroup(ns, "gpu") or {}
        conds = {c["type"]: c for c in (pg.get("status") or {}).get("conditions", [])}
        sched = conds.get("Scheduled", {})
        return str(sched["message"]) if sched.get("reason") == "Unplaceable" else NotYet(pg)

    message = wait_for(unplaceable, 30, "the GPU gang's PodGroup says Unplaceable",
                       logs=prio.logs())
    assert f"gang {ns}/gpu: can never be placed" in message, message
    assert "the most any has: nvidia.com/gpu: 2" in message, message
    assert metric(prio, "gang_extender_unplaceable_gangs") >= 1


def test_two_node_pools_each_with_a_starving_gang_are_both_placed_in_their_bound(
    prio: GangStack, fake_nodes: Nodes, namespace: str
) -> None:
    """Pool a's pods (half a CPU) run 12 s, pool b's 4 s: each big gang's bound is
    --starvation-after plus its pool's run plus the retry. By the old rule pool b's
    gang (the younger) waited for pool a's to be placed first."""
    ns = namespace
    runs = {"a": 12.0, "b": 4.0}
    cpus = {"a": "500m", "b": "1"}
    for pool in runs:
        fake_nodes.add_nodes(2, prefix=f"pool{pool}", cpu="4", memory="8Gi",
                             labels={"prio-e2e": ns, "pool": pool})

    def small(i: int) -> None:
        pool = "ab"[i % 2]
        gang(ns, f"{pool}{i:03d}", 1, cpus[pool], runs[pool], pool=pool)

    with Recorder(ns) as rec:
        stop, worker = streaming(small, 0.6)
        try:
            time.sleep(4)
            created = time.monotonic()
            gang(ns, "biga", 2, "4", 5, pool="a")
            gang(ns, "bigb", 2, "4", 5, pool="b")
            waited = wait_bound(rec, {"biga": 2, "bigb": 2}, created, 45)
        finally:
            stop.set()
            worker.join(10)
        print(f"MEASURED pool a's gang waited {waited['biga']}s (bound "
              f"{STARVATION_AFTER + runs['a'] + RETRY:g}), pool b's {waited['bigb']}s "
              f"(bound {STARVATION_AFTER + runs['b'] + RETRY:g})")
        assert None not in waited.values(), (waited, prio.debug())
        rec.assert_never_partial("biga", 2)
        rec.assert_never_partial("bigb", 2)
    for name, pool in (("biga", "a"), ("bigb", "b")):
        got = waited[name]
        assert got is not None and got <= STARVATION_AFTER + runs[pool] + RETRY, waited

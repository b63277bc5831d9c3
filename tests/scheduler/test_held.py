"""Held Bindings (`HeldBindings`): one timer per pod, whatever the number of holds.

A pod is held again when kube-scheduler takes it through another cycle within the first
hold's window. The Binding must then wait for the second cycle's bind request (or the
second hold's deadline); posted at the first hold's deadline, it could reach
kube-scheduler's informer before the second cycle assumed the pod, and that cycle would
fail with FailedScheduling on a bound pod.
"""

from __future__ import annotations

import asyncio

from extender.core.model.vocabulary import BindPod, PodRef
from extender.scheduler.binding import BindingPoster, HeldBindings

ACTION = BindPod(PodRef("team", "worker-0", "uid-0"), "node-1", "team/job")
HOLD = 0.3


async def posts(holds: list[float], release_at: float | None = None
                ) -> tuple[list[float], float]:
    """Hold ACTION at each time in `holds` (seconds from the start), release it at
    `release_at` as kube-scheduler's bind request would. Returns when each Binding was
    posted and when the last hold was made, both on the loop's clock as the timers are
    (a late wake-up of this test cannot make a post look early)."""
    loop = asyncio.get_running_loop()
    posted: list[float] = []
    held = HeldBindings(BindingPoster(None, 1), lambda _: posted.append(loop.time()),
                        commit_wait=0.0)
    held.hold_seconds = HOLD
    start = loop.time()
    last_hold = 0.0
    steps = sorted([(t, "hold") for t in holds]
                   + ([(release_at, "release")] if release_at is not None else []))
    for at, step in steps:
        await asyncio.sleep(max(start + at - loop.time(), 0.0))
        if step == "hold":
            last_hold = loop.time() - start
            held.hold(ACTION)
        else:
            held.release(ACTION.pod.uid)
    await asyncio.sleep(max(start + max(holds) + HOLD + 0.3 - loop.time(), 0.0))
    return [t - start for t in posted], last_hold


def test_a_pod_held_again_waits_for_the_second_holds_deadline() -> None:
    posted, last_hold = asyncio.run(posts(holds=[0.0, 0.15]))
    assert len(posted) == 1
    assert posted[0] >= last_hold + HOLD - 0.01


def test_a_binding_released_at_its_bind_request_is_not_posted_again_by_its_timer() -> None:
    posted, last_hold = asyncio.run(posts(holds=[0.0, 0.15], release_at=0.05))
    # Once at the bind request, once at the second hold's deadline; not at the first's.
    assert len(posted) == 2
    assert posted[1] >= last_hold + HOLD - 0.01

"""Who may act, decided from kube-scheduler's lease (extender/kube/leader.py): the pure
decision, and following the lease by watch, with a timer and a second read at expiry.

What a standby holds back is tests/scheduler/test_standby.py; the two-replica failover on a real
control plane is e2e/tests/faults/test_failover.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from extender.kube.client import ApiError
from extender.kube.leader import Leadership, LeaseRef, decide
from tests.kube.leases import REF, lease

# ----- the decision ------------------------------------------------------------------------

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("obj", "active", "why"), [
    (lease("replica-a_4f1c", NOW - 1), True, "holder: replica-a_4f1c"),
    (lease("replica-a_4f1c", NOW - 15), False, "holder: replica-a_4f1c, expired 0.0s ago"),
    (lease("replica-a_4f1c", NOW - 20), False, "expired 5.0s ago"),
    (lease("replica-b_77aa", NOW - 1), False, "holder: replica-b_77aa"),
    # a host whose name only starts like ours, and a holder without kube-scheduler's "_uuid"
    (lease("replica-ab_77aa", NOW - 1), False, "holder: replica-ab_77aa"),
    (lease("replica-a", NOW - 1), False, "holder: replica-a"),
    (lease("", NOW - 1), False, "holder: none"),  # released by its holder
    (None, False, "lease not found"),
    ({"spec": {"holderIdentity": "replica-a_1", "leaseDurationSeconds": 15}}, False,
     "without a renewal time"),
    ({"spec": {"holderIdentity": "replica-a_1", "renewTime": "yesterday",
               "leaseDurationSeconds": 15}}, False, "without a renewal time"),
    ({"spec": "garbage"}, False, "holder: none"),
])
def test_active_only_while_its_own_scheduler_holds_an_unexpired_lease(
        obj: dict[str, Any] | None, active: bool, why: str) -> None:
    verdict = decide(obj, "replica-a", NOW)
    assert verdict.active is active
    assert why in verdict.why


def test_a_lease_is_named_namespace_slash_name_or_off() -> None:
    assert LeaseRef.parse("off") is None
    assert LeaseRef.parse("gang/lease") == LeaseRef("gang", "lease")
    for bad in ("lease", "/lease", "ns/", "a/b/c", ""):
        with pytest.raises(ValueError):
            LeaseRef.parse(bad)


# ----- following the lease -----------------------------------------------------------------


class LeaseServer:
    """A stand-in for the API's lease list and watch: `events` feeds the watch; `current`
    is what a list returns."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        self.current = current
        self.events: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.lists = 0
        self.fail: ApiError | None = None
        self.seen_params: list[Mapping[str, str] | None] = []

    async def list(self, path: str, limit: int = 2000,
                   params: Mapping[str, str] | None = None
                   ) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        self.seen_params.append(params)
        assert path == "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
        if self.fail is not None:
            raise self.fail
        return ([self.current] if self.current else []), "1"

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    params: Mapping[str, str] | None = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.seen_params.append(params)
        while True:
            yield await self.events.get()


async def following(api: LeaseServer) -> tuple[Leadership, list[str], asyncio.Task[None]]:
    """A Leadership of "me" following `api`'s lease, given a moment to read it first;
    `lost` gathers what it reports when it loses leadership."""
    lost: list[str] = []
    leader = Leadership(api, REF, "me", on_lost=lost.append)
    task = asyncio.create_task(leader.run())
    await asyncio.sleep(0.05)
    return leader, lost, task


def test_follows_the_lease_by_watch_and_steps_down_when_it_expires() -> None:
    async def go() -> None:
        api = LeaseServer(lease("other_1", time.time()))
        leader, lost, task = await following(api)
        assert not leader.active
        assert leader.standby_error() == (
            "gang-extender me is on standby: its kube-scheduler does not hold lease "
            "ns/gang-scheduler (holder: other_1)")
        assert leader.view()["mode"] == "standby"
        # Our kube-scheduler takes over with a short lease: active on that very event.
        api.current = lease("me_2", time.time(), duration=1)
        await api.events.put(("MODIFIED", api.current))
        await asyncio.sleep(0.05)
        assert leader.active and leader.view()["mode"] == "active" and not lost
        # No renewal: once the lease runs out, one more read confirms it, and it steps down.
        await asyncio.sleep(1.2)
        assert not leader.active and leader.view()["mode"] == "lost"
        assert len(lost) == 1 and "expired" in lost[0]
        assert api.lists == 2  # the first list, then the confirmation
        assert all(p == {"fieldSelector": "metadata.name=gang-scheduler"}
                   for p in api.seen_params)
        # A new holder later changes nothing: it lost once, and exits.
        await api.events.put(("MODIFIED", lease("me_3", time.time())))
        await asyncio.sleep(0.05)
        assert not leader.active and len(lost) == 1
        task.cancel()

    asyncio.run(go())


def test_renewals_missed_by_a_stalled_watch_do_not_end_leadership() -> None:
    async def go() -> None:
        api = LeaseServer(lease("me_1", time.time(), duration=1))
        leader, lost, task = await following(api)
        assert leader.active
        # kube-scheduler keeps renewing, but the watch delivers nothing. Renewed every
        # 0.3 s, the copy each second read finds has 0.7 s or more to run, and no expiry
        # falls near the check below (past its expiry the lease is not acted on).
        for _ in range(7):
            await asyncio.sleep(0.3)
            api.current = lease("me_1", time.time(), duration=1)
        assert leader.active and not lost
        assert api.lists >= 2  # read again at each apparent expiry
        task.cancel()

    asyncio.run(go())


def test_past_its_expiry_the_lease_is_not_acted_on_while_it_is_read_again() -> None:
    """The lease as last seen has run out: another replica's kube-scheduler may take it
    from now on, so this one stops acting at once, not when the second read answers (a
    slow API server) or the timer runs (a busy event loop). A renewal that read finds
    makes it act again: it never lost."""
    async def go() -> None:
        answer = asyncio.Event()

        class SlowSecondRead(LeaseServer):
            async def list(self, path: str, limit: int = 2000,
                           params: Mapping[str, str] | None = None
                           ) -> tuple[list[dict[str, Any]], str]:
                if self.lists:
                    await answer.wait()
                return await super().list(path, limit, params)

        api = SlowSecondRead(lease("me_1", time.time(), duration=1))
        leader, lost, task = await following(api)
        assert leader.active
        await asyncio.sleep(1.0)  # past the expiry; the second read does not answer
        assert not leader.active and not lost
        api.current = lease("me_1", time.time())  # renewed all along (a stalled watch)
        answer.set()
        await asyncio.sleep(0.05)
        assert leader.active and not lost and leader.view()["mode"] == "active"
        task.cancel()

    asyncio.run(go())


def test_a_new_holder_or_a_released_lease_ends_leadership_at_once() -> None:
    for change in (("MODIFIED", lease("other_9", time.time())),
                   ("MODIFIED", lease("", time.time(), duration=1)),
                   ("DELETED", lease("me_1", time.time()))):
        async def go(change: tuple[str, dict[str, Any]] = change) -> list[str]:
            api = LeaseServer(lease("me_1", time.time()))
            leader, lost, task = await following(api)
            assert leader.active
            await api.events.put(change)
            await asyncio.sleep(0.05)
            assert not leader.active
            task.cancel()
            return lost

        assert len(asyncio.run(go())) == 1, change


def test_a_standby_never_counts_as_losing() -> None:
    async def go() -> None:
        api = LeaseServer(None)
        leader, lost, task = await following(api)
        assert "(lease not found)" in leader.standby_error()
        for i in range(3):
            await api.events.put(("MODIFIED", lease(f"other_{i}", time.time(), duration=1)))
        await asyncio.sleep(0.05)
        assert not leader.active and not lost
        task.cancel()

    asyncio.run(go())


def test_an_unreadable_lease_is_standby_with_the_reason() -> None:
    async def go() -> None:
        api = LeaseServer(lease("me_1", time.time()))
        api.fail = ApiError(403, "Forbidden", "leases is forbidden")
        leader = Leadership(api, REF, "me")
        task = asyncio.create_task(leader.run())
        await asyncio.sleep(0.05)
        assert not leader.active
        assert "lease not readable: 403 Forbidden: leases is forbidden" in (
            leader.standby_error())
        task.cancel()

    asyncio.run(go())


def test_without_a_lease_it_is_always_active() -> None:
    leader = Leadership(None, None, "me")
    assert leader.active
    assert leader.view() == {"mode": "always-active", "identity": "me", "lease": None}


def test_a_lease_missing_for_two_durations_is_called_a_misconfiguration(
        caplog: pytest.LogCaptureFixture) -> None:
    """No lease at all, for longer than two lease durations: the kube-scheduler beside it
    elects with another lease or none, so the extender would stand by forever. It says so
    in its log and in /debug/gangs, naming --leader-lease; a lease that appears clears it."""
    async def go() -> None:
        api = LeaseServer(None)
        leader = Leadership(api, REF, "me", lease_duration=0.1)
        task = asyncio.create_task(leader.run())
        await asyncio.sleep(0.1)  # missing, but not yet for two durations
        assert "warning" not in leader.view() and leader.missing_warning() is None
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
        await asyncio.sleep(0.25)
        warning = leader.view()["warning"]
        assert "lease ns/gang-scheduler has not existed for" in warning
        assert "runs without that lease" in warning and "--leader-lease" in warning
        logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(logged) == 1 and "--leader-lease" in logged[0], logged
        assert leader.view()["mode"] == "standby" and not leader.active
        # Relists that still find nothing neither restart the clock nor warn again.
        await asyncio.sleep(0.1)
        assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
        # The lease appears (another replica's): a plain standby, no warning.
        await api.events.put(("ADDED", lease("other_1", time.time())))
        await asyncio.sleep(0.05)
        assert "warning" not in leader.view() and not leader.active
        task.cancel()

    caplog.set_level("INFO", logger="gang-extender.leader")
    asyncio.run(go())


def test_a_lease_that_exists_but_is_held_by_another_never_warns() -> None:
    async def go() -> None:
        api = LeaseServer(lease("other_1", time.time(), duration=1))
        leader = Leadership(api, REF, "me", lease_duration=0.05)
        task = asyncio.create_task(leader.run())
        await asyncio.sleep(0.3)
        assert not leader.active and "warning" not in leader.view()
        task.cancel()

    asyncio.run(go())

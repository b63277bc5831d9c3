"""The read model: what the adapters may read of the core, and never change.

The gang manager takes commands (watch events, the verbs, the time) and gives out
actions; the status writer, the Events, the metrics, `/debug`, the wake-ups, the
filter verb's waits and the connection warmer only look. They take this object
instead of the manager, so that a reader cannot command by mistake, and the door the
commands come through stays a short list (`GangManager`). Built with the manager over
the same parts (`GangManager.reads`): every answer is the core's state as it is now,
never a copy that could fall behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from extender.core.model.types import SCHEDULER_PLUGINS, CompositeInfo, GroupInfo, PodInfo
from extender.core.model.vocabulary import Gauges, QueueRow, ReservationView, WaitingBindView
from extender.core.provisioning import ProvisioningView
from extender.core.queue.backoff import Backoff
from extender.core.wiring import Core

# `bindings_ahead` counts the gangs a member of which arrived this recently.
_ARRIVING_SECONDS = 5.0


class Reads:
    """What the core holds, for the adapters that only look. One line each:

    pods and groups as the watches and the verbs left them:
        pod(uid)                       a known pod, or None
        group(key)                     a known PodGroup (any source), or None
        groups()                       every known PodGroup
        composite(key)                 a known CompositePodGroup, or None
        children(key)                  the groups whose parent is that composite
        group_pods(ns, name, source)   every pod that joins the group, finished ones too
        still_pending(uid)             known, unbound, no bind waiting: a wake-up may help
        pod_bound(uid)                 bound as far as the extender knows
    binds and commits under way:
        bind_in_flight(uid)            its Binding POST is in flight
        landing(gang, but)             a commit's members not yet seen bound by the watch
        pod_landing(uid)               this member is one of them
        binds_in_progress()            every bind waiting at the barrier or in flight
        bindings_ahead(now)            Bindings the gangs arriving now will ask for soon
    the lifecycle, for status, Events, metrics and /debug:
        queue()                        the gangs waiting for capacity, in queue order
        reservations()                 every reservation and its slots
        gauges()                       the counts the metrics export
        backoff(gang)                  the gang's backoff, kept in its status
        backoffs(now)                  every backoff still running
        waiting_since(gang)            when the gang began waiting for capacity
        provisioning(gang)             the gang's live ProvisioningRequest
    """

    def __init__(self, core: Core) -> None:
        self._core = core
        self._cache = core.cache
        self._ledger = core.ledger

    # ----- pods and groups ----------------------------------------------------------------

    def pod(self, uid: str) -> PodInfo | None:
        return self._cache.pods.get(uid)

    def group(self, key: str) -> GroupInfo | None:
        return self._cache.groups.get(key)

    def groups(self) -> list[GroupInfo]:
        return list(self._cache.groups.values())

    def composite(self, key: str) -> CompositeInfo | None:
        return self._cache.composites.get(key)

    def children(self, key: str) -> list[GroupInfo]:
        return self._cache.children(key)

    def group_pods(self, namespace: str, name: str,
                   source: str = SCHEDULER_PLUGINS) -> Sequence[PodInfo]:
        """Every pod that joins the group, finished ones included."""
        return self._cache.group_pods(namespace, name, source)

    def still_pending(self, uid: str) -> bool:
        """Known, unbound, and with no bind waiting: a wake-up may still help it."""
        pod = self._cache.pods.get(uid)
        return pod is not None and not pod.node_name and uid not in self._ledger.binds.waiting

    def pod_bound(self, uid: str) -> bool:
        """Bound as far as the extender knows: its Binding returned, or the watch said."""
        pod = self._cache.pods.get(uid)
        return pod is not None and bool(pod.node_name)

    # ----- binds and commits under way ------------------------------------------------------

    def bind_in_flight(self, uid: str) -> bool:
        return uid in self._ledger.binds.in_flight

    def landing(self, gang: str | None, but: str | None = None) -> bool:
        """Members `gang`'s commit let through (any gang's if None; `but` aside) are not
        yet seen bound by the watch (the filter verb's commit wait)."""
        return self._ledger.staleness.landing(gang, but)

    def pod_landing(self, uid: str) -> bool:
        return self._ledger.staleness.is_landing(uid)

    def binds_in_progress(self) -> list[WaitingBindView]:
        reservations = self._ledger.reservations

        def deadline(gang: str | None) -> float | None:
            res = reservations.get(gang)
            return res.deadline if res is not None else None

        return self._ledger.binds.views(deadline)

    def bindings_ahead(self, now: float) -> int:
        """Members not yet bound of the gangs whose members are being created now and
        that hold no reservation yet: about how many Bindings their commits will ask for
        at once, so that the adapter can open the connections for them before
        (scheduler/warm.py). A gang with a reservation is committing or waiting; its
        Bindings in flight hold connections already."""
        total = 0
        for gang in self._core.arrivals.recent(now, _ARRIVING_SECONDS):
            group = self._cache.groups.get(gang)
            if group is not None and self._ledger.reservations.get(gang) is None:
                tally = self._cache.tally(group)
                total += tally.members - tally.bound_members
        return total

    # ----- the lifecycle --------------------------------------------------------------------

    def queue(self) -> list[QueueRow]:
        return self._core.queue.rows()

    def reservations(self) -> tuple[ReservationView, ...]:
        """With the devices each slot's member is planned on (DRA)."""
        views = self._ledger.reservations.views()
        devices = self._cache.devices
        out = []
        for view in views:
            slots = []
            for s in view.slots:
                pod = self._cache.pods.get(s.pod.uid)
                keys = devices.slot_devices(self._cache.nodes, pod) if pod is not None else ()
                slots.append(dataclasses.replace(s, devices=tuple("/".join(k) for k in keys))
                             if keys else s)
            changed = any(a is not b for a, b in zip(slots, view.slots, strict=True))
            out.append(dataclasses.replace(view, slots=tuple(slots)) if changed else view)
        return tuple(out)

    def gauges(self) -> Gauges:
        reservations = self._ledger.reservations
        return Gauges(len(reservations), reservations.slot_count(),
                      len(self._ledger.binds.waiting), self._core.explanations.reasons(),
                      len(reservations.held()), reservations.held_idle(),
                      self._cache.devices.class_counts(self._cache.nodes))

    def backoff(self, gang: str) -> Backoff | None:
        """The gang's backoff, for the status that keeps it over a restart."""
        return self._core.backoffs.get(gang)

    def backoffs(self, now: float) -> list[dict[str, object]]:
        return self._core.backoffs.view(now)

    def waiting_since(self, gang: str) -> float | None:
        """When the gang began waiting for capacity, for the status that keeps it."""
        return self._core.starvation.since(gang)

    def provisioning(self, gang: str) -> ProvisioningView | None:
        """The gang's live ProvisioningRequest, if it asked for capacity."""
        return self._core.provisioning.view(gang)

"""Keeps PodGroup status current: a thin adapter around `extender.core.model.phase`.

A background task notices what changed (watch events for the group and its pods, the
gang manager's reports), recomputes those groups' status and writes it with a merge
patch of the `status` subresource, off the request path:

* coalesced: only when the computed status differs from what was written last (or,
  after a restart, from what the API shows), so a steady gang costs nothing;
* rate-limited: at most one write per group per `min_interval`, and at most
  `max_writes_per_second` overall; a change inside the interval is written at its end;
* never fatal: API errors are logged and retried later with backoff.

What it revisits is proportional to what may change, never to the history: a group is
recomputed when something of it changed, and the periodic pass (every
`resync_seconds`) revisits only the groups that still have members; a finished group,
or one whose pods are all gone, waits for its next watch event (docs/reliability.md,
"History at scale"). A large backlog (every group after a restart's list) is worked
through `batch` (100) groups at a time, the event loop let run in between.

It also logs one line per status transition and tells `GangEvents` about it. On standby
it only notes what changed: the active replica owns the status and its Events. The whole
status is written to scheduler-plugins PodGroups only: a Volcano PodGroup's status is its
own controllers', and a Kueue pod group has no object; for those the status is computed
all the same, for the Events, /debug/podgroups and the metrics. An upstream PodGroup
(`scheduling.k8s.io`) whose members name this scheduler gets the conditions kube-scheduler
writes on its own gangs (`reporting/upstream.py`), through the same coalescing and rate
limits; one any of whose pods name another scheduler never does. A gang whose pods come
to name another scheduler is that scheduler's from then on: let go of as a deleted gang
is (`_disown`), and ours again once its pods name us.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from extender.core.model.phase import (
    PENDING,
    GroupStatus,
    Previous,
    compute_status,
)
from extender.core.model.types import (
    COMPOSITE,
    SCHEDULER_PLUGINS,
    WORKLOAD_API,
    CompositeInfo,
    GroupInfo,
    PodInfo,
    gang_key,
)
from extender.core.model.upstream_status import Disruption, disruptions, member_lost
from extender.core.model.vocabulary import (
    Decision,
    GangDisrupted,
    Preempting,
    Report,
    StatusChanged,
)
from extender.core.reads import Reads
from extender.kube.client import PODGROUP_PATH, ApiError
from extender.reporting import composite_status, upstream
from extender.reporting.events import GangEvents, quiet
from extender.reporting.labelled import LabelledPods
from extender.reporting.status_records import GangCounts, GroupRecord, StatusConfig
from extender.reporting.upstream import UpstreamStatusApi
from extender.scheduler.supervise import LoopErrors

log = logging.getLogger("gang-extender.status")

__all__ = ["StatusConfig", "StatusHooks", "StatusWriter"]


class StatusApi(Protocol):
    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None: ...


def _kv(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _scheduled_reason(status: dict[str, Any]) -> str:
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Scheduled":
            return str(c.get("reason", ""))
    return ""


@dataclass(frozen=True)
class StatusHooks:
    """Told of the writer's work, for the metrics."""

    on_write: Callable[[str], None] | None = None  # each patch's result
    on_loop_error: Callable[[str], None] | None = None  # a failed pass, by loop name


class StatusWriter:
    def __init__(
        self,
        reads: Reads,
        kube: StatusApi | None,
        clock: Callable[[], float] = time.time,
        config: StatusConfig | None = None,
        events: GangEvents | None = None,
        hooks: StatusHooks | None = None,
    ) -> None:
        hooks = hooks or StatusHooks()
        self.reads = reads  # the gang manager's read model: the writer only looks
        self.kube = kube
        self.clock = clock
        self.config = config or StatusConfig()
        self.events = events
        self.on_write = hooks.on_write
        self.groups: dict[str, GroupRecord] = {}
        self.pods = LabelledPods()  # owners of members, pods of other schedulers
        self.dirty: set[str] = set()
        self.writes = 0
        self.write_errors = 0
        self._decisions: dict[str, Decision] = {}  # the gang manager's, as reported
        self._last_resync = float("-inf")
        self.errors = LoopErrors("podgroup-status", hooks.on_loop_error)
        # Groups the periodic pass revisits: their last computed status had members.
        self._live: set[str] = set()
        self._counts = GangCounts()  # the gangs gauge, kept as statuses change
        # Gangs our preemption evicts, until their members are gone and it was said.
        self._disrupted: dict[str, Disruption] = {}

    # ----- watch hooks (called after the gang manager applied the object) -------------------

    def observe_group(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        uid = str(meta.get("uid", ""))
        status = obj.get("status")
        rec, new = self._record(key, uid)
        if new:
            observed = status if isinstance(status, dict) else {}
            rec.phase = str(observed.get("phase", ""))
            rec.reason = _scheduled_reason(observed)
        rec.observed = status if isinstance(status, dict) else {}
        self.dirty.add(key)

    def group_deleted(self, key: str) -> None:
        self._drop(key)
        self.dirty.discard(key)
        self._decisions.pop(key, None)
        self._disrupted.pop(key, None)

    def group_changed(self, key: str) -> None:
        """A group object whose status this writer does not own changed."""
        self.dirty.add(key)

    def observe_upstream(self, obj: dict[str, Any]) -> None:
        """An upstream PodGroup (either version), after the gang manager applied it."""
        meta = obj.get("metadata") or {}
        key = gang_key(WORKLOAD_API, str(meta.get("namespace", "")), str(meta.get("name", "")))
        rec, _ = self._record(key, str(meta.get("uid", "")))
        upstream.observe(rec, obj)
        self.dirty.add(key)

    def observe_composite(self, obj: dict[str, Any]) -> None:
        """A CompositePodGroup, after the gang manager applied it: its conditions are
        ours to write when its children's pods are (`reporting/composite_status.py`)."""
        key = composite_status.key_of(obj)
        rec, _ = self._record(key, str((obj.get("metadata") or {}).get("uid", "")))
        upstream.observe(rec, obj)
        self.dirty.add(key)

    def observe_pod(self, obj: dict[str, Any]) -> None:
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        # As the gang manager applied it: its gang decided.
        self.dirty.update(self.pods.observe(obj, self.reads.pod(uid)))

    def pod_deleted(self, uid: str, pod: PodInfo | None) -> None:
        named = self.pods.deleted(uid)
        self.dirty.update(k for k in (named, pod.gang if pod else None) if k is not None)

    def on_report(self, report: Report) -> None:
        if isinstance(report, StatusChanged):
            if report.status is None:
                self._decisions.pop(report.gang, None)
            else:
                self._decisions[report.gang] = report.status
            self.dirty.add(report.gang)
        elif isinstance(report, Preempting):
            self.dirty.update(g.key for g in report.groups())
            self._disrupted.update((d.gang, d) for d in disruptions(report))
            for d in composite_status.preempted(report, self.reads):
                self._disrupted[d.gang] = d  # one victim: the composite says so too
                self.dirty.add(d.gang)
        elif isinstance(report, GangDisrupted):
            if report.group.source in (SCHEDULER_PLUGINS, WORKLOAD_API):  # status of ours
                self._disrupted[report.group.key] = member_lost(report)
            self.dirty.add(report.group.key)
            if report.composite:  # disrupted whole with its siblings: the composite says so
                d = composite_status.disrupted(report, self._disrupted.get(
                    gang_key(COMPOSITE, report.group.namespace, report.composite)))
                self._disrupted[d.gang] = d
                self.dirty.add(d.gang)
        else:
            self.dirty.add(report.group.key)

    # ----- computing -------------------------------------------------------------------------

    def _resync(self, now: float) -> None:
        """Every group with members now and then, changed or not: a write that was lost,
        or a status someone else overwrote, converges. A group without members (finished,
        or its pods gone) has nothing that moves without a watch event, which marks it;
        revisiting each of them every 30 s made this pass as long as the history."""
        if now - self._last_resync >= self.config.resync_seconds:
            self._last_resync = now
            self.dirty |= self._live

    def _record(self, key: str, uid: str) -> tuple[GroupRecord, bool]:
        """The record of the group object `uid` named `key`, and whether it is new: a
        name that now holds another object (deleted and made again) starts afresh."""
        rec = self.groups.get(key)
        if rec is not None and rec.uid == uid:
            return rec, False
        self._drop(key)
        rec = self.groups[key] = GroupRecord(uid)
        return rec, True

    def _drop(self, key: str) -> None:
        rec = self.groups.pop(key, None)
        if rec is not None:
            self._counts.move(rec, None)
        self._live.discard(key)

    def _disown(self, key: str, source: str, rec: GroupRecord) -> None:
        """`key` is another scheduler's gang now (its pods were made again naming it,
        or it never was ours): let go of it as of a deleted gang, keeping only what the
        API shows. Counted under its last phase, it stayed in the gangs gauge and
        /debug/podgroups for good; and what this process wrote before, laid over what its
        new owner writes, would pass for the API's status once the gang is ours again,
        and ours would not be written back."""
        self._live.discard(key)
        self._disrupted.pop(key, None)
        if rec.counted is None and rec.current is None and rec.written_json is None and (
                rec.api_written_json is None and rec.unwritten is None):
            return  # nothing of ours to forget: the common case, kept cheap
        self._counts.move(rec, None)
        fresh = self.groups[key] = GroupRecord(
            rec.uid, api_json=rec.api_json, generation=rec.generation)
        if source == SCHEDULER_PLUGINS:  # only there is `observed` the API's own
            fresh.observed_json = rec.observed_json
            observed = fresh.observed
            fresh.phase, fresh.reason = str(observed.get("phase", "")), _scheduled_reason(
                observed)

    def compute(self, group: GroupInfo, now: float) -> GroupStatus | None:
        rec = self.groups.get(group.key)
        written = rec.written if rec is not None else None
        base = written if written is not None else (rec.observed if rec is not None else {})
        pods = self.reads.group_pods(group.namespace, group.name, group.source)
        decision = self._decisions.get(group.key)
        owners: Iterable[tuple[str, ...]] = (self.pods.owners.get(p.uid, ()) for p in pods)
        bo = self.reads.backoff(group.key)
        return compute_status(
            group, pods, decision, now,
            retry_limit_reached=decision is not None and decision.retry_limit_reached,
            previous=Previous.from_k8s(base), owners=owners,
            requeue=(bo.attempts, bo.until) if bo is not None and bo.attempts else None,
            waiting_since=self.reads.waiting_since(group.key),
            disrupted=self._member_lost(group, pods),
        )

    def _member_lost(self, group: GroupInfo, pods: Sequence[PodInfo]
                     ) -> tuple[str, float] | None:
        """A scheduler-plugins gang disrupted whole (its `DisruptionTarget`), until its
        evicted members are deleted (one terminating still runs, and would read as the
        gang placed) and a quorum of new ones is bound: then it is over. Upstream
        PodGroups have their own record keeping (`upstream.evicted`)."""
        d = self._disrupted.get(group.key)
        if group.source != SCHEDULER_PLUGINS or d is None or not d.lost:
            return None
        bound = sum(1 for p in pods if p.node_name and not p.terminal and not p.deleting)
        if bound >= group.min_member and all(self.reads.pod(u) is None for u in d.pods):
            del self._disrupted[group.key]
            return None
        return d.message, d.since

    def _transition(self, group: GroupInfo, rec: GroupRecord, st: GroupStatus) -> None:
        # Still a transition when only the quietness ends: "0 of 3 members exist" then
        # "2 of 3" is one reason, and the Event held back for the first is owed now.
        if (st.phase, st.reason) == (rec.phase, rec.reason) and (not rec.quiet or quiet(st)):
            return
        log.info(
            "podgroup=%s phase=%s reason=%s running=%d succeeded=%d failed=%d bound=%d "
            "members=%d minMember=%d message=%s",
            group.key, st.phase, st.reason, st.running, st.succeeded, st.failed, st.bound,
            st.members, group.min_member, _kv(st.message),
        )
        if self.events is not None:
            try:
                self.events.on_status(group, rec.phase, "" if rec.quiet else rec.reason, st)
            except Exception:  # an event is never worth a lost status
                log.exception("event for podgroup %s failed", group.key)
        rec.phase, rec.reason, rec.quiet = st.phase, st.reason, quiet(st)

    def due(self, now: float) -> list[tuple[GroupInfo | CompositeInfo, dict[str, Any]]]:
        """Recompute the dirty groups; return those to write now. Groups that changed
        but were written too recently stay dirty for a later round."""
        keys, self.dirty = self.dirty, set()
        return self._recompute(keys, now)

    def _recompute(self, keys: Iterable[str], now: float
                   ) -> list[tuple[GroupInfo | CompositeInfo, dict[str, Any]]]:
        out: list[tuple[GroupInfo | CompositeInfo, dict[str, Any]]] = []
        keep: set[str] = set()
        for key in keys:
            if key.startswith(f"{COMPOSITE}:"):
                due = self._composite(key, now, keep)
                if due is not None:
                    out.append(due)
                continue
            group = self.reads.group(key)
            if group is None:
                self._drop(key)  # a Kueue group goes with its last pod
                continue
            if group.parent:
                keep.add(group.parent)  # its composite's conditions follow its own
            rec = self.groups.get(key)
            if rec is None or rec.uid != group.uid:
                self._drop(key)
                rec = self.groups[key] = GroupRecord(group.uid)
            if group.jobset_split and not self.reads.group_pods(group.namespace, group.name,
                                                                group.source):
                # A split JobSet's own gang without a pod: they went to the gangs of its
                # Jobs or replicated Jobs, which are reported each. Counted, it would show
                # a gang "0 of 1 members" waiting forever beside them.
                self._counts.move(rec, None)
                rec.current = None
                self._live.discard(key)
                continue
            st = self.compute(group, now)
            disruption = self._disrupted.get(key)
            # An upstream PodGroup of ours: a member of ours, or one we wrote (or whose
            # gang our preemption evicts: the members may be gone by now), and no pod of
            # another scheduler (the in-tree scheduler's gangs are its own).
            ours_upstream = (
                group.source == WORKLOAD_API and st is not None
                and not self.pods.theirs(group)
                and (st.members > 0 or rec.api_written_json is not None
                     or disruption is not None))
            if st is None:  # finished, its pods gone: its status stays as it is
                self._live.discard(key)
                continue
            if not ours_upstream and st.members == 0 and (
                    self.pods.theirs(group) or (group.source == SCHEDULER_PLUGINS
                                               and rec.written_json is None
                                               and rec.has_observed)):
                # No member of ours, and pods of another scheduler labelled for it or a
                # status someone else wrote (only a scheduler-plugins PodGroup's
                # `observed` is the API's; the others' is what was computed here last):
                # another scheduler's gang, whose status is its own (architecture.md §11;
                # `reporting/labelled.py`).
                self._disown(key, group.source, rec)
                continue
            rec.current = st
            self._counts.move(rec, (st.phase, st.reason, group.source))
            if st.members:
                self._live.add(key)
            else:
                self._live.discard(key)
            self._transition(group, rec, st)
            doc = st.to_k8s()
            if group.source != SCHEDULER_PLUGINS:
                rec.observed = doc  # never written: what was computed is the previous
                if disruption is not None and upstream.evicted(self.reads, disruption, rec):
                    del self._disrupted[key]  # evicted and said: placed again, it ends
                    disruption = None
                up = (upstream.doc(rec, st, disruption, upstream.api_version(group), now)
                      if ours_upstream and isinstance(self.kube, UpstreamStatusApi) else None)
                if up is None:
                    rec.unwritten = None
                    continue
                doc = up
            else:
                written = rec.written
                base = written if written is not None else rec.observed
                if all(base.get(k) == v for k, v in doc.items()):
                    rec.unwritten = None
                    continue
            if rec.unwritten is None:
                rec.unwritten_since = rec.unwritten_changed = now
            elif rec.unwritten != doc:
                rec.unwritten_changed = now
            rec.unwritten = doc
            if self._too_early(group, rec, st, now) or not self._settled(rec, now):
                keep.add(key)
                continue
            if now - rec.written_at < self.config.min_interval or now < rec.retry_at:
                keep.add(key)
                continue
            out.append((group, doc))
        self.dirty |= keep
        return out

    def _composite(self, key: str, now: float, keep: set[str]
                   ) -> tuple[CompositeInfo, dict[str, Any]] | None:
        """A CompositePodGroup's conditions, when one of its children is a gang of ours
        (a member of ours and no pod of another scheduler) or this process wrote them
        before; recomputed whenever a child's status is (`_recompute` marks it)."""
        composite = self.reads.composite(key)
        rec = self.groups.get(key)
        if composite is None or rec is None:
            return None  # not seen (yet): its watch event marks it again
        kin = self.reads.children(key)
        children = [(g, st) for g in kin if (st := self.compute(g, now)) is not None]
        ours = any(st.members > 0 and not self.pods.theirs(g) for g, st in children)
        if not ours and any(self.pods.theirs(g) for g in kin):
            # Its children are another scheduler's now, so is it: what we wrote before
            # is no reason to write there again (its generation bumped, our clock).
            self._disown(key, COMPOSITE, rec)
            return None
        disruption = self._disrupted.get(key)
        if not (ours or rec.api_written_json is not None or disruption is not None):
            return None
        if disruption is not None and upstream.evicted(self.reads, disruption, rec):
            del self._disrupted[key]  # evicted and said: placed again, it ends
            disruption = None
        state = composite_status.state(composite, children, self.reads.waiting_since(key))
        doc = composite_status.doc(rec, state, disruption, now)
        if doc is None or not isinstance(self.kube, UpstreamStatusApi):
            return None
        if now - rec.written_at < self.config.min_interval or now < rec.retry_at:
            keep.add(key)
            return None
        return composite, doc

    def _settled(self, rec: GroupRecord, now: float) -> bool:
        cfg = self.config
        return (now - rec.unwritten_changed >= cfg.settle
                or now - rec.unwritten_since >= cfg.max_lag)

    def _too_early(self, group: GroupInfo, rec: GroupRecord, st: GroupStatus, now: float) -> bool:
        """The first status of a PodGroup that has no members yet and was created less
        than `new_group_grace` ago: its pods are most likely on their way. A status the
        API already shows (a restart, another writer) is never held back."""
        return (st.members == 0 and st.phase == PENDING and rec.written_json is None
                and not rec.has_observed and now - group.creation < self.config.new_group_grace)

    # ----- writing ---------------------------------------------------------------------------

    async def write(self, group: GroupInfo | CompositeInfo, doc: dict[str, Any]) -> bool:
        rec = self.groups.get(group.key)
        if self.kube is None or rec is None:
            return False
        path = f"{PODGROUP_PATH}/namespaces/{group.namespace}/podgroups/{group.name}/status"
        now = self.clock()
        try:
            if isinstance(group, CompositeInfo):
                assert isinstance(self.kube, UpstreamStatusApi)
                await self.kube.strategic_patch(composite_status.path(group),
                                                {"status": doc})
            elif group.source == WORKLOAD_API:
                assert isinstance(self.kube, UpstreamStatusApi)
                await self.kube.strategic_patch(
                    upstream.path(group, upstream.api_version(group)), {"status": doc})
            else:
                await self.kube.merge_patch(path, {"status": doc})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, ApiError) and exc.status == 404:
                return False  # deleted meanwhile; the watch will tell
            self.write_errors += 1
            rec.errors += 1
            rec.retry_at = now + min(self.config.max_error_backoff, 2.0 ** min(rec.errors, 10))
            self.dirty.add(group.key)
            if self.on_write is not None:
                self.on_write("error")
            log.warning("podgroup=%s status write failed (retry in %.0fs): %s", group.key,
                        rec.retry_at - now, exc)
            return False
        if isinstance(group, CompositeInfo) or group.source == WORKLOAD_API:
            upstream.written(rec, doc)
            rec.written_at, rec.errors, rec.retry_at = now, 0, 0.0
        else:
            rec.written, rec.written_at, rec.errors, rec.retry_at = doc, now, 0, 0.0
        if rec.unwritten == doc:
            rec.unwritten = None
        self.writes += 1
        if self.on_write is not None:
            self.on_write("ok")
        return True

    async def step(self, active: Callable[[], bool] = lambda: True) -> int:
        """One round: scan, recompute, write what is due. Returns the writes made.
        The dirty groups are worked through `batch` at a time (a finished group costs
        about 100 µs), the event loop let run
        in between: after a restart's list every group is dirty at once.

        `active` (`Leadership.active`) is asked before each write: the writes are paced
        (`max_writes_per_second`), so a round with a backlog lasts seconds, and once the
        lease is lost the status is the new leader's to write. The round then ends, its
        groups left dirty."""
        self._resync(self.clock())
        keys, self.dirty = list(self.dirty), set()
        written = tried = 0
        gap = 1.0 / self.config.max_writes_per_second
        size = max(1, self.config.batch)
        for start in range(0, len(keys), size):
            if start:
                await asyncio.sleep(0)
            for group, doc in self._recompute(keys[start:start + size], self.clock()):
                if self.kube is None:
                    continue  # --podgroup-status off: computed, never written nor waited for
                if tried:
                    await asyncio.sleep(gap)
                if not active():
                    self.dirty.update(keys)
                    return written
                tried += 1
                if await self.write(group, doc):
                    written += 1
        return written

    async def run(self, active: Callable[[], bool] = lambda: True) -> None:
        while True:
            try:
                if active():
                    await self.step(active)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the status loop die: logged, rate-limited
                self.errors.report(exc)
            await asyncio.sleep(self.config.loop_interval)

    # ----- views -----------------------------------------------------------------------------

    def counts(self) -> dict[tuple[str, str, str], int]:
        """(phase, reason, source) -> number of gangs, for the gangs-by-state gauge; kept
        as statuses are computed, so a scrape costs the number of states, not of
        groups."""
        return self._counts.snapshot()

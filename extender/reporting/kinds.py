"""The informer's kinds with the reporting adapters told of every change, after the gang
manager has applied it: the status writer learns which gangs to look at again and the
owners of their pods."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from extender.core.manager import GangManager
from extender.kube.informer import GROUPS, NODES, PODS, Kind
from extender.kube.source_kinds import (
    COMPOSITES,
    JOBSETS,
    SOURCE_GROUP_KINDS,
    WORKLOAD_BETA_GROUPS,
    WORKLOAD_GROUPS,
    jobset_deleted_gangs,
    jobset_gangs,
)
from extender.reporting.status import StatusWriter

log = logging.getLogger("gang-extender.status")

WORKLOAD_KINDS = (WORKLOAD_BETA_GROUPS, WORKLOAD_GROUPS)


def observed_kinds(writer: StatusWriter) -> tuple[Kind, ...]:
    """The informer's kinds, with the status writer told about every pod and PodGroup
    change after the gang manager has applied it."""

    def apply_pod(manager: GangManager, obj: dict[str, Any], now: float) -> None:
        PODS.apply(manager, obj, now)
        _guard(writer.observe_pod, obj)

    def delete_pod(manager: GangManager, key: str, now: float) -> None:
        pod = manager.reads.pod(key)
        PODS.delete(manager, key, now)
        writer.pod_deleted(key, pod)

    def apply_group(manager: GangManager, obj: dict[str, Any], now: float) -> None:
        GROUPS.apply(manager, obj, now)
        _guard(writer.observe_group, obj)

    def delete_group(manager: GangManager, key: str, now: float) -> None:
        GROUPS.delete(manager, key, now)
        writer.group_deleted(key)

    return (
        NODES,
        dataclasses.replace(PODS, apply=apply_pod, delete=delete_pod),
        Kind(GROUPS.name, GROUPS.path, GROUPS.key, apply_group, delete_group),
    )


def _guard(fn: Callable[[dict[str, Any]], None], obj: dict[str, Any]) -> None:
    try:
        fn(obj)
    except Exception:  # a malformed object must not stop the informer
        log.exception("status writer could not read an object")


def source_kinds(writer: StatusWriter) -> tuple[Kind, ...]:
    """The group objects of the other sources (Volcano, the upstream Workload API),
    watched while served. A Volcano PodGroup's status is not ours to write, so the writer
    only hears which gang changed, to recompute it for the Events, the debug views and
    metrics; an upstream PodGroup's conditions are, when its pods name this scheduler, so
    the writer sees the object (`StatusWriter.observe_upstream`). A JobSet is several
    gangs when it is split, and its event moves its pods between them with no pod event
    the writer would see: it hears of every gang of the JobSet, and of those the event
    dropped (another split, a restart, the JobSet deleted), not of the set's alone."""

    def wrap(kind: Kind) -> Kind:
        def apply(manager: GangManager, obj: dict[str, Any], now: float) -> None:
            before = jobset_gangs(kind.key(obj)) if kind is JOBSETS else []
            kind.apply(manager, obj, now)
            if kind in WORKLOAD_KINDS:  # its conditions are ours to write if its pods are
                _guard(writer.observe_upstream, obj)
            elif kind is COMPOSITES:  # so are a composite's, if its children's pods are
                _guard(writer.observe_composite, obj)
            elif kind is JOBSETS:
                after = jobset_gangs(kind.key(obj))
                for key in before:
                    if key not in after:
                        writer.group_deleted(key)
                for key in after:
                    writer.group_changed(key)
            else:
                writer.group_changed(kind.key(obj))

        def delete(manager: GangManager, key: str, now: float) -> None:
            gone = jobset_deleted_gangs(key) if kind is JOBSETS else [key]
            kind.delete(manager, key, now)
            for k in gone:
                writer.group_deleted(k)

        return Kind(kind.name, kind.path, kind.key, apply, delete, kind.discover)

    return tuple(wrap(kind) for kind in SOURCE_GROUP_KINDS)

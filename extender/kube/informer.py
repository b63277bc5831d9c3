"""List+watch loops that feed the gang manager (kube-scheduler's informers).

Each event is converted to core types once, here, so the filter path reads only plain
data. A relist (start, 410 Gone, dropped watch) replays the full list and deletes what
vanished, so the cache converges whatever was missed.

A kind of an optional API (a CRD such as Volcano's, an alpha API such as the upstream
PodGroup) is watched only while the API server serves it: its group-version's discovery
document is asked every `discovery_interval` seconds until it lists the resource (no
list, no watch, no warning before that), and when a list or watch later answers 404 the
kind goes back to asking, its objects deleted from the cache. Not being served counts as
listed for readiness: an API that does not exist must not keep the extender unready.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.core.convert import budget_from_k8s, node_from_k8s, pod_from_k8s
from extender.core.convert_groups import group_from_k8s
from extender.core.manager import GangManager
from extender.kube.client import PODGROUP_PATH, ApiError, Kube, ProtoDecoder, ResourceExpired

log = logging.getLogger("gang-extender.informer")


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    path: str
    key: Callable[[dict[str, Any]], str]
    apply: Callable[[GangManager, dict[str, Any], float], None]
    delete: Callable[[GangManager, str, float], None]
    # (group-version path, resource) of an optional API, watched only while served;
    # None: always served (nodes, pods, the scheduler-plugins PodGroup CRD we ship).
    discover: tuple[str, str] | None = None
    # How to read its watch in protobuf (`Informer(protobuf=True)`); None: JSON only.
    proto: Callable[[], ProtoDecoder] | None = None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _apply_node(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_node(node_from_k8s(obj))


def _apply_pod(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_pod(pod_from_k8s(obj), now)


def _apply_group(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_group(group_from_k8s(obj), now)


def _apply_budget(manager: GangManager, obj: dict[str, Any], now: float) -> None:
    manager.on_budget(budget_from_k8s(obj))


def _pod_proto() -> ProtoDecoder:
    # Imported only when asked for: the protobuf runtime and the core API's descriptors
    # cost 4 MiB of memory and 25-30 ms at import.
    from extender.kube import protobuf

    return protobuf.Pod, protobuf.pod_dict


def _ns_name(obj: dict[str, Any]) -> str:
    return f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}"


NODES = Kind(
    "nodes", "/api/v1/nodes", lambda o: str(_meta(o).get("name", "")), _apply_node,
    lambda m, key, now: m.on_node_deleted(key),
)
PODS = Kind(
    "pods", "/api/v1/pods", lambda o: str(_meta(o).get("uid", "")), _apply_pod,
    lambda m, key, now: m.on_pod_deleted(key, now), proto=_pod_proto,
)
GROUPS = Kind(
    "podgroups", f"{PODGROUP_PATH}/podgroups", _ns_name, _apply_group,
    lambda m, key, now: m.on_group_deleted(key),
)
# What the preemption needs to know to never pick a victim the Eviction API would refuse.
BUDGETS = Kind(
    "poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", _ns_name, _apply_budget,
    lambda m, key, now: m.on_budget_deleted(key),
)


class Informer:
    """Runs one list+watch loop per kind; `synced` is set once every kind is listed.

    `protobuf`: watch the kinds that have a `proto` decoder (pods) in protobuf. Off by
    default: it saves kube-apiserver a JSON encoding of every pod event where no other
    client watches pods in JSON, and costs the extender more CPU per event than JSON
    (docs/performance.md, "CPU per pod": measured both ways).
    """

    def __init__(
        self,
        kube: Kube,
        manager: GangManager,
        clock: Callable[[], float],
        on_change: Callable[[], None],
        kinds: tuple[Kind, ...] = (NODES, PODS, GROUPS),
        discovery_interval: float = 10.0,
        protobuf: bool = False,
    ) -> None:
        self.protobuf = protobuf
        self.kube = kube
        self.manager = manager
        self.clock = clock
        self.on_change = on_change
        self.kinds = kinds
        self.synced = asyncio.Event()
        self._listed: set[str] = set()
        self._known: dict[str, set[str]] = {k.name: set() for k in kinds}
        self.discovery_interval = discovery_interval
        self.served: dict[str, bool] = {}  # optional kinds: served at the last look

    async def run(self) -> None:
        await asyncio.gather(*(self._loop(k) for k in self.kinds))

    def _apply(self, kind: Kind, obj: dict[str, Any]) -> None:
        try:
            kind.apply(self.manager, obj, self.clock())
        except ValueError as exc:
            # One malformed object must not stop the informer; it is skipped and logged.
            log.warning("ignoring %s %s: %s", kind.name, kind.key(obj), exc)
            return
        self._known[kind.name].add(kind.key(obj))

    def _replace_all(self, kind: Kind, items: list[dict[str, Any]]) -> None:
        seen = {kind.key(o) for o in items}
        for key in self._known[kind.name] - seen:
            kind.delete(self.manager, key, self.clock())
        self._known[kind.name] = set()
        for obj in items:
            self._apply(kind, obj)
        self._listed.add(kind.name)
        if len(self._listed) == len(self.kinds) and not self.synced.is_set():
            self.synced.set()
            # The objects just listed mostly live as long as the process; a full
            # collection walks every tracked object, so move them out of its way
            # (halved the longest pauses in bench.core --gc-freeze).
            gc.collect()
            gc.freeze()
        self.on_change()

    async def _wait_until_served(self, kind: Kind) -> None:
        """Return once the optional API of `kind` is served; until then it has no
        objects (those of an API that went away are deleted) and counts as listed."""
        assert kind.discover is not None
        group_version, resource = kind.discover
        while True:
            try:
                names = await self.kube.discover(group_version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Unknown: objects already known stay, and readiness does not wait.
                log.warning("%s: discovery of %s failed (%s); asking again in %gs",
                            kind.name, group_version, exc, self.discovery_interval)
                if kind.name not in self._listed:
                    self._replace_all(kind, [])
                await asyncio.sleep(self.discovery_interval)
                continue
            served = names is not None and resource in names
            if served != self.served.get(kind.name):
                log.info("%s: %s/%s is %s", kind.name, group_version.removeprefix("/apis/"),
                         resource, "served; watching it" if served else "not served")
                self.served[kind.name] = served
            if served:
                return
            if self._known[kind.name] or kind.name not in self._listed:
                self._replace_all(kind, [])
            await asyncio.sleep(self.discovery_interval)

    async def _loop(self, kind: Kind) -> None:
        delay = 0.5
        while True:
            try:
                if kind.discover is not None:
                    await self._wait_until_served(kind)
                items, rv = await self.kube.list(kind.path)
                self._replace_all(kind, items)
                delay = 0.5
                while True:
                    proto = kind.proto() if self.protobuf and kind.proto else None
                    async for etype, obj in self.kube.watch(kind.path, rv, proto=proto):
                        meta = _meta(obj)
                        if meta.get("resourceVersion"):
                            rv = str(meta["resourceVersion"])
                        if etype in ("ADDED", "MODIFIED"):
                            self._apply(kind, obj)
                        elif etype == "DELETED":
                            key = kind.key(obj)
                            self._known[kind.name].discard(key)
                            kind.delete(self.manager, key, self.clock())
                        else:
                            continue  # BOOKMARK
                        self.on_change()
            except ResourceExpired:
                log.info("%s watch expired; relisting", kind.name)
            except asyncio.CancelledError:
                raise
            except (ApiError, OSError, ValueError, Exception) as exc:
                if kind.discover is not None and isinstance(exc, ApiError) and exc.status == 404:
                    # The API went away (its CRD deleted): back to discovery, which
                    # deletes its objects once the API server says so too.
                    log.info("%s: no longer served", kind.name)
                    await asyncio.sleep(min(delay, self.discovery_interval))
                else:
                    log.warning("%s list/watch failed (%s); retrying in %.1fs", kind.name,
                                exc, delay)
                    await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

"""What the soak's checker records about each pod, gang and node, and what it reports:
plain data shared by the watch that fills the records and the rules that judge them,
so neither has to import the other for its types. The labels that tell a pod's kind
are here too: the driver sets them, the watch reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
NEIGHBOUR_LABEL = "soak-neighbour"
"""Set by the driver on neighbour pods: `direct` (created with `spec.nodeName`) or
`scheduled` (placed by the default scheduler)."""
DECIDED_AT = "gang-extender.x-k8s.io/decided-at"
"""Set by the extender on each Binding it posts (kube-apiserver copies it onto the pod):
its wall clock, RFC 3339 UTC, when it decided that Binding (docs/observability.md)."""


@dataclass
class Violation:
    # partial | partial-at-end | partial-gang | partial-eviction | overcommit | rebound;
    # for notes:
    # overcommit-by-direct | overcommit-by-scheduled | overcommit-by-other |
    # overcommit-race | gang-onto-overcommitted
    kind: str
    subject: str
    detail: str
    at: float  # seconds since the checker started

    def __str__(self) -> str:
        return f"[{self.at:7.1f}s] {self.kind} {self.subject}: {self.detail}"


@dataclass
class PodRec:
    uid: str
    ns: str
    name: str
    gang: str | None
    kind: str = "other"  # gang | direct | scheduled | other
    node: str = ""
    phase: str = "Pending"
    cpu: int = 0
    mem: int = 0
    charged: bool = False
    bound_at: float | None = None
    # When the Binding that bound it was decided (its DECIDED_AT annotation, on the
    # checker's clock); None when it carries none (another scheduler's pod).
    decided_at: float | None = None
    # The Eviction API marked it (condition DisruptionTarget, EvictionByEvictionAPI): the
    # extender evicted it, and evicts gangs whole (`partial-eviction`).
    evicted: bool = False


@dataclass
class GangRec:
    key: str
    min_member: int
    timeout: float  # scheduleTimeoutSeconds, or the extender's default
    bound: set[str] = field(default_factory=set)  # uids ever bound
    live: set[str] = field(default_factory=set)  # uids bound and not deleted
    first_bound_at: float | None = None
    quorum_at: float | None = None
    reported: bool = False
    partial_since: float | None = None  # 0 < live < min_member since then
    partial_reported: bool = False
    deleted: bool = False  # the driver deleted it: its members leaving is no partial gang
    vanished: int = 0  # members deleted by someone else while the gang was alive
    # (when a running member was deleted by someone else, the members bound and running
    # then): each must be gone or finished within the window (`partial-eviction`).
    evictions: list[tuple[float, set[str]]] = field(default_factory=list)


@dataclass
class NodeRec:
    cpu: int
    mem: int
    pods: int
    used_cpu: int = 0
    used_mem: int = 0
    used_pods: int = 0

    def exceeded(self) -> bool:
        return self.used_cpu > self.cpu or self.used_mem > self.mem or self.used_pods > self.pods

    def usage(self) -> str:
        return (f"cpu {self.used_cpu}m/{self.cpu}m, memory {self.used_mem >> 20}Mi/"
                f"{self.mem >> 20}Mi, pods {self.used_pods}/{self.pods}")

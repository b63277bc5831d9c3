"""The world around the pure core, as the model-based test of the commit plays it
(tests/core/ledger/test_commit_model.py has the rules, the invariants and what the model
guarantees): the API server's truth, the informers' watches and relists, and the
adapter's side of Bindings (pending posts, `post_due`, outcomes, retries, the lease).

Kept apart from the state machine so that the rules read as the list of what may happen,
and this as how each thing happens.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from extender.core.manager import GangManager
from extender.core.model.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo, Resources

SCHEDULER = "gang-scheduler"
NS = "ns"
CPU = 8000
MEMORY = 32 << 30

# The watch states of one kind (pods, podgroups, provisioningrequests):
UP = "up"  # events since the last list are delivered in order by `deliver`
DOWN = "down"  # broken: undelivered events are lost, new ones not seen
LISTING = "listing"  # a relist took its snapshot; the new watch queues from it
CATCHING = "catching"  # snapshot applied; the new watch has not delivered since the list

Event = tuple[str, object]  # ("put", object) or ("delete", key)


@dataclass
class Watch:
    """One informer: its queue of undelivered events (the new watch's, after a relist),
    its store (what the core was last told per key), and the relist in progress."""

    kind: str
    holds_commits: bool
    state: str = UP
    queue: list[Event] = field(default_factory=list)
    store: dict[str, object] = field(default_factory=dict)
    snapshot: dict[str, object] | None = None

    def emit(self, event: Event) -> None:
        """A change in the API: queued if a watch is open (or a relist's new one)."""
        if self.state != DOWN:
            self.queue.append(event)


@dataclass
class Post:
    """A Binding the core asked for (`BindPod`), on the adapter's side: `pending` (held,
    queued, or waiting for a retry: `post_due` is asked before it is sent), or `sent`
    (on the wire; it may land)."""

    uid: str
    node: str
    gang: str | None
    group_uid: str | None  # the core's PodGroup uid for `gang` when it was decided
    committed: bool  # decided by a commit (its gang held a reservation slot for it)
    requests: Resources
    sent: bool = False
    # A foreign pod landed on its node while it waited (the watch up, the core told):
    # counted again only once it is sent, which `post_due` decides.
    stale: bool = False
    attempts: int = 0


def node_info(name: str) -> NodeInfo:
    return NodeInfo(name=name, allocatable={"cpu": CPU, "memory": MEMORY, "pods": 110},
                    labels={"kubernetes.io/hostname": name})


def new_pod(n: int, kind: str, cpu: int, now: float, group: str | None = None,
            node: str = "") -> PodInfo:
    """A gang member (`group`), a plain pod of our scheduler, or (`node`) a foreign pod
    of another scheduler created bound, as with spec.nodeName. `n` makes its name and
    uid unique (the machine's own counter: a run must not depend on the one before)."""
    labels = {GROUP_LABEL: group} if group else {}
    return PodInfo(
        uid=f"{kind}-{n:02d}", namespace=NS, name=f"{kind}-{n:02d}",
        requests={"cpu": cpu, "memory": 1 << 30, "pods": 1}, labels=labels,
        creation=now, scheduler_name="other-scheduler" if node else SCHEDULER,
        node_name=node, phase="Running" if node else "Pending")


def new_group(n: int, name: str, min_member: int, now: float) -> GroupInfo:
    return GroupInfo(namespace=NS, name=name, min_member=min_member,
                     uid=f"g-{name}-{n:02d}", creation=now)


def post_due_of(manager: GangManager) -> Callable[[str, str, float], str | None] | None:
    """`GangManager.post_due` if this core has it, called with or without `now`."""
    fn: Callable[..., str | None] | None = getattr(manager, "post_due", None)
    if fn is None:
        return None
    if len(inspect.signature(fn).parameters) >= 3:
        return fn
    two = fn
    return lambda uid, node, now: two(uid, node)


def fits(used: Resources, extra: Resources, alloc: Resources) -> bool:
    """Whether `used` plus `extra` stays within `alloc` on every resource."""
    total = dict(used)
    add(total, extra)
    return all(q <= alloc.get(r, 0) for r, q in total.items() if q > 0)


def add(into: Resources, req: Resources) -> None:
    for r, q in req.items():
        into[r] = into.get(r, 0) + q


def bound_copy(pod: PodInfo, node: str) -> PodInfo:
    return dataclasses.replace(pod, node_name=node, phase="Running")

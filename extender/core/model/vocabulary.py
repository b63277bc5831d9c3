"""The words the core speaks to its adapters: reasons, actions, results and views.

Everything here is immutable and complete: an adapter that receives an action never
has to look back into the core, nor read a message to learn what happened. The state
machines behind these words are drawn in docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import ClassVar

from extender.core.model.types import SCHEDULER_PLUGINS, Resources, gang_key


class Reason(StrEnum):
    """Why a gang is where it is: the reason of its `Scheduled` condition, of Events
    and of rejection messages (README "Why a gang waits" lists them for users)."""

    WAITING_FOR_MEMBERS = "WaitingForMembers"
    QUEUED = "Queued"  # a quorum exists; the extender has not looked at it yet
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    # Fits no set of the cluster's nodes even emptied: set aside (`queue/unplaceable.py`).
    UNPLACEABLE = "Unplaceable"
    # A member's required pod affinity selects no pod yet: it waits for one, not for
    # capacity, and is planned again when one is bound (`planner.Awaited`).
    WAITING_FOR_POD_AFFINITY = "WaitingForPodAffinity"
    INVALID_TOPOLOGY = "InvalidTopology"  # a malformed topology annotation: not placed
    WAITING_BEHIND_OLDER_GANG = "WaitingBehindOlderGang"
    RESERVED = "Reserved"
    # Capacity held ahead for a starving gang (a forward reservation).
    CAPACITY_HELD = "CapacityHeld"
    # Evicting lower-priority work; capacity held for it until the victims are gone.
    PREEMPTING = "Preempting"
    PREEMPTED = "Preempted"  # a victim: evicted whole to make room for a higher priority
    BACKING_OFF = "BackingOff"
    TIMED_OUT = "TimedOut"  # an Event only: the gang moves on to BackingOff or Failed
    # An Event only: a started gang whose disruption mode is "all" lost a member, and
    # its other members are evicted (`core/preemption/disruption.py`); it waits for its new pods.
    DISRUPTED = "Disrupted"
    BOUND = "Bound"
    FAILED = "Failed"
    MEMBER_FAILED = "MemberFailed"
    RETRY_LIMIT_REACHED = "RetryLimitReached"
    # Short of capacity, waiting for the ProvisioningRequest the extender made for it
    # (`core/provisioning.py`), or for one another controller (Kueue) made for its pods.
    WAITING_FOR_PROVISIONING = "WaitingForProvisioning"


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class GroupRef:
    namespace: str
    name: str
    uid: str
    source: str = SCHEDULER_PLUGINS  # which object it is (reporting/events.py)

    @property
    def key(self) -> str:
        return gang_key(self.source, self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Decision:
    """The core's latest word on a gang: why it waits, or that it is bound. The
    PodGroup's status (`phase.GroupStatus`) is computed from it and the pods."""

    reason: Reason
    message: str
    since: float
    retry_limit_reached: bool = False


# ----- actions: I/O the core asks the adapters to do ------------------------------------


@dataclass(frozen=True, slots=True)
class BindPod:
    """Create the Binding for a pod now: its gang's quorum is assembled, or it is a
    plain pod or an elastic extra whose bind was accepted."""

    pod: PodRef
    node: str
    gang: str | None


@dataclass(frozen=True, slots=True)
class RejectWaitingBind:
    """Answer a bind request that waits at the permit barrier with this error;
    kube-scheduler then forgets the pod and schedules it again."""

    uid: str
    message: str


@dataclass(frozen=True, slots=True)
class WakePods:
    """Touch these pending pods so kube-scheduler retries them at once (architecture.md §6)."""

    reason: str
    pods: tuple[PodRef, ...]
    gang: str | None = None


@dataclass(frozen=True, slots=True)
class EvictPods:
    """Evict these pods through the Eviction API (policy/v1): a gang that ended below
    its quorum after its commit must not keep part of its members running; or, with
    `preemptor`, a victim unit (`gang` is its key) of a whole-gang preemption, whose
    answers go back to the gang manager at once (`eviction_answered`)
    so that a refusal makes it choose other victims instead of retrying."""

    gang: str
    pods: tuple[PodRef, ...]
    reason: str
    preemptor: str | None = None


@dataclass(frozen=True, slots=True)
class SlotView:
    pod: PodRef
    node: str
    requests: Resources
    # The devices (DRA) its member is planned on, as "driver/pool/device": none for a
    # member without claims, and none in the events made as it is reserved (`/debug`
    # reads them, `Reads.reservations`).
    devices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GangReserved:
    reason: ClassVar[Reason] = Reason.RESERVED
    group: GroupRef
    message: str
    slots: tuple[SlotView, ...]
    created: float
    deadline: float


@dataclass(frozen=True, slots=True)
class GangHeld:
    """The starvation guard holds capacity for a starving gang on nodes still taken by
    running pods (a forward reservation); it becomes `GangReserved` once every node has
    room."""

    reason: ClassVar[Reason] = Reason.CAPACITY_HELD
    group: GroupRef
    message: str
    slots: tuple[SlotView, ...]
    waited: float  # seconds it had waited for capacity


@dataclass(frozen=True, slots=True)
class GangBound:
    reason: ClassVar[Reason] = Reason.BOUND
    group: GroupRef
    message: str
    # From "quorum present" to "quorum bound"; None when the quorum was already bound
    # when this process first saw the gang.
    seconds: float | None


@dataclass(frozen=True, slots=True)
class GangTimedOut:
    """A reservation reached its deadline and was released as a whole."""

    reason: ClassVar[Reason] = Reason.TIMED_OUT
    group: GroupRef
    message: str
    attempts: int
    # When the next attempt may start; None when the retry limit made the group Failed.
    retry_at: float | None
    slots: int  # what was released
    nodes: int
    reserved_at: float
    unbound: tuple[PodRef, ...]  # members still pending after the release
    # Members this reservation's commit let through that were bound while the rest of
    # the quorum never was: the gang is partial, and these are evicted (`EvictPods`).
    evicted: tuple[PodRef, ...] = ()

    @property
    def failed(self) -> bool:
        return self.retry_at is None


@dataclass(frozen=True, slots=True)
class GangDisrupted:
    """A started gang whose disruption mode is "all" lost members (`lost`: deleted,
    evicted, failed, or on a node removed or not ready) and its other bound members are
    evicted (`evicted`, an `EvictPods` beside this), so that its owner restarts the job
    whole (`core/preemption/disruption.py`)."""

    reason: ClassVar[Reason] = Reason.DISRUPTED
    group: GroupRef
    message: str
    lost: tuple[PodRef, ...]
    evicted: tuple[PodRef, ...]
    since: float  # when it was disrupted (a restarted extender's carried-on one: then)
    # The name of the CompositePodGroup (in the group's namespace) of mode all that was
    # disrupted whole with this group, its child; "": the gang alone.
    composite: str = ""


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """A gang's `Decision` changed; `status` None: the gang is gone."""

    gang: str
    status: Decision | None


# What a preemption victim is (`Victim.kind`, `preemption/victims.Unit.kind`).
GANG, POD, RESERVATION = "gang", "pod", "reservation"


@dataclass(frozen=True, slots=True)
class Victim:
    """One unit a preemption evicts whole, or a reservation it releases."""

    name: str  # "gang ns/x", "pod ns/p", "reservation of gang ns/y"
    kind: str  # GANG, POD or RESERVATION
    priority: int
    group: GroupRef | None  # the PodGroup of a victim gang or reservation
    pods: tuple[PodRef, ...]  # evicted (none for a reservation)


@dataclass(frozen=True, slots=True)
class Preempting:
    """A preemptor (a gang, or a plain pod of the gang scheduler) evicts lower-priority
    victims; the capacity they free is held for it until they are gone."""

    reason: ClassVar[Reason] = Reason.PREEMPTING
    preemptor: str  # "gang ns/x" or "pod ns/p"
    group: GroupRef | None  # the preemptor's PodGroup; None for a plain pod
    pod: PodRef | None  # the plain preemptor
    priority: int
    message: str
    victims: tuple[Victim, ...]
    slots: tuple[SlotView, ...]

    def groups(self) -> list[GroupRef]:
        """Every PodGroup it concerns: the preemptor's and the victims'."""
        return [g for g in (self.group, *(v.group for v in self.victims)) if g is not None]


@dataclass(frozen=True, slots=True)
class PodSet:
    template: PodRef  # the member whose spec the PodTemplate copies
    count: int


# ----- the provisioning adapter's actions (core/model/provisioning_request.py has the contract) ---


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Create the PodTemplates (`<name>-<i>`, one per pod set, copied from a member) and
    then the request, all owned by the gang's PodGroup (none for a Kueue pod group, which
    has no object), then annotate `annotate` to consume it."""

    group: GroupRef
    gang: str
    name: str
    class_name: str
    pod_sets: tuple[PodSet, ...]
    annotate: tuple[PodRef, ...]


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """Delete the request the watch showed carrying our marker for `gang`, with `uid` as
    the delete's precondition (an object of that name made since, ours or not, stays),
    then those of its PodTemplates that carry our marker for `gang` when read."""

    namespace: str
    name: str
    templates: tuple[str, ...]
    reason: str
    uid: str
    gang: str


@dataclass(frozen=True, slots=True)
class ProtectNode:
    """Set (`on`) or remove the scale-down-disabled annotation, and ours beside it."""

    node: str
    on: bool
    gang: str = ""


@dataclass(frozen=True, slots=True)
class ProvisioningReport:
    """A request of a gang changed state: for its Events and metrics. `outcome`:
    "requested", "provisioned", "failed", "booking-expired", "capacity-revoked",
    "not-created" (the adapter could not make it, or it never showed)."""

    group: GroupRef
    request: str
    outcome: str
    message: str


ProvisioningAction = CreateRequest | DeleteRequest | ProtectNode | ProvisioningReport



Transition = GangReserved | GangBound | GangTimedOut | GangHeld | GangDisrupted
# For the reporting adapters: status, Events, metrics.
Report = Transition | StatusChanged | Preempting
Action = BindPod | RejectWaitingBind | WakePods | EvictPods | Report | ProvisioningAction


# ----- results of the verbs ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FilterResult:
    """`wait` > 0: no answer yet; the gang is still being created, ask again after its
    next member arrives or `wait` seconds, passing the time waited so far."""

    nodes: list[str]
    unresolvable: dict[str, str]
    error: str = ""
    wait: float = 0.0


class BindOutcome(Enum):
    BOUND = "bound"  # already bound to that node: answer success
    WAIT = "wait"  # wait for the answer, until `deadline` at most
    ERROR = "error"  # answer with `message`


@dataclass(frozen=True, slots=True)
class BindDecision:
    outcome: BindOutcome
    message: str = ""
    deadline: float = 0.0


# ----- read-only views -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReservationView:
    gang: str
    created: float
    deadline: float  # infinite while held
    slots: tuple[SlotView, ...]
    domain: str = ""  # "rack r2": the topology domain its slots stay in, if any
    held: str | None = None  # `Reservation.held`: "starvation" or "preemption"


@dataclass(frozen=True, slots=True)
class WaitingBindView:
    """A bind in progress: waiting at the permit barrier, or its Binding in flight."""

    pod: str  # namespace/name
    uid: str
    node: str
    gang: str | None
    in_flight: bool
    deadline: float | None  # of its gang's reservation, while it waits


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A gang not yet bound, in the order capacity is granted."""

    gang: str
    min_member: int
    members: int
    bound: int
    status: Decision | None


@dataclass(frozen=True, slots=True)
class Gauges:
    reservations: int
    reserved_slots: int
    waiting_binds: int
    reasons: dict[str, int]  # gangs by the reason of their status
    held: int = 0  # reservations held ahead of capacity (`Reservation.held`)
    # Capacity free on held slots' nodes that nothing else may use yet: the cost of
    # holding ahead (`Reservations.held_idle`).
    held_idle: Resources | None = None
    # Per DeviceClass (DRA): its devices free, reserved by slots, and allocated.
    devices: dict[str, tuple[int, int, int]] | None = None

"""Plain data the core works on.

The adapters translate Kubernetes JSON into these once, when a watch event arrives,
so the filter path never walks raw API objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from extender.core.model.claims import PodClaims

# Resource name -> integer amount in kube-scheduler's units: "cpu" in millicores,
# "memory"/"ephemeral-storage"/hugepages in bytes, "pods" as a count, extended
# resources (e.g. "nvidia.com/gpu") as whole values.
Resources = dict[str, int]

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# PodGroup annotations (the scheduler-plugins PodGroup has no field for them): the label
# key whose domains (racks, blocks, zones) must hold the whole quorum, and the keys,
# narrowest first, whose domains it should preferably fit in. docs/topology.md.
TOPOLOGY_REQUIRED = "gang-extender.x-k8s.io/topology-required"
TOPOLOGY_PREFERRED = "gang-extender.x-k8s.io/topology-preferred"
# How a started gang may be disrupted (core/preemption/disruption.py): "single" (the default), a
# lost member is replaced beside the others; "all", the others are evicted with it, so
# the job restarts whole. The upstream PodGroup says it in spec.disruptionMode; the
# scheduler-plugins and Volcano PodGroups, which have no such field, in this annotation.
DISRUPTION_MODE = "gang-extender.x-k8s.io/disruption-mode"
DISRUPT_SINGLE, DISRUPT_ALL = "single", "all"
# The reason of the `DisruptionTarget` condition this extender sets on a gang it evicts
# whole after a member was lost (a preemption's is kube-scheduler's
# "PreemptionByScheduler"); read back after a restart (`GroupInfo.disrupted_since`).
MEMBER_DISRUPTED = "MemberDisrupted"
# The condition in which a CompositePodGroup's or an upstream PodGroup's status keeps
# when it began waiting for capacity (True, its lastTransitionTime), the starvation
# guard's clock carried over a restart (`CompositeInfo.waiting_since`,
# `GroupInfo.waiting_since`). A condition, not a field: both are built-in API types,
# whose status holds only the fields it declares (its conditions), so a
# `waitingForCapacitySince` as a scheduler-plugins PodGroup's would be dropped.
WAITING_FOR_CAPACITY = "gang-extender.x-k8s.io/WaitingForCapacity"
# The condition in which an upstream PodGroup's status keeps its backoff (True while
# timeouts are counted against --backoff-limit: the count and the backoff's end in its
# message, `upstream_status.backoff_message`), carried over a restart
# (`GroupInfo.requeue_count`, `requeue_at`): what a scheduler-plugins PodGroup keeps in
# `status.requeueState`, which a built-in type's status would drop.
BACKING_OFF = "gang-extender.x-k8s.io/BackingOff"

# Where a gang comes from: the API or operator convention that marked it
# (core/model/sources.py has each one's keys and objects; docs/integrations.md and
# docs/workload-api.md a section per source).
SCHEDULER_PLUGINS = "scheduler-plugins"  # PodGroup scheduling.x-k8s.io/v1alpha1 + label
WORKLOAD_API = "workload-api"  # PodGroup scheduling.k8s.io/v1beta1|v1alpha2 + spec.schedulingGroup
VOLCANO = "volcano"  # PodGroup scheduling.volcano.sh/v1beta1 + annotation
KUEUE = "kueue"  # Kueue plain pod groups: labels and annotations only, no object


def gang_key(source: str, namespace: str, name: str) -> str:
    """The key a gang is addressed by everywhere (cache, queue, reservations, messages,
    /debug): "namespace/name" for scheduler-plugins PodGroups, as it always was, and
    "source:namespace/name" for the others, so that two sources' groups of the same name
    in one namespace stay two gangs."""
    if source == SCHEDULER_PLUGINS:
        return f"{namespace}/{name}"
    return f"{source}:{namespace}/{name}"


def split_gang_key(key: str) -> tuple[str, str, str]:
    """(source, namespace, name) of a `gang_key`. Neither a namespace nor an object name
    may contain ":" or "/", so the split is unambiguous."""
    head, _, name = key.rpartition("/")
    source, sep, namespace = head.partition(":")
    if not sep:
        return SCHEDULER_PLUGINS, head, name
    return source, namespace, name


@dataclass(frozen=True, slots=True)
class JobSetPod:
    """What a JobSet's pod says of its place in the set, from the JobSet controller's
    labels: the gang of its JobSet's attempt (`sources.jobset_gang_name`), its replicated
    Job and its Job's index. The JobSet, not the pod, says whether its replicated Jobs
    are gangs of their own (the controller copies none of the JobSet's annotations to
    its pods), so the core resolves the pod's gang from these and the JobSet's split
    (`sources.jobset_resolve`), again whenever the split changes."""

    set_gang: str
    replicated_job: str
    index: str


@dataclass(frozen=True, slots=True)
class Membership:
    """The gang a pod joins, as `core/model/sources.membership` chose it from the pod's keys."""

    source: str
    name: str  # the group's name in the pod's namespace
    # Kueue's pod-group-total-count; None for other sources, or when absent or invalid.
    total: int | None = None
    # A JobSet's pod whose gang its JobSet's split decides (`JobSetPod`); None for every
    # other pod, and for one whose own template already chose its gang (per Job or per
    # replicated Job).
    jobset: JobSetPod | None = None


# A pod that carries a gang's keys but names another scheduler: plain here, whatever its
# keys say (architecture.md §11). Its own scheduler places and reports its gang.
NOT_A_MEMBER = Membership("", "")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" matches every effect


@dataclass(frozen=True, slots=True)
class Requirement:
    """One matchExpressions entry of a node selector term or a label selector."""

    key: str
    operator: str  # In NotIn Exists DoesNotExist (+ Gt Lt for node selectors)
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements are ANDed; terms of a NodeSelector are ORed."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()  # only key "metadata.name" exists upstream


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required (anti-)affinity term. namespaces empty and no namespace selector
    means the pod's own namespace."""

    selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    # namespaceSelector: None when absent; an empty LabelSelector selects every
    # namespace. When set, `namespaces` plus the selected namespaces replace the default.
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint with whenUnsatisfiable: DoNotSchedule (the only kind
    that filters; ScheduleAnyway only scores, so it is not kept)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"  # Honor | Ignore
    node_taints_policy: str = "Ignore"  # Honor | Ignore


@dataclass(slots=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    # The Cluster Autoscaler's scale-down-disabled annotation is there (any value); and
    # whether the extender set it (its own annotation beside it). Nothing plans with these, so a
    # change of them is no change of the node (`Cache.upsert_node` compares).
    scale_down_disabled: bool = field(default=False, compare=False)
    scale_down_ours: bool = field(default=False, compare=False)


@dataclass(slots=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    requests: Resources  # always includes "pods": 1
    labels: dict[str, str] = field(default_factory=dict)
    priority: int = 0
    node_name: str = ""  # "" while unbound
    phase: str = "Pending"  # Pending Running Succeeded Failed Unknown
    deleting: bool = False  # metadata.deletionTimestamp set
    gated: bool = False  # spec.schedulingGates non-empty
    scheduler_name: str = "default-scheduler"
    creation: float = 0.0  # metadata.creationTimestamp, epoch seconds
    node_selector: dict[str, str] = field(default_factory=dict)
    # Required node affinity: None means none; terms are ORed.
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    # Required pod affinity terms and DoNotSchedule spread constraints: planned among a
    # gang's members (docs/topology.md), left to kube-scheduler for plain pods.
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    # kube-scheduler recorded a failed attempt (condition PodScheduled=False): the pod
    # may sit in its unschedulable queue until an event or the 5-minute flush moves it
    # (architecture.md §6). Status only: it changes neither the pod's footprint nor its gang.
    unschedulable: bool = False
    # The gang this pod joins, set by `convert.pod_from_k8s` from every source's keys
    # (core/model/sources.py). None: the scheduler-plugins label alone decides, which is what a
    # PodInfo built by hand (tests, benchmarks) relies on.
    membership: Membership | None = None
    # spec.preemptionPolicy, set by admission from the pod's PriorityClass: "Never" means
    # the pod (or a gang with such a member) never evicts anyone to be placed.
    preemption_policy: str = "PreemptLowerPriority"
    # The ProvisioningRequest its `autoscaling.x-k8s.io/consume-provisioning-request`
    # annotation names ("": none): the extender's own, or another controller's (Kueue's).
    provisioning_request: str = ""
    # kube-scheduler's own plugins must place it: a PersistentVolumeClaim (or a generic
    # ephemeral volume) that may need binding, resource claims (DRA) to allocate, or a
    # host port the planner does not check. Such a member goes through kube-scheduler's
    # cycle and waits at the barrier; the others of a planned gang are committed by the
    # extender directly (`Ledger.commit`, architecture.md §7).
    binds_via_scheduler: bool = False
    # status.nominatedNodeName ("": none): the node kube-scheduler's preemption freed
    # for this pending pod. Its requests are kept there for it, from pods of equal or
    # lower priority, as kube-scheduler keeps them (`Cache.nominated_on`).
    nominated_node: str = ""
    # spec.resourceClaims and their status (DRA), None for a pod without claims: the
    # devices it needs are planned with its other requests (docs/devices.md).
    claims: PodClaims | None = None
    # Key (`gang_key`) of the gang this pod is a member of, or None: derived from
    # `membership` (or the scheduler-plugins label) once, when the pod is made (a changed
    # copy is a new one: `dataclasses.replace`), since nearly every part of the core
    # reads it on every pod it looks at and a property formatted the key on each read.
    gang: str | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = self.membership
        if m is not None:
            self.gang = gang_key(m.source, self.namespace, m.name) if m.name else None
        else:
            group = self.labels.get(GROUP_LABEL)
            self.gang = f"{self.namespace}/{group}" if group else None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group(self) -> str | None:
        """Name of the group this pod joins (in its source), or None for a plain pod."""
        if self.membership is not None:
            return self.membership.name or None
        return self.labels.get(GROUP_LABEL) or None

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def takes_capacity(self) -> bool:
        """Whether the pod's requests count against its node, as in kube-scheduler's
        cache: every assigned pod that has not finished."""
        return bool(self.node_name) and not self.terminal


@dataclass(slots=True)
class GroupInfo:
    """A gang's group: a PodGroup of any source (scheduler-plugins, the upstream Workload
    API, Volcano) or a Kueue pod group derived from its pods; one model for all."""

    namespace: str
    name: str
    min_member: int
    uid: str = ""
    creation: float = 0.0
    min_resources: Resources | None = None
    schedule_timeout_seconds: int | None = None
    source: str = SCHEDULER_PLUGINS
    # A node label key whose domains (racks, blocks, zones) must hold the whole quorum
    # ("": none), and label keys, narrowest first, whose domains it should preferably fit
    # in (docs/topology.md). From the PodGroup's topology annotations, or for an upstream
    # PodGroup from spec.schedulingConstraints.topology[].key. A malformed value leaves
    # both empty and says why in `topology_error`; such a gang is not placed.
    topology_required: str = ""
    topology_preferred: tuple[str, ...] = ()
    topology_error: str = ""
    # A Volcano PodGroup's spec.priorityClassName, as written; carried, not resolved:
    # the queue orders gangs by their members' pod priority (queue/order.py).
    priority_class_name: str | None = None
    # The group's backoff as its status recorded it (`status.requeueState`; an upstream
    # PodGroup's, our condition `BACKING_OFF`; written by the active extender): timeouts
    # so far and when it may be tried again (epoch seconds, 0: not backing off). A
    # restarted or newly leading extender carries it on rather than retrying a timed-out
    # gang at once, or a Failed one at all.
    requeue_count: int = 0
    requeue_at: float = 0.0
    # When the gang began waiting for capacity, as its status recorded it
    # (`status.waitingForCapacitySince`; an upstream PodGroup's, our condition
    # `WAITING_FOR_CAPACITY`; epoch seconds, 0: not recorded): the starvation guard's
    # clock, carried over a restart (`queue/starvation.py`).
    waiting_since: float = 0.0
    # DISRUPT_SINGLE or DISRUPT_ALL (`DISRUPTION_MODE`).
    disruption_mode: str = DISRUPT_SINGLE
    # An upstream PodGroup's spec.preemptionPolicy (1.37, PodGroupPreemptionPolicy), as
    # admission resolved it: "Never" keeps the gang from evicting lower-priority work,
    # as a member whose pod says Never does (`core/preemption/preemptor.py`). The other
    # sources have no such field: their members' pods say it.
    preemption_policy: str = "PreemptLowerPriority"
    # An upstream PodGroup's spec.priority (v1beta1, 1.37), what admission resolved from
    # spec.priorityClassName (None: absent; other sources: their pods say it): the gang's
    # priority where none of its members has one of its own (`order.gang_priority`).
    priority: int | None = None
    # When this extender evicted the gang whole after it lost a member, as its status
    # recorded it (the `DisruptionTarget` condition of ours, True; epoch seconds, 0:
    # not disrupted): a restarted extender carries the disruption on, never starts
    # another for the members it evicted (`core/preemption/disruption.py`).
    disrupted_since: float = 0.0
    # The key of the CompositePodGroup this group is a child of (an upstream PodGroup's
    # spec.parentCompositePodGroupName, `CompositeInfo`), "" for none: a child of a
    # gang composite is planned with its siblings, never alone (`queue/composite_unit.py`).
    parent: str = ""
    # An upstream PodGroup's spec.resourceClaims and status.resourceClaimStatuses
    # (Kubernetes 1.37, DRAWorkloadResourceClaims): claims its members share, one
    # allocation for the gang; None for none.
    claims: PodClaims | None = None
    # A JobSet's own gang (the set's, `convert_jobset`): its replicated Jobs that are
    # gangs of their own, each with how ("per-job" or "per-replicated-job"), sorted; the
    # rest stay in the set's gang. Its pods' gangs are resolved from it
    # (`sources.jobset_resolve`). None for every other group.
    jobset_split: tuple[tuple[str, str], ...] | None = None

    @property
    def key(self) -> str:
        return gang_key(self.source, self.namespace, self.name)

    def same_spec(self, other: GroupInfo) -> bool:
        """Equal but for what the status records (the backoff, the wait). No plan
        depends on those, so the extender's own status write coming back must not
        have every waiting gang planned again (`Cache.upsert_group`)."""
        return replace(self, requeue_count=other.requeue_count, requeue_at=other.requeue_at,
                       waiting_since=other.waiting_since,
                       disrupted_since=other.disrupted_since) == other


# The key prefix of a CompositePodGroup (scheduling.k8s.io/v1alpha3, Kubernetes 1.37
# alpha), beside the sources' prefixes: its key lives among the gangs' keys, so that the
# gang manager takes it through the same watch input as the PodGroups
# (`GangManager.on_group`), and no gang can be mistaken for it.
COMPOSITE = "composite-podgroup"


def composite_key(namespace: str, name: str) -> str:
    """The key of the composite `name` in `namespace`: what a child's `parent` holds."""
    return gang_key(COMPOSITE, namespace, name)


@dataclass(frozen=True, slots=True)
class CompositeInfo:
    """A CompositePodGroup: a group of PodGroups (its children, whose
    spec.parentCompositePodGroupName names it, `GroupInfo.parent`), how many of them
    must be placed together (`min_group_count`; 0 for a "basic" policy, whose children
    are each planned on their own), the node label whose one domain holds all of them
    ("": none), and why it cannot be honoured (`error`, "": it can; a composite inside
    another, a malformed topology), with which its children wait rather than be placed
    in part (`queue/composite_unit.py`)."""

    namespace: str
    name: str
    min_group_count: int
    uid: str = ""
    creation: float = 0.0
    topology_required: str = ""
    error: str = ""
    # DISRUPT_ALL: its children are disrupted together, as one gang of gangs
    # (`core/preemption/disruption.py`); DISRUPT_SINGLE: each child by its own mode.
    disruption_mode: str = DISRUPT_SINGLE
    # spec.priority as admission resolved it from spec.priorityClassName (None: absent):
    # the queue place of its children whose members have no priority of their own
    # (`model/order.py`).
    priority: int | None = None
    # As `GroupInfo.disrupted_since`, from the composite's own `DisruptionTarget`.
    disrupted_since: float = 0.0
    # spec.preemptionPolicy (1.37, PodGroupPreemptionPolicy), as admission resolved it
    # from spec.priorityClassName: "Never" keeps the composite, and each of its
    # children, from evicting lower-priority work (`core/preemption/preemptor.py`).
    preemption_policy: str = "PreemptLowerPriority"
    # When it began waiting for capacity, as its status recorded it (our
    # `WAITING_FOR_CAPACITY` condition; epoch seconds, 0: not recorded): as
    # `GroupInfo.waiting_since`, the starvation guard's clock over a restart.
    waiting_since: float = 0.0

    @property
    def key(self) -> str:
        return composite_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class BudgetInfo:
    """A PodDisruptionBudget (policy/v1): the pods it covers and how many of them the
    Eviction API lets go right now. The preemption never picks a victim whose eviction
    a budget would refuse (`core/preemption/budgets.py`)."""

    namespace: str
    name: str
    # policy/v1: an absent selector covers no pod, an empty one every pod of the namespace.
    selector: LabelSelector | None
    # status.disruptionsAllowed, kept by the disruption controller; 0 until it has looked.
    disruptions_allowed: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

"""The extender's view of the cluster, kept incrementally like kube-scheduler's cache.

Per-node free capacity is maintained on every change instead of being recomputed,
so the filter path and the planner read it in O(1) per node. "Free" already
excludes capacity reserved for gangs, because every consumer except the gang that
reserved a slot must be kept off it.
"""

from __future__ import annotations

from extender.core.cache.devices import DeviceObject, DeviceState, DeviceView, no_selectors
from extender.core.cache.fitindex import FitIndex
from extender.core.cache.pods_on_node import PodsOnNode
from extender.core.cache.quorum import QuorumIndex
from extender.core.cache.snapshot import Snapshot
from extender.core.cache.tally import GangPods, QuorumCounts, Tallies, Tally, is_member
from extender.core.cache.topology import Domains
from extender.core.devices.model import SelectorCompiler
from extender.core.model.constraints import repels_beyond_node
from extender.core.model.types import (
    SCHEDULER_PLUGINS,
    CompositeInfo,
    GroupInfo,
    NodeInfo,
    PodInfo,
    Resources,
    gang_key,
)


def _add_into(target: Resources, delta: Resources, sign: int) -> None:
    for name, amount in delta.items():
        target[name] = target.get(name, 0) + sign * amount


class Cache:
    """Nodes, pods and PodGroups as last seen, plus derived per-node usage.

    `capacity_epoch` grows whenever capacity may have become free (a pod left a node,
    a node appeared or changed, a reservation slot was released), so a gang whose plan failed at
    one epoch need not be planned again until it moves.
    """

    def __init__(self, selectors: SelectorCompiler | None = None) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodInfo] = {}
        self.groups: dict[str, GroupInfo] = {}
        # CompositePodGroups by key (`CompositeInfo`): what a child's `parent` names.
        self.composites: dict[str, CompositeInfo] = {}
        self.free: dict[str, Resources] = {}
        # uid -> pod for pods whose requests are charged to a node (bound, not finished).
        self._charged: dict[str, PodInfo] = {}
        # priority -> how many charged pods have it: whether any running pod could be
        # preempted at all, without walking them (`lowest_running_priority`).
        self._charged_priorities: dict[int, int] = {}
        self._on_node: dict[str, dict[str, PodInfo]] = {}
        self._reserved_on_node: dict[str, dict[str, PodInfo]] = {}
        # Pods whose Binding is in flight, charged before the API confirms them.
        self._assumed_on_node: dict[str, dict[str, PodInfo]] = {}
        # Node -> uid -> pod, for the pending pods nominated there
        # (`PodInfo.nominated_node`), and uid -> node: kept as pods change, so the
        # checks that count nominations read one node's few, never every pod
        # (`nominated_on`).
        self.nominated: dict[str, dict[str, PodInfo]] = {}
        self._nominated_to: dict[str, str] = {}
        self.pods_on_node = PodsOnNode(self._on_node, self._reserved_on_node)
        # Told of every change to `nodes` and `free` (all of them go through
        # `_adjust`, `upsert_node` and `remove_node`), so plans need not visit every node.
        self.fit_index = FitIndex(self.nodes, self.free)
        self.domains = Domains(self.nodes)  # told of nodes added, removed, relabelled
        # ("bound" | "reserved", uid) -> (node, pod) for the pods of `pods_on_node` whose
        # anti-affinity reaches beyond their node (a zone, a rack): they keep members out
        # of whole domains, and finding them would mean walking every pod per plan.
        self._repellers: dict[tuple[str, str], tuple[str, PodInfo]] = {}
        # Devices (DRA) from their watches, and those reservation slots hold.
        self.devices = DeviceState(selectors or no_selectors)
        self.snapshot = Snapshot(self.nodes, self.free, self.pods_on_node, self.fit_index,
                                 self.domains, self._repellers,
                                 DeviceView(self.devices, self.nodes))
        # Nodes where at least one reservation has capacity: the only nodes where
        # the extender can disagree with kube-scheduler's own fit check.
        self.reserved_nodes: dict[str, int] = {}
        # Node -> what held slots charge there (`Reservation.held`): capacity promised
        # ahead of time on nodes still taken by pods that are leaving or will finish, so
        # free capacity there is below zero by design until they are gone.
        self.held: dict[str, Resources] = {}
        # gang key -> uid -> pod, for every pod that joins the gang (`PodInfo.gang`).
        self._group_pods: dict[str, dict[str, PodInfo]] = {}
        # gang key -> (members, bound members, succeeded pods), computed
        # when asked and dropped whenever a pod of the group changes: the gang queue
        # asks for every group on every pass, and walking every pending pod each time
        # would make a pass grow with every pod waiting (docs/performance.md).
        self._summaries: dict[str, GangPods] = {}
        # The same counts without the members, kept as pods change (`tally`).
        self._tallies = Tallies()
        # Told whenever a summary is dropped or a group changes (`short_of_quorum`).
        self._quorum = QuorumIndex(self.groups, self.tally)
        self.capacity_epoch = 0
        self.charge_epoch = 0  # grows whenever a pod is charged to a node or leaves it
        self.unreserve_epoch = 0  # grows whenever a reservation slot is released
        self.node_epoch = 0  # grows whenever a node is added, changed or removed
        self.free_epoch = 0  # grows whenever free capacity changes (`_adjust`)
        # Values come from one counter for the whole cache, so a gang key that is
        # forgotten and later seen again can never repeat a stale epoch.
        self.members_epoch: dict[str, int] = {}
        self._epoch_seq = 0

    # ----- nodes -------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> bool:
        """Returns whether anything the extender plans with changed (not on heartbeats)."""
        old = self.nodes.get(node.name)
        self.nodes[node.name] = node
        if old is None or old.labels != node.labels:
            self.domains.changed()
        free = dict(node.allocatable)
        for charged in (self._on_node, self._reserved_on_node, self._assumed_on_node):
            for pod in charged.get(node.name, {}).values():
                _add_into(free, pod.requests, -1)
        old_free = self.free.get(node.name)
        self.free[node.name] = free
        if old_free is None:
            self.fit_index.node_added(node.name)
        elif old != node or old_free != free:
            self.fit_index.changed(node.name)  # not on heartbeats: nothing changed then
        if old is None or old != node:
            self.capacity_epoch += 1
            self.node_epoch += 1
            return True
        return False

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.domains.changed()
        if self.free.pop(name, None) is not None:
            self.fit_index.node_removed(name)
        self.capacity_epoch += 1
        self.node_epoch += 1

    def upsert_devices(self, kind: str, key: str, obj: DeviceObject | None) -> bool:
        """A device watch event (`DeviceState.apply`), and whether a plan may come out
        differently. Slices, classes and templates change what can be placed at all
        (`node_epoch`, which the unplaceable test depends on); a claim allocated or
        released changes what is free."""
        if not self.devices.apply(kind, key, obj):
            return False
        self.capacity_epoch += 1
        self.free_epoch += 1
        if kind != "resourceclaims":
            self.node_epoch += 1
        return True

    def _adjust(self, node: str, requests: Resources, sign: int) -> None:
        """Every change to a node's free capacity after `upsert_node`."""
        free = self.free.get(node)
        self.free_epoch += 1
        if free is not None:
            _add_into(free, requests, sign)
            self.fit_index.changed(node)

    # ----- pods --------------------------------------------------------------------

    def upsert_pod(self, pod: PodInfo) -> None:
        old = self.pods.get(pod.uid)
        self.pods[pod.uid] = pod
        charged = self._charged.get(pod.uid)
        if charged is not None and pod.takes_capacity and _same_footprint(charged, pod):
            # A status or annotation update of a running pod (the most common watch
            # event by far): free capacity and everything the planner reads are the
            # same, so only the reference changes. Uncharging and charging again would
            # advance `capacity_epoch` and have every waiting gang planned again.
            self._charged[pod.uid] = pod
            self._on_node[pod.node_name][pod.uid] = pod
        else:
            self._uncharge(pod.uid)
            if pod.takes_capacity:
                self._charge(pod)
        if pod.nominated_node or pod.uid in self._nominated_to:
            self._nominate(pod)
        old_group = old.gang if old is not None else None
        new_group = pod.gang
        if old is not None and old_group is not None:
            self._tallies.remove(old_group, old)
        if new_group is not None:
            self._tallies.add(new_group, pod)
        if old_group is not None and old_group != new_group:
            self._group_pods.get(old_group, {}).pop(pod.uid, None)
            self._summaries.pop(old_group, None)
            self._quorum.changed(old_group)
            self._bump_members(old_group)
        if new_group is not None:
            self._group_pods.setdefault(new_group, {})[pod.uid] = pod
            self._summaries.pop(new_group, None)
            self._quorum.changed(new_group)
            # A pod that joins the gang (new, relabelled into it, or moved by its
            # JobSet's split) changes its members even when nothing else of it changed:
            # it may be the member that lets a failed plan fit (`plan_gang` lets a later
            # member stand in for one that does not fit).
            if old is None or old_group != new_group or _membership_changed(old, pod):
                self._bump_members(new_group)

    def remove_pod(self, uid: str) -> PodInfo | None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return None
        self._uncharge(uid)
        self._unnominate(uid)
        key = pod.gang
        if key is not None:
            self._tallies.remove(key, pod)
            self._summaries.pop(key, None)
            self._quorum.changed(key)
            members = self._group_pods.get(key)
            if members is not None:
                members.pop(uid, None)
                if not members:
                    del self._group_pods[key]
            self._bump_members(key)
        return pod

    def _nominate(self, pod: PodInfo) -> None:
        """Keep `pod`'s nomination while it is pending: bound (anywhere), finished or
        being deleted, the nomination has ended, as in kube-scheduler's nominator."""
        self._unnominate(pod.uid)
        node = pod.nominated_node
        if node and not (pod.node_name or pod.terminal or pod.deleting):
            self.nominated.setdefault(node, {})[pod.uid] = pod
            self._nominated_to[pod.uid] = node

    def _unnominate(self, uid: str) -> None:
        node = self._nominated_to.pop(uid, None)
        if node is None:
            return
        on = self.nominated[node]
        del on[uid]
        if not on:
            del self.nominated[node]

    def nominated_to(self, uid: str) -> str:
        """The node pod `uid` is nominated to while pending, "" if none."""
        return self._nominated_to.get(uid, "")

    def nominated_on(self, node: str, priority: int, but: str = "") -> list[PodInfo]:
        """The pods whose nomination keeps capacity on `node` from a pod of `priority`
        (uid `but`): kube-scheduler's rule, the pending pods nominated there with equal
        or higher priority, the pod itself aside. A pod already charged to the node (its
        slot, or its Binding in flight) is counted there once, as that charge."""
        on = self.nominated.get(node)
        if not on:
            return []
        slots = self._reserved_on_node.get(node, {})
        assumed = self._assumed_on_node.get(node, {})
        return [p for uid, p in on.items()
                if p.priority >= priority and uid != but
                and uid not in slots and uid not in assumed]

    def nominated_requests(self, node: str, priority: int, but: str = "") -> Resources:
        """What `nominated_on` keeps on `node`, summed ({} when nothing is nominated
        there, which is nearly always)."""
        kept: Resources = {}
        for p in self.nominated_on(node, priority, but):
            _add_into(kept, p.requests, +1)
        return kept

    def lowest_running_priority(self) -> int | None:
        """The lowest priority of any pod charged to a node, None if there is none."""
        return min(self._charged_priorities, default=None)

    def _charge(self, pod: PodInfo) -> None:
        self.charge_epoch += 1
        # The watch can report a pod bound before its Binding's reply is handled: its
        # assumption ends here, or it would be counted twice (and a reserved node would
        # look over-committed for a moment).
        self._drop_assumed(pod.node_name, pod)
        self._charged[pod.uid] = pod
        self._charged_priorities[pod.priority] = self._charged_priorities.get(pod.priority, 0) + 1
        self._on_node.setdefault(pod.node_name, {})[pod.uid] = pod
        self._adjust(pod.node_name, pod.requests, -1)
        if pod.required_anti_affinity and repels_beyond_node(pod):
            self._repellers["bound", pod.uid] = (pod.node_name, pod)
        if pod.claims is not None:
            self.devices.reserve(pod.node_name, pod, bound=True)

    def _uncharge(self, uid: str) -> None:
        pod = self._charged.pop(uid, None)
        if pod is None:
            return
        self._repellers.pop(("bound", uid), None)
        self.charge_epoch += 1
        left = self._charged_priorities.get(pod.priority, 0) - 1
        if left > 0:
            self._charged_priorities[pod.priority] = left
        else:
            self._charged_priorities.pop(pod.priority, None)
        self._on_node.get(pod.node_name, {}).pop(uid, None)
        self._adjust(pod.node_name, pod.requests, +1)
        if pod.claims is not None:
            self.devices.release(uid, bound=True)
        self.capacity_epoch += 1

    def _bump_members(self, key: str) -> None:
        if key not in self._group_pods and key not in self.groups:
            # Neither the group nor any of its pods is left: forget it (no entry per
            # gang ever seen for the life of the process).
            self.members_epoch.pop(key, None)
            return
        self._epoch_seq += 1
        self.members_epoch[key] = self._epoch_seq

    def bound_on(self, node: str) -> list[PodInfo]:
        """The pods charged to `node` as bound (not slots, not assumed)."""
        return list(self._on_node.get(node, {}).values())

    def group_pods(self, namespace: str, group: str,
                   source: str = SCHEDULER_PLUGINS) -> list[PodInfo]:
        """Every pod that joins the group, including finished ones."""
        return self.gang_pods(gang_key(source, namespace, group))

    def gang_pods(self, key: str) -> list[PodInfo]:
        """Every pod that joins the gang with this key, including finished ones."""
        return list(self._group_pods.get(key, {}).values())

    def has_pods(self, key: str) -> bool:
        """Some pod joins the gang with this key (finished ones included), in O(1)."""
        return key in self._group_pods

    def summary(self, group: GroupInfo) -> GangPods:
        """The gang's members, how many of them are bound, and its succeeded pods;
        the members listed once until one of its pods changes, the counts the kept
        `tally`."""
        key = group.key
        cached = self._summaries.get(key)
        if cached is None:
            group_pods = self._group_pods.get(key)
            if group_pods is None:
                return GangPods((), 0, 0)  # not cached: nothing would ever drop the entry
            members = tuple(p for p in group_pods.values() if is_member(p))
            tally = self._tallies.get(key)
            cached = self._summaries[key] = GangPods(members, tally.bound_members,
                                                     tally.succeeded)
        return cached

    def tally(self, group: GroupInfo) -> Tally:
        """`summary` without the members, in O(1): for the checks every pod event and
        every verb call of a member makes."""
        return self._tallies.get(group.key)

    def short_of_quorum(self) -> list[tuple[str, GroupInfo]]:
        """(key, group) of the groups whose quorum is not bound, succeeded pods counted
        as bound: what the gang queue looks at, not every group ever created."""
        return self._quorum.short()

    def succeeded(self, group: GroupInfo) -> int:
        """Labelled pods that ran to success: they were bound as part of a quorum, so
        they keep counting toward it (a Job with more completions than parallelism must
        not hang once its first pods finish); until they are being deleted
        (`tally.counts_as_succeeded`)."""
        return self.summary(group).succeeded

    def quorum_counts(self, group: GroupInfo) -> QuorumCounts:
        """Members, and bound and present as the quorum counts them: succeeded pods
        count as both, since they ran as part of a formed quorum; failed ones do not."""
        members, bound_members, done = self.summary(group)
        return QuorumCounts(list(members), bound_members + done, len(members) + done)

    def members(self, group: GroupInfo) -> list[PodInfo]:
        """Pods that count for the gang: labelled, not finished, not being deleted, not
        gated (architecture.md §1)."""
        return list(self.summary(group).members)

    # ----- groups ------------------------------------------------------------------

    def upsert_group(self, group: GroupInfo) -> None:
        old = self.groups.get(group.key)
        self.groups[group.key] = group
        self._quorum.changed(group.key)
        # An upstream PodGroup's shared claims (DRA): its status naming the claim made
        # from a template changes what its members' devices are.
        claims_moved = self.devices.set_group(group.key, group.name, group.claims)
        if old is None or not old.same_spec(group) or claims_moved:
            self._epoch_seq += 1
            self.members_epoch[group.key] = self._epoch_seq
            self.capacity_epoch += 1

    def remove_group(self, key: str) -> GroupInfo | None:
        group = self.groups.pop(key, None)
        self._quorum.changed(key)
        self.devices.set_group(key, "", None)
        if group is not None and key not in self._group_pods:
            self.members_epoch.pop(key, None)
        return group

    def upsert_composite(self, composite: CompositeInfo) -> None:
        """Its children's plans depend on it: they are planned again."""
        self.composites[composite.key] = composite
        self._touch_children(composite.key)

    def remove_composite(self, key: str) -> CompositeInfo | None:
        composite = self.composites.pop(key, None)
        if composite is not None:
            self._touch_children(key)
        return composite

    def children(self, composite: str) -> list[GroupInfo]:
        """The groups whose parent is `composite`, by name (the order they are planned
        in). A walk over the groups: asked only for a group that has a parent."""
        return sorted((g for g in self.groups.values() if g.parent == composite),
                      key=lambda g: g.name)

    def _touch_children(self, composite: str) -> None:
        self.capacity_epoch += 1
        for g in self.children(composite):
            self._epoch_seq += 1
            self.members_epoch[g.key] = self._epoch_seq

    # ----- placements whose Binding is in flight ------------------------------------

    def assume(self, node: str, pod: PodInfo) -> None:
        """Charge a pod to `node` from the moment its bind is accepted, before the API
        confirms it, like kube-scheduler's assumed pods. Kept per node, so that a node
        update recomputing its free capacity does not lose the charge."""
        self._assumed_on_node.setdefault(node, {})[pod.uid] = pod
        self._adjust(node, pod.requests, -1)

    def forget(self, node: str, pod: PodInfo, freed: bool) -> None:
        """Undo `assume`, unless the bound pod has taken its place already; `freed` when
        the Binding failed, so capacity really came back."""
        if self._drop_assumed(node, pod) and freed:
            self.capacity_epoch += 1

    def _drop_assumed(self, node: str, pod: PodInfo) -> bool:
        assumed = self._assumed_on_node.get(node)
        if assumed is None or assumed.pop(pod.uid, None) is None:
            return False
        if not assumed:
            del self._assumed_on_node[node]
        self._adjust(node, pod.requests, +1)
        return True

    # ----- Reserve / Unreserve (reservation slots) ---------------------------------

    def reserve(self, node: str, pod: PodInfo, held: bool = False) -> None:
        """Charge a reservation slot for `pod` to `node`; `held`: ahead of capacity."""
        self._reserved_on_node.setdefault(node, {})[pod.uid] = pod
        self._adjust(node, pod.requests, -1)
        if pod.claims is not None:
            self.devices.reserve(node, pod)
        if pod.required_anti_affinity and repels_beyond_node(pod):
            self._repellers["reserved", pod.uid] = (node, pod)
        self.reserved_nodes[node] = self.reserved_nodes.get(node, 0) + 1
        if held:
            _add_into(self.held.setdefault(node, {}), pod.requests, +1)

    def unhold(self, node: str, pod: PodInfo) -> None:
        """A held slot became a normal one: still charged, no longer ahead of capacity."""
        held = self.held.get(node)
        if held is not None:
            _add_into(held, pod.requests, -1)
            if not any(held.values()):
                del self.held[node]

    def unreserve(self, node: str, pod: PodInfo, freed: bool = True, held: bool = False) -> None:
        """Release a slot. `freed=False`: the pod is being bound to this same node, so
        its requests stay taken (now as a bound pod) and `capacity_epoch` stays put;
        `unreserve_epoch` moves either way, for explanations that name other gangs'
        reservations."""
        if held:
            self.unhold(node, pod)
        reserved = self._reserved_on_node.get(node)
        if reserved is not None:
            reserved.pop(pod.uid, None)
            if not reserved:
                del self._reserved_on_node[node]
        self._repellers.pop(("reserved", pod.uid), None)
        self._adjust(node, pod.requests, +1)
        if pod.claims is not None:
            self.devices.release(pod.uid)
        count = self.reserved_nodes.get(node, 0) - 1
        if count > 0:
            self.reserved_nodes[node] = count
        else:
            self.reserved_nodes.pop(node, None)
        self.unreserve_epoch += 1
        if freed:
            self.capacity_epoch += 1


def _same_footprint(old: PodInfo, new: PodInfo) -> bool:
    """Whether `new` takes exactly what `old` took on its node: the same requests, and
    for anti-affinity the same labels and terms (a pod's uid fixes its name and
    namespace)."""
    return (
        old.node_name == new.node_name
        and old.requests == new.requests
        and old.labels == new.labels
        and old.required_anti_affinity == new.required_anti_affinity
        and old.priority == new.priority
    )


def _membership_changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether a gang's failed plan may now come out differently. Status-only updates
    (the PodScheduled condition kube-scheduler writes after every failed attempt,
    carried as `unschedulable`) change none of these, so they do not have waiting
    gangs planned again."""
    return (
        old.terminal != new.terminal
        or old.deleting != new.deleting
        or old.gated != new.gated
        or old.node_name != new.node_name
        or old.priority != new.priority
    )

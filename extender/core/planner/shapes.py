"""Members grouped into shapes: interchangeable for placement, planned together."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from extender.core.cache.devices import DeviceView
from extender.core.devices.allocate import Claim
from extender.core.devices.inventory import MemberClaims
from extender.core.model.constraints import self_anti_affine
from extender.core.model.types import PodInfo

STANDARD = ("cpu", "memory", "ephemeral-storage", "pods")


def _scan_order(name: str) -> tuple[int, str]:
    # Scarce resources first, so the check of a node that lacks them stops at once.
    if name in STANDARD:
        return (1 + STANDARD.index(name), name)
    return (0, name)


@dataclass(slots=True)
class Shape:
    proto: PodInfo  # constraints and requests of every member are these
    members: list[PodInfo]
    items: tuple[tuple[str, int], ...]  # positive requests, scarcest first
    allowed: Collection[str] | None
    plain: bool  # no node selector, no node affinity: only taints/unschedulable matter
    one_per_node: bool  # every member repels every other
    # The members' own claims resolved (planner/device_plan.py), None for members without
    # claims; `device_missing` says what could not be resolved (a template not seen).
    devices: tuple[Claim, ...] | None = None
    device_missing: str = ""
    # The claims among `devices` that members name (`resourceClaimName`): one
    # allocation for every member naming them, which pins those members to the nodes
    # that can use it (planner/device_plan.py).
    shared: tuple[Claim, ...] = ()

    def size_key(self) -> tuple[int, int, int, int, int, int, int]:
        """Descending sort key: devices first (the scarcest, and counted per node),
        then extended resources outweigh cpu, which outweighs memory; on a tie the
        more constrained shape goes first."""
        req = self.proto.requests
        extended = sum(v for k, v in req.items() if k not in STANDARD)
        return (
            0 if self.devices else 1,
            -extended,
            -req.get("cpu", 0),
            -req.get("memory", 0),
            -req.get("ephemeral-storage", 0),
            0 if self.allowed is not None else 1,
            0 if not self.plain else 1,
        )


def shapes_of(
    pods: Sequence[PodInfo], allowed: Mapping[str, Collection[str]] | None, by_size: bool = True,
    devices: DeviceView | None = None,
) -> list[Shape]:
    """`devices`: resolve the claims of members that have some (without it, claims are
    not planned: a view built by hand)."""
    by_key: dict[object, Shape] = {}
    for p in pods:
        restriction = allowed.get(p.uid) if allowed is not None else None
        key: object = (
            p.namespace,
            tuple(sorted(p.requests.items())),
            tuple(sorted(p.node_selector.items())),
            p.required_node_affinity,
            p.tolerations,
            p.required_anti_affinity,
            p.required_affinity,
            p.spread_constraints,
            None if restriction is None else p.uid,
        )
        member: MemberClaims | None = None
        if p.claims is not None and devices is not None:
            # Members whose claims ask the same (a template's claims differ by name
            # only) are one shape; one with an allocated claim is pinned, its own.
            member = devices.member(p)
            # Members naming different shared claims are not interchangeable: each
            # follows its own claim's allocation.
            key = (key, member.missing,
                   tuple((c.spec, c.allocated) for c in (*member.own, *member.shared)),
                   tuple(c.name for c in member.shared))
        shape = by_key.get(key)
        if shape is None:
            items = tuple(
                sorted(
                    ((k, v) for k, v in p.requests.items() if v > 0),
                    key=lambda kv: _scan_order(kv[0]),
                )
            )
            shape = by_key[key] = Shape(
                proto=p,
                members=[],
                items=items,
                allowed=restriction,
                plain=not p.node_selector and p.required_node_affinity is None,
                one_per_node=False,
            )
            if member is not None:
                shape.devices = (*member.own, *member.shared)
                shape.device_missing = member.missing
                shape.shared = member.shared
        shape.members.append(p)
    out = list(by_key.values())
    for s in out:
        # Members of a shape share their terms, so if those terms select every
        # member, no two members may share a node.
        s.one_per_node = all(self_anti_affine(m) for m in s.members)
    if by_size:
        # sort() is stable: equal shapes keep the members' preference order.
        out.sort(key=Shape.size_key)
    return out


def pod_size_key(p: PodInfo) -> tuple[int, int, int, int]:
    req = p.requests
    extended = sum(v for k, v in req.items() if k not in STANDARD)
    return (extended, req.get("cpu", 0), req.get("memory", 0), req.get("ephemeral-storage", 0))

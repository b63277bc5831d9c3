"""A pod's Dynamic Resource Allocation claims (`spec.resourceClaims` and
`status.resourceClaimStatuses`), read with the pod itself.

Here rather than with the device model (`core/devices/model.py`) because `PodInfo`
carries them: the model layer imports nothing of the core above it. Most pods have no
claims; `pod_from_k8s` reads these fields only when `spec.resourceClaims` is present,
so a pod without claims costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.model.fields import as_list, as_obj, as_str

__all__ = ["ClaimRef", "PodClaims", "read_pod_claims"]


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """One `spec.resourceClaims[]` entry: a named claim (shared by whoever names it) or a
    template (a claim of the pod's own, named in `status.resourceClaimStatuses` once the
    control plane has made it)."""

    name: str
    claim: str | None = None
    template: str | None = None


@dataclass(frozen=True, slots=True)
class PodClaims:
    refs: tuple[ClaimRef, ...] = ()
    generated: Mapping[str, str | None] = field(default_factory=dict)

    def claim_name(self, ref: ClaimRef) -> str | None:
        """The ResourceClaim the entry stands for, None while a template's claim is
        not made yet (or when the control plane decided none is needed)."""
        return ref.claim if ref.claim is not None else self.generated.get(ref.name)

    def __hash__(self) -> int:
        # `generated` is a dict: hashed by its items, so claims can key a shape.
        return hash((self.refs, tuple(sorted(self.generated.items(),
                                             key=lambda kv: kv[0]))))


def read_pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> PodClaims:
    """The claims of a pod's spec and status; `ValueError` naming the field when one is
    malformed."""
    refs = []
    for i, raw in enumerate(as_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        w = f"spec.resourceClaims[{i}]"
        r = as_obj(raw, w)
        claim, template = r.get("resourceClaimName"), r.get("resourceClaimTemplateName")
        if (claim is None) == (template is None):
            raise ValueError(f"{w}: exactly one of resourceClaimName and "
                             "resourceClaimTemplateName must be set")
        refs.append(ClaimRef(
            as_str(r.get("name"), f"{w}.name"),
            None if claim is None else as_str(claim, f"{w}.resourceClaimName"),
            None if template is None else as_str(template, f"{w}.resourceClaimTemplateName")))
    generated: dict[str, str | None] = {}
    for i, raw in enumerate(as_list(status.get("resourceClaimStatuses"),
                                    "status.resourceClaimStatuses")):
        w = f"status.resourceClaimStatuses[{i}]"
        s = as_obj(raw, w)
        claim_name = s.get("resourceClaimName")
        generated[as_str(s.get("name"), f"{w}.name")] = (
            None if claim_name is None else as_str(claim_name, f"{w}.resourceClaimName"))
    return PodClaims(tuple(refs), generated)

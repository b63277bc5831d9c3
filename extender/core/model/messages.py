"""Every user message the core writes in more than one place, built here once, so the
same fact reads the same wherever a user meets it (a filter rejection, a bind error,
PodGroup status, an Event). Each names the gang or pod and the number that did not fit.
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.core.model.resources import format_resources
from extender.core.model.types import Resources


def members_exist(gang: str, present: int, need: int) -> str:
    """A gang short of members: how many exist against its `minMember`."""
    return f"gang {gang}: {present} of {need} members exist"


def quorum_bound(gang: str, need: int) -> str:
    return f"gang {gang}: quorum of {need} bound"


def pod_deleted(pod: str) -> str:
    return f"pod {pod} was deleted"


def pod_gone(pod: str) -> str:
    """A pod that can no longer be bound: it finished, or its deletion began."""
    return f"pod {pod} is finished or being deleted"


def capacity_held(node: str, gangs: Iterable[str], pod: str, requests: Resources) -> str:
    """A pod kept off a node whose free capacity is held for gangs."""
    return (f"capacity on node {node} is held for gang(s) {', '.join(gangs)}; "
            f"pod {pod} needs {format_resources(requests)}")

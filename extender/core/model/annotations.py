"""The PodGroup's topology annotations, read and checked (docs/topology.md).

The scheduler-plugins PodGroup has no field for topology, and the extender must stay
wire-compatible with it, so the gang's domain is asked for in annotations:

* `gang-extender.x-k8s.io/topology-required: <label key>`
* `gang-extender.x-k8s.io/topology-preferred: <key>[,<key>...]`, narrowest first.

A value that is not a label key is a user's mistake that no admission webhook caught.
It is reported, never guessed at: the result carries a message naming the annotation
and the value, and a gang with it is not placed at all (`Reason.INVALID_TOPOLOGY`)
until the PodGroup is fixed. Ignoring a bad preferred key instead would place a training
job across the cluster, where it runs slowly without anyone noticing why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from extender.core.model.fields import shown
from extender.core.model.types import TOPOLOGY_PREFERRED, TOPOLOGY_REQUIRED

# Kubernetes' qualified name (validation.IsQualifiedName): an optional DNS-1123
# subdomain prefix and "/", then a name of at most 63 characters.
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_problem(key: str) -> str | None:
    """None if `key` is a valid label key, else what is wrong with it."""
    if not key:
        return "empty"
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' is empty"
    if "/" in prefix:
        return "more than one '/'"
    if len(name) > 63:
        return f"the name part is {len(name)} characters, at most 63"
    if not _NAME.match(name):
        return ("the name part must be letters, digits, '-', '_' or '.', beginning and "
                "ending with a letter or digit")
    if prefix and (len(prefix) > 253 or not _PREFIX.match(prefix)):
        return "the prefix must be a DNS subdomain (lowercase letters, digits, '-', '.')"
    return None


def topology_of(annotations: Mapping[str, str]) -> tuple[str, tuple[str, ...], str]:
    """(required key, preferred keys, error) from a PodGroup's annotations. On error
    both keys are empty and the error says which annotation holds which bad value.
    Spaces around keys are dropped and a preferred key named twice counts once."""
    required = annotations.get(TOPOLOGY_REQUIRED)
    preferred = annotations.get(TOPOLOGY_PREFERRED)
    req = ""
    if required is not None:
        req = required.strip()
        problem = label_key_problem(req)
        if problem is not None:
            return "", (), _bad(TOPOLOGY_REQUIRED, required, problem)
    keys: list[str] = []
    if preferred is not None:
        for part in preferred.split(","):
            key = part.strip()
            problem = label_key_problem(key)
            if problem is not None:
                what = f"key {shown(key)}: {problem}" if key else "an empty key"
                return "", (), _bad(TOPOLOGY_PREFERRED, preferred, what)
            if key not in keys:
                keys.append(key)
    return req, tuple(keys), ""


def _bad(annotation: str, value: str, problem: str) -> str:
    return (f"annotation {annotation}: {shown(value)} is not a node label key ({problem}); "
            f"the gang is not placed until the annotation is fixed")

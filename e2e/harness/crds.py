"""CustomResourceDefinitions from YAML files, installed through the API and awaited.

Why apart: the control plane installs the repository's CRDs at start, but tests and
benchmarks install other projects' (Kueue, the training operator, scheduler-plugins) on
any cluster, an external one too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from .base import REPO_ROOT, HarnessError
from .k8s import ApiException, client

DEFAULT_CRD_DIRS = (REPO_ROOT / "crds",)


def _crd_docs(dirs: Iterable[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for d in dirs:
        if not d.is_dir():
            continue
        for f in sorted([*d.rglob("*.yaml"), *d.rglob("*.yml")]):
            for doc in yaml.safe_load_all(f.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    docs.append(doc)
    return docs


def crd_names(dirs: Iterable[Path]) -> set[str]:
    """Names (``plural.group``) of the CRDs defined in YAML files under ``dirs``."""
    return {str(d["metadata"]["name"]) for d in _crd_docs(dirs)}


def install_crds(api: Any, dirs: Iterable[Path], timeout: float = 30.0) -> list[str]:
    """Create (or replace) every CRD in YAML files under ``dirs`` and wait until Established.

    Uses the Python client rather than kubectl so a fresh CI machine needs nothing else.
    Returns the CRD names; an empty or missing directory installs nothing.
    """
    ext = client.ApiextensionsV1Api(api)
    names: list[str] = []
    for doc in _crd_docs(dirs):
        name = doc["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(body=doc)
        except ApiException as e:
            if e.status != 409:
                raise
            cur = ext.read_custom_resource_definition(name)
            doc = {**doc, "metadata": {**doc["metadata"],
                                       "resourceVersion": cur.metadata.resource_version}}
            ext.replace_custom_resource_definition(name, body=doc)
        names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = ext.read_custom_resource_definition(name)
            conds = {c.type: c.status for c in (crd.status.conditions or [])}
            if conds.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise HarnessError(f"CRD {name} not Established after {timeout}s: {conds}")
            time.sleep(0.1)
    return names

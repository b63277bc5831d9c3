"""The ProvisioningRequest CRD the stand-in provisioner installs (e2e/crds/autoscaler/,
copied from the autoscaler's tag cluster-autoscaler-1.36.1) is the one the real
autoscaler's build copies from the same source: the stand-in's runs and the real one's
run against the same API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FILE = "autoscaling.x-k8s.io_provisioningrequests.yaml"
COPY = REPO / "e2e" / "crds" / "autoscaler" / FILE


def built_copy() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "gang-extender" / "cluster-autoscaler" / "v1.36.1" / "crds" / FILE


def test_the_copy_is_the_provisioningrequest_crd_of_v1() -> None:
    doc = yaml.safe_load(COPY.read_text())
    assert doc["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    v1 = next(v for v in doc["spec"]["versions"] if v["name"] == "v1")
    assert v1["served"] and v1["storage"]
    assert "status" in v1["subresources"]  # the stand-in writes conditions there


def test_the_copy_equals_the_built_autoscalers() -> None:
    built = built_copy()
    if not built.exists():
        pytest.skip(f"the Cluster Autoscaler is not built on this machine ({built} absent: "
                    "e2e/build-operator.sh cluster-autoscaler needs its source from GitHub)")
    assert COPY.read_bytes() == built.read_bytes(), f"{COPY} differs from {built}"

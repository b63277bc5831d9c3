"""Volcano's PodGroup API for the e2e tests: its CRD installed for a test (after the
extender started, as a user would add it) unless the cluster has it, and the annotation
that puts a pod in a Volcano PodGroup. The sources, hostile-quantity, poisoned-object
and provisioning tests all use it, so it is a module of its own rather than a test
module the others import from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.harness.base import REPO_ROOT
from e2e.harness.crds import install_crds
from e2e.harness.k8s import ApiException, client
from e2e.harness.target import ClusterApis

VOLCANO_CRD_DIR = REPO_ROOT / "e2e" / "crds" / "volcano"
VOLCANO_CRD = "podgroups.scheduling.volcano.sh"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"


@pytest.fixture
def volcano_crd(kube: ClusterApis) -> Iterator[None]:
    """Volcano's PodGroup API, installed now (after the extender started) unless the
    cluster has it; removed again if installed here."""
    ext = client.ApiextensionsV1Api(kube.api)
    try:
        ext.read_custom_resource_definition(VOLCANO_CRD)
        yield
        return
    except ApiException as e:
        if e.status != 404:
            raise
    install_crds(kube.api, [VOLCANO_CRD_DIR])
    try:
        yield
    finally:
        ext.delete_custom_resource_definition(VOLCANO_CRD)

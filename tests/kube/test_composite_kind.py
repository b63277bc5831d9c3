"""The CompositePodGroup kind (scheduling.k8s.io/v1alpha3, Kubernetes 1.37 alpha): watched
while served, like the other optional group objects, and fed to the gang manager as the
group of groups its children are planned with."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.manager import GangManager
from extender.core.model.types import CompositeInfo
from extender.core.wiring import Core
from extender.kube.source_kinds import COMPOSITES, SOURCE_GROUP_KINDS

OBJ: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
    "metadata": {"name": "lw", "namespace": "ml", "uid": "c-1"},
    "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
             "schedulingPolicy": {"gang": {"minGroupCount": 2}}},
}


def test_it_is_discovered_like_the_other_optional_kinds() -> None:
    assert COMPOSITES in SOURCE_GROUP_KINDS
    assert COMPOSITES.path == "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups"
    assert COMPOSITES.discover == ("/apis/scheduling.k8s.io/v1alpha3", "compositepodgroups")
    assert COMPOSITES.key(OBJ) == "composite-podgroup:ml/lw"


def test_applied_and_deleted_through_the_gang_manager() -> None:
    core = Core.wire()
    manager, cache = GangManager(core), core.cache
    COMPOSITES.apply(manager, OBJ, 0.0)
    assert cache.composites == {"composite-podgroup:ml/lw": CompositeInfo(
        "ml", "lw", 2, uid="c-1")}
    COMPOSITES.delete(manager, COMPOSITES.key(OBJ), 0.0)
    assert cache.composites == {}


def test_a_malformed_one_is_a_clear_error() -> None:
    bad = {**OBJ, "spec": {"schedulingPolicy": {"gang": {"minGroupCount": -1}}}}
    with pytest.raises(ValueError, match=r"ml/lw: spec\.schedulingPolicy\.gang\.minGroupCount"):
        COMPOSITES.apply(GangManager(), bad, 0.0)

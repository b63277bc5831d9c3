"""pytest wiring for the end-to-end tests: the fixtures live in ``e2e.harness.fixtures``.

Importing them here (rather than ``pytest_plugins``, which pytest only honours in the
root conftest) makes them available to everything under ``e2e/``.
"""

from e2e.anycluster import any_cluster
from e2e.gang import gang, gang_stack
from e2e.harness.fixtures import (
    control_plane,
    default_scheduler,
    fake_kubelet,
    fake_nodes,
    kube_fixture,
    local_control_plane,
    namespace,
)

__all__ = [
    "any_cluster",
    "control_plane",
    "default_scheduler",
    "fake_kubelet",
    "fake_nodes",
    "gang",
    "gang_stack",
    "kube_fixture",
    "local_control_plane",
    "namespace",
]

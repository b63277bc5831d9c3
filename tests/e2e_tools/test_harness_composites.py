"""The local control plane serves CompositePodGroups on 1.37 (found on v1.37.2: the gate
and scheduling.k8s.io/v1alpha3 in the runtime-config), and asks for neither on a release
without them, whose API server would refuse the gate and the version."""

from __future__ import annotations

from e2e.harness.versions import composite_gates, composites_served, workload_runtime_config


def test_1_37_serves_them_with_the_gate_and_the_version() -> None:
    assert composites_served((1, 37))
    assert composite_gates((1, 37)) == "CompositePodGroup=true"
    assert workload_runtime_config((1, 37)) == (
        "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true")


def test_1_36_is_asked_for_neither() -> None:
    assert not composites_served((1, 36))
    assert composite_gates((1, 36)) == ""
    assert workload_runtime_config((1, 36)) == "scheduling.k8s.io/v1alpha2=true"

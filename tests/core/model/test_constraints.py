"""Placement predicates against the rules of kube-scheduler's in-tree filters."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.model.constraints import (
    anti_affinity_conflict,
    label_selector_matches,
    node_matches,
    self_anti_affine,
    tolerates,
)
from extender.core.model.types import (
    LabelSelector,
    NodeInfo,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Requirement,
    Taint,
    Toleration,
)

HOST = "kubernetes.io/hostname"


def mk_node(name: str = "n1", labels: dict[str, str] | None = None, **kw: Any) -> NodeInfo:
    return NodeInfo(name, {"cpu": 1000, "pods": 10}, labels or {}, **kw)


def mk_pod(name: str = "p", ns: str = "ns", **kw: Any) -> PodInfo:
    return PodInfo(uid=f"u-{ns}-{name}", namespace=ns, name=name, requests={"pods": 1}, **kw)


# ----- tolerations --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tol", "taint", "ok"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "w", "NoSchedule"), False),
        (Toleration("k", "", "v", ""), Taint("k", "v", "NoExecute"), True),  # "" is Equal
        (Toleration("k", "Equal", "", ""), Taint("k", "", "NoSchedule"), True),
        (Toleration("k", "Exists", "", ""), Taint("k", "anything", "NoExecute"), True),
        (Toleration("k", "Exists", "", "NoSchedule"), Taint("k", "x", "NoExecute"), False),
        (Toleration("", "Exists", "", ""), Taint("any", "thing", "NoSchedule"), True),
        (Toleration("", "Exists", "", "NoExecute"), Taint("any", "", "NoSchedule"), False),
        (Toleration("other", "Exists", "", ""), Taint("k", "", "NoSchedule"), False),
        (Toleration("k", "Gt", "5", ""), Taint("k", "7", "NoSchedule"), False),  # gated off
    ],
)
def test_toleration_rules(tol: Toleration, taint: Taint, ok: bool) -> None:
    assert tolerates([tol], taint.key, taint.value, taint.effect) is ok


def test_taints() -> None:
    node = mk_node(
        taints=(Taint("gpu", "a100", "NoSchedule"), Taint("soft", "", "PreferNoSchedule"))
    )
    assert node_matches(mk_pod(), node) == "untolerated taint {gpu: a100}"
    tol = (Toleration("gpu", "Exists"),)
    assert node_matches(mk_pod(tolerations=tol), node) is None  # PreferNoSchedule ignored
    node2 = mk_node(taints=(Taint("dedicated", "", "NoExecute"),))
    assert node_matches(mk_pod(tolerations=tol), node2) == "untolerated taint {dedicated}"


def test_unschedulable() -> None:
    node = mk_node(unschedulable=True)
    assert node_matches(mk_pod(), node) == "node is unschedulable"
    tol = Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")
    assert node_matches(mk_pod(tolerations=(tol,)), node) is None
    assert node_matches(mk_pod(tolerations=(Toleration("", "Exists"),)), node) is None
    wrong = Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoExecute")
    assert node_matches(mk_pod(tolerations=(wrong,)), node) == "node is unschedulable"


# ----- node selector and affinity -----------------------------------------------------


def test_node_selector() -> None:
    node = mk_node(labels={"pool": "gpu", "zone": "a"})
    assert node_matches(mk_pod(node_selector={"pool": "gpu"}), node) is None
    assert node_matches(mk_pod(node_selector={"pool": "gpu", "zone": "a"}), node) is None
    assert node_matches(mk_pod(node_selector={"pool": "cpu"}), node) == (
        "node(s) didn't match node selector"
    )
    assert node_matches(mk_pod(node_selector={"rack": "1"}), node) is not None


def term(*exprs: Requirement, fields: tuple[Requirement, ...] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(tuple(exprs), fields)


@pytest.mark.parametrize(
    ("req", "ok"),
    [
        (Requirement("zone", "In", ("a", "b")), True),
        (Requirement("zone", "In", ("b",)), False),
        (Requirement("missing", "In", ("a",)), False),
        (Requirement("zone", "NotIn", ("b",)), True),
        (Requirement("zone", "NotIn", ("a",)), False),
        (Requirement("missing", "NotIn", ("a",)), True),
        (Requirement("zone", "Exists"), True),
        (Requirement("missing", "Exists"), False),
        (Requirement("missing", "DoesNotExist"), True),
        (Requirement("zone", "DoesNotExist"), False),
        (Requirement("cores", "Gt", ("15",)), True),
        (Requirement("cores", "Gt", ("16",)), False),
        (Requirement("cores", "Lt", ("17",)), True),
        (Requirement("cores", "Lt", ("16",)), False),
        (Requirement("zone", "Gt", ("1",)), False),  # label not an integer
        (Requirement("cores", "Gt", ("x",)), False),  # bound not an integer
        (Requirement("cores", "Gt", ("1", "2")), False),
        (Requirement("missing", "Lt", ("100",)), False),
        (Requirement("zone", "Like", ("a",)), False),
    ],
)
def test_node_affinity_operators(req: Requirement, ok: bool) -> None:
    node = mk_node(labels={"zone": "a", "cores": "16"})
    assert (node_matches(mk_pod(required_node_affinity=(term(req),)), node) is None) is ok


def test_node_affinity_terms_are_ored_requirements_anded() -> None:
    node = mk_node(labels={"zone": "a", "pool": "gpu"})
    a = Requirement("zone", "In", ("a",))
    b = Requirement("pool", "In", ("cpu",))
    assert node_matches(mk_pod(required_node_affinity=(term(a, b),)), node) is not None
    assert node_matches(mk_pod(required_node_affinity=(term(b), term(a))), node) is None
    assert node_matches(mk_pod(required_node_affinity=(term(a),)), node) is None


def test_empty_node_affinity() -> None:
    node = mk_node(labels={"zone": "a"})
    assert node_matches(mk_pod(required_node_affinity=(term(),)), node) == (
        "node(s) didn't match node affinity"
    )
    assert node_matches(mk_pod(required_node_affinity=()), node) is not None
    assert node_matches(mk_pod(required_node_affinity=None), node) is None


def test_match_fields_on_node_name() -> None:
    node = mk_node("n1")
    f_in = Requirement("metadata.name", "In", ("n1",))
    f_not = Requirement("metadata.name", "NotIn", ("n1",))
    f_other = Requirement("metadata.uid", "In", ("n1",))
    f_exists = Requirement("metadata.name", "Exists")
    assert node_matches(mk_pod(required_node_affinity=(term(fields=(f_in,)),)), node) is None
    for bad in (f_not, f_other, f_exists):
        assert node_matches(mk_pod(required_node_affinity=(term(fields=(bad,)),)), node)
    zone = Requirement("zone", "Exists")
    both = term(zone, fields=(f_in,))
    assert node_matches(mk_pod(required_node_affinity=(both,)), node) is not None
    assert (
        node_matches(mk_pod(required_node_affinity=(both,)), mk_node("n1", {"zone": "a"})) is None
    )


def test_reason_order_follows_kube_scheduler_filters() -> None:
    node = mk_node(labels={}, taints=(Taint("t", "", "NoSchedule"),), unschedulable=True)
    pod = mk_pod(node_selector={"a": "b"})
    assert node_matches(pod, node) == "node is unschedulable"
    node.unschedulable = False
    assert node_matches(pod, node) == "untolerated taint {t}"


# ----- label selectors ----------------------------------------------------------------


def test_label_selector() -> None:
    labels = {"app": "web", "tier": "front"}
    assert not label_selector_matches(None, labels)
    assert label_selector_matches(LabelSelector(), labels)
    assert label_selector_matches(LabelSelector(), {})
    assert label_selector_matches(LabelSelector((("app", "web"),)), labels)
    assert not label_selector_matches(LabelSelector((("app", "db"),)), labels)
    sel = LabelSelector(
        (("app", "web"),),
        (Requirement("tier", "In", ("front", "back")), Requirement("canary", "DoesNotExist")),
    )
    assert label_selector_matches(sel, labels)
    assert not label_selector_matches(sel, {**labels, "canary": "1"})
    assert label_selector_matches(LabelSelector((), (Requirement("x", "NotIn", ("1",)),)), labels)
    assert not label_selector_matches(
        LabelSelector((), (Requirement("app", "Gt", ("1",)),)), labels
    )


# ----- anti-affinity ------------------------------------------------------------------


def anti(sel: LabelSelector | None, key: str = HOST, **kw: Any) -> tuple[PodAffinityTerm, ...]:
    return (PodAffinityTerm(sel, key, **kw),)


APP_WEB = LabelSelector((("app", "web"),))


def test_anti_affinity_own_terms() -> None:
    pod = mk_pod("a", labels={"app": "web"}, required_anti_affinity=anti(APP_WEB))
    other = mk_pod("b", labels={"app": "web"})
    reason = anti_affinity_conflict(pod, [other])
    assert reason is not None and "ns/b" in reason
    assert anti_affinity_conflict(pod, [mk_pod("c", labels={"app": "db"})]) is None
    assert anti_affinity_conflict(pod, []) is None
    assert anti_affinity_conflict(pod, [pod]) is None  # a pod does not repel itself


def test_anti_affinity_other_pods_terms() -> None:
    pod = mk_pod("a", labels={"app": "web"})
    other = mk_pod("b", labels={"app": "db"}, required_anti_affinity=anti(APP_WEB))
    reason = anti_affinity_conflict(pod, [other])
    assert reason is not None and "ns/b" in reason


def test_anti_affinity_only_on_hostname() -> None:
    zone = anti(APP_WEB, key="topology.kubernetes.io/zone")
    pod = mk_pod("a", labels={"app": "web"}, required_anti_affinity=zone)
    assert anti_affinity_conflict(pod, [mk_pod("b", labels={"app": "web"})]) is None
    assert not self_anti_affine(pod)


def test_anti_affinity_nil_and_empty_selectors() -> None:
    other = mk_pod("b", labels={"x": "y"})
    assert anti_affinity_conflict(mk_pod("a", required_anti_affinity=anti(None)), [other]) is None
    empty = mk_pod("a", required_anti_affinity=anti(LabelSelector()))
    assert anti_affinity_conflict(empty, [other]) is not None


def test_anti_affinity_namespaces() -> None:
    web_elsewhere = mk_pod("b", ns="other", labels={"app": "web"})
    # Default: the term owner's namespace only, in both directions.
    pod = mk_pod("a", ns="ns", labels={"app": "web"}, required_anti_affinity=anti(APP_WEB))
    assert anti_affinity_conflict(pod, [web_elsewhere]) is None
    repeller = mk_pod("r", ns="other", required_anti_affinity=anti(APP_WEB))
    assert anti_affinity_conflict(mk_pod("a", labels={"app": "web"}), [repeller]) is None
    # Listed namespaces replace the default.
    listed = mk_pod(
        "a", labels={"app": "web"}, required_anti_affinity=anti(APP_WEB, namespaces=("other",))
    )
    assert anti_affinity_conflict(listed, [web_elsewhere]) is not None
    assert anti_affinity_conflict(listed, [mk_pod("c", labels={"app": "web"})]) is None
    # An empty namespace selector selects every namespace.
    everywhere = anti(APP_WEB, namespace_selector=LabelSelector())
    assert anti_affinity_conflict(mk_pod("a", required_anti_affinity=everywhere), [web_elsewhere])
    # A selector by name uses the kubernetes.io/metadata.name label.
    by_name = anti(
        APP_WEB,
        namespace_selector=LabelSelector((("kubernetes.io/metadata.name", "other"),)),
    )
    assert anti_affinity_conflict(mk_pod("a", required_anti_affinity=by_name), [web_elsewhere])
    assert not anti_affinity_conflict(
        mk_pod("a", required_anti_affinity=by_name), [mk_pod("c", labels={"app": "web"})]
    )


def test_self_anti_affine() -> None:
    assert self_anti_affine(mk_pod(labels={"app": "web"}, required_anti_affinity=anti(APP_WEB)))
    assert not self_anti_affine(mk_pod(labels={"app": "db"}, required_anti_affinity=anti(APP_WEB)))
    assert not self_anti_affine(mk_pod(labels={"app": "web"}))

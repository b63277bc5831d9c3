"""The metrics are declared once, in `DECLARED`: each row becomes a `Metrics` attribute
whose annotation gives callers its type, and each name is one users can look up."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from prometheus_client import Counter, Gauge, Histogram

from extender.reporting import metrics
from extender.reporting.metrics import DECLARED, Metrics

_KINDS = (Counter, Gauge, Histogram)
_DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def kind_mismatches(cls: type, declared: tuple[metrics._Declared, ...]) -> list[str]:
    """Rows whose attribute is not annotated with their kind on `cls`, and metric
    annotations no row makes."""
    hints = typing.get_type_hints(cls)
    rows = {d.attribute: d.kind for d in declared}
    out = [f"{a}: declared {k.__name__}, annotated {getattr(hints.get(a), '__name__', None)}"
           for a, k in rows.items() if hints.get(a) is not k]
    out += [f"{a}: annotated, not declared" for a, t in hints.items()
            if t in _KINDS and a not in rows]
    return out


def test_every_declared_metric_is_an_attribute_of_its_annotated_kind() -> None:
    assert kind_mismatches(Metrics, DECLARED) == []
    m = Metrics()
    for d in DECLARED:
        assert type(getattr(m, d.attribute)) is d.kind, d.attribute


def test_the_kind_check_fails_on_a_row_out_of_step() -> None:
    wrong = tuple(metrics._Declared(d.attribute, Gauge, d.name, d.labels, d.help)
                  if d.attribute == "timeouts" else d for d in DECLARED)
    assert kind_mismatches(Metrics, wrong) == ["timeouts: declared Gauge, annotated Counter"]
    missing = tuple(d for d in DECLARED if d.attribute != "leader")
    assert kind_mismatches(Metrics, missing) == ["leader: annotated, not declared"]


def test_histograms_and_only_histograms_have_buckets() -> None:
    for d in DECLARED:
        assert (d.buckets is not None) == (d.kind is Histogram), d.attribute


@pytest.mark.parametrize("name", sorted({d.name for d in DECLARED}))
def test_every_metric_is_documented(name: str) -> None:
    assert f"`{name}`" in _DOCS.read_text(), f"{name} is not in docs/observability.md"
